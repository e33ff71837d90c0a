"""LSTM, GRU and RNN imported unrolled over the sequence (dnnfusion/frontends/onnx_recurrent.py,
issue 17 part 3: operators ONNX Runtime runs): every direction and layout, biases, initial
states, peepholes, clip, GRU's linear_before_reset, non-default activations and sequence_lens
given at run time, against ONNX Runtime; PyTorch's nn.LSTM / nn.GRU exported to ONNX against
PyTorch; what stays refused says why."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

S, B, I, H = 4, 3, 5, 6
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
# name: (operator, attributes, optional inputs given: B, sequence_lens, initial_h, initial_c, P)
CASES = {
    "lstm_bidirectional_everything": ("LSTM", {"direction": "bidirectional"}, {"B", "lens", "h0", "c0", "P"}),
    "lstm_reverse_lens_clip": ("LSTM", {"direction": "reverse", "clip": 0.7}, {"B", "lens"}),
    "lstm_batchwise_states": ("LSTM", {"layout": 1}, {"B", "h0", "c0"}),
    "lstm_activations": ("LSTM", {"activations": ["HardSigmoid", "Tanh", "Softsign"], "activation_alpha": [0.3],
                                  "activation_beta": [0.4]}, {"B"}),
    "gru_linear_before_reset_lens": ("GRU", {"linear_before_reset": 1, "direction": "bidirectional"}, {"B", "lens", "h0"}),
    "gru_reset_then_multiply": ("GRU", {}, {"B", "h0"}),
    "gru_batchwise_reverse": ("GRU", {"layout": 1, "direction": "reverse"}, {"B"}),
    "rnn_relu_lens": ("RNN", {"activations": ["Relu", "Tanh"], "direction": "bidirectional"}, {"B", "lens", "h0"}),
    "rnn_plain": ("RNN", {}, set()),
}


def _case(name, layout=None):
    op, attrs, given = CASES[name]
    if layout is not None:
        attrs = {**attrs, "layout": layout}
    D = 2 if attrs.get("direction") == "bidirectional" else 1
    G = GATES[op]
    layout = attrs.get("layout", 0)
    rng = np.random.default_rng(sum(map(ord, name)))
    f = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)  # noqa: E731
    feeds = {"X": f(B, S, I) if layout else f(S, B, I), "W": f(D, G * H, I), "R": f(D, G * H, H)}
    inputs = ["X", "W", "R", "", "", "", "", ""]
    if "B" in given:
        feeds["B"], inputs[3] = f(D, 2 * G * H), "B"
    if "lens" in given:
        feeds["lens"], inputs[4] = np.array([4, 1, 3], np.int32), "lens"
    if "h0" in given:
        feeds["h0"], inputs[5] = (f(B, D, H) if layout else f(D, B, H)), "h0"
    if "c0" in given:
        feeds["c0"], inputs[6] = (f(B, D, H) if layout else f(D, B, H)), "c0"
    if "P" in given:
        feeds["P"], inputs[7] = f(D, 3 * H), "P"
    while inputs[-1] == "":
        inputs.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    types = {"lens": T.INT32}
    g = h.make_graph([h.make_node(op, inputs, outs, hidden_size=H, **attrs)], name,
                     [h.make_tensor_value_info(k, types.get(k, T.FLOAT), v.shape) for k, v in feeds.items()],
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), feeds


def _onnxruntime(name, feeds):
    """ONNX Runtime's outputs; for layout 1, which it does not take ("Batchwise recurrent
    operations are not supported"), those of the same node in layout 0 on transposed operands."""
    if not CASES[name][1].get("layout"):
        m, _ = _case(name)
        return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    m, _ = _case(name, layout=0)
    seq_first = {k: (np.swapaxes(v, 0, 1) if k in ("X", "h0", "c0") else v) for k, v in feeds.items()}
    outs = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, seq_first)
    return [np.transpose(outs[0], (2, 0, 1, 3))] + [np.swapaxes(o, 0, 1) for o in outs[1:]]


@pytest.mark.parametrize("target", ["cpu", "opencl"])
@pytest.mark.parametrize("case", list(CASES))
def test_recurrent_matches_onnxruntime(case, target, request):
    if target == "opencl":
        request.getfixturevalue("ocl_device")
    m, feeds = _case(case)
    want = _onnxruntime(case, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        compiled = df.compile(m.SerializeToString(), target=target)
    got = compiled(**feeds)
    for g, w, name in zip(got, want, ["Y", "Y_h", "Y_c"]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6, err_msg=name)
    if "lens" in feeds:  # a shorter batch gives zeros past its end in Y: the lengths are read at run time
        feeds = {**feeds, "lens": np.array([2, 4, 4], np.int32)}
        want = _onnxruntime(case, feeds)
        for g, w in zip(compiled(**feeds), want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_pytorch_recurrent_layers_exported_to_onnx(kind, tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    layer = getattr(torch.nn, kind)(input_size=I, hidden_size=H, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(B, S, I)
    path = tmp_path / f"{kind}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(layer.eval(), (x,), str(path), dynamo=False, opset_version=17)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        out = df.compile(str(path))(x.numpy())
    with torch.no_grad():
        want = layer(x)
    np.testing.assert_allclose(out[0], want[0].numpy(), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(out[1], want[1][0].numpy() if kind == "LSTM" else want[1].numpy(), rtol=1e-5, atol=2e-6)


def test_what_stays_refused_says_why():
    m, _ = _case("lstm_activations")
    keep = [a for a in m.graph.node[0].attribute if not a.name.startswith("activation")]
    del m.graph.node[0].attribute[:]
    m.graph.node[0].attribute.extend(keep)
    m.graph.node[0].attribute.append(h.make_attribute("activations", ["Affine", "Tanh", "Tanh"]))
    with pytest.raises(df.UnsupportedOperatorError, match=r"activation 'Affine' is not supported"):
        df.compile(m.SerializeToString())
    m, _ = _case("lstm_batchwise_states")
    m.graph.node[0].attribute.append(h.make_attribute("input_forget", 1))
    with pytest.raises(df.UnsupportedOperatorError, match="input_forget"):
        df.compile(m.SerializeToString())
    m, _ = _case("rnn_plain")
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "seq"
    with pytest.raises(df.ShapeError, match="static shapes"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", df.ModelWarning)
            df.load(m.SerializeToString())
