"""float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) and float4 (e2m1) (issue 17 part 3): ECG element
types held a byte an element, as ml_dtypes holds them; the reference converts with ml_dtypes,
compile() computes them in float32 with every conversion to them rounded exactly as ONNX says
(rewrite.narrow_to_wide). Checked bit for bit against the ONNX reference evaluator (ONNX
Runtime's Python API returns none of these types) on every x86 dialect this CPU runs; the ONNX
backend cases also run through generated code on every dialect and OpenCL
(test_codegen_onnx_nodes)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")

import dnnfusion as df  # noqa: E402
from dnnfusion import reference  # noqa: E402
from dnnfusion.dtypes import numpy_dtype  # noqa: E402
from onnx import TensorProto as T, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dialects import X86, compile_only  # noqa: E402

TYPES = [(T.FLOAT8E4M3FN, "f8e4m3fn"), (T.FLOAT8E4M3FNUZ, "f8e4m3fnuz"), (T.FLOAT8E5M2, "f8e5m2"),
         (T.FLOAT8E5M2FNUZ, "f8e5m2fnuz"), (T.FLOAT4E2M1, "f4e2m1")]
RUN_HERE = [i for i in X86 if not compile_only(i)]


def _model(nodes, inputs, outputs, inits=(), opset=23):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _values() -> np.ndarray:
    """Random floats over every exponent these types reach and past them, each type's ties,
    subnormals, limits, signed zeros, infinities and NaN."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(6000) * np.exp2(rng.integers(-24, 20, 6000))
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 448, 464, 465, -464, 480, 240, 248, 57344, 59392, 61440, -61440,
               6, 7, -7, 0.25, 0.75, 5, 2 ** -9, 2 ** -10, 3 * 2 ** -11, 2 ** -16, 2 ** -17, 3 * 2 ** -18, 1e-30]
    return np.concatenate([x, special]).astype(np.float32)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("isa", RUN_HERE)
@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("code,name", TYPES, ids=[t[1] for t in TYPES])
def test_cast_rounds_bit_for_bit(code, name, saturate, isa):
    """Round half to even at the type's precision, subnormals included; beyond the largest
    value: that value when saturating (ONNX's default), else NaN (with its sign for e4m3fn,
    the one NaN of the fnuz types) or infinity (e5m2); float4 always saturates."""
    if code == T.FLOAT4E2M1 and not saturate:
        saturate = 1  # (float4 has no non-saturating form; the case is the saturating one)
    x = _values()
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=code, saturate=saturate),
                helper.make_node("Cast", ["y"], ["z"], to=T.FLOAT)],
               [helper.make_tensor_value_info("x", T.FLOAT, [x.size])],
               [helper.make_tensor_value_info("y", code, [x.size]), helper.make_tensor_value_info("z", T.FLOAT, [x.size])])
    with np.errstate(all="ignore"):
        want_y, want_z = ReferenceEvaluator(m).run(None, {"x": x})
    g = df.load(m)
    assert g.graph.outputs[0].dtype == name
    ry, rz = reference.run(g.graph, [x])
    assert _same_bits(ry, want_y)
    y, z = df.compile(m, isa=isa)(x)
    bad = np.nonzero(y.view(np.uint8) != want_y.view(np.uint8))[0]
    assert y.dtype == want_y.dtype and bad.size == 0, (x[bad[:5]], y[bad[:5]], want_y[bad[:5]])
    np.testing.assert_array_equal(z, want_z)


@pytest.mark.parametrize("code,name", TYPES, ids=[t[1] for t in TYPES])
def test_quantize_and_dequantize(code, name):
    """QuantizeLinear to a float8 / float4 zero point: x / scale converted (saturating by
    default; float8 takes no zero point, float4 adds it, as the ONNX reference does), bit for
    bit against the ONNX reference; DequantizeLinear back, (x - zero point) * scale in
    float32. (The ONNX reference subtracts float4 zero points in float4, rounding the
    difference; ONNX Runtime has no float4 DequantizeLinear. dnnfusion takes the exact one.)"""
    x = np.linspace(-900, 900, 97, dtype=np.float32).reshape(1, 97) * np.array([[1.0], [1e-3]], np.float32)
    zp = np.zeros(2, dtype=numpy_dtype(name))
    if code == T.FLOAT4E2M1:
        zp = np.array([0.5, -1.0], dtype=numpy_dtype(name))
    s = np.array([2.0, 0.01], np.float32)
    m = _model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=0),
                helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=0)],
               [helper.make_tensor_value_info("x", T.FLOAT, [2, 97])],
               [helper.make_tensor_value_info("q", code, [2, 97]), helper.make_tensor_value_info("y", T.FLOAT, [2, 97])],
               [numpy_helper.from_array(s, "s"), numpy_helper.from_array(zp, "zp")])
    with np.errstate(all="ignore"):
        want_q, want_y = ReferenceEvaluator(m).run(None, {"x": x})
    exact_y = (want_q.astype(np.float32) - zp.astype(np.float32)[:, None]) * s[:, None]
    if code != T.FLOAT4E2M1:
        np.testing.assert_array_equal(exact_y, want_y)
    for q, y in (reference.run(df.load(m).graph, [x]), df.compile(m)(x)):
        assert _same_bits(q, want_q), (q, want_q)
        np.testing.assert_array_equal(y, exact_y)


def test_a_float8_input_is_taken_as_ml_dtypes_and_the_text_form_keeps_its_bytes():
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT), helper.make_node("Add", ["y", "w"], ["z"])],
               [helper.make_tensor_value_info("x", T.FLOAT8E5M2, [4])], [helper.make_tensor_value_info("z", T.FLOAT, [4])],
               [numpy_helper.from_array(np.array([1, 2, 3, 4], np.float32), "w")])
    x = np.array([-2.5, 0.0, 57344, -np.inf], ml_dtypes.float8_e5m2)
    c = df.compile(m)
    np.testing.assert_array_equal(c(x), x.astype(np.float32) + [1, 2, 3, 4])
    with pytest.raises(df.DTypeError, match="float8_e5m2 in the model, got float32"):
        c(x.astype(np.float32))
    w = np.array([0.5, -448, 2 ** -9], ml_dtypes.float8_e4m3fn)
    k = _model([helper.make_node("Cast", ["w"], ["y"], to=T.FLOAT)], [], [helper.make_tensor_value_info("y", T.FLOAT, [3])],
               [numpy_helper.from_array(w, "w")])
    text = df.load(k).to_text()
    assert "f8e4m3fn[3] = const 0x30fe01" in text, text
    back = [v for v in df.parse(text).graph.constants if v.name == "w"][0]
    assert back.dtype == "f8e4m3fn" and _same_bits(back.numpy(), w)


@pytest.mark.parametrize("isa", RUN_HERE)
@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
def test_cast_to_float8e8m0_bit_for_bit(mode, saturate, isa):
    """float8e8m0 (MX scales, a power of two): the exponent of x, rounded up for any fraction
    ("up", ONNX's default), for at least a half ("nearest"; float32 subnormals: more than a
    half) or never ("down"); 2^127 kept when saturating, else NaN; against the ONNX
    reference. Negative values are undefined in ONNX and left out."""
    x = np.abs(_values())
    x = np.concatenate([x, [1.5, 3.0, 2 ** 127, 1.5 * 2 ** 127, 3e38, 2 ** -127, 2 ** -149, 3 * 2 ** -128]]).astype(np.float32)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT8E8M0, saturate=saturate, round_mode=mode),
                helper.make_node("Cast", ["y"], ["z"], to=T.FLOAT)],
               [helper.make_tensor_value_info("x", T.FLOAT, [x.size])],
               [helper.make_tensor_value_info("y", T.FLOAT8E8M0, [x.size]),
                helper.make_tensor_value_info("z", T.FLOAT, [x.size])], opset=24)
    with np.errstate(all="ignore"):
        want_y, want_z = ReferenceEvaluator(m).run(None, {"x": x})
    ry, _ = reference.run(df.load(m).graph, [x])
    assert _same_bits(ry, want_y)
    y, z = df.compile(m, isa=isa)(x)
    bad = np.nonzero(y.view(np.uint8) != want_y.view(np.uint8))[0]
    assert bad.size == 0, (x[bad[:5]], y.view(np.uint8)[bad[:5]], want_y.view(np.uint8)[bad[:5]])
    np.testing.assert_array_equal(z, want_z)


@pytest.mark.parametrize("code,name", [(T.FLOAT6E2M3, "f6e2m3"), (T.FLOAT6E3M2, "f6e3m2")])
def test_float6_casts_and_quantizes_as_the_reference(code, name):
    """float6 (e2m3, e3m2: no infinity or NaN, always saturating, as float4)."""
    x = _values()
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=code), helper.make_node("Cast", ["y"], ["z"], to=T.FLOAT),
                helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"])],
               [helper.make_tensor_value_info("x", T.FLOAT, [x.size])],
               [helper.make_tensor_value_info(n, t, [x.size]) for n, t in (("y", code), ("z", T.FLOAT), ("q", code))],
               [numpy_helper.from_array(np.array(0.5, np.float32), "s"),
                numpy_helper.from_array(np.array(0.25, dtype=numpy_dtype(name)), "zp")], opset=25)
    with np.errstate(all="ignore"):
        want = ReferenceEvaluator(m).run(None, {"x": x})
    for got in (reference.run(df.load(m).graph, [x]), df.compile(m)(x)):
        assert _same_bits(got[0], want[0]) and _same_bits(got[2], want[2])
        np.testing.assert_array_equal(got[1], want[1])


# PyTorch's float8 types through the FX front-end (dtypes.TORCH_FLOAT8): torch's conversions
# become Casts with torch's own saturation, constants and inputs arrive as ml_dtypes arrays
# over the same bytes, and outputs leave as torch's types.
def _torch_float8_values(torch):
    v = torch.randn(4096, generator=torch.Generator().manual_seed(3)) * 60
    special = torch.tensor([0.0, -0.0, 448.0, 464.0, 470.0, 1000.0, -1000.0, 240.0, 57344.0, 61440.0, 1e6,
                            float("inf"), float("-inf"), float("nan"), 1e-9, 2.0 ** -10, 2.0 ** -17])
    return torch.cat([v, special, special / 64]).reshape(-1, 1)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"])
def test_torch_float8_conversions_bit_for_bit(dtype):
    torch = pytest.importorskip("torch")
    td = getattr(torch, dtype)

    class M(torch.nn.Module):
        def forward(self, x):
            q = x.to(td)  # rounded, saturated or not as torch does it
            return q, q.to(torch.float32) * 2

    x = _torch_float8_values(torch)
    cm = df.compile(M().eval(), example_inputs=(x,))
    got, want = cm(x), M()(x)
    assert got[0].dtype == td
    nan = want[0].float().isnan()
    assert torch.equal(got[0].float().isnan(), nan)  # NaN's payload may differ (e5m2: 0x7E, torch 0x7F)
    assert torch.equal(got[0].view(torch.uint8)[~nan], want[0].view(torch.uint8)[~nan])
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())  # NaN where torch has NaN


def test_torch_float8_weights_and_inputs():
    """A float8 weight buffer (weight-only quantization) and a float8 input, dequantized in
    the model: the compiled model takes the float8 tensor and matches eager exactly."""
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(0)
            self.register_buffer("w8", torch.randn(16, 8, generator=g).to(torch.float8_e4m3fn))
            self.register_buffer("s", torch.rand(8, generator=g) + 0.5)

        def forward(self, x8):
            return x8.to(torch.float32) @ (self.w8.to(torch.float32) * self.s)

    m = M().eval()
    x8 = (torch.randn(4, 16) * 8).to(torch.float8_e5m2)
    cm = df.compile(m, example_inputs=(x8,))
    got = cm(x8)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(got.numpy(), m(x8).numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(df.DTypeError, match="float8_e5m2"):
        cm(x8.to(torch.float32))


def test_torch_float8e8m0_conversion_refused():
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, x):
            return x.to(torch.float8_e8m0fnu)

    with pytest.raises(df.DTypeError, match=r"torch.float8_e8m0fnu: torch drops the sign"):
        df.compile(M().eval(), example_inputs=(torch.rand(4),))


@pytest.mark.parametrize("name", ["f8e8m0", "f8e4m3fn", "f4e2m1"])
def test_arithmetic_on_a_small_float_is_refused_as_onnx_runtime_refuses_it(name):
    """Sigmoid and Add do not take float8 / float4 in ONNX (their schemas' type constraints;
    the checker does not look, ONNX Runtime does). compile() would compute them in float32
    without the rounding the reference applies after each: refused instead (found by the
    structural fuzzer, proto_fuzz seed 11 case 300)."""
    code = dict((n, c) for c, n in TYPES + [(T.FLOAT8E8M0, "f8e8m0")])[name]
    m = _model([helper.make_node("Sigmoid", ["x"], ["s"], name="sig"), helper.make_node("Cast", ["s"], ["y"], to=T.FLOAT)],
               [helper.make_tensor_value_info("x", code, [2, 3])], [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    with pytest.raises(df.DTypeError, match=r"node 'sig' \(Sigmoid-13\): input 0 is float[0-9a-z]+, which the "
                                            r"operator does not take"):
        df.load(m)
