"""A model whose output length depends on the data (NonMaxSuppression, then Gathers that pick
the kept boxes: a detection export with its post-processing) compiles: the kernels compute
everything up to it, and the operators from it on run on the host with the NumPy reference
(dnnfusion/host_tail.py). Checked against ONNX Runtime on data that keeps many, few and no
boxes, at several batch sizes through specialization."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402


def _detector(batch="B", score_threshold=0.3, center_point_box=0, max_boxes=10, threshold_input=False):
    """Conv features -> boxes [B, 64, 4] and 2 classes' scores [B, 2, 64] -> NMS -> the kept
    boxes of batch 0 gathered by the selected indices; the features are an output too. With
    `threshold_input`, the score threshold is a second input (read by the tail alone)."""
    rng = np.random.default_rng(0)
    nodes = [h.make_node("Conv", ["x", "w"], ["f"], kernel_shape=[3, 3], pads=[1] * 4),
             h.make_node("Shape", ["f"], ["fs"]),
             h.make_node("Slice", ["fs", "z1", "o1"], ["b"]),
             h.make_node("Concat", ["b", "c6", "c64"], ["s1"], axis=0),
             h.make_node("Reshape", ["f", "s1"], ["f2"]),
             h.make_node("Transpose", ["f2"], ["ft"], perm=[0, 2, 1]),
             h.make_node("Slice", ["ft", "z1", "c4", "two1"], ["boxes"]),
             h.make_node("Slice", ["f2", "c4", "c6", "o1"], ["sc"]),
             h.make_node("Sigmoid", ["sc"], ["scores"]),
             h.make_node("NonMaxSuppression", ["boxes", "scores", "mx", "iou", "sth"], ["sel"],
                         center_point_box=center_point_box),
             h.make_node("Gather", ["sel", "two"], ["idx"], axis=1),
             h.make_node("Gather", ["boxes", "zero"], ["b0"], axis=0),
             h.make_node("Gather", ["b0", "idx"], ["kept"], axis=0),
             h.make_node("ReduceSum", ["kept"], ["area"], keepdims=0),
             h.make_node("Relu", ["f"], ["feat"])]
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    inits = [nh.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), "w"),
             nh.from_array(i64(0), "z1"), nh.from_array(i64(1), "o1"), nh.from_array(i64(2), "two1"),
             nh.from_array(i64(4), "c4"), nh.from_array(i64(6), "c6"), nh.from_array(i64(64), "c64"),
             nh.from_array(i64(max_boxes), "mx"), nh.from_array(np.array([0.5], np.float32), "iou"),
             nh.from_array(np.array([score_threshold], np.float32), "sth"),
             nh.from_array(np.array(2, np.int64), "two"), nh.from_array(np.array(0, np.int64), "zero")]
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [batch, 3, 8, 8])]
    if threshold_input:
        inits = [i for i in inits if i.name != "sth"]
        inputs.append(h.make_tensor_value_info("sth", T.FLOAT, [1]))
    g = h.make_graph(nodes, "detector", inputs,
                     [h.make_tensor_value_info("kept", T.FLOAT, ["k", 4]),
                      h.make_tensor_value_info("sel", T.INT64, ["k", 3]),
                      h.make_tensor_value_info("area", T.FLOAT, []),
                      h.make_tensor_value_info("feat", T.FLOAT, [batch, 6, 8, 8])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def _check(model, m, x, *more):
    feeds = dict(zip(["x", "sth"], [x, *more]))
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = m(x, *more)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    return got


@pytest.mark.parametrize("threshold,center", [(0.3, 0), (0.05, 1), (1.0, 0)])
def test_operators_after_nms_run_on_the_host_and_match_onnxruntime(threshold, center):
    model = _detector(score_threshold=threshold, center_point_box=center)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    m = df.compile(model, example_inputs=[x])
    t = m.stats["host_tail"]
    # NMS, the three Gathers after it and the ReduceSum of what they pick; the Conv, the
    # boxes' and scores' slices and the Relu are kernels
    assert t["ops"] == {"Gather": 2, "NonMaxSuppression": 1, "ReduceSum": 1}, t
    assert "NonMaxSuppression's output depends on the data" in t["why"], t
    assert "On the host after the kernels (4 operators" in m.explain()
    assert m.output_names == ["kept", "sel", "area", "feat"]
    # the tail is a graph of its own: no second copy of the prefix's weights
    assert len(m._tail.graph.nodes) == 4 and "w" not in {c.name for c in m._tail.graph.constants}
    rows = [_check(model, m, x)[1].shape[0]]
    for seed in (2, 3):  # other data: other numbers of boxes kept
        rows.append(_check(model, m, np.random.default_rng(seed).standard_normal((2, 3, 8, 8)).astype(np.float32))[1].shape[0])
    if threshold >= 1:
        assert rows == [0, 0, 0]  # no score above it: empty outputs, as ONNX Runtime's
    else:
        assert min(rows) > 0


def test_another_batch_size_compiles_a_specialization_with_its_own_tail():
    model = _detector()
    rng = np.random.default_rng(4)
    m = df.compile(model, example_inputs=[rng.standard_normal((1, 3, 8, 8)).astype(np.float32)])
    for b in (3, 1):
        _check(model, m, rng.standard_normal((b, 3, 8, 8)).astype(np.float32))
    assert m.stats["specializations"] and m.stats["host_tail"]["operators"] == 4


def test_dynamic_batch_refuses_a_data_dependent_length():
    """dynamic=True runs chunks of the batch and joins their outputs along axis 0, which an
    output of NMS rows (batch indices inside) does not allow: refused, naming the operator."""
    with pytest.raises(df.Error, match="NonMaxSuppression"):
        df.compile(_detector(), dynamic=True)


def test_a_model_that_is_only_nms_is_a_clear_error():
    g = h.make_graph([h.make_node("NonMaxSuppression", ["b", "s", "mx"], ["sel"])], "only",
                     [h.make_tensor_value_info("b", T.FLOAT, [1, 5, 4]),
                      h.make_tensor_value_info("s", T.FLOAT, [1, 1, 5])],
                     [h.make_tensor_value_info("sel", T.INT64, ["k", 3])],
                     [nh.from_array(np.array([3], np.int64), "mx")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(df.UnsupportedOperatorError, match="nothing before them to compile"):
        df.compile(m.SerializeToString())


def test_the_opencl_target_runs_the_tail_on_the_host_too():
    model = _detector()
    x = np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32)
    m = df.compile(model, example_inputs=[x], target="opencl")
    assert m.stats["target"] == "opencl" and m.stats["host_tail"]["operators"] == 4
    _check(model, m, x)


def test_an_input_only_the_tail_reads():
    """The score threshold as a model input: the compiled prefix still takes every input in
    the model's order, and the tail reads the threshold from the call."""
    model = _detector(threshold_input=True)
    x = np.random.default_rng(6).standard_normal((1, 3, 8, 8)).astype(np.float32)
    m = df.compile(model, example_inputs=[x, np.array([0.3], np.float32)])
    assert m.input_names == ["x", "sth"]
    kept = [_check(model, m, x, np.array([t], np.float32))[1].shape[0] for t in (0.2, 0.6, 1.0)]
    assert kept[0] >= kept[1] >= kept[2] == 0 and kept[0] > 0, kept


@pytest.mark.parametrize("seed", range(6))
def test_the_tails_nms_in_cpp_selects_what_the_oracle_selects(seed):
    """host_tail runs NonMaxSuppression with the prelude's C++ kernel (_core.nms_f32; the
    oracle's NumPy loop took 88 ms where ONNX Runtime took 1.6 on SSD's post-processing): on
    random boxes with repeated scores (ties by lower index), zero-area and flipped corners, a
    NaN score, both box encodings, with and without a score threshold, and max 0 or more than n."""
    from dnnfusion import host_tail, reference

    rng = np.random.default_rng(seed)
    B, C, n = 1 + seed % 2, 1 + seed % 3, 40 + 7 * seed
    boxes = rng.random((B, n, 4)).astype(np.float32)
    boxes[:, ::9, 2:] = boxes[:, ::9, :2]  # zero-area boxes
    scores = rng.choice(np.float32([0.1, 0.3, 0.5, 0.7, 0.9]), size=(B, C, n)) if seed % 2 else \
        rng.random((B, C, n)).astype(np.float32)
    scores = scores.astype(np.float32)
    scores[0, 0, 3] = np.nan
    for center in (0, 1):
        for mx, iou, st in ((10, 0.5, None), (n + 5, 0.3, 0.4), (0, 0.5, None), (3, 0.0, 0.2)):
            args = [boxes, scores, np.array([mx], np.int64), np.array([iou], np.float32),
                    None if st is None else np.array([st], np.float32)]
            want = reference.run_node("NonMaxSuppression", args, {"center_point_box": center})[0]
            (got,) = host_tail._nms(args, {"center_point_box": center})
            assert got.dtype == np.int64 and got.shape == want.shape, (got.shape, want.shape)
            np.testing.assert_array_equal(got, want)
