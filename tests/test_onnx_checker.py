"""The ONNX checker as the importer runs it (dnnfusion/frontends/onnx_checker.py, issue 17 part
4): a complaint ONNX Runtime tolerates is a ModelWarning on every load, another complaint beside
it is still an error, and the same bytes are checked once per process."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import dnnfusion  # noqa: E402
from dnnfusion.frontends import onnx_checker as front  # noqa: E402


def _shapeless_output_model():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_checker_complaints_onnx_runtime_tolerates_are_warnings(tmp_path):
    """A graph output whose type has no shape: the checker faults it, ONNX Runtime runs it;
    dnnfusion imports it with a ModelWarning naming the complaint, on every load (the import
    cache does not keep such models), and computes what ORT computes."""
    ort = pytest.importorskip("onnxruntime")
    m = _shapeless_output_model()
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    for _ in range(2):
        with pytest.warns(dnnfusion.ModelWarning, match="'shape' of 'type' is required"):
            g = dnnfusion.load(str(path))
    assert [v.shape for v in g.outputs] == [(2, 3)]
    with pytest.warns(dnnfusion.ModelWarning):
        cm = dnnfusion.compile(m.SerializeToString())
    np.testing.assert_array_equal(cm(x), want)


def test_the_same_bytes_are_checked_once(monkeypatch):
    """dynamic=True imports one model at several shapes: the checker runs once per distinct
    bytes that pass it cleanly; bytes it warns about are checked (and warned about) every time,
    and other bytes are checked anew."""
    calls = []
    real = front._run_checker
    monkeypatch.setattr(front, "_run_checker", lambda o, p: (calls.append(1), real(o, p)))
    monkeypatch.setattr(front, "_CHECKED_BYTES", {})
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "t", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    for n in (1, 2, 5):
        assert dnnfusion.load(data, input_shapes={"x": [n, 3]}).inputs[0].shape == (n, 3)
    assert len(calls) == 1
    other = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()
    dnnfusion.load(other, input_shapes={"x": [1, 3]})
    assert len(calls) == 2
    shapeless = _shapeless_output_model().SerializeToString()
    for _ in range(2):
        with pytest.warns(dnnfusion.ModelWarning):
            dnnfusion.load(shapeless)
    assert len(calls) == 2 + 2 * 2  # checked, then checked repaired, each time


def test_a_tolerated_complaint_does_not_hide_another():
    m = _shapeless_output_model()
    m.graph.node.append(helper.make_node("Relu", ["x"], ["y"]))  # y assigned twice: not SSA
    with pytest.raises(dnnfusion.ModelFormatError, match="fails the ONNX checker"):
        dnnfusion.load(m.SerializeToString())
