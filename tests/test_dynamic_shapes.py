"""Dynamic shapes by specialization (issue 17 part 2): an ONNX model exported with dynamic
axes is compiled from example inputs (its symbolic dimensions fixed before any shape
arithmetic is folded), and calling it with other sizes compiles a specialization for them,
checked against ONNX Runtime."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")


class ConvLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 4, 3)
        self.l = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        y = self.c(x)
        return self.l(y.reshape(y.shape[0], -1))  # shape arithmetic on the batch


def export(module, args, path, names, axes):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, str(path), input_names=names, dynamic_axes=axes, dynamo=False)
    return str(path)


def test_conv_linear_with_a_dynamic_batch(tmp_path):
    path = export(ConvLinear(), (torch.randn(2, 3, 8, 8),), tmp_path / "m.onnx", ["x"], {"x": {0: "batch"}})
    m = df.compile(path, example_inputs=[np.zeros((2, 3, 8, 8), np.float32)])
    sess = ort.InferenceSession(path)
    for b in (2, 5, 1, 5):
        x = np.random.default_rng(b).standard_normal((b, 3, 8, 8)).astype(np.float32)
        np.testing.assert_allclose(m(x), sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert m.stats["specializations"] == [{"x": [5, 3, 8, 8]}, {"x": [1, 3, 8, 8]}]


class Attention(torch.nn.Module):
    """One self-attention layer with two heads, its reshapes read from the input's shape."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.qkv, self.out, self.norm, self.h = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d), torch.nn.LayerNorm(d), heads

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.h) ** 0.5, dim=-1) @ v
        return self.norm(x + self.out(a.transpose(1, 2).reshape(b, s, d)))


def test_attention_with_dynamic_batch_and_sequence(tmp_path):
    layer = Attention()
    path = export(layer, (torch.randn(2, 7, 16),), tmp_path / "t.onnx", ["x"], {"x": {0: "batch", 1: "seq"}})
    m = df.compile(path, example_inputs=[np.zeros((2, 7, 16), np.float32)], max_specializations=2)
    sess = ort.InferenceSession(path)
    for shape in [(2, 7, 16), (1, 3, 16), (4, 11, 16), (1, 3, 16), (5, 2, 16), (4, 11, 16)]:
        x = np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(m(x), sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
    # at most 2 kept: (4, 11) was dropped for (5, 2) and compiled again; (1, 3) was still
    # there; (2, 7), the example's, is the model itself
    assert [s["x"][:2] for s in m.stats["specializations"]] == [[1, 3], [4, 11], [5, 2], [4, 11]]


def test_dimensions_shared_by_inputs_must_agree(tmp_path):
    class Add(torch.nn.Module):
        def forward(self, a, b):
            return a + b

    path = export(Add(), (torch.randn(2, 4), torch.randn(2, 4)), tmp_path / "a.onnx", ["a", "b"],
                  {"a": {0: "batch"}, "b": {0: "batch"}})
    m = df.compile(path, example_inputs=[np.zeros((2, 4), np.float32)] * 2)
    one = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(m(one, one), 2 * one)
    with pytest.raises(df.ShapeError, match="dimension 'batch' is 3 in input 'a' but 5 in input 'b'"):
        m(one, np.ones((5, 4), np.float32))


def test_a_static_model_still_refuses_other_shapes(tmp_path):
    path = export(ConvLinear(), (torch.randn(2, 3, 8, 8),), tmp_path / "s.onnx", ["x"], None)
    m = df.compile(path)
    with pytest.raises(df.ShapeError, match="input 'x'"):
        m(np.zeros((3, 3, 8, 8), np.float32))
    assert "specializations" not in m.stats


def test_a_torch_module_called_with_new_shapes_is_exported_again():
    """A PyTorch module compiled from example inputs and called with other shapes is exported
    again with the call's inputs and compiled for them (as torch.compile recompiles), checked
    against eager; a shape seen before reuses its compile; a shape the module cannot take is a
    clear error."""
    layer = Attention().eval()
    m = df.compile(layer, [torch.randn(2, 7, 16)], max_specializations=3)
    for shape in [(2, 7, 16), (1, 3, 16), (4, 11, 16), (1, 3, 16)]:
        x = torch.from_numpy(np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32))
        with torch.no_grad():
            want = layer(x).numpy()
        np.testing.assert_allclose(m(x).numpy(), want, rtol=1e-4, atol=1e-4)
    assert m.stats["specializations"] == [{"x": [1, 3, 16]}, {"x": [4, 11, 16]}]
    with pytest.raises(df.Error, match="could not export Attention"):
        m(np.zeros((2, 7, 5), np.float32))  # d = 5 does not match the weights
    cnn = ConvLinear().eval()
    c = df.compile(cnn, (torch.randn(2, 3, 8, 8),))
    x = torch.randn(6, 3, 8, 8)
    with torch.no_grad():
        np.testing.assert_allclose(c(x).numpy(), cnn(x).numpy(), rtol=1e-4, atol=1e-5)
    assert c.stats["specializations"] == [{"x": [6, 3, 8, 8]}]


def test_set_num_threads_reaches_the_specializations(tmp_path):
    path = export(ConvLinear(), (torch.randn(2, 3, 8, 8),), tmp_path / "m.onnx", ["x"], {"x": {0: "batch"}})
    m = df.compile(path, example_inputs=[np.zeros((2, 3, 8, 8), np.float32)], threads=1)
    m(np.zeros((3, 3, 8, 8), np.float32))  # a specialization, compiled at one thread
    m.set_num_threads(2)
    x = np.random.default_rng(0).standard_normal((3, 3, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(m(x), want, rtol=1e-4, atol=1e-5)
    assert {s.stats["threads"] for s in m._specializer.compiled.values()} == {2}
