"""Model access for the harness: the dnnfusion zoo, plus two tiny built-in models.

The tiny models (``tiny_cnn``, ``tiny_transformer``) follow the zoo's interface
(``module``, ``example_inputs``, ``input_names``, ``output_names``) and exist so the
harness can be tested quickly and independently of the zoo.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import warnings
from typing import Any

TINY_MODELS = ("tiny_cnn", "tiny_transformer")
REPO = pathlib.Path(__file__).resolve().parents[2]


def zoo():
    """``dnnfusion.zoo``.  The zoo is pure PyTorch: if ``import dnnfusion`` fails (its C++
    core mid-rebuild, say), the zoo is loaded from the source tree under a stub ``dnnfusion``
    package marked ``_harness_stub`` so that the measuring stick still works."""
    import importlib
    import sys
    import types

    try:
        from dnnfusion import zoo as z

        return z
    except ImportError as first:
        if not (REPO / "dnnfusion" / "zoo" / "__init__.py").exists():
            raise
        for k in [k for k in sys.modules if k == "dnnfusion" or k.startswith("dnnfusion.")]:
            del sys.modules[k]
        stub = types.ModuleType("dnnfusion")
        stub.__path__ = [str(REPO / "dnnfusion")]
        stub._harness_stub = f"import dnnfusion failed: {first}"
        sys.modules["dnnfusion"] = stub
        return importlib.import_module("dnnfusion.zoo")


def zoo_names() -> list[str]:
    """The zoo's model names, or [] if the zoo is not importable."""
    try:
        z = zoo()
    except Exception:  # noqa: BLE001 - the zoo is optional for the harness
        return []
    return list(z.list())


def known_models() -> list[str]:
    return zoo_names() + list(TINY_MODELS)


@dataclasses.dataclass
class Model:
    name: str
    module: Any  # torch.nn.Module in eval mode
    example_inputs: tuple
    input_names: list[str]
    output_names: list[str]
    paper_layers: int | None = None
    family: str = "tiny"


def _tiny(name: str) -> Model:
    import torch
    from torch import nn

    class TinyCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
            self.b1 = nn.BatchNorm2d(16)
            self.c2 = nn.Conv2d(16, 16, 3, padding=1, groups=16)
            self.c3 = nn.Conv2d(16, 16, 1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            z = self.c3(torch.nn.functional.relu6(self.c2(y)))
            y = y + torch.sigmoid(z) * z
            y = torch.nn.functional.max_pool2d(y, 2)
            y = y.mean((2, 3))
            return torch.softmax(self.fc(y), -1)

    class TinyTransformer(nn.Module):
        def __init__(self, vocab=64, d=32, heads=2, seq=8):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.1)
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.ff1 = nn.Linear(d, 4 * d)
            self.ff2 = nn.Linear(4 * d, d)
            self.heads = heads

        def forward(self, ids, mask):
            b, s = ids.shape
            x = self.emb(ids) + self.pos[:, :s]
            h = self.ln1(x)
            q, k, v = self.qkv(h).chunk(3, -1)
            hd = q.shape[-1] // self.heads
            q, k, v = (t.reshape(b, s, self.heads, hd).transpose(1, 2) for t in (q, k, v))
            att = q @ k.transpose(-1, -2) / hd ** 0.5
            att = att + (1.0 - mask[:, None, None, :].to(att.dtype)) * -1e4
            o = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)
            x = x + self.proj(o)
            x = x + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))
            return x, x[:, 0].tanh()

    g = torch.Generator().manual_seed(1234)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        if name == "tiny_cnn":
            m = TinyCNN()
            with torch.no_grad():  # non-trivial BN statistics
                m.b1.running_mean.uniform_(-0.1, 0.1)
                m.b1.running_var.uniform_(0.8, 1.2)
            inputs = (torch.randn(1, 3, 16, 16, generator=g),)
            return Model(name, m.eval(), inputs, ["input"], ["probs"])
        if name == "tiny_transformer":
            m = TinyTransformer()
            ids = torch.randint(0, 64, (1, 8), generator=g)
            mask = torch.ones(1, 8, dtype=torch.int64)
            mask[0, -2:] = 0
            return Model(name, m.eval(), (ids, mask), ["input_ids", "attention_mask"],
                         ["hidden", "pooled"])
    raise KeyError(name)


def load(name: str, reduced: bool, batch: int = 1) -> Model:
    """Build model ``name`` (zoo or tiny) in eval mode with its example inputs; with
    ``batch`` > 1, inputs of that batch (see :func:`batched`)."""
    if name in TINY_MODELS:
        m = _tiny(name)
    else:
        zm = zoo().get(name, reduced=reduced)
        m = Model(zm.name, zm.module, tuple(zm.example_inputs), list(zm.input_names),
                  list(zm.output_names), getattr(zm, "paper_layers", None),
                  getattr(zm, "family", ""))
    if batch != 1:
        m.example_inputs = batched(m.example_inputs, batch)
    return m


def batched(inputs: tuple, batch: int) -> tuple:
    """The example inputs at batch ``batch``: each has batch 1 on axis 0; the new samples of a
    floating-point input are drawn like ``randn`` (seeded, so every cell sees the same ones),
    an integer input (token ids, masks) is repeated."""
    import torch

    if batch < 1:
        raise ValueError(f"batch must be >= 1, not {batch}")
    g = torch.Generator().manual_seed(4321)
    out = []
    for x in inputs:
        if x.dim() == 0 or x.shape[0] != 1:
            raise ValueError(f"an input of shape {list(x.shape)} has no batch axis of 1 to grow")
        if x.is_floating_point():
            extra = torch.randn((batch - 1,) + tuple(x.shape[1:]), generator=g, dtype=x.dtype)
            out.append(torch.cat([x, extra * x.std() + x.mean()]))
        else:
            out.append(x.repeat((batch,) + (1,) * (x.dim() - 1)))
    return tuple(out)


def export_onnx(name: str, reduced: bool, workdir: str | os.PathLike, opset: int = 17,
                batch: int = 1) -> pathlib.Path:
    """The model's ONNX file: the zoo's cached export (batch 1), or an export of a tiny model
    or of a batched one into ``workdir``.

    All use the TorchScript exporter (``dynamo=False``) with static shapes, as the zoo does.
    """
    if name not in TINY_MODELS and batch == 1:
        return pathlib.Path(zoo().export_onnx(name, reduced=reduced, opset=opset))
    import torch

    m = load(name, reduced, batch)
    path = pathlib.Path(workdir) / f"{name}-b{batch}.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m.module, m.example_inputs, str(path), dynamo=False,
                          opset_version=opset, input_names=m.input_names,
                          output_names=m.output_names, do_constant_folding=True)
    return path
