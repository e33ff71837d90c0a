"""The PyTorch front-end (``dnnfusion.frontends.fx``): modules imported through
``torch.export``, ``torch.fx.symbolic_trace`` and ``torch.compile`` compute what PyTorch
computes (checked with the NumPy reference interpreter), one ATen op family at a time and
on whole models; unsupported ops and bad calls fail with clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import dnnfusion  # noqa: E402
from dnnfusion import ModelFormatError, UnsupportedOperatorError  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


class Fn(nn.Module):
    """A module computing ``f(*inputs)``."""

    def __init__(self, f, **modules):
        super().__init__()
        self.f = f
        for k, m in modules.items():
            self.add_module(k, m)

    def forward(self, *xs):
        return self.f(self, *xs)


def flat_tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict) or hasattr(out, "values") and not isinstance(out, (tuple, list)):
        out = list(out.values())
    return [t for o in out for t in flat_tensors(o)] if isinstance(out, (tuple, list)) else []


def check(model, inputs, rtol=RTOL, atol=ATOL, load_inputs=None, torch_model=None):
    """Imports ``model`` and compares the reference interpreter's outputs with PyTorch's
    (those of ``torch_model`` if given)."""
    with torch.no_grad():
        want = flat_tensors((torch_model or model)(*inputs))
    g = dnnfusion.load(model, load_inputs if load_inputs is not None else inputs)
    g.verify()
    got = g.run_reference(*[t.numpy() for t in inputs])
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        b = b.detach().numpy()
        assert a.dtype == b.dtype, f"output {i}: {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"output {i}: {a.shape} != {b.shape}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {i}")
    return g


def ops_of(g):
    return {n.op for n in g.nodes}


# ---------------------------------------------------------------------------------------
# A model made of the usual CNN and transformer pieces, through the three entry points
# ---------------------------------------------------------------------------------------
class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=4)
        self.bn2 = nn.BatchNorm2d(16)
        self.conv3 = nn.Conv2d(16, 32, 1)
        self.fc = nn.Linear(32, 32)
        self.ln = nn.LayerNorm(32)
        self.q, self.k, self.v = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 32)
        self.o = nn.Linear(32, 32)
        self.head = nn.Linear(32, 10)
        with torch.no_grad():
            for bn in (self.bn, self.bn2):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        y = F.max_pool2d(y, 2)
        y = F.hardswish(self.bn2(self.conv2(y)))
        y = F.avg_pool2d(F.silu(self.conv3(y)), 3, stride=1, padding=1)
        pooled = F.adaptive_avg_pool2d(y, 1).flatten(1)
        tokens = y.flatten(2).transpose(1, 2)  # [N, HW, C]
        h = self.ln(F.gelu(self.fc(tokens)))
        n, t, c = h.shape
        heads = 4

        def split(z):
            return z.view(n, t, heads, c // heads).transpose(1, 2)

        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(c // heads), dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(n, t, c)
        h = h + self.o(ctx)
        return self.head(torch.tanh(h.mean(1)) + torch.sigmoid(pooled)), att


def _mixed():
    torch.manual_seed(0)
    return Mixed().eval(), torch.randn(2, 3, 16, 16)


def test_mixed_model_export():
    m, x = _mixed()
    g = check(m, (x,))
    assert [v.name for v in g.inputs] == ["x"]
    assert len(g.outputs) == 2
    assert {"Conv", "BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool",
            "Gemm", "MatMul", "LayerNormalization", "Softmax", "Gelu", "HardSwish",
            "Transpose", "Reshape"} <= ops_of(g)
    # parameters are constants sharing memory with the module
    w = g.graph.value("conv.weight")
    assert w is not None and w.is_constant
    assert np.shares_memory(w.numpy(), m.conv.weight.detach().numpy())


def test_mixed_model_symbolic_trace():
    m, x = _mixed()
    gm = torch.fx.symbolic_trace(m)
    check(gm, (x,))


def test_mixed_model_torch_compile():
    m, x = _mixed()
    captured = {}

    def capture(gm, example_inputs):
        captured["gm"], captured["inputs"] = gm, list(example_inputs)
        return gm.forward

    with torch.no_grad():
        torch.compile(m, backend=capture)(x)
    gm = captured["gm"]
    assert isinstance(gm, torch.fx.GraphModule)
    g = check(gm, (x,), load_inputs=captured["inputs"], torch_model=m)
    assert len(g.inputs) == 1  # the lifted parameters became constants
    # Dynamo's graph needs the parameters it lifted into inputs: say so
    with pytest.raises(TypeError, match="lifted the parameters"):
        dnnfusion.load(gm, (x,))


def _eval_copy(m):
    import copy
    return copy.deepcopy(m).eval()


def test_training_mode_is_restored():
    m, x = _mixed()
    m.train()
    check(m, (x,), torch_model=_eval_copy(m))  # exported in eval mode, like torch.onnx.export
    assert m.training and m.bn.training


# ---------------------------------------------------------------------------------------
# One module per ATen op family
# ---------------------------------------------------------------------------------------
def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def bn_with_stats(c, affine=True, d=2):
    bn = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)[d - 1](c, affine=affine)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        if affine:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return bn


X = (2, 3, 6, 5)

CASES = {
    # elementwise activations
    "activations": (lambda: Fn(lambda s, x: (
        F.relu(x), F.leaky_relu(x, 0.2), F.elu(x), F.elu(x, 0.5), F.selu(x), F.celu(x, 1.3),
        F.gelu(x), F.gelu(x, approximate="tanh"), torch.sigmoid(x), F.silu(x), F.hardswish(x),
        F.hardsigmoid(x), F.hardtanh(x, -0.5, 0.5), F.relu6(x * 4), torch.tanh(x), F.mish(x),
        F.softplus(x), F.softplus(x, beta=2.0, threshold=1.0),
        F.prelu(x, torch.tensor([0.1, 0.2, 0.3])),
        F.prelu(x, torch.tensor([0.25])))), lambda: (randn(*X),)),
    "clamp": (lambda: Fn(lambda s, x, lo: (
        torch.clamp(x, -0.3, 0.4), torch.clamp(x, min=0.1), torch.clamp(x, max=-0.1),
        torch.clamp(x, min=lo), torch.clamp_min(x, 0.2), torch.clamp(x, lo, lo + 1))),
        lambda: (randn(*X), randn(1, 3, 1, 1))),
    "unary_math": (lambda: Fn(lambda s, x: (
        torch.erf(x), torch.exp(x), torch.log(x.abs() + 0.1), torch.sqrt(x.abs()),
        torch.rsqrt(x.abs() + 0.1), torch.reciprocal(x + 3), -x, x.abs(), x.floor(), x.ceil(),
        torch.round(x * 3), torch.round(x, decimals=1), torch.sign(x), torch.trunc(x * 3),
        torch.sin(x), torch.cos(x), torch.log1p(x.abs()), torch.expm1(x), torch.log2(x.abs() + 1),
        torch.log10(x.abs() + 1))), lambda: (randn(*X),)),
    "binary_math": (lambda: Fn(lambda s, x, y: (
        x + y, torch.add(x, y, alpha=0.5), x - y, torch.sub(x, y, alpha=2), 1 - x, x * y, x * 2.5,
        x / (y.abs() + 1), x / 3, torch.div(x * 4, y.abs() + 1, rounding_mode="floor"),
        torch.div(x * 4, y.abs() + 1, rounding_mode="trunc"), x ** 2, x.abs() ** y,
        2 ** x, torch.pow(x.abs(), 0.5), torch.maximum(x, y), torch.minimum(x, y),
        torch.remainder(x * 4, 1.5), torch.fmod(x * 4, 1.5))),
        lambda: (randn(*X), randn(3, 1, 5))),
    "integer_math": (lambda: Fn(lambda s, a, b: (
        a + b, a * 3, a - 1, a // b, torch.div(a, b, rounding_mode="trunc"), a / b,
        a % b, torch.fmod(a, b), a + 1.5, a * 0.5, torch.maximum(a, b), a.abs(), -a,
        a.sum(), a.sum(1), torch.cumsum(a, 1))),
        lambda: (torch.randint(-20, 20, (4, 5)), torch.randint(1, 6, (4, 5)))),
    "compare_logic": (lambda: Fn(lambda s, x, y: (
        x == y, x != y, x < y, x <= 0.5, x > y, x >= 0, torch.eq(x, 0.0),
        torch.logical_not(x > 0), torch.logical_and(x > 0, y > 0), torch.logical_or(x > 0, y > 0),
        torch.logical_xor(x > 0, y > 0), (x > 0) & (y > 0), (x > 0) | (y < 0), (x > 0) ^ (y < 0),
        ~(x > 0), torch.where(x > y, x, y), torch.where(x > 0, x, 0.0),
        x.masked_fill(y > 0.5, -1.0), torch.isnan(x))),
        lambda: (torch.randint(-3, 3, X).float(), torch.randint(-3, 3, X).float())),
    "cast": (lambda: Fn(lambda s, x, i: (
        x.to(torch.int32), x.to(torch.float64), (x > 0).to(torch.float32), i.float() * x,
        x.half().float(), i.to(torch.int64) + i, x.long(), (x > 0).sum())),
        lambda: (randn(*X) * 5, torch.randint(-5, 5, X, dtype=torch.int32))),
    # convolutions
    "conv": (lambda: Fn(lambda s, x1, x2, x3: (
        s.c1(x1), s.c2(x2), s.c2g(x2), s.c3(x3), s.ct(x2), s.ctg(x2), s.ct1(x1)),
        c1=nn.Conv1d(3, 4, 3, padding=2, dilation=2),
        c2=nn.Conv2d(3, 6, (3, 2), stride=(2, 1), padding=(1, 0), bias=False),
        c2g=nn.Conv2d(3, 6, 3, groups=3, padding=1, dilation=2),
        c3=nn.Conv3d(3, 4, 3, padding=1, stride=2),
        ct=nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
        ctg=nn.ConvTranspose2d(3, 6, 2, stride=2, groups=3, bias=False),
        ct1=nn.ConvTranspose1d(3, 2, 4, stride=3)),
        lambda: (randn(2, 3, 9), randn(2, 3, 7, 6), randn(1, 3, 5, 6, 4))),
    # linear algebra
    "matmul": (lambda: Fn(lambda s, a, b, c: (
        s.l2(a), s.l3(c), s.lnb(c), a @ b, torch.mm(a, b), torch.bmm(c, c.transpose(1, 2)),
        torch.matmul(c.unsqueeze(1), b.T), torch.addmm(b[0], a, b, beta=0.5, alpha=2.0),
        torch.baddbmm(c, c, torch.ones(3, 4, 4), alpha=0.5), torch.matmul(a[0], b)),
        l2=nn.Linear(5, 4), l3=nn.Linear(4, 6), lnb=nn.Linear(4, 3, bias=False)),
        lambda: (randn(3, 5), randn(5, 4), randn(3, 2, 4))),
    # normalization
    "norms": (lambda: Fn(lambda s, x, t: (
        s.bn(x), s.bn_plain(x), s.ln(t), F.layer_norm(t, (4, 6)), s.gn(x), s.inorm(x),
        F.instance_norm(x), s.bn1(t.transpose(1, 2)), F.normalize(t, dim=-1),
        *torch.ops.aten.native_layer_norm(t, [6], s.ln.weight, None, 1e-5)),
        bn=bn_with_stats(4), bn_plain=bn_with_stats(4, affine=False), ln=nn.LayerNorm(6),
        gn=nn.GroupNorm(2, 4), inorm=nn.InstanceNorm2d(4, affine=True), bn1=bn_with_stats(6, d=1)),
        lambda: (randn(2, 4, 5, 5), randn(2, 4, 6))),
    # pooling
    "pooling": (lambda: Fn(lambda s, x, v: (
        F.max_pool2d(x, 2), F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
        F.max_pool2d(x, 2, dilation=2), F.max_pool1d(x.flatten(2), 3),
        F.max_pool3d(v, 2, ceil_mode=True), F.avg_pool2d(x, 2), F.avg_pool2d(x, 3, 2, 1),
        F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), F.avg_pool2d(x, 2, ceil_mode=True),
        F.avg_pool3d(v, 2), F.avg_pool1d(x.flatten(2), 4),
        F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(x, (2, 3)),
        F.adaptive_max_pool2d(x, 1), F.adaptive_avg_pool1d(x.flatten(2), 1))),
        lambda: (randn(2, 3, 8, 9), randn(1, 2, 5, 4, 4))),
    # reductions
    "reductions": (lambda: Fn(lambda s, x: (
        x.mean((2, 3)), x.mean(1, keepdim=True), x.mean(), x.sum(-1), x.sum(), x.amax((1, 2)),
        x.amin(0, keepdim=True), x.max(1).values, x.max(1).indices, x.min(-1, keepdim=True)[0],
        x.max(), x.argmax(2), x.argmin(), x.argmax(1, keepdim=True), x.var(1), x.std((2, 3)),
        x.var(-1, unbiased=False, keepdim=True), torch.var_mean(x, 1)[1], x.norm(dim=1),
        torch.linalg.vector_norm(x, 1, dim=-1), torch.linalg.vector_norm(x, float("inf")),
        x.prod(2), torch.cumsum(x, 2), (x > 0).any(1), (x > -2).all(), x.logsumexp(1))),
        lambda: (randn(*X),)),
    "softmax": (lambda: Fn(lambda s, x: (
        torch.softmax(x, -1), torch.softmax(x, 1), F.log_softmax(x, dim=2),
        torch.softmax(x.double(), 0))), lambda: (randn(*X),)),
    "topk_sort": (lambda: Fn(lambda s, x: (
        *torch.topk(x, 3), *torch.topk(x, 2, dim=1, largest=False), torch.sort(x, 1)[0],
        torch.sort(x, descending=True)[1])),
        lambda: (torch.randperm(2 * 3 * 6 * 5).reshape(X).float(),)),
    # layout
    "reshape_permute": (lambda: Fn(lambda s, x: (
        x.view(6, 30), x.reshape(-1), x.reshape(2, 3, 30) + 0, x.permute(0, 2, 3, 1),
        x.transpose(1, 3), x[0, 0].t(), x.flatten(1), x.flatten(), x.unsqueeze(1) * 2,
        x[:, :1].squeeze(1), x.unsqueeze(-1).squeeze(), x.contiguous() * 1,
        x.view(2, 3, 30).unflatten(2, (5, 6)))),
        lambda: (randn(*X),)),
    "expand_repeat_cat": (lambda: Fn(lambda s, x, y: (
        y.expand(2, 3, 6, 5), y.expand(4, -1, -1, -1, -1), x.repeat(1, 2, 1, 1),
        x.repeat(2, 1, 1, 1, 2), torch.cat([x, x * 2], 1), torch.cat([x, y.expand_as(x)], -1),
        torch.stack([x, x], 2), x.expand_as(x))),
        lambda: (randn(*X), randn(1, 3, 1, 5))),
    "split_slice": (lambda: Fn(lambda s, x: (
        *x.split(2, 2), *x.split([1, 2], 1), *x.chunk(2, -1), *x.unbind(1),
        x[:, 1:], x[..., ::2], x[:, :, 1:-1:3], x[:, -2:], x[1], x[:, 2], x[..., -1],
        x[:, None, 1])), lambda: (randn(*X),)),
    "indexing": (lambda: Fn(lambda s, x, i, j: (
        x.index_select(2, i), x[:, :, i], x[i.clamp(max=1), 1], x[:, j, j], x[0, :, i, i],
        x[i.clamp(max=1), :, i.clamp(max=4), 0],
        torch.gather(x, 2, i.view(1, 1, 3, 1).expand(2, 3, 3, 5)),
        torch.gather(x, 1, torch.zeros(2, 2, 2, 2, dtype=torch.int64)),
        x[:, torch.tensor([-1, 0])])),
        lambda: (randn(*X), torch.tensor([4, 0, 2]), torch.tensor([[0, 2], [1, 1]]))),
    "embedding": (lambda: Fn(lambda s, ids, pos: (
        s.emb(ids) + s.pos(pos), F.embedding(ids, s.emb.weight, padding_idx=0)),
        emb=nn.Embedding(11, 4), pos=nn.Embedding(5, 4)),
        lambda: (torch.randint(0, 11, (2, 5)), torch.arange(5))),
    "padding": (lambda: Fn(lambda s, x: (
        F.pad(x, (1, 2)), F.pad(x, (1, 0, 2, 3), value=1.5), F.pad(x, (-1, 1, 0, 0, 1, 1)),
        F.pad(x, (1, 2, 2, 1), mode="reflect"), F.pad(x, (1, 1, 0, 2), mode="replicate"),
        F.pad(x.flatten(2), (2, 1), mode="reflect"), s.zp(x)), zp=nn.ZeroPad2d(1)),
        lambda: (randn(*X),)),
    "flip_roll_trilu": (lambda: Fn(lambda s, x: (
        x.flip(1), x.flip((2, 3)), torch.roll(x, 1, 2), torch.roll(x, (-1, 2), (0, 3)),
        torch.triu(x), torch.tril(x, -1), torch.triu(x, 2))), lambda: (randn(*X),)),
    "resize": (lambda: Fn(lambda s, x: (
        F.interpolate(x, scale_factor=2, mode="nearest"), F.interpolate(x, size=(5, 7)),
        F.interpolate(x, size=(7, 4), mode="bilinear", align_corners=True),
        F.interpolate(x, size=(7, 9), mode="bilinear"),
        F.interpolate(x, scale_factor=1.5, mode="bilinear"),
        F.interpolate(x, scale_factor=2, mode="bicubic"),
        F.interpolate(x, size=(5, 7), mode="nearest-exact"),
        F.interpolate(x.flatten(2), scale_factor=2, mode="linear"),
        s.up(x)), up=nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)),
        lambda: (randn(1, 2, 4, 5),)),
    "pixel_shuffle": (lambda: Fn(lambda s, x: (
        F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 2))), lambda: (randn(1, 8, 4, 6),)),
    "constants": (lambda: Fn(lambda s, x: (
        x + torch.arange(5), x * torch.ones(3, 1, 1), x + torch.zeros_like(x),
        torch.full_like(x, 2.5) - x, torch.ones_like(x, dtype=torch.int64),
        x + torch.full((6, 5), 0.5), torch.arange(0, 1, 0.25), x + torch.tensor(3.0),
        torch.zeros(40, 30, 20) + 1, x.new_zeros(2, 3) + 1, torch.eye(3) + 1)),
        lambda: (randn(*X),)),
    "attention": (lambda: Fn(lambda s, q, k, v, m: (
        F.scaled_dot_product_attention(q, k, v),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
        F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0),
        F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3))),
        lambda: (randn(2, 3, 5, 4), randn(2, 3, 5, 4), randn(2, 3, 5, 6), randn(5, 5))),
    "dropout_identity": (lambda: Fn(lambda s, x: (
        s.drop(x), F.dropout(x, 0.3, training=False), x.clone(), x.detach() + 0,
        s.drop2(x) * 2), drop=nn.Dropout(0.5), drop2=nn.Dropout2d(0.2)), lambda: (randn(*X),)),
    "unbatched_indices_gqa": (lambda: Fn(lambda s, x, q, kv: (
        F.max_pool2d(x, 2), F.avg_pool2d(x, 3, 1, 1), F.adaptive_avg_pool2d(x, 1),
        *F.max_pool2d(x.unsqueeze(0), 3, 2, 1, return_indices=True),
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True),
        (x > 0) * (x < 1), (x > 0) + (x < -1))),
        lambda: (randn(3, 6, 7), randn(1, 4, 3, 8), randn(1, 2, 5, 8))),
    # dtypes
    "float64": (lambda: Fn(lambda s, x: (
        s.conv(x), s.fc(x.flatten(1)), torch.softmax(x, 1), F.gelu(x) * 0.1, x.mean((2, 3)),
        s.ln(x)), conv=nn.Conv2d(3, 2, 3), fc=nn.Linear(90, 4), ln=nn.LayerNorm(5)).double(),
        lambda: (randn(*X, dtype=torch.float64),)),
    "bool_masks": (lambda: Fn(lambda s, x, m: (
        x.masked_fill(~m, float("-inf")).softmax(-1), torch.where(m, x, torch.zeros_like(x)),
        (m & (x > 0)).float(), m.sum(-1), m.long().cumsum(-1), m.any(-1))),
        lambda: (randn(2, 4, 4), torch.rand(2, 4, 4) > 0.3)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_family(case):
    make_module, make_inputs = CASES[case]
    torch.manual_seed(1)
    check(make_module().eval(), make_inputs())


# ---------------------------------------------------------------------------------------
# Whole models: a small CNN with a detection-style head, BERT and GPT-2
# ---------------------------------------------------------------------------------------
class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), bn_with_stats(8), nn.ReLU6())
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1, groups=8), bn_with_stats(8),
                                   nn.Hardswish(), nn.Conv2d(8, 16, 1), bn_with_stats(16))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.cls = nn.Conv2d(24, 6, 1)
        self.box = nn.Conv2d(24, 4 * 3, 1)

    def forward(self, x):
        a = self.stem(x)
        b = self.block(a)
        c = torch.cat([F.max_pool2d(self.up(b), 2), a], 1)
        n = x.shape[0]
        cls = self.cls(c).permute(0, 2, 3, 1).reshape(n, -1, 2).sigmoid()
        box = self.box(c).permute(0, 2, 3, 1).reshape(n, -1, 4)
        return {"scores": cls, "boxes": torch.cat([box[..., :2].sigmoid(), box[..., 2:].exp()], -1)}


class Nested(nn.Module):
    def forward(self, x, y):
        return x * 2, [y + 1, {"a": x - y, "b": None}], 3, x


def test_nested_outputs_flattened_in_order():
    g = check(Nested(), (randn(3), randn(3)))
    assert len(g.outputs) == 4
    assert [v.name for v in g.inputs] == ["x", "y"]


def test_detector_dict_outputs():
    torch.manual_seed(0)
    g = check(TinyDetector().eval(), (randn(2, 3, 16, 16),))
    assert [v.shape for v in g.outputs] == [(2, 192, 2), (2, 192, 4)]


def _transformers():
    return pytest.importorskip("transformers")


def test_bert():
    transformers = _transformers()
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, vocab_size=100,
                                  attn_implementation="eager")
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 100, (2, 8))
    g = check(model, (ids,))
    assert [v.name for v in g.inputs] == ["input_ids"]
    assert len(g.outputs) == 2  # last_hidden_state, pooler_output
    assert {"LayerNormalization", "Gelu", "Softmax", "MatMul"} <= ops_of(g)


def test_bert_sdpa_with_mask():
    transformers = _transformers()
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, vocab_size=50)
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 50, (2, 6))
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    check(model, (ids, mask))


def test_gpt2():
    transformers = _transformers()
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100,
                                  n_positions=32, use_cache=False,
                                  attn_implementation="eager")
    model = transformers.GPT2Model(cfg).eval()
    ids = torch.randint(0, 100, (2, 8))
    g = check(model, (ids,))
    assert {"LayerNormalization", "Softmax", "Gemm", "Tanh"} <= ops_of(g)


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------
def test_unsupported_op_names_node_and_target():
    m = Fn(lambda s, x: torch.fft.fft(x).abs())
    pattern = (r"fx node '.*' calls aten\.\w*fft\w*\.default, which dnnfusion does not support; "
               r"torch\.compile\(module, backend=\"dnnfusion\"\) runs a graph it cannot compile in PyTorch")
    with pytest.raises(UnsupportedOperatorError, match=pattern):
        dnnfusion.load(m, (randn(4, 8),))


def test_unsupported_op_bool_mask_index():
    m = Fn(lambda s, x: x[x > 0])
    with pytest.raises((UnsupportedOperatorError, ModelFormatError)):
        dnnfusion.load(m, (randn(4, 8),))


def test_unsupported_adaptive_pool_uneven():
    m = Fn(lambda s, x: F.adaptive_avg_pool2d(x, 3))
    with pytest.raises(UnsupportedOperatorError, match="adaptive pooling from"):
        dnnfusion.load(m, (randn(1, 2, 7, 8),))


def test_unsupported_avg_pool_divisor_override():
    m = Fn(lambda s, x: F.avg_pool2d(x, 2, divisor_override=3))
    with pytest.raises(UnsupportedOperatorError, match="divisor_override"):
        dnnfusion.load(m, (randn(1, 2, 4, 4),))


def test_missing_example_inputs():
    with pytest.raises(TypeError, match="example_inputs"):
        dnnfusion.load(nn.Linear(2, 2))
    from dnnfusion.frontends.fx import import_torch
    with pytest.raises(TypeError, match="example_inputs"):
        import_torch(nn.Linear(2, 2), None)


def test_unsupported_dtype():
    m = Fn(lambda s, x: x * 2)
    with pytest.raises(dnnfusion.DTypeError, match="complex64"):
        dnnfusion.load(m, (randn(2, 2, dtype=torch.complex64),))


def test_export_failure_is_a_model_format_error():
    def f(s, x):
        if x.sum() > 0:  # data-dependent control flow
            return x
        return -x
    with pytest.raises(ModelFormatError, match="torch.export could not export"):
        dnnfusion.load(Fn(f), (randn(3),))


def test_training_only_ops_are_refused():
    m = Fn(lambda s, x: F.dropout(x, 0.5, training=True))
    with pytest.raises(UnsupportedOperatorError, match="native_dropout.*training mode"):
        dnnfusion.load(m, (randn(3),))
    bn = nn.BatchNorm1d(3)
    m = Fn(lambda s, x: F.batch_norm(x, s.bn.running_mean, s.bn.running_var, training=True), bn=bn)
    with pytest.raises(UnsupportedOperatorError, match="batch statistics"):
        dnnfusion.load(m, (randn(2, 3),))


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        self.calls += 1
        return x * 2


def test_stateful_module_is_refused():
    with pytest.raises(UnsupportedOperatorError, match="updates 'calls' in place"):
        dnnfusion.load(Counter(), (randn(3),))
