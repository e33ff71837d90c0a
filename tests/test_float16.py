"""float16 models (issue 17 part 3): with compile's default float16="f32" a model that
computes in float16 is computed in float32 (constants converted exactly at import, Cast to
float16 retargeted), and the compiled model keeps the model's interface: float16 inputs
and outputs, converted at its boundary. Checked against ONNX Runtime running the model in
float16, and against ONNX Runtime running the same model in float32 (what dnnfusion
computes, so only the final rounding to float16 may differ)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from onnx import TensorProto as T  # noqa: E402

from half_models import as_float32, transformer_block  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402


def _session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _as_float32(model):
    """The same model in float32 (the computation dnnfusion runs)."""
    return as_float32(model, T.FLOAT16)


def _conv_net():
    """Conv -> SiLU -> Reshape -> MatMul -> Softmax in float16, with a float32 output made by
    Cast, a Cast back to float16, a Constant and a ConstantOfShape holding float16 values."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float16), "W"),
             nh.from_array(rng.standard_normal(8).astype(np.float16), "B"),
             nh.from_array((rng.standard_normal((288, 10)) * 0.1).astype(np.float16), "M"),
             nh.from_array(np.array([1, -1], np.int64), "shape"),
             nh.from_array(np.array([1, 10], np.int64), "ones_shape")]
    nodes = [
        h.make_node("Conv", ["x", "W", "B"], ["c"]),
        h.make_node("Sigmoid", ["c"], ["s"]),
        h.make_node("Mul", ["c", "s"], ["silu"]),
        h.make_node("Reshape", ["silu", "shape"], ["flat"]),
        h.make_node("MatMul", ["flat", "M"], ["y"]),
        h.make_node("Constant", [], ["half"], value=nh.from_array(np.array(0.5, np.float16))),
        h.make_node("ConstantOfShape", ["ones_shape"], ["bias"],
                    value=nh.from_array(np.array([0.25], np.float16))),
        h.make_node("Mul", ["y", "half"], ["yh"]),
        h.make_node("Add", ["yh", "bias"], ["yb"]),
        h.make_node("Cast", ["yb"], ["y32"], to=T.FLOAT),
        h.make_node("Cast", ["y32"], ["y16"], to=T.FLOAT16),
        h.make_node("Softmax", ["y16"], ["p"], axis=-1),
    ]
    g = h.make_graph(nodes, "f16net", [h.make_tensor_value_info("x", T.FLOAT16, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("p", T.FLOAT16, [1, 10]),
                      h.make_tensor_value_info("y32", T.FLOAT, [1, 10])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize("planner", ["dnnfusion", "none"])
def test_float16_onnx_model_runs_in_float32_with_its_float16_interface(planner):
    model = _conv_net()
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float16)
    m = df.compile(model, planner=planner)
    assert m.stats["float16"] == "f32"
    assert all(v.dtype != "f16" for v in m.graph.graph.values)  # nothing float16 left inside
    p, y32 = m(x)
    assert p.dtype == np.float16 and y32.dtype == np.float32  # the model's own output types
    # What dnnfusion computes: the model in float32, rounded to float16 at the output.
    want_p, want_y = _session(_as_float32(model)).run(None, {"x": x.astype(np.float32)})
    np.testing.assert_allclose(y32, want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(p.astype(np.float32), want_p, rtol=1e-3, atol=1e-4)
    # And ONNX Runtime computing in float16 agrees to float16's precision.
    ort_p, ort_y = _session(model).run(None, {"x": x})
    np.testing.assert_allclose(p.astype(np.float32), ort_p.astype(np.float32), rtol=1e-2, atol=2e-3)
    np.testing.assert_allclose(y32, ort_y, rtol=1e-2, atol=1e-2)


def test_float16_inputs_are_not_cast_silently():
    m = df.compile(_conv_net())
    with pytest.raises(df.DTypeError, match="input 'x' is float16 in the model, got float32"):
        m(np.zeros((1, 3, 8, 8), np.float32))


def test_float16_error_mode_refuses_and_unknown_modes_are_errors():
    with pytest.raises(df.DTypeError, match="float16='f32'"):
        df.compile(_conv_net(), float16="error")
    with pytest.raises(df.Error, match="unknown float16 mode 'bf16'"):
        df.compile(_conv_net(), float16="bf16")


def test_float16_torch_export_with_a_dynamic_batch_against_onnxruntime(tmp_path):
    torch.manual_seed(0)
    module = transformer_block().half().eval()
    path = str(tmp_path / "block16.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(2, 5, 32).half(),), path, input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}}, dynamo=False)
    model = onnx.load(path)
    assert model.graph.input[0].type.tensor_type.elem_type == T.FLOAT16
    m = df.compile(path, example_inputs=[np.zeros((2, 5, 32), np.float16)])
    f32 = _session(_as_float32(model))
    f16 = _session(model)
    for b in (2, 3):  # the second batch size compiles a specialization, also in float32
        x = np.random.default_rng(b).standard_normal((b, 5, 32)).astype(np.float16)
        y = m(x)
        assert y.dtype == np.float16 and y.shape == (b, 5, 32)
        np.testing.assert_allclose(y.astype(np.float32), f32.run(None, {"x": x.astype(np.float32)})[0],
                                   rtol=1e-3, atol=2e-3)
        np.testing.assert_allclose(y.astype(np.float32), f16.run(None, {"x": x})[0].astype(np.float32),
                                   rtol=2e-2, atol=2e-2)
    assert m.stats["specializations"] == [{"x": [3, 5, 32]}]


def test_float16_torch_module_takes_and_returns_half_tensors():
    torch.manual_seed(0)
    module = transformer_block().half().eval()
    x = torch.randn(2, 5, 32).half()
    m = df.compile(module, (x,))
    y = m(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float16
    with torch.no_grad():
        want = transformer_block().eval()
        want.load_state_dict({k: v.float() for k, v in module.state_dict().items()})
        ref = want(x.float())  # the float32 computation of the same weights
    np.testing.assert_allclose(y.float().numpy(), ref.numpy(), rtol=1e-3, atol=2e-3)
