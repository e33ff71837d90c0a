"""dnnfusion.zoo -- the DNNFusion paper's evaluation models, built in code.

Random (seeded) weights, the paper's input sizes, plain ``torch.nn.Module``
objects in eval mode with example inputs, exportable to ONNX::

    from dnnfusion import zoo
    zoo.list()                       # 18 names, stable order
    m = zoo.get("vgg16")             # ZooModel(module, example_inputs, ...)
    m.module(*m.example_inputs)
    path = zoo.export_onnx("vgg16")  # cached .onnx (static shapes)

``python -m dnnfusion.zoo.check [names...]`` builds, exports and compares
ONNX Runtime against PyTorch for every model.
"""
from .registry import ZooModel, describe, export_onnx, get, list, paper_layers  # noqa: A004

__all__ = ["ZooModel", "list", "get", "export_onnx", "describe", "paper_layers"]
