"""compile(..., dynamic=True) (issue 17): one compiled program serves every batch size, for
models proven batch-separable (dnnfusion/batching.py); models that mix samples or use the batch
size as a value are refused with the operator that does."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import dnnfusion as df  # noqa: E402
from dnnfusion import batching, compiler  # noqa: E402
from dnnfusion.zoo import dynamic_check, registry  # noqa: E402

# The TorchScript exporter (the zoo's, see registry.export_onnx) announces its deprecation.
pytestmark = [pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript-based ONNX export"),
              pytest.mark.filterwarnings("ignore:The feature will be removed")]


class ConvLinear(torch.nn.Module):
    """The export pattern of every CNN: x.reshape(x.shape[0], -1) before the classifier."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return torch.softmax(self.fc(y.reshape(y.shape[0], -1)), dim=-1)


def _export(module, x, path, inputs=("x",)) -> str:
    axes = {n: {0: "batch"} for n in inputs}
    axes["y"] = {0: "batch"}
    torch.manual_seed(0)
    torch.onnx.export(module.eval(), (x,), str(path), input_names=list(inputs), output_names=["y"],
                      dynamic_axes=axes, dynamo=False)
    return str(path)


@pytest.fixture
def compiles(monkeypatch):
    """How many times a program was compiled (_compile_static calls)."""
    n = [0]
    real = compiler._compile_static

    def counted(*a, **k):
        n[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(compiler, "_compile_static", counted)
    return n


def _ort(path, x):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_one_compile_serves_every_batch_size(tmp_path, compiles):
    torch.manual_seed(1)
    path = _export(ConvLinear(), torch.randn(1, 3, 6, 6), tmp_path / "m.onnx")
    m = df.compile(path, dynamic=True, threads=2)
    rng = np.random.default_rng(0)
    for b in (1, 2, 5, 8):
        x = rng.standard_normal((b, 3, 6, 6)).astype(np.float32)
        y = m(x)
        assert y.shape == (b, 5)
        np.testing.assert_allclose(y, _ort(path, x), rtol=1e-4, atol=1e-6)
    assert compiles[0] == 1
    d = m.stats["dynamic"]
    assert d["batch"] == "runtime" and d["representative_batch"] == 1 and d["output_batch_axes"] == [0]
    assert d["calls"] == 4 and d["chunks_run"] == 1 + 2 + 5 + 8
    assert "specializations" not in m.stats


def test_the_representative_batch_comes_from_the_examples(tmp_path, compiles):
    torch.manual_seed(2)
    path = _export(ConvLinear(), torch.randn(1, 3, 6, 6), tmp_path / "m.onnx")
    rng = np.random.default_rng(1)
    m = df.compile(path, [rng.standard_normal((4, 3, 6, 6)).astype(np.float32)], dynamic=True, threads=2)
    assert m.stats["dynamic"]["representative_batch"] == 4
    assert m.graph.inputs[0].shape == (4, 3, 6, 6)  # planned and compiled for 4
    for b in (10, 3, 4):  # 4 + 4 + 2 (padded to 4, the padding dropped); 3 (padded); 4
        x = rng.standard_normal((b, 3, 6, 6)).astype(np.float32)
        np.testing.assert_allclose(m(x), _ort(path, x), rtol=1e-4, atol=1e-6)
    assert compiles[0] == 1 and m.stats["dynamic"]["chunks_run"] == 3 + 1 + 1
    # torch tensors in, torch tensors out, as without dynamic=True
    xt = torch.randn(6, 3, 6, 6)
    assert torch.is_tensor(m(xt)) and tuple(m(xt).shape) == (6, 5)


class _Mean(torch.nn.Module):
    def forward(self, x):
        return x - x.mean(dim=0, keepdim=True)  # mixes the samples


class _Scaled(torch.nn.Module):
    def forward(self, x):
        return x * x.shape[0]  # the batch size as a value


class _SoftmaxOverBatch(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=0)


class _CatBatch(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x, x * 2], dim=0)


class _FlattenAll(torch.nn.Module):
    def forward(self, x):
        return x.reshape(-1) * 2  # the whole batch in one axis: no batch axis left


@pytest.mark.parametrize("module,why", [
    (_Mean, "ReduceMean) reduces the batch axis"),
    (_Scaled, "reads a value computed from the batch size"),
    (_SoftmaxOverBatch, "Softmax) normalises along it: the batch axis"),
    (_CatBatch, "Concat) joins along the batch axis"),
    (_FlattenAll, "does not carry the batch as a whole axis"),
], ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_models_that_mix_samples_are_refused_with_the_reason(tmp_path, module, why):
    path = _export(module(), torch.randn(2, 4), tmp_path / "bad.onnx")
    with pytest.raises(batching.NotSeparable, match="cannot prove the model batch-separable") as info:
        df.compile(path, dynamic=True)
    assert why in str(info.value)
    assert isinstance(info.value, df.Error)
    # Without dynamic=True the same file compiles per shape and is right at each.
    m = df.compile(path, input_shapes={"x": [2, 4]})
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(m(x), _ort(path, x), rtol=1e-5)


def test_inputs_without_a_shared_symbolic_batch_are_a_clear_error(tmp_path):
    static = tmp_path / "static.onnx"
    torch.onnx.export(ConvLinear().eval(), (torch.randn(1, 3, 6, 6),), str(static), input_names=["x"],
                      output_names=["y"], dynamo=False)
    with pytest.raises(df.ShapeError, match="symbolic batch dimension on axis 0 of every input"):
        df.compile(str(static), dynamic=True)
    with pytest.raises(df.Error, match="or a torch.nn.Module with example_inputs"):
        df.compile(ConvLinear().eval(), dynamic=True)  # a module needs its examples
    path = _export(ConvLinear(), torch.randn(1, 3, 6, 6), tmp_path / "m.onnx")
    m = df.compile(path, dynamic=True)
    with pytest.raises(df.ShapeError, match="every input carries the batch on axis 0"):
        m(np.zeros((), np.float32))


def test_a_pytorch_module_with_a_runtime_batch():
    """A torch.nn.Module with dynamic=True is exported with a symbolic batch on axis 0 of every
    input and output, proven separable and compiled once for its examples' batch; every batch
    size runs through that program and matches the module. One that mixes samples is refused
    with the operator that does."""
    torch.manual_seed(3)
    module = ConvLinear().eval()
    m = df.compile(module, [torch.randn(2, 3, 6, 6)], dynamic=True)
    assert m.stats["dynamic"]["representative_batch"] == 2
    for n in (1, 3, 7):
        x = torch.randn(n, 3, 6, 6)
        got = m(x)
        assert torch.is_tensor(got) and tuple(got.shape) == (n, 5)
        with torch.no_grad():
            torch.testing.assert_close(got, module(x), rtol=1e-4, atol=1e-5)
    assert m.stats["dynamic"]["calls"] == 3 and m.stats["dynamic"]["chunks_run"] == 1 + 2 + 4
    with pytest.raises(batching.NotSeparable, match=r"Softmax\) normalises along it: the batch axis"):
        df.compile(_SoftmaxOverBatch(), [torch.randn(2, 4)], dynamic=True)


@pytest.mark.parametrize("name", ["mobilenetv2", "distilbert", "vit_b16"])
def test_zoo_models_with_a_runtime_batch_match_ort(name):
    """A CNN, a BERT (its attention mask gathers each sample's own rows of the flattened mask)
    and ViT (its class token is broadcast to every sample): every batch through the one program,
    and BERT's shorter sequence too (padded, dnnfusion.sequence); only a longer one compiles
    again."""
    rows = dynamic_check.check(name, reduced=True, threads=1, dynamic_batch=True)
    for r in rows:
        assert r["ok"], dynamic_check.fmt(r)
    sizes = dynamic_check.sizes_for(name, dynamic_batch=True)
    assert [r["sizes"] for r in rows] == [
        f"batch {b}" if s is None else f"batch {b}, seq {s}" for b, s in sizes]
    longest = [max((s or 0) for _, s in sizes[:i + 1]) for i in range(len(sizes))]
    assert [r["compiled"] for r in rows] == [1 + len(set(longest[:i + 1])) - 1 for i in range(len(sizes))]
    assert all(r["specializations"] == 0 for r in rows)


def test_rcnn_detections_are_not_batch_separable():
    """Faster R-CNN's detections of its one image have no batch axis: the proof stops at the
    operator that joins the batch with the proposals."""
    zm = registry.get("faster_rcnn", reduced=True)
    path = str(registry.export_onnx("faster_rcnn", reduced=True, dynamic=True))
    shapes = {n: list(x.shape) for n, x in zip(zm.input_names, zm.example_inputs)}
    graphs = [df.load(path, input_shapes={n: [b] + s[1:] for n, s in shapes.items()}) for b in (2, 3)]
    with pytest.raises(batching.NotSeparable, match="Concat"):
        batching.prove(graphs, (2, 3))
