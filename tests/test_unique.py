"""Unique (ONNX 11/28): its distinct values, first indices, inverse indices and counts have as
many entries as the data has distinct values, so compile() runs it and what follows on the
host (host_tail.py, as NonZero), after the kernels that compute its input. The NumPy
reference (np.unique, reordered by first occurrence for sorted=0) against ONNX Runtime, and
whole models through the CPU and OpenCL targets."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import reference

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper as h  # noqa: E402

OUTS = ["y", "first", "inverse", "counts"]


def _model(nodes, x, outputs):
    ty = {np.dtype(np.float32): T.FLOAT, np.dtype(np.int64): T.INT64, np.dtype(np.float64): T.DOUBLE,
          np.dtype(np.int8): T.INT8}[x.dtype]
    g = h.make_graph(nodes, "u", [h.make_tensor_value_info("x", ty, x.shape)], [onnx.ValueInfoProto(name=o) for o in outputs])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)


def _ort(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


RNG = np.random.default_rng(4)
DATA = {
    "f32_1d": RNG.integers(-3, 4, 40).astype(np.float32),
    "i64_2d": RNG.integers(0, 5, (6, 7)).astype(np.int64),
    "f64_3d": RNG.integers(0, 3, (2, 5, 3)).astype(np.float64),
    "i8_rows": np.repeat(RNG.integers(-2, 2, (3, 4)), 2, axis=0).astype(np.int8)[RNG.permutation(6)],
}
ATTRS = [{}, {"sorted": 0}, {"axis": 0}, {"axis": -1, "sorted": 0}]


@pytest.mark.parametrize("attrs", ATTRS, ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()) or "flat")
@pytest.mark.parametrize("data", list(DATA), ids=list(DATA))
def test_reference_against_ort(data, attrs):
    x = DATA[data]
    m = _model([h.make_node("Unique", ["x"], OUTS, **attrs)], x, OUTS)
    want = _ort(m, {"x": x})
    g = df.load(m)
    assert g.outputs[0].shape[0 if "axis" not in attrs else attrs["axis"]] == "unique_count"
    got = reference.run(g.graph, {"x": x})
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def _pipeline():
    """round(relu(x) * 3) -> Unique (first occurrence order) -> counts * 10 and the values'
    sum, with exp(x) computed beside: the kernels compute the rounding and exp, the host the
    rest."""
    c = onnx.numpy_helper.from_array
    return _model([h.make_node("Constant", [], ["three"], value=c(np.array(3, np.float32))),
                   h.make_node("Constant", [], ["ten"], value=c(np.array(10, np.int64))),
                   h.make_node("Relu", ["x"], ["r"]), h.make_node("Mul", ["r", "three"], ["m"]),
                   h.make_node("Round", ["m"], ["q"]),
                   h.make_node("Unique", ["q"], ["vals", "", "inv", "cnt"], sorted=0),
                   h.make_node("Mul", ["cnt", "ten"], ["cnt10"]),
                   h.make_node("ReduceSum", ["vals"], ["vsum"], keepdims=0), h.make_node("Exp", ["x"], ["e"])],
                  np.zeros((4, 6), np.float32), ["cnt10", "vsum", "inv", "e"])


@pytest.mark.parametrize("target", ["cpu", "opencl"])
def test_unique_runs_on_the_host_after_the_kernels(target):
    m = _pipeline()
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    cm = df.compile(m.SerializeToString(), target=target)
    tail = cm.stats["host_tail"]
    assert tail["ops"] == {"Mul": 1, "ReduceSum": 1, "Unique": 1}, tail
    assert "the length of Unique's output depends on the data" in tail["why"]
    got, want = cm.run(x), _ort(m, {"x": x})
    assert [g.shape for g in got] == [w.shape for w in want]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_allclose(got[3], want[3], rtol=1e-6)


def test_unique_axis_out_of_range_is_a_shape_error():
    x = DATA["i64_2d"]
    g = h.make_graph([h.make_node("Unique", ["x"], ["y"], axis=2, name="u")], "u",
                     [h.make_tensor_value_info("x", T.INT64, x.shape)], [h.make_tensor_value_info("y", T.INT64, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises((df.ShapeError, df.ModelFormatError), match="axis"):
        df.load(m)
