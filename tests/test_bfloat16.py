"""bfloat16 models (issue 17 part 3), as float16 ones (test_float16.py): with compile's default
float16="f32" a model that computes in bfloat16 is computed in float32 (constants converted
exactly at import, Cast to bfloat16 retargeted), and the compiled model keeps the model's
interface: bfloat16 inputs and outputs (ml_dtypes' NumPy dtype, or torch.bfloat16 tensors),
converted at its boundary. ONNX Runtime's CPU provider has no bfloat16 MatMul, Conv or
Softmax, so the oracles are ONNX Runtime running the same model in float32 (what dnnfusion
computes: only the final rounding to bfloat16 may differ), the ONNX reference evaluator
computing in bfloat16, and PyTorch eager in bfloat16."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")

from onnx import TensorProto as T  # noqa: E402

from half_models import as_float32, transformer_block  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
ULP = 2.0 ** -7  # bfloat16 keeps 8 significant bits: one unit in the last place, relative, at most


def _as_float32(model):
    """The same model in float32 (the computation dnnfusion runs)."""
    return as_float32(model, T.BFLOAT16)


def _mlp_net():
    """MatMul -> Add -> Erf-GELU -> MatMul -> LayerNormalization -> Softmax in bfloat16, a Constant
    holding a bfloat16, and a float32 output made by Cast."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array((rng.standard_normal((24, 48)) * 0.2).astype(BF16), "W1"),
             nh.from_array(rng.standard_normal(48).astype(BF16), "B1"),
             nh.from_array((rng.standard_normal((48, 16)) * 0.2).astype(BF16), "W2"),
             nh.from_array(np.ones(16, BF16), "gamma"), nh.from_array(np.zeros(16, BF16), "beta")]
    nodes = [
        h.make_node("MatMul", ["x", "W1"], ["a"]), h.make_node("Add", ["a", "B1"], ["ab"]),
        h.make_node("Constant", [], ["rs2"], value=nh.from_array(np.array(0.70710678, BF16))),
        h.make_node("Constant", [], ["half"], value=nh.from_array(np.array(0.5, BF16))),
        h.make_node("Constant", [], ["one"], value=nh.from_array(np.array(1.0, BF16))),
        h.make_node("Mul", ["ab", "rs2"], ["s"]), h.make_node("Erf", ["s"], ["e"]),
        h.make_node("Add", ["e", "one"], ["e1"]), h.make_node("Mul", ["ab", "e1"], ["g0"]),
        h.make_node("Mul", ["g0", "half"], ["g"]),
        h.make_node("MatMul", ["g", "W2"], ["y"]),
        h.make_node("LayerNormalization", ["y", "gamma", "beta"], ["n"], axis=-1),
        h.make_node("Softmax", ["n"], ["p"], axis=-1),
        h.make_node("Cast", ["n"], ["n32"], to=T.FLOAT),
    ]
    g = h.make_graph(nodes, "bf16net", [h.make_tensor_value_info("x", T.BFLOAT16, [4, 24])],
                     [h.make_tensor_value_info("p", T.BFLOAT16, [4, 16]),
                      h.make_tensor_value_info("n32", T.FLOAT, [4, 16])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


def _close_to_bf16(got: np.ndarray, want: np.ndarray, ulps: float = 1, atol: float = 1e-3) -> None:
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=ulps * ULP, atol=atol)


@pytest.mark.parametrize("planner", ["dnnfusion", "none"])
def test_bfloat16_onnx_model_runs_in_float32_with_its_bfloat16_interface(planner):
    model = _mlp_net()
    x = np.random.default_rng(1).standard_normal((4, 24)).astype(BF16)
    m = df.compile(model, planner=planner)
    assert m.stats["float16"] == "f32"
    assert all(v.dtype not in ("bf16", "f16") for v in m.graph.graph.values)  # nothing 16-bit inside
    p, n32 = m(x)
    assert p.dtype == BF16 and n32.dtype == np.float32  # the model's own output types
    # What dnnfusion computes: the model in float32, rounded to bfloat16 at the output.
    want_p, want_n = ort.InferenceSession(_as_float32(model).SerializeToString(),
                                          providers=["CPUExecutionProvider"]).run(None, {"x": x.astype(np.float32)})
    np.testing.assert_allclose(n32, want_n, rtol=1e-5, atol=1e-5)
    _close_to_bf16(p, want_p)
    # The ONNX reference, rounding every step to bfloat16, agrees to bfloat16's precision.
    ref_p, ref_n = ReferenceEvaluator(model).run(None, {"x": x})
    assert ref_p.dtype == BF16
    _close_to_bf16(p, ref_p, ulps=4, atol=2e-2)
    np.testing.assert_allclose(n32, ref_n, rtol=5e-2, atol=5e-2)


def test_bfloat16_constants_convert_exactly():
    """Every bfloat16 is a float32: the extremes, -0, the smallest normal and a subnormal
    cross the conversion at import unchanged (x + c with x = 0 gives c back)."""
    c = np.array([np.inf, -np.inf, -0.0, 3.3895314e38, -1.1754944e-38, 9.2e-41, 1.0078125, np.nan], np.float32)
    cb = c.astype(BF16)
    g = h.make_graph([h.make_node("Add", ["x", "c"], ["y"])], "consts",
                     [h.make_tensor_value_info("x", T.BFLOAT16, [8])], [h.make_tensor_value_info("y", T.BFLOAT16, [8])],
                     [nh.from_array(cb, "c")])
    m = df.compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    y = m(np.zeros(8, BF16))
    assert y.dtype == BF16
    np.testing.assert_array_equal(y.view(np.uint16)[:7], (cb + np.zeros(8, BF16)).view(np.uint16)[:7])
    assert np.isnan(np.float32(y[7]))


def test_bfloat16_inputs_are_not_cast_silently_and_error_mode_refuses():
    m = df.compile(_mlp_net())
    with pytest.raises(df.DTypeError, match="input 'x' is bfloat16 in the model, got float32"):
        m(np.zeros((4, 24), np.float32))
    with pytest.raises(df.DTypeError, match="float16='f32'"):
        df.compile(_mlp_net(), float16="error")


def test_bfloat16_onnx_model_takes_and_returns_torch_bfloat16():
    m = df.compile(_mlp_net())
    x = torch.randn(4, 24).to(torch.bfloat16)
    p, n32 = m(x)
    assert p.dtype == torch.bfloat16 and n32.dtype == torch.float32
    want = m(x.float().numpy().astype(BF16))[0]
    np.testing.assert_array_equal(p.view(torch.int16).numpy(), want.view(np.int16))


def test_bfloat16_torch_module_against_eager():
    torch.manual_seed(0)
    block = transformer_block().eval()
    x = torch.randn(2, 8, 32)
    want32 = block(x).detach()
    b16 = transformer_block().eval()
    b16.load_state_dict(block.state_dict())
    b16 = b16.to(torch.bfloat16)
    xb = x.to(torch.bfloat16)
    m = df.compile(b16, [xb])
    assert m.stats["float16"] == "f32"
    y = m(xb)
    assert y.dtype == torch.bfloat16 and y.shape == (2, 8, 32)
    eager = b16(xb).detach()
    # dnnfusion computes the bfloat16 weights in float32: nearer the float32 block than eager
    # bfloat16 is, and within a few bfloat16 units of eager.
    err_dnnf = (y.float() - want32).abs().max().item()
    err_eager = (eager.float() - want32).abs().max().item()
    assert err_dnnf <= err_eager * 1.5 + 1e-3, (err_dnnf, err_eager)
    np.testing.assert_allclose(y.float().numpy(), eager.float().numpy(), rtol=8 * ULP, atol=0.1)


def test_bfloat16_graph_text_round_trip():
    """The ECG's canonical text writes bfloat16 constants in hex (as float16) and reads them
    back bit for bit; the imported graph holds bf16 values before compile converts them."""
    g = df.load(_mlp_net())
    assert {v.dtype for v in g.graph.values} >= {"bf16"}
    back = df.parse(g.to_text())
    assert back.to_text() == g.to_text()
    w = {v.name: v for v in back.graph.constants}["W1"].numpy()
    assert w.dtype == BF16
    np.testing.assert_array_equal(w.view(np.uint16), nh.to_array(_mlp_net().graph.initializer[0]).view(np.uint16))
