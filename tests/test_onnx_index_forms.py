"""ReverseSequence, Col2Im and MaxUnpool, imported as written bodies of gathers and scatters
(dnnfusion/frontends/onnx_index_forms.py): results through generated code against ONNX Runtime,
the ONNX reference and PyTorch (fold, max_unpool2d), exact where the operator only moves data;
the edge cases where those disagree, read as the module's docstring says; refusals that name
the node and the operator."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

ONNX_TYPE = {np.float32: T.FLOAT, np.float64: T.DOUBLE, np.int32: T.INT32, np.int64: T.INT64, np.uint8: T.UINT8}


def _model(node, inputs, consts=None, out_type=T.FLOAT, opset=18, extra=()):
    """One node (plus `extra` before it) over graph inputs {name: (onnx type, shape)} and
    initializers {name: array}."""
    g = h.make_graph([*extra, node], node.op_type, [h.make_tensor_value_info(k, t, s) for k, (t, s) in inputs.items()],
                     [h.make_tensor_value_info(node.output[0], out_type, None)],
                     [nh.from_array(a, k) for k, a in (consts or {}).items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _compile(model, **kw):
    with warnings.catch_warnings():  # the output's shape is left to inference (the checker says so)
        warnings.simplefilter("ignore", df.ModelWarning)
        return df.compile(model.SerializeToString(), **kw)


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _ref(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)[0]


def _same(got, want, tol=0.0):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if tol:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


# ---- ReverseSequence --------------------------------------------------------------------------
def _reverse(shape, dtype, batch_axis, time_axis, consts=None):
    nb = shape[batch_axis]
    node = h.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rev", batch_axis=batch_axis, time_axis=time_axis)
    ins = {"x": (ONNX_TYPE[dtype], shape)}
    if not consts:
        ins["lens"] = (T.INT64, (nb,))
    return _model(node, ins, consts, ONNX_TYPE[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
@pytest.mark.parametrize("axes,shape", [((1, 0), (5, 4)), ((0, 1), (4, 5)), ((1, 0), (5, 3, 2, 3)),
                                        ((0, 1), (3, 5, 4))], ids=["b1t0", "b0t1", "b1t0_rank4", "b0t1_rank3"])
def test_reverse_sequence_matches_onnxruntime_and_the_reference(dtype, axes, shape):
    batch, time = axes
    m = _reverse(shape, dtype, batch, time)
    nb, nt = shape[batch], shape[time]
    x = np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)
    f = _compile(m)
    lens = np.array(([1, nt, 0, 2, nt - 1] * nb)[:nb], np.int64)  # 1, the full length, none, and between
    for ls in (lens, np.full(nb, nt, np.int64), np.ones(nb, np.int64)):
        feeds = {"x": x, "lens": ls}
        got = f(**feeds)
        _same(got, _ort(m, feeds))
        _same(got, _ref(m, feeds))


def test_reverse_sequence_of_constant_lengths():
    m = _reverse((4, 3), np.float32, 1, 0, consts={"lens": np.array([4, 2, 1], np.int64)})
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    _same(_compile(m)(x=x), _ort(m, {"x": x}))


def test_reverse_sequence_lengths_outside_the_time_axis():
    """Above the time size: the whole sequence reversed (the ONNX reference; ONNX Runtime
    refuses it at run time); negative: nothing reversed (ONNX Runtime refuses it too)."""
    m = _reverse((2, 4), np.float32, 0, 1)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = _compile(m)(x=x, lens=np.array([9, -1], np.int64))
    np.testing.assert_array_equal(got, [[3, 2, 1, 0], [4, 5, 6, 7]])
    np.testing.assert_array_equal(got[0], _ref(m, {"x": x, "lens": np.array([9, 2], np.int64)})[0])


def test_reverse_sequence_body_is_a_gather_under_the_node_name():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        ecg = df.load(_reverse((5, 3, 2), np.float32, 1, 0).SerializeToString())
    ops = [n.op for n in ecg.nodes]
    assert "GatherElements" in ops and "ReverseSequence" not in ops, ops
    assert all(n.name.startswith("rev/") for n in ecg.nodes), [n.name for n in ecg.nodes]


# ---- Col2Im ---------------------------------------------------------------------------------
# name: (N, C, image_shape, block_shape, attributes)
COL2IM = {
    "plain": (1, 1, [5, 5], [2, 2], {}),
    "channels_batch": (2, 3, [4, 6], [3, 2], {}),
    "pads": (1, 2, [4, 5], [3, 3], {"pads": [1, 2, 0, 1]}),
    "strides": (2, 1, [7, 6], [3, 2], {"strides": [2, 2]}),
    "dilations": (1, 2, [6, 7], [2, 3], {"dilations": [2, 2]}),
    "all": (2, 2, [8, 7], [3, 2], {"pads": [1, 0, 2, 1], "strides": [2, 1], "dilations": [1, 3]}),
    "3d": (1, 2, [3, 4, 5], [2, 1, 3], {"strides": [1, 2, 1], "pads": [0, 1, 1, 1, 0, 0]}),
}


def _geometry(case):
    n, c, image, block, attrs = COL2IM[case]
    d = len(image)
    pads, strides, dil = attrs.get("pads", [0] * 2 * d), attrs.get("strides", [1] * d), attrs.get("dilations", [1] * d)
    blocks = [(image[i] + pads[i] + pads[d + i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(d)]
    return (n, c * int(np.prod(block)), int(np.prod(blocks))), image, block, attrs


def _col2im(case, dtype=np.float32):
    shape, image, block, attrs = _geometry(case)
    node = h.make_node("Col2Im", ["x", "image", "block"], ["y"], name="fold", **attrs)
    return _model(node, {"x": (ONNX_TYPE[dtype], shape)},
                  {"image": np.array(image, np.int64), "block": np.array(block, np.int64)}, ONNX_TYPE[dtype]), shape


@pytest.mark.parametrize("case", list(COL2IM))
def test_col2im_matches_onnxruntime_and_the_reference(case):
    m, shape = _col2im(case)
    x = {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
    got = _compile(m)(**x)
    _same(got, _ort(m, x), 1e-6)
    _same(got, _ref(m, x), 1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_col2im_other_types_match_the_reference(dtype):
    """ONNX Runtime has float32 kernels only; the specification allows every type."""
    m, shape = _col2im("all", dtype)
    x = {"x": np.random.default_rng(2).integers(-50, 50, shape).astype(dtype)}
    _same(_compile(m)(**x), _ref(m, x), 1e-12 if dtype == np.float64 else 0.0)


@pytest.mark.parametrize("case", ["channels_batch", "all"])
def test_col2im_is_torch_fold(case):
    torch = pytest.importorskip("torch")
    m, shape = _col2im(case)
    _, _, image, block, attrs = COL2IM[case]
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    pads = attrs.get("pads", [0, 0, 0, 0])
    # fold pads both sides alike: fold over the larger padded image, then crop
    pad_image = [image[i] + pads[i] + pads[2 + i] for i in range(2)]
    want = torch.nn.functional.fold(torch.from_numpy(x), pad_image, block, dilation=attrs.get("dilations", 1),
                                    stride=attrs.get("strides", 1)).numpy()
    want = want[:, :, pads[0]:pads[0] + image[0], pads[1]:pads[1] + image[1]]
    np.testing.assert_allclose(_compile(m)(x=x), want, rtol=1e-6, atol=1e-6)


# ---- MaxUnpool ------------------------------------------------------------------------------
def _pool(x, kernel, strides, pads=None):
    """MaxPool's values and indices, from ONNX Runtime (an oracle independent of the MaxUnpool
    under test; test_max_pool_then_unpool_in_one_model compiles the two together)."""
    d = len(kernel)
    node = h.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=kernel, strides=strides, pads=pads or [0] * 2 * d)
    g = h.make_graph([node], "pool", [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                     [h.make_tensor_value_info("p", T.FLOAT, None), h.make_tensor_value_info("i", T.INT64, None)])
    s = ort.InferenceSession(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString(),
                             providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})


def _unpool(pooled_shape, kernel, strides, output_shape=None, dtype=np.float32, opset=22, **attrs):
    ins = ["x", "i"] + (["shape"] if output_shape is not None else [])
    node = h.make_node("MaxUnpool", ins, ["y"], name="unpool", kernel_shape=kernel, strides=strides, **attrs)
    consts = {"shape": np.array(output_shape, np.int64)} if output_shape is not None else None
    return _model(node, {"x": (ONNX_TYPE[dtype], pooled_shape), "i": (T.INT64, pooled_shape)}, consts, ONNX_TYPE[dtype],
                  opset)


@pytest.mark.parametrize("shape,kernel,strides,opset", [((2, 3, 6, 8), [2, 2], [2, 2], 22),
                                                        ((1, 2, 7, 7), [3, 3], [2, 2], 13),  # MaxUnpool-11, overlapping
                                                        ((2, 2, 9), [3], [3], 22),
                                                        ((1, 2, 4, 4, 6), [2, 2, 2], [2, 2, 2], 22)],
                         ids=["2d", "overlapping", "1d", "3d"])
def test_max_unpool_of_max_pool_indices(shape, kernel, strides, opset):
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    p, i = _pool(x, kernel, strides)
    m = _unpool(p.shape, kernel, strides, opset=opset)
    feeds = {"x": p, "i": i}
    got = _compile(m)(**feeds)
    _same(got, _ort(m, feeds))
    _same(got, _ref(m, feeds))


def test_max_unpool_output_shape_equal_to_the_inferred_and_float64():
    """(ONNX Runtime has a float32 MaxUnpool only: doubles against the reference.)"""
    x = np.random.default_rng(5).standard_normal((1, 2, 4, 6)).astype(np.float32)
    p, i = _pool(x, [2, 2], [2, 2])
    for dtype in (np.float32, np.float64):
        m = _unpool(p.shape, [2, 2], [2, 2], output_shape=[1, 2, 4, 6], dtype=dtype)
        feeds = {"x": p.astype(dtype), "i": i}
        got = _compile(m)(**feeds)
        _same(got, _ref(m, feeds))
        if dtype == np.float32:
            _same(got, _ort(m, feeds))


def test_max_unpool_output_shape_as_onnxruntime_and_torch_read_it():
    """An odd-sized image pooled, unpooled to its own size: the maxima back in their places
    (ONNX Runtime, PyTorch); the ONNX reference reads I in the inferred 4x4 shape instead."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(6).standard_normal((2, 3, 5, 5)).astype(np.float32)
    p, i = _pool(x, [2, 2], [2, 2])
    m = _unpool(p.shape, [2, 2], [2, 2], output_shape=[2, 3, 5, 5])
    got = _compile(m)(x=p, i=i)
    _same(got, _ort(m, {"x": p, "i": i}))
    tp, ti = torch.nn.functional.max_pool2d(torch.from_numpy(x), 2, 2, return_indices=True)
    np.testing.assert_array_equal(got, torch.nn.functional.max_unpool2d(tp, ti, 2, 2, output_size=(5, 5)).numpy())
    np.testing.assert_array_equal(got[x == got], x[x == got])


def test_max_unpool_is_torch_max_unpool2d_with_pads():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(7).standard_normal((2, 2, 6, 6)).astype(np.float32)
    tp, ti = torch.nn.functional.max_pool2d(torch.from_numpy(x), 3, 2, padding=1, return_indices=True)
    want = torch.nn.functional.max_unpool2d(tp, ti, 3, 2, padding=1, output_size=(6, 6)).numpy()
    plane = np.arange(4, dtype=np.int64).reshape(2, 2, 1, 1) * 36  # torch's indices are per (n, c) plane
    m = _unpool(tuple(tp.shape), [3, 3], [2, 2], output_shape=[2, 2, 6, 6], pads=[1, 1, 1, 1])
    np.testing.assert_array_equal(_compile(m)(x=tp.numpy(), i=ti.numpy() + plane), want)


def test_max_unpool_duplicate_indices_keep_the_last():
    m = _unpool((1, 1, 2, 2), [2, 2], [2, 2])
    feeds = {"x": np.array([[[[5, 6], [7, 8]]]], np.float32), "i": np.array([[[[5, 5], [5, 15]]]], np.int64)}
    got = _compile(m)(**feeds)
    _same(got, _ort(m, feeds))
    assert got.reshape(-1)[5] == 7


@pytest.mark.parametrize("planner", ["dnnfusion", "dp", "tvm", "patterns", "none"])
def test_max_pool_then_unpool_in_one_model(planner):
    """SegNet's pattern: MaxPool's Indices read by MaxUnpool (and by an Add). Code generation
    computes the Indices in a call of their own (anchors.cc lower_pool), so every planner keeps
    their readers out of MaxPool's block (plan.h written_apart) and says why."""
    pool = h.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2])
    relu = h.make_node("Relu", ["p"], ["pr"])
    node = h.make_node("MaxUnpool", ["pr", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    m = _model(node, {"x": (T.FLOAT, (1, 2, 4, 4))}, extra=[pool, relu])
    x = np.random.default_rng(8).standard_normal((1, 2, 4, 4)).astype(np.float32)
    c = _compile(m, planner=planner)
    _same(c(x=x), _ort(m, {"x": x}))
    if planner == "dnnfusion":
        assert "in a call of its own" in c.explain()


# ---- refusals -------------------------------------------------------------------------------
def _refused(model, error, pattern):
    with pytest.raises(error, match=pattern) as e:
        _compile(model)
    assert isinstance(e.value, df.errors.Error)


@pytest.mark.parametrize("axes", [(0, 0), (2, 0), (1, 1)])
def test_reverse_sequence_bad_axes_are_refused(axes):
    _refused(_reverse((4, 3, 2), np.float32, *axes), df.ShapeError, r"node 'rev' \(ReverseSequence\): batch_axis")


def test_reverse_sequence_refusals():
    node = h.make_node("ReverseSequence", ["x", "lens"], ["y"], name="rev")
    _refused(_model(node, {"x": (T.FLOAT, (4, 3)), "lens": (T.INT64, (2,))}), df.ShapeError,
             r"node 'rev' \(ReverseSequence\): sequence_lens must have shape \[3\]")
    _refused(_model(node, {"x": (T.FLOAT, ("T", 3)), "lens": (T.INT64, (3,))}), df.ShapeError,
             r"node 'rev' \(ReverseSequence\) needs a static shape")


def test_col2im_refusals():
    node = h.make_node("Col2Im", ["x", "image", "block"], ["y"], name="fold")
    blk = {"block": np.array([2, 2], np.int64)}
    _refused(_model(node, {"x": (T.FLOAT, (1, 4, 16)), "image": (T.INT64, (2,))}, blk), df.ShapeError,
             r"node 'fold' \(Col2Im\): image_shape \(input 1\) must be a constant")
    both = {"image": np.array([5, 5], np.int64), **blk}
    _refused(_model(node, {"x": (T.FLOAT, (1, 4, 15))}, both), df.ShapeError,
             r"node 'fold' \(Col2Im\): an input of shape \[1, 4, 15\] does not hold blocks")
    _refused(_model(node, {"x": (T.FLOAT, (1, 4, 16))}, {"image": np.array([5, 5, 5], np.int64), **blk}),
             df.ShapeError, r"node 'fold' \(Col2Im\): image_shape \[5, 5, 5\] and block_shape \[2, 2\]")
    bad = h.make_node("Col2Im", ["x", "image", "block"], ["y"], name="fold", strides=[0, 1])
    _refused(_model(bad, {"x": (T.FLOAT, (1, 4, 16))}, both), df.ShapeError,
             r"node 'fold' \(Col2Im\): strides \[0, 1\]")
    _refused(_model(node, {"x": (T.BOOL, (1, 4, 16))}, both, T.BOOL), df.DTypeError, r"node 'fold' \(Col2Im\): bool")


def test_max_unpool_refusals():
    ins = {"x": (T.FLOAT, (1, 1, 2, 2)), "i": (T.INT64, (1, 1, 2, 2))}
    node = h.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], name="unpool", kernel_shape=[2, 2], strides=[2, 2])
    _refused(_model(node, {**ins, "shape": (T.INT64, (4,))}), df.ShapeError,
             r"node 'unpool' \(MaxUnpool\): output_shape \(input 2\) must be a constant")
    _refused(_model(node, ins, {"shape": np.array([1, 1, 3, 4], np.int64)}), df.ShapeError,
             r"node 'unpool' \(MaxUnpool\): output_shape \[1, 1, 3, 4\] must keep N and C \[1, 1\] and be at least")
    short = h.make_node("MaxUnpool", ["x", "i"], ["y"], name="unpool", kernel_shape=[2], strides=[2, 2])
    _refused(_model(short, ins), df.ShapeError, r"node 'unpool' \(MaxUnpool\): kernel_shape \[2\] must give")
    _refused(_model(h.make_node("MaxUnpool", ["x", "i"], ["y"], name="unpool", kernel_shape=[2, 2]),
                    {"x": (T.FLOAT, (1, 1, 2, 2)), "i": (T.INT64, (1, 1, 2, 3))}), df.ShapeError,
             r"node 'unpool' \(MaxUnpool\): I must have X's shape")


# ---- Compress ---------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_compress_with_a_constant_mask_matches_onnxruntime(axis, dtype):
    """A Gather at the mask's true positions; a mask shorter than the axis drops the rest."""
    x = np.arange(3 * 5, dtype=dtype).reshape(3, 5) * 3 - 7
    n = x.size if axis is None else x.shape[axis]
    mask = (np.arange(n - 1) % 3 != 1)  # one shorter than the axis (or the flattened input)
    attrs = {} if axis is None else {"axis": axis}
    onnx_t = T.FLOAT if dtype == np.float32 else T.INT64
    m = _model(h.make_node("Compress", ["x", "c"], ["y"], **attrs), {"x": (onnx_t, [3, 5])}, {"c": mask},
               out_type=onnx_t)
    want = _ort(m, {"x": x})
    _same(_compile(m)(x), want)
    _same(df.load(m.SerializeToString()).run_reference(x)[0], want)


def test_compress_refuses_a_runtime_mask_and_a_true_entry_past_the_input():
    m = _model(h.make_node("Compress", ["x", "c"], ["y"], name="cz", axis=0),
               {"x": (T.FLOAT, [3, 5]), "c": (T.BOOL, [3])})
    with pytest.raises(df.ShapeError, match=r"node 'cz' \(Compress\): the condition \(input 1\) must be a constant"):
        df.load(m.SerializeToString())
    m = _model(h.make_node("Compress", ["x", "c"], ["y"], name="cz", axis=0), {"x": (T.FLOAT, [3, 5])},
               {"c": np.array([True, False, False, True])})
    with pytest.raises(df.ShapeError, match=r"true entry at 3, past the 3 entries along the axis"):
        df.load(m.SerializeToString())
