"""The inverse trigonometric and hyperbolic functions (Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh,
Acosh, Atanh) and the bitwise operators (BitwiseAnd/Or/Xor/Not, BitShift-11 and -28) in
generated code (issue 17 part 3): fused with their neighbours, on every x86 dialect (compiled
only where this CPU lacks one) and on OpenCL, against ONNX Runtime where it runs the op and
against ONNX's own reference evaluator for BitShift-28's signed and out-of-range shifts."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from codegen_runner import run_or_compile  # noqa: E402
from dialects import params  # noqa: E402

SHAPE = (3, 37)  # 37 columns: a vector body and a tail on every dialect

# output: (op, the input expression's nodes before it); x is in (-0.9, 0.9)
TRIG = {
    "tan": ("Tan", []), "asin": ("Asin", []), "acos": ("Acos", []), "atanh": ("Atanh", []),
    "atan": ("Atan", [("Mul", "five")]), "sinh": ("Sinh", [("Mul", "three")]),
    "cosh": ("Cosh", [("Mul", "three")]), "asinh": ("Asinh", [("Mul", "ten")]),
    "acosh": ("Acosh", [("Mul", "ten"), ("Abs", None), ("Add", "one")]),
    # fused: the inverse of the inverse's neighbour (each output must match x's function).
    "atanh_tanh": ("Atanh", [("Tanh", None)]),
}
SCALARS = {"one": 1.0, "three": 3.0, "five": 5.0, "ten": 10.0}


def _trig_model(dtype=T.FLOAT):
    np_t = np.float32 if dtype == T.FLOAT else np.float64
    nodes = []
    for out, (op, before) in TRIG.items():
        cur = "x"
        for i, (pop, operand) in enumerate(before):
            nxt = f"{out}_{i}"
            nodes.append(h.make_node(pop, [cur] + ([operand] if operand else []), [nxt]))
            cur = nxt
        nodes.append(h.make_node(op, [cur], [out]))
    inits = [onnx.numpy_helper.from_array(np.array(v, np_t), k) for k, v in SCALARS.items()]
    g = h.make_graph(nodes, "trig", [h.make_tensor_value_info("x", dtype, SHAPE)],
                     [h.make_tensor_value_info(o, dtype, SHAPE) for o in TRIG], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _x(dtype=np.float32):
    return np.random.default_rng(5).uniform(-0.9, 0.9, SHAPE).astype(dtype)


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("isa", params())
def test_trig_fused_every_dialect(isa):
    m = _trig_model()
    outs = run_or_compile(m, {"x": _x()}, isa)
    if outs is None:
        return
    for name, got, want in zip(TRIG, outs, _ort(m, {"x": _x()})):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, err_msg=name)
    np.testing.assert_allclose(outs[list(TRIG).index("atanh_tanh")], _x(), rtol=1e-5, atol=1e-5)


def test_trig_compiled_model_and_double():
    m = _trig_model()
    compiled = df.compile(m.SerializeToString())
    for name, got, want in zip(TRIG, compiled(x=_x()), _ort(m, {"x": _x()})):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, err_msg=name)
    # float64: libm in double (ONNX Runtime has no double kernels for these; NumPy is the oracle)
    m64 = _trig_model(T.DOUBLE)
    want = ReferenceEvaluator(m64).run(None, {"x": _x(np.float64)})
    for name, got, w in zip(TRIG, df.compile(m64.SerializeToString())(x=_x(np.float64)), want):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, w, rtol=1e-13, atol=1e-13, err_msg=name)


def test_trig_opencl(ocl_device):
    m = _trig_model()
    outs = df.compile(m.SerializeToString(), target="opencl")(x=_x())
    for name, got, want in zip(TRIG, outs, _ort(m, {"x": _x()})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


# --------------------------------------------------------------------------------------------
# Bitwise
# --------------------------------------------------------------------------------------------
def _bitwise_model(itype, shift_type, opset=18):
    """a [4, 9] and b [9] of `itype`: And/Or/Xor/Not broadcast and chained; s [4, 9] and
    n [4, 9] of `shift_type`: left and right shifts, and a shift fused into a mask."""
    nodes = [
        h.make_node("BitwiseAnd", ["a", "b"], ["and"]),
        h.make_node("BitwiseOr", ["a", "b"], ["or"]),
        h.make_node("BitwiseXor", ["and", "or"], ["xor"]),
        h.make_node("BitwiseNot", ["xor"], ["not"]),
        h.make_node("BitShift", ["s", "n"], ["left"], direction="LEFT"),
        h.make_node("BitShift", ["s", "n"], ["right"], direction="RIGHT"),
        h.make_node("BitShift", ["s", "three"], ["s3"], direction="RIGHT"),
        h.make_node("BitwiseAnd", ["s3", "mask"], ["masked"]),
    ]
    np_s = onnx.helper.tensor_dtype_to_np_dtype(shift_type)
    inits = [onnx.numpy_helper.from_array(np.array(3, np_s), "three"),
             onnx.numpy_helper.from_array(np.array(0x1E, np_s), "mask")]
    g = h.make_graph(nodes, "bits",
                     [h.make_tensor_value_info("a", itype, (4, 9)), h.make_tensor_value_info("b", itype, (9,)),
                      h.make_tensor_value_info("s", shift_type, (4, 9)),
                      h.make_tensor_value_info("n", shift_type, (4, 9))],
                     [h.make_tensor_value_info(o, itype if o in ("and", "or", "xor", "not") else shift_type,
                                                    (4, 9))
                      for o in ("and", "or", "xor", "not", "left", "right", "masked")], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _bit_feeds(itype, shift_type, shifts):
    rng = np.random.default_rng(9)
    it = onnx.helper.tensor_dtype_to_np_dtype(itype)
    st = onnx.helper.tensor_dtype_to_np_dtype(shift_type)
    info = np.iinfo(it)
    sinfo = np.iinfo(st)
    return {"a": rng.integers(info.min, info.max, (4, 9), endpoint=True, dtype=it),
            "b": rng.integers(info.min, info.max, (9,), endpoint=True, dtype=it),
            "s": rng.integers(sinfo.min, sinfo.max, (4, 9), endpoint=True, dtype=st),
            "n": rng.choice(np.array(shifts, st), (4, 9))}


# (bitwise type, shift type, opset, shift amounts, oracle): ONNX Runtime runs BitShift on
# unsigned types with in-range shifts; BitShift-28's signed types and negative or too-wide
# shifts are checked against ONNX's reference evaluator.
BIT_CASES = {
    "i32_u8_ort": (T.INT32, T.UINT8, 18, [0, 1, 3, 7], "ort"),
    "u64_u64_ort": (T.UINT64, T.UINT64, 18, [0, 5, 31, 63], "ort"),
    "i8_i8_wide_negative": (T.INT8, T.INT8, 28, [-3, -1, 0, 2, 7, 8, 100], "onnx"),
    "u16_i64_wide_negative": (T.UINT16, T.INT64, 28, [-70, -1, 0, 13, 63, 64, 65], "onnx"),
    "i16_u32_wide": (T.INT16, T.UINT32, 28, [0, 9, 31, 32, 40], "onnx"),
}


def _bit_want(case):
    it, st, opset, shifts, oracle = BIT_CASES[case]
    m, feeds = _bitwise_model(it, st, opset), _bit_feeds(it, st, shifts)
    if oracle == "ort":
        return m, feeds, _ort(m, feeds)
    return m, feeds, ReferenceEvaluator(m).run(None, feeds)


@pytest.mark.parametrize("case", list(BIT_CASES))
def test_bitwise_compiled(case):
    m, feeds, want = _bit_want(case)
    for got, w in zip(df.compile(m.SerializeToString())(**feeds), want):
        assert got.dtype == w.dtype
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("isa", params())
def test_bitwise_every_dialect(isa):
    for case in BIT_CASES:
        m, feeds, want = _bit_want(case)
        outs = run_or_compile(m, feeds, isa)
        for got, w in zip(outs or [], want):
            np.testing.assert_array_equal(got, w, err_msg=case)


@pytest.mark.parametrize("case", list(BIT_CASES))
def test_bitwise_opencl(case, ocl_device):
    m, feeds, want = _bit_want(case)
    for got, w in zip(df.compile(m.SerializeToString(), target="opencl")(**feeds), want):
        np.testing.assert_array_equal(got, w, err_msg=case)


def test_a_negative_right_shift_fills_with_the_sign():
    m = _bitwise_model(T.INT8, T.INT8, 28)
    feeds = _bit_feeds(T.INT8, T.INT8, [9])
    feeds["s"][:] = -100
    out = dict(zip(("and", "or", "xor", "not", "left", "right", "masked"), df.compile(m.SerializeToString())(**feeds)))
    assert (out["right"] == -1).all() and (out["left"] == 0).all()


@pytest.mark.parametrize("op,types,attrs,match", [
    ("BitwiseAnd", (T.FLOAT, T.FLOAT), {}, "integer"),
    ("BitShift", (T.FLOAT, T.FLOAT), {"direction": "LEFT"}, "integer"),
    ("BitShift", (T.UINT8, T.UINT8), {"direction": "UP"}, "direction"),
    ("Asin", (T.INT32,), {}, "float"),
])
def test_bad_types_and_attributes_are_clear_errors(op, types, attrs, match):
    ins = [h.make_tensor_value_info(f"i{k}", t, (4,)) for k, t in enumerate(types)]
    g = h.make_graph([h.make_node(op, [i.name for i in ins], ["y"], **attrs)], "bad", ins,
                     [h.make_tensor_value_info("y", types[0], (4,))])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    with pytest.raises(df.Error, match=match):
        df.compile(m.SerializeToString())


# --------------------------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------------------------
def test_torch_bitwise_and_trig_against_eager():
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, x, a, b):
            t = torch.asin(x) + torch.acos(x) * torch.atan(x) - torch.sinh(x) + torch.cosh(x)
            t = t + torch.tan(x) + torch.asinh(x) + torch.atanh(x) + torch.acosh(x.abs() + 1.5)
            bits = ((a & b) ^ (a | 7)) + (~a) + (a >> 2) + torch.bitwise_left_shift(b, 3)
            return t, bits

    g = torch.Generator().manual_seed(1)
    x = torch.rand(2, 19, generator=g) * 1.6 - 0.8
    a = torch.randint(-1000, 1000, (2, 19), generator=g, dtype=torch.int32)
    b = torch.randint(0, 1000, (19,), generator=g, dtype=torch.int32)
    compiled = df.compile(M(), example_inputs=(x, a, b))
    got = compiled(x.numpy(), a.numpy(), b.numpy())
    want = M()(x, a, b)
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1], want[1].numpy())


# --------------------------------------------------------------------------------------------
# BitCast
# --------------------------------------------------------------------------------------------
def _abs_by_bits_model():
    """|x| by clearing the sign bit: BitCast to int32, BitwiseAnd 0x7fffffff, BitCast back (fused
    into one loop); and u8 -> bool (nonzero bytes are true), f64 -> i64 -> f64 unchanged."""
    nodes = [h.make_node("BitCast", ["x"], ["xi"], to=T.INT32),
             h.make_node("BitwiseAnd", ["xi", "mask"], ["ai"]),
             h.make_node("BitCast", ["ai"], ["abs"], to=T.FLOAT),
             h.make_node("BitCast", ["b"], ["truth"], to=T.BOOL),
             h.make_node("BitCast", ["d"], ["di"], to=T.INT64),
             h.make_node("BitCast", ["di"], ["dd"], to=T.DOUBLE)]
    g = h.make_graph(nodes, "bitcast",
                     [h.make_tensor_value_info("x", T.FLOAT, SHAPE), h.make_tensor_value_info("b", T.UINT8, (6,)),
                      h.make_tensor_value_info("d", T.DOUBLE, (5,))],
                     [h.make_tensor_value_info("abs", T.FLOAT, SHAPE), h.make_tensor_value_info("truth", T.BOOL, (6,)),
                      h.make_tensor_value_info("di", T.INT64, (5,)), h.make_tensor_value_info("dd", T.DOUBLE, (5,))],
                     [onnx.numpy_helper.from_array(np.array(0x7FFFFFFF, np.int32), "mask")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 26)])


def _bitcast_feeds():
    x = np.random.default_rng(8).standard_normal(SHAPE).astype(np.float32)
    d = np.array([1.5, -0.0, np.inf, -3e300, 7.0])
    return {"x": x, "b": np.array([0, 1, 2, 0, 255, 0], np.uint8), "d": d}


def _bitcast_check(outs, feeds):
    np.testing.assert_array_equal(outs[0], np.abs(feeds["x"]))
    np.testing.assert_array_equal(outs[1], feeds["b"] != 0)
    np.testing.assert_array_equal(outs[2], feeds["d"].view(np.int64))
    np.testing.assert_array_equal(outs[3].view(np.int64), feeds["d"].view(np.int64))  # -0.0 too


@pytest.mark.parametrize("isa", params())
def test_bitcast_every_dialect(isa):
    outs = run_or_compile(_abs_by_bits_model(), _bitcast_feeds(), isa)
    if outs is not None:
        _bitcast_check(outs, _bitcast_feeds())


def test_bitcast_compiled_and_opencl(ocl_device):
    m = _abs_by_bits_model()
    compiled = df.compile(m.SerializeToString())
    _bitcast_check(compiled(**_bitcast_feeds()), _bitcast_feeds())
    # one kernel per independent chain: the three ops of the bit trick fuse into one loop
    assert compiled.stats["kernels"] == 3
    _bitcast_check(df.compile(m.SerializeToString(), target="opencl")(**_bitcast_feeds()), _bitcast_feeds())


@pytest.mark.parametrize("src,to,match", [(T.FLOAT, T.INT64, "width"), (T.FLOAT16, T.INT16, "float16")])
def test_bitcast_refusals(src, to, match):
    g = h.make_graph([h.make_node("BitCast", ["x"], ["y"], to=to)], "bad", [h.make_tensor_value_info("x", src, (4,))],
                     [h.make_tensor_value_info("y", to, (4,))])
    with pytest.raises(df.Error, match=match):
        df.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 26)]).SerializeToString())
