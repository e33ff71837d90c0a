"""GatherND through generated code (its coordinates read from the indices tensor inside the
fused loop, each wrapped and range-checked like Gather's) and NonZero (a data-dependent output
length, so compile() runs it and what follows on the host, host_tail.py): against ONNX Runtime
and the NumPy reference, in every dialect this machine runs and on the OpenCL target."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion.batching import NotSeparable

from dialects import compile_only, params  # noqa: E402

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402


def _model(nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def _gather_nd(xs, ish, batch_dims):
    """Relu -> GatherND(indices an input) -> Sigmoid: one fused kernel."""
    k = ish[-1]
    out = list(ish[:-1]) + list(xs[batch_dims + k:])
    return _model([h.make_node("Relu", ["x"], ["r"]),
                   h.make_node("GatherND", ["r", "i"], ["g"], batch_dims=batch_dims),
                   h.make_node("Sigmoid", ["g"], ["y"])],
                  [h.make_tensor_value_info("x", T.FLOAT, list(xs)), h.make_tensor_value_info("i", T.INT64, list(ish))],
                  [h.make_tensor_value_info("y", T.FLOAT, out)])


def _indices(rng, xs, ish, batch_dims):
    sizes = np.array(xs[batch_dims:batch_dims + ish[-1]])
    i = rng.integers(0, 1 << 20, ish) % sizes
    return np.where(rng.integers(0, 2, ish) == 1, i - sizes, i).astype(np.int64)  # negative ones too


def _ort(model, feeds):
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


SHAPES = [((5, 6, 7), (4, 2), 0), ((5, 6, 7), (3, 4, 3), 0), ((5, 6, 7), (5, 3, 1), 1),
          ((2, 5, 6, 7), (2, 5, 2, 1), 2), ((4, 6), (4, 3, 1), 1), ((5, 6, 7), (1,), 0)]


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("xs,ish,b", SHAPES)
def test_gather_nd_fuses_and_matches_onnxruntime(xs, ish, b, isa):
    rng = np.random.default_rng(len(xs) * 10 + b)
    model = _gather_nd(xs, ish, b)
    x, i = rng.standard_normal(xs).astype(np.float32), _indices(rng, xs, ish, b)
    if compile_only(isa):
        gen = df._core.generate_cpu(df.load(model).graph, df.plan.plan(df.load(model)), isa)
        assert "GatherND" in gen.source and len(gen.kernels) == 1
        return
    m = df.compile(model, isa=isa)
    assert m.stats["kernels"] == 1  # Relu, GatherND and Sigmoid in one loop, no copy of r
    np.testing.assert_allclose(m.run(x, i)[0], _ort(model, {"x": x, "i": i})[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(m.run(x, i)[0], df.load(model).run_reference(x=x, i=i)[0], rtol=1e-6, atol=1e-6)


def test_gather_nd_on_the_opencl_target():
    xs, ish, b = (5, 6, 7), (5, 3, 1), 1
    rng = np.random.default_rng(2)
    model = _gather_nd(xs, ish, b)
    x, i = rng.standard_normal(xs).astype(np.float32), _indices(rng, xs, ish, b)
    m = df.compile(model, target="opencl")
    np.testing.assert_allclose(m.run(x, i)[0], _ort(model, {"x": x, "i": i})[0], rtol=1e-5, atol=1e-6)


def test_an_index_out_of_range_is_a_clear_error():
    model = _gather_nd((5, 6, 7), (4, 2), 0)
    x = np.zeros((5, 6, 7), np.float32)
    m = df.compile(model)
    with pytest.raises(df.Error, match="GatherND: index 9 is out of range for an axis of size 5"):
        m(x, np.full((4, 2), 9, np.int64))
    with pytest.raises(IndexError, match="GatherND: index 9 is out of range for axis 0 of size 5"):
        df.load(model).run_reference(x=x, i=np.full((4, 2), 9, np.int64))


def test_gather_nd_with_indices_computed_by_the_model():
    """The indices an ArgMax computes (the row of each column's maximum), as a model picking
    by them would: the index tensor is an intermediate, not an input."""
    model = _model([h.make_node("ArgMax", ["x"], ["a"], axis=0, keepdims=0),
                    h.make_node("Unsqueeze", ["a", "ax"], ["ai"]),
                    h.make_node("Tanh", ["x"], ["t"]),
                    h.make_node("Transpose", ["t"], ["tt"], perm=[1, 0]),
                    h.make_node("GatherND", ["tt", "ai"], ["y"], batch_dims=1)],
                   [h.make_tensor_value_info("x", T.FLOAT, [7, 9])], [h.make_tensor_value_info("y", T.FLOAT, [9])],
                   [nh.from_array(np.array([1], np.int64), "ax")])
    x = np.random.default_rng(4).standard_normal((7, 9)).astype(np.float32)
    got = df.compile(model).run(x)[0]
    np.testing.assert_allclose(got, np.tanh(x.max(axis=0)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, _ort(model, {"x": x})[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("xs,ish,b,dtype,match", [
    ((5, 6), (4, 3), 0, T.INT64, r"last axis of indices \(3\) must be in \[1, 2\]"),
    ((5, 6), (5, 1), 2, T.INT64, r"batch_dims must be in \[0, 2\)"),
    ((5, 6), (4, 1), 1, T.INT64, "disagree on batch axis 0"),
    ((5, 6), (4, 1), 0, T.INT32, "indices must be i64"),
])
def test_bad_gather_nd_is_a_shape_error(xs, ish, b, dtype, match):
    g = h.make_graph([h.make_node("GatherND", ["x", "i"], ["y"], batch_dims=b)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, list(xs)), h.make_tensor_value_info("i", dtype, list(ish))],
                     [h.make_tensor_value_info("y", T.FLOAT, ["B", 3, 7])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    with pytest.raises(df.ShapeError, match=match):
        df.load(m.SerializeToString())


def _masked_select():
    """x[x > 0.5] summed (NonZero -> Transpose -> GatherND -> ReduceSum: what torch's boolean
    indexing exports to), the coordinates themselves, and exp(x) computed beside them."""
    return _model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Greater", ["r", "z"], ["mask"]),
                   h.make_node("NonZero", ["mask"], ["nz"]), h.make_node("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
                   h.make_node("GatherND", ["r", "nzt"], ["sel"]),
                   h.make_node("ReduceSum", ["sel"], ["s"], keepdims=0), h.make_node("Exp", ["x"], ["e"])],
                  [h.make_tensor_value_info("x", T.FLOAT, [3, 4, 5])],
                  [h.make_tensor_value_info("s", T.FLOAT, []), h.make_tensor_value_info("nz", T.INT64, [3, "n"]),
                   h.make_tensor_value_info("e", T.FLOAT, [3, 4, 5])],
                  [nh.from_array(np.array(0.5, np.float32), "z")])


@pytest.mark.parametrize("target", ["cpu", "opencl"])
@pytest.mark.parametrize("scale", [1.0, 0.0, 10.0])  # some, no and nearly all elements selected
def test_nonzero_runs_on_the_host_after_the_kernels(target, scale):
    model = _masked_select()
    x = (scale * np.random.default_rng(1).standard_normal((3, 4, 5))).astype(np.float32)
    m = df.compile(model, target=target)
    tail = m.stats["host_tail"]
    assert tail["ops"] == {"GatherND": 1, "NonZero": 1, "ReduceSum": 1, "Transpose": 1}, tail
    assert "the length of NonZero's output depends on the data" in tail["why"]
    assert "NonMaxSuppression" not in tail["why"]
    got, want = m.run(x), _ort(model, {"x": x})
    assert [g.shape for g in got] == [w.shape for w in want] and got[1].dtype == np.int64
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


def test_generating_code_for_the_whole_graph_is_a_clear_error():
    """Code generation asked for the graph with NonZero in it (not split as compile() splits
    it) refuses with the value whose length is unknown."""
    ecg = df.load(_masked_select())
    with pytest.raises(df.ShapeError, match=r"memory plan needs static shapes: %nzt? has type i64\[.*nonzero_count"):
        df._core.generate_cpu(ecg.graph, df.plan.plan(ecg), "scalar")


TABLE = np.random.default_rng(9).standard_normal((6, 7)).astype(np.float32)


def _batched(batch_dims, data_batched=True):
    """x [B, 6, 7] an input, or a table every sample reads (a constant), gathered by i."""
    n = [h.make_node("Relu", ["x"], ["r"]), h.make_node("GatherND", ["r", "i"], ["y"], batch_dims=batch_dims)]
    ins = [h.make_tensor_value_info("i", T.INT64, ["B", 3, 1])]
    if data_batched:
        ins.insert(0, h.make_tensor_value_info("x", T.FLOAT, ["B", 6, 7]))
    return _model(n, ins, [h.make_tensor_value_info("y", T.FLOAT, ["B", 3, 7])],
                  [] if data_batched else [nh.from_array(TABLE, "x")])


@pytest.mark.parametrize("batch_dims,data_batched", [(1, True), (0, False)])
def test_dynamic_batch_proves_gather_nd_separable(batch_dims, data_batched):
    """Sample i's coordinates address sample i's data (the batch one of batch_dims), or data
    every sample shares: one compile serves every batch size."""
    model = _batched(batch_dims, data_batched)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 6, 7)).astype(np.float32)
    i = rng.integers(0, 6, (5, 3, 1)).astype(np.int64)
    feeds = {"x": x, "i": i} if data_batched else {"i": i}
    m = df.compile(model, dynamic=True, example_inputs=[a[:2] for a in feeds.values()])
    assert m.stats["dynamic"]["representative_batch"] == 2
    np.testing.assert_allclose(m.run(*feeds.values())[0], _ort(model, feeds)[0], rtol=1e-6)
    assert m.stats["dynamic"]["chunks_run"] == 3  # 5 samples through a program for 2


def test_dynamic_batch_refuses_what_mixes_samples():
    with pytest.raises(NotSeparable, match="GatherND.*batch is not one of its batch_dims"):
        df.compile(_batched(0), dynamic=True)
    nz = _model([h.make_node("NonZero", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, ["B", 6])],
                [h.make_tensor_value_info("y", T.INT64, [2, "n"])])
    with pytest.raises(NotSeparable, match="NonZero"):
        df.compile(nz, dynamic=True)
