"""Det as the operators of Gaussian elimination with partial pivoting (frontends/onnx_linalg.py):
the reference against ONNX Runtime (the same algorithm: equal to the last bit on these
cases) and float64 NumPy; compiled models on every x86 dialect this CPU runs and on OpenCL;
singular matrices give 0; what it cannot take is refused with the node named."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import reference

from dialects import X86, compile_only  # noqa: E402

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper as h  # noqa: E402

RUN_HERE = [i for i in X86 if not compile_only(i)]


def _model(shape, elem=T.FLOAT, pre=True):
    nodes = ([h.make_node("Relu", ["x"], ["r"])] if pre else []) + [h.make_node("Det", ["r" if pre else "x"], ["y"], name="det")]
    g = h.make_graph(nodes, "det", [h.make_tensor_value_info("x", elem, shape)], [onnx.ValueInfoProto(name="y")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)


def _matrices(shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if shape[-1] >= 2 and x.ndim == 3 and shape[0] >= 3:
        x[0, 1] = 2 * x[0, 0]  # singular: two dependent rows
        x[1] = 0               # all zero
        x[2] = np.eye(shape[-1])[::-1]  # a permutation: every step swaps or not, det +-1
    return x


SHAPES = [(3, 3), (1, 1), (5, 2, 2), (4, 6, 6), (2, 3, 4, 4), (3, 12, 12)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_reference_against_ort_and_numpy(shape):
    x = _matrices(shape)
    m = _model(shape, pre=False)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = reference.run(df.load(m).graph, {"x": x})[0]
    assert got.shape == want.shape == shape[:-2] and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)), rtol=1e-4, atol=1e-5)
    if len(shape) == 3 and shape[0] >= 3 and shape[-1] >= 2:
        assert got[0] == 0 and got[1] == 0 and abs(got[2]) == 1


@pytest.mark.parametrize("isa", RUN_HERE)
def test_compiled_matches_numpy(isa):
    shape = (3, 6, 6)
    x = _matrices(shape, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        cm = df.compile(_model(shape).SerializeToString(), isa=isa)
    got = np.asarray(cm(x))
    np.testing.assert_allclose(got, np.linalg.det(np.maximum(x, 0).astype(np.float64)), rtol=1e-4, atol=1e-6)


def test_compiled_float64_and_opencl(ocl_device):
    x = _matrices((4, 5, 5), 2).astype(np.float64)
    want = np.linalg.det(np.maximum(x, 0))
    for target in ("cpu", "opencl"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", df.ModelWarning)
            cm = df.compile(_model(x.shape, T.DOUBLE).SerializeToString(), target=target)
        got = np.asarray(cm(x))
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape,match", [((3, 4), r"node 'det' \(Det\): the matrices must be square, got 3 x 4"),
                                         ((5,), r"rank >= 2"), ((65, 65), r"larger than dnnfusion unrolls Det for \(64\)")])
def test_refusals_name_the_node(shape, match):
    g = h.make_graph([h.make_node("Det", ["x"], ["y"], name="det")], "det", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        with pytest.raises(df.ShapeError, match=match):
            df.load(m)


def test_integer_det_refused():
    g = h.make_graph([h.make_node("Det", ["x"], ["y"], name="det")], "det", [h.make_tensor_value_info("x", T.INT64, [2, 2])],
                     [h.make_tensor_value_info("y", T.INT64, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises((df.DTypeError, df.ModelFormatError), match="Det|det"):
        df.load(m)
