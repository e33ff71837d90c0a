"""QOperator-format quantized operators (QLinearMatMul, QLinearConv, MatMulInteger,
ConvInteger), imported as the bodies onnx_qoperator.py writes, compiled and compared with ONNX
Runtime and onnx.reference: int32 accumulators exactly (K=768 among them, with sums past 2^24
that a float32 accumulation would round), requantized outputs exactly against the reference;
per-tensor, per-row, per-column and per-channel zero points and scales; convolutions with
pads, strides, dilations, groups and auto_pad; whole models quantized by onnxruntime.quantization
(QOperator static, dynamic); and the errors for what is refused.

ONNX Runtime requantizes in float32 (float(acc) * multiplier), the reference in float64: where
the two differ (by one, on a product within a float32 rounding of a .5 tie) dnnfusion matches
the reference, so comparisons with ONNX Runtime on requantized outputs allow one step on 1 in
1000 elements (none of the float32 cases here hits one today). With float16 scales (opset 21)
they differ more often: see test_qlinear_matmul_float16_scales_opset21."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

U8, I8, I32, F32, F16 = np.uint8, np.int8, np.int32, np.float32, np.float16
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _seeded():
    """Each test draws the same data whatever ran before it (xdist splits the file)."""
    global RNG
    RNG = np.random.default_rng(7)


def _code(dtype) -> int:
    return nh.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _q(dtype, shape, lo=None, hi=None) -> np.ndarray:
    i = np.iinfo(dtype)
    return RNG.integers(i.min if lo is None else lo, (i.max if hi is None else hi) + 1, shape).astype(dtype)


def _model(nodes, feeds: dict, inits: dict, outputs: dict, opset: int = 13):
    """nodes over graph inputs `feeds` and initializers `inits`; outputs: name -> dtype."""
    g = h.make_graph(nodes, "q", [h.make_tensor_value_info(n, _code(v.dtype), v.shape) for n, v in feeds.items()],
                     [h.make_tensor_value_info(n, _code(t), None) for n, t in outputs.items()],
                     [nh.from_array(np.asarray(v), n) for n, v in inits.items()])
    # (ONNX's shape inference gives the outputs their shapes, which the checker wants)
    return onnx.shape_inference.infer_shapes(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]))


def _dnnfusion(model, feeds: dict) -> list[np.ndarray]:
    out = df.compile(model)(**feeds)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _ort(model, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _reference(model, feeds: dict) -> list[np.ndarray]:
    return ReferenceEvaluator(model).run(None, feeds)


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
    bad = np.flatnonzero(got.astype(np.int64) != want.astype(np.int64))
    assert bad.size == 0, f"{what}: {bad.size} elements differ, first at {bad[:5]}"


def _near_ort(got: np.ndarray, want: np.ndarray, what: str, share: float = 0.001) -> None:
    """Requantized outputs against ONNX Runtime: at most one step, on at most `share` of them."""
    d = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert d.max(initial=0) <= 1 and (d > 0).sum() <= max(1, d.size * share), (what, int(d.max()), int((d > 0).sum()))


def _mm_truth(a, b, az=0, bz=0) -> np.ndarray:
    return np.matmul(a.astype(np.int64) - az, b.astype(np.int64) - bz).astype(I32)


# ---- MatMulInteger -------------------------------------------------------------------------
@pytest.mark.parametrize("ta,tb", [(U8, U8), (U8, I8), (I8, I8), (I8, U8)])
def test_matmul_integer_against_ort_and_reference(ta, tb):
    a, b, a3 = _q(ta, [5, 7]), _q(tb, [7, 6]), _q(ta, [2, 5, 7])
    inits = {"az": np.array(3, ta), "bz": np.array([-2 if tb == I8 else 200], tb),
             "bzc": np.arange(6).astype(tb), "az1": np.array([9], ta)}
    nodes = [h.make_node("MatMulInteger", ["a", "b"], ["plain"]),  # no zero points
             h.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["scalar"]),
             h.make_node("MatMulInteger", ["a", "b", "az1", "bzc"], ["per_column"]),
             h.make_node("MatMulInteger", ["a3", "b", "", "bzc"], ["batched"])]  # a_zero_point left out
    names = ["plain", "scalar", "per_column", "batched"]
    m = _model(nodes, {"a": a, "b": b, "a3": a3}, inits, dict.fromkeys(names, I32))
    feeds = {"a": a, "b": b, "a3": a3}
    got, want = _dnnfusion(m, feeds), _ort(m, feeds)
    truth = [_mm_truth(a, b), _mm_truth(a, b, 3, inits["bz"].astype(np.int64)),
             _mm_truth(a, b, 9, inits["bzc"].astype(np.int64)), _mm_truth(a3, b, 0, inits["bzc"].astype(np.int64))]
    for name, g, w, t, r in zip(names, got, want, truth, _reference(m, feeds)):
        _same(g, w, f"{name} vs ONNX Runtime")
        _same(g, r, f"{name} vs the reference")
        _same(g, t, f"{name} vs int64")


def test_matmul_integer_per_row_zero_points():
    """A's zero point per row ([M], and the N-D [D, M, 1] with B's [D, 1, N]): ONNX Runtime
    takes a scalar only, and the reference subtracts a 1-D one along K, so the truth is int64."""
    a, b, a3, b3 = _q(U8, [4, 9]), _q(I8, [9, 3]), _q(U8, [2, 4, 9]), _q(I8, [2, 9, 3])
    azr, az3, bz3 = np.array([1, 50, 128, 255], U8), _q(U8, [2, 4, 1]), _q(I8, [2, 1, 3])
    nodes = [h.make_node("MatMulInteger", ["a", "b", "azr"], ["rows"]),
             h.make_node("MatMulInteger", ["a3", "b3", "az3", "bz3"], ["nd"])]
    m = _model(nodes, {"a": a, "b": b, "a3": a3, "b3": b3}, {"azr": azr, "az3": az3, "bz3": bz3},
               {"rows": I32, "nd": I32})
    rows, nd = _dnnfusion(m, {"a": a, "b": b, "a3": a3, "b3": b3})
    _same(rows, _mm_truth(a, b, azr.astype(np.int64)[:, None]), "per-row a_zero_point")
    _same(nd, _mm_truth(a3, b3, az3.astype(np.int64), bz3.astype(np.int64)), "N-D zero points")


def test_realistic_size_is_exact():
    """K=768 (a BERT-base projection): MatMulInteger at the extremes (|sum| up to 768 * 255 *
    128 = 25 million, past float32's 2^24) and QLinearMatMul with per-column int8 weights."""
    M, K, N = 16, 768, 64
    a = _q(U8, [M, K])
    a[0] = 255  # a row of 255 against a column of -128: the largest sums
    b = _q(I8, [K, N])
    b[:, 0] = -128
    ws = RNG.uniform(0.002, 0.004, N).astype(F32)
    inits = {"az": np.array(0, U8), "bz": np.array(0, I8), "as": F32(0.01), "aq": np.array(128, U8),
             "bs": ws, "bzc": np.zeros(N, I8), "ys": F32(0.45), "yz": np.array(120, U8)}
    nodes = [h.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["acc"]),
             h.make_node("QLinearMatMul", ["a", "as", "aq", "b", "bs", "bzc", "ys", "yz"], ["y"])]
    m = _model(nodes, {"a": a, "b": b}, inits, {"acc": I32, "y": U8})
    feeds = {"a": a, "b": b}
    (acc, y), (acc_ort, y_ort), (acc_ref, y_ref) = _dnnfusion(m, feeds), _ort(m, feeds), _reference(m, feeds)
    assert np.abs(acc.astype(np.int64)).max() > 1 << 24
    _same(acc, _mm_truth(a, b), "MatMulInteger vs int64")
    _same(acc, acc_ort, "MatMulInteger vs ONNX Runtime")
    _same(y, y_ref, "QLinearMatMul vs the reference")
    _near_ort(y, y_ort, "QLinearMatMul vs ONNX Runtime")
    assert 5 < len(np.unique(y)) and (y != 0).any() and (y != 255).any()  # not all saturated


# ---- QLinearMatMul -------------------------------------------------------------------------
def _qlmm_inputs(tq, n: int, per_column: bool) -> dict:
    z = (lambda v: np.array(v - 128 if tq == I8 else v, tq))  # noqa: E731
    return {"as": np.array([0.0066], F32), "az": np.array([z(113)]), "bs": (RNG.uniform(0.005, 0.009, n).astype(F32)
            if per_column else F32(0.00705)), "bz": (np.array([z(v) for v in RNG.integers(100, 140, n)])
            if per_column else z(114)), "ys": F32(0.0107), "yz": z(118)}


@pytest.mark.parametrize("tq", [U8, I8])
@pytest.mark.parametrize("scales", ["constant", "graph inputs"])
def test_qlinear_matmul(tq, scales):
    """Per tensor and per column, 2-D and 3-D; the scales and zero points constants (as
    quantizers write them) or fed at run time (as ONNX's backend tests do)."""
    a, b, a3 = _q(tq, [3, 10]), _q(tq, [10, 5]), _q(tq, [2, 3, 10])
    per_t, per_c = _qlmm_inputs(tq, 5, False), _qlmm_inputs(tq, 5, True)
    qs = {**{k + "_t": v for k, v in per_t.items()}, **{k + "_c": v for k, v in per_c.items()}}
    ins = lambda x, s: [x, "as" + s, "az" + s, "b", "bs" + s, "bz" + s, "ys" + s, "yz" + s]  # noqa: E731
    nodes = [h.make_node("QLinearMatMul", ins("a", "_t"), ["t"]), h.make_node("QLinearMatMul", ins("a", "_c"), ["c"]),
             h.make_node("QLinearMatMul", ins("a3", "_c"), ["c3"])]
    feeds = {"a": a, "b": b, "a3": a3}
    if scales == "graph inputs":
        feeds.update({k: np.asarray(v) for k, v in qs.items()})
        m = _model(nodes, feeds, {}, dict.fromkeys(["t", "c", "c3"], tq))
    else:
        m = _model(nodes, feeds, qs, dict.fromkeys(["t", "c", "c3"], tq))
    got = _dnnfusion(m, feeds)
    for name, g, r, o in zip(["per tensor", "per column", "3-D"], got, _reference(m, feeds), _ort(m, feeds)):
        _same(g, r, f"{name} vs the reference")
        _near_ort(g, o, f"{name} vs ONNX Runtime")


def test_qlinear_matmul_float16_scales_opset21():
    """The reference computes the multiplier a_scale * b_scale / y_scale in float16, each step
    rounded to float16, as dnnfusion does; ONNX Runtime 1.32 widens the scales and computes it
    in float32, a multiplier up to ~3 float16 roundings away, so some outputs differ by one."""
    a, b = _q(U8, [4, 12]), _q(U8, [12, 6])
    inits = {"as": F16(0.0066), "az": np.array(113, U8), "bs": F16(0.00705), "bz": np.array(114, U8),
             "ys": F16(0.0207), "yz": np.array(118, U8)}
    m = _model([h.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
               {"a": a, "b": b}, inits, {"y": U8}, opset=21)
    feeds = {"a": a, "b": b}
    got = _dnnfusion(m, feeds)[0]
    _same(got, _reference(m, feeds)[0], "float16 scales vs the reference")
    _near_ort(got, _ort(m, feeds)[0], "float16 scales vs ONNX Runtime", share=0.25)


def test_qlinear_matmul_per_row_a():
    """a_scale and a_zero_point per row [M] (the specification allows it; ONNX Runtime does
    not, and the reference multiplies [M] scales along the columns): against NumPy."""
    a, b = _q(U8, [3, 8]), _q(U8, [8, 4])
    asc, az = np.array([0.01, 0.02, 0.015], F32), np.array([100, 128, 90], U8)
    bsc, ysc = F32(0.008), F32(0.05)
    inits = {"as": asc, "az": az, "bs": bsc, "bz": np.array(120, U8), "ys": ysc, "yz": np.array(10, U8)}
    m = _model([h.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
               {"a": a, "b": b}, inits, {"y": U8})
    acc = _mm_truth(a, b, az.astype(np.int64)[:, None], 120)
    want = np.clip(np.rint(acc * ((asc * bsc) / ysc)[:, None].astype(np.float64) + 10), 0, 255).astype(U8)
    _same(_dnnfusion(m, {"a": a, "b": b})[0], want, "per-row a vs NumPy")


# ---- ConvInteger and QLinearConv -----------------------------------------------------------
CONVS = {  # name -> (x shape, w shape, attributes)
    "pads": ([1, 3, 7, 7], [4, 3, 3, 3], {"pads": [1, 1, 1, 1]}),
    "strides_dilations": ([2, 2, 9, 8], [3, 2, 3, 2], {"strides": [2, 1], "dilations": [2, 1], "pads": [1, 0, 2, 1]}),
    "groups": ([1, 4, 6, 6], [6, 2, 3, 3], {"group": 2, "pads": [0, 1, 1, 0]}),
    "depthwise_same_upper": ([1, 3, 6, 5], [3, 1, 3, 3], {"group": 3, "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "same_lower": ([1, 2, 5, 5], [2, 2, 2, 2], {"auto_pad": "SAME_LOWER"}),
    "pointwise": ([1, 5, 4, 4], [3, 5, 1, 1], {}),
    "conv1d": ([2, 3, 11], [2, 3, 4], {"strides": [3], "pads": [2, 1]}),
}


def test_conv_integer():
    """Per-tensor and per-output-channel W zero points; ONNX Runtime takes per tensor only."""
    nodes, feeds, inits, outs = [], {}, {}, {}
    for k, (name, (xs, ws, attrs)) in enumerate(CONVS.items()):
        tx, tw = (U8, I8) if k % 2 else (U8, U8)
        feeds[f"x{k}"], inits[f"w{k}"] = _q(tx, xs), _q(tw, ws)
        inits[f"xz{k}"] = np.array(RNG.integers(0, 256), U8)
        inits[f"wz{k}"] = _q(tw, [ws[0]]) if k % 3 else np.array(7, tw)
        nodes.append(h.make_node("ConvInteger", [f"x{k}", f"w{k}", f"xz{k}", f"wz{k}"], [name], **attrs))
        outs[name] = I32
    m = _model(nodes, feeds, inits, outs, opset=13)
    got = _dnnfusion(m, feeds)
    for k, (name, g, r) in enumerate(zip(outs, got, _reference(m, feeds))):
        _same(g, r, f"ConvInteger {name} vs the reference")
    per_tensor = _model([h.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1])],
                        {"x": feeds["x0"]}, {"w": inits["w0"], "xz": inits["xz0"], "wz": inits["wz0"]}, {"y": I32})
    _same(_dnnfusion(per_tensor, {"x": feeds["x0"]})[0], _ort(per_tensor, {"x": feeds["x0"]})[0],
          "ConvInteger vs ONNX Runtime")


@pytest.mark.parametrize("tq", [U8, I8])
def test_qlinear_conv(tq):
    """Per-channel w_scale and zero points (0 on int8 weights, as onnxruntime.quantization
    writes them, or not), an int32 bias, every geometry of
    CONVS, against the reference exactly and ONNX Runtime. The reference's per-channel w_scale
    is 2-D only (it broadcasts it as [1, M, 1, 1]): the 1-D convolution is compared with ONNX
    Runtime alone."""
    nodes, feeds, inits, outs = [], {}, {}, {}
    for k, (name, (xs, ws, attrs)) in enumerate(CONVS.items()):
        tw = I8 if k % 2 or tq == I8 else U8  # (ONNX Runtime has no int8 X with uint8 W)
        feeds[f"x{k}"], inits[f"w{k}"] = _q(tq, xs), _q(tw, ws)
        inits[f"xs{k}"], inits[f"xz{k}"] = F32(0.02), np.array(-5 if tq == I8 else 125, tq)
        inits[f"ws{k}"] = RNG.uniform(0.002, 0.01, ws[0]).astype(F32)
        shift = 128 if tw == I8 else 0
        inits[f"wz{k}"] = np.zeros(ws[0], I8) if k % 2 else _q(tw, [ws[0]], 100 - shift, 150 - shift)
        inits[f"ys{k}"], inits[f"yz{k}"] = F32(0.03 * np.sqrt(np.prod(ws[1:]))), np.array(3 if tq == I8 else 131, tq)
        if k % 3:
            inits[f"b{k}"] = RNG.integers(-2000, 2000, ws[0]).astype(I32)
        ins = [f"{i}{k}" for i in ("x", "xs", "xz", "w", "ws", "wz", "ys", "yz")] + ([f"b{k}"] if k % 3 else [])
        nodes.append(h.make_node("QLinearConv", ins, [name], **attrs))
        outs[name] = tq
    m = _model(nodes, feeds, inits, outs, opset=13)
    got = _dnnfusion(m, feeds)
    for name, g, r, o in zip(outs, got, _reference(m, feeds), _ort(m, feeds)):
        if name != "conv1d":
            _same(g, r, f"QLinearConv {name} vs the reference")
        _near_ort(g, o, f"QLinearConv {name} vs ONNX Runtime")
        assert len(np.unique(g)) > 3, name  # not all saturated


# ---- Whole models from onnxruntime.quantization --------------------------------------------
def _float_model(path) -> None:
    """Conv (3 -> 8, 3x3, pads 1) + Relu, then a MatMul to 10 (random weights)."""
    w = RNG.standard_normal([8, 3, 3, 3]).astype(F32) * 0.3
    wm = RNG.standard_normal([8 * 6 * 6, 10]).astype(F32) * 0.05
    nodes = [h.make_node("Conv", ["x", "w", "wb"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
             h.make_node("Reshape", ["r", "shape"], ["f"]), h.make_node("MatMul", ["f", "wm"], ["y"])]
    g = h.make_graph(nodes, "f", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 6, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 10])],
                     [nh.from_array(w, "w"), nh.from_array(RNG.standard_normal(8).astype(F32) * 0.1, "wb"),
                      nh.from_array(np.array([2, -1], np.int64), "shape"), nh.from_array(wm, "wm")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), str(path))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_quantize_static_qoperator_model(tmp_path):
    q = pytest.importorskip("onnxruntime.quantization")
    fp, qp = tmp_path / "f.onnx", tmp_path / "q.onnx"
    _float_model(fp)

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": RNG.standard_normal([2, 3, 6, 6]).astype(F32)} for _ in range(4)])

        def get_next(self):
            return next(self.data, None)

    q.quantize_static(str(fp), str(qp), Reader(), quant_format=q.QuantFormat.QOperator, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
    model = onnx.load(str(qp))
    ops = [n.op_type for n in model.graph.node]
    assert "QLinearConv" in ops and "QLinearMatMul" in ops, ops
    x = RNG.standard_normal([2, 3, 6, 6]).astype(F32)
    got, want = _dnnfusion(model, {"x": x})[0], _ort(model, {"x": x})[0]
    # The float output is DequantizeLinear of a uint8: equal where the uint8 is.
    step = float(np.min(np.abs(np.diff(np.unique(want))))) if len(np.unique(want)) > 1 else 1.0
    assert np.abs(got - want).max() <= step * 1.01 and (np.abs(got - want) > 1e-6).mean() <= 0.01


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_quantize_dynamic_model(tmp_path):
    q = pytest.importorskip("onnxruntime.quantization")
    fp, qp = tmp_path / "f.onnx", tmp_path / "q.onnx"
    _float_model(fp)
    q.quantize_dynamic(str(fp), str(qp), weight_type=q.QuantType.QUInt8, op_types_to_quantize=["MatMul", "Conv"])
    model = onnx.load(str(qp))
    ops = [n.op_type for n in model.graph.node]
    assert "MatMulInteger" in ops and "ConvInteger" in ops, ops
    x = RNG.standard_normal([2, 3, 6, 6]).astype(F32)
    got, want = _dnnfusion(model, {"x": x})[0], _ort(model, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- Errors --------------------------------------------------------------------------------
def _load_error(node, feeds, inits, out_type, match, error=df.Error):
    m = _model([node], feeds, inits, {"y": out_type})
    with pytest.raises(error, match=match):
        df.load(m)


@pytest.mark.filterwarnings("ignore::dnnfusion.ModelWarning")
def test_errors_name_the_node():
    a, b = _q(U8, [3, 4]), _q(U8, [4, 5])
    mmi = lambda *i: h.make_node("MatMulInteger", list(i), ["y"], name="mm")  # noqa: E731
    _load_error(mmi("a", "b", "az"), {"a": a, "b": b}, {"az": np.array(1, I8)}, I32,
                r"node 'mm' \(MatMulInteger\): the zero point of A .* i8, A u8", df.DTypeError)
    _load_error(mmi("a", "b", "az"), {"a": a, "b": b}, {"az": np.arange(4).astype(U8)}, I32,
                r"node 'mm' \(MatMulInteger\): the zero point of A .* 4 entries, but there are 3 rows", df.ShapeError)
    _load_error(mmi("a", "b", "", "bz"), {"a": a, "b": b}, {"bz": np.zeros([2, 5], U8)}, I32,
                r"node 'mm' \(MatMulInteger\): the zero point of B .* shape \[2, 5\]", df.ShapeError)
    _load_error(mmi("a", "b"), {"a": a.astype(I32), "b": b}, {}, I32, r"node 'mm' \(MatMulInteger\): A .* i32",
                df.DTypeError)
    _load_error(mmi("a", "b"), {"a": a, "b": _q(U8, [3, 5])}, {}, I32,
                r"node 'mm' \(MatMulInteger\): .* do not multiply",
                df.ShapeError)
    qn = h.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], name="qm")
    qi = {"as": F32(0.1), "az": np.array(1, U8), "bs": np.array(0.1, np.float64), "bz": np.array(1, U8),
          "ys": F32(0.1), "yz": np.array(1, U8)}
    _load_error(qn, {"a": a, "b": b}, qi, U8, r"node 'qm' \(QLinearMatMul\): the scales .* f64", df.DTypeError)
    x, w = _q(U8, [1, 4, 5, 5]), _q(I8, [6, 2, 3, 3])
    qc_in = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"]
    cn = lambda **kw: h.make_node("QLinearConv", qc_in, ["y"], name="qc", **kw)  # noqa: E731
    ci = {"xs": F32(0.1), "xz": np.array(1, U8), "w": w, "ws": np.full(6, 0.1, F32), "wz": np.zeros(6, I8),
          "ys": F32(0.1), "yz": np.array(1, U8), "bias": np.zeros(6, I32)}
    _load_error(cn(group=3), {"x": x}, ci, U8, r"node 'qc' \(QLinearConv\): group 3", df.ShapeError)
    _load_error(cn(group=2), {"x": x}, {**ci, "bias": np.zeros(6, np.int64)}, U8,
                r"node 'qc' \(QLinearConv\): the bias B .* i64", df.DTypeError)
    _load_error(cn(group=2), {"x": x}, {**ci, "ws": np.full(4, 0.1, F32)}, U8,
                r"node 'qc' \(QLinearConv\): w_scale .* 4 entries, but there are 6 output channels", df.ShapeError)
    _load_error(cn(group=2), {"x": x}, {**ci, "xz": np.zeros(4, U8)}, U8,
                r"node 'qc' \(QLinearConv\): the zero point of X .* a scalar or \[1\]", df.ShapeError)
    sym = h.make_graph([cn(group=2)], "s", [h.make_tensor_value_info("x", T.UINT8, [1, 4, "H", 5])],
                       [h.make_tensor_value_info("y", T.UINT8, None)], [nh.from_array(v, k) for k, v in ci.items()])
    with pytest.raises(df.ShapeError, match=r"node 'qc' \(QLinearConv\): X .* static shapes"):
        df.load(h.make_model(sym, opset_imports=[h.make_opsetid("", 13)]))
