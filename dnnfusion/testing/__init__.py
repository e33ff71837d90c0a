"""Test harnesses shipped with dnnfusion, so that users can run them against their install:
:mod:`dnnfusion.testing.onnx_node_suite` runs the ONNX backend node tests through the ONNX
front-end and the NumPy reference interpreter."""
