"""The Python rewrite pipeline (dnnfusion.rewrite.rewrite) of paper §4.2: its report of
every pass and of the rules that fired, a custom pass list, and whole blocks as exporters
write them (a BERT encoder layer, an EfficientNet MBConv block) getting cheaper while they
keep their values."""

from __future__ import annotations

import numpy as np

import dnnfusion as df
from dnnfusion import _core

from rewrite_helpers import RULE_NAMES, feeds, graph, rw


# ---- the Python pipeline -------------------------------------------------------------------
def test_rewrite_pipeline_reports_every_pass():
    g = graph("%c: f32[] = const [2.0]\n%i: f32[4,8] = Identity(%x)\n%p: f32[4,8] = Pow(%i, %c)\n"
              "%q: f32[4,8] = Div(%p, %c)\nreturn %q")
    out, report = rw.rewrite(g)
    assert [p.name for p in report.passes] == [p.__name__ for p in rw.DEFAULT_PASSES]
    assert report.operators_before == 3 and report.operators_after == 2
    assert report.flops_after < report.flops_before
    assert report.rules_fired == {"pow_two": 1, "div_to_mul": 1}
    assert "pow_two x1" in str(report)
    x = feeds(g, False)
    np.testing.assert_allclose(out.run_reference(*x)[0], g.run_reference(*x)[0], rtol=1e-6)


def test_rewrite_runs_a_custom_pass_list_and_verifies():
    g = graph("%n: f32[4,8] = Neg(%x)\n%r: f32[4,8] = Neg(%n)\nreturn %r")
    out, report = rw.rewrite(g, passes=[rw.apply_algebraic_rules, rw.eliminate_dead_code])
    assert len(out) == 0 and report.rules_fired == {"neg_neg": 1}
    rules = rw.algebra_rules()
    assert rules[0].name == RULE_NAMES[0] and rules[0].math


# ---- whole blocks, as exporters write them -------------------------------------------------
class _B:
    """A few lines of graph building for the block tests."""

    def __init__(self, name: str, seed: int = 0):
        self.g = _core.Graph(name)
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def c(self, x) -> object:
        self.n += 1
        return self.g.add_constant(f"c{self.n}", np.asarray(x, np.float32))

    def w(self, *shape, scale: float = 0.1) -> object:
        return self.c(self.rng.standard_normal(shape) * scale)

    def i64(self, *xs) -> object:
        self.n += 1
        return self.g.add_constant(f"i{self.n}", np.asarray(xs, np.int64))

    def __call__(self, op, *inputs, **attrs):
        return self.g.add_node(op, list(inputs), attrs, 1)[0]


def _layer_norm_decomposed(b: _B, h, hidden: int):
    # what torch.onnx (opset < 17) writes for nn.LayerNorm
    mean = b("ReduceMean", h, b.i64(-1))
    d = b("Sub", h, mean)
    var = b("ReduceMean", b("Pow", d, b.c(2.0)), b.i64(-1))
    std = b("Sqrt", b("Add", var, b.c(1e-12)))
    return b("Add", b("Mul", b("Div", d, std), b.c(1 + b.rng.standard_normal(hidden) * 0.1)),
             b.w(hidden))


def bert_like_block(seq: int = 16, hidden: int = 32, heads: int = 4, ffn: int = 64) -> df.ECG:
    """One BERT encoder layer as torch.onnx exports it: scaled attention with an additive
    mask, decomposed LayerNorm and erf-GELU."""
    b = _B("bert_block")
    dh = hidden // heads
    x = b.g.add_input("x", "f32", [1, seq, hidden])
    mask = b.g.add_input("mask", "f32", [1, 1, 1, seq])
    ext = b("Mul", b("Sub", b.c(1.0), mask), b.c(-10000.0))

    def proj(t, perm):
        y = b("Add", b("MatMul", t, b.w(hidden, hidden)), b.w(hidden))
        y = b("Reshape", y, b.i64(1, seq, heads, dh))
        return b("Transpose", y, perm=perm)

    q, k, v = proj(x, [0, 2, 1, 3]), proj(x, [0, 2, 3, 1]), proj(x, [0, 2, 1, 3])
    scores = b("Div", b("MatMul", q, k), b.c(np.sqrt(dh)))
    p = b("Softmax", b("Add", scores, ext), axis=-1)
    ctx = b("Reshape", b("Transpose", b("MatMul", p, v), perm=[0, 2, 1, 3]), b.i64(1, seq, hidden))
    h = b("Add", b("Add", b("MatMul", ctx, b.w(hidden, hidden)), b.w(hidden)), x)
    h = _layer_norm_decomposed(b, h, hidden)
    f = b("Add", b("MatMul", h, b.w(hidden, ffn)), b.w(ffn))
    gelu = b("Mul", b("Mul", f, b("Add", b("Erf", b("Div", f, b.c(1.4142135))), b.c(1.0))), b.c(0.5))
    o = b("Add", b("Add", b("MatMul", gelu, b.w(ffn, hidden)), b.w(hidden)), h)
    b.g.set_outputs([_layer_norm_decomposed(b, o, hidden)])
    return df.ECG(b.g)


def mbconv_se_block(ch: int = 8, expand: int = 4, size: int = 8, se: int = 2) -> df.ECG:
    """An EfficientNet MBConv block: 1x1 expand, depthwise 3x3, squeeze-and-excitation,
    1x1 project, each conv followed by BatchNormalization, Swish as x * Sigmoid(x)."""
    b = _B("mbconv_se")
    x = b.g.add_input("x", "f32", [1, ch, size, size])
    mid = ch * expand

    def bn(t, c):
        return b("BatchNormalization", t, b.c(b.rng.uniform(0.5, 2, c)), b.w(c), b.w(c),
                 b.c(b.rng.uniform(0.5, 2, c)), epsilon=1e-3)

    def swish(t):
        return b("Mul", t, b("Sigmoid", t))

    h = swish(bn(b("Conv", x, b.w(mid, ch, 1, 1)), mid))
    h = swish(bn(b("Conv", h, b.w(mid, 1, 3, 3), group=mid, pads=[1, 1, 1, 1]), mid))
    s = b("ReduceMean", h, b.i64(2, 3))
    s = swish(b("Conv", s, b.w(se, mid, 1, 1), b.w(se)))
    s = b("Sigmoid", b("Conv", s, b.w(mid, se, 1, 1), b.w(mid)))
    h = b("Mul", h, s)
    h = bn(b("Conv", h, b.w(ch, mid, 1, 1)), ch)
    b.g.set_outputs([b("Add", h, x)])
    return df.ECG(b.g)


def test_bert_like_block_gets_cheaper_and_keeps_values():
    g = bert_like_block()
    out, report = rw.rewrite(g)
    fired = report.rules_fired
    assert {"pow_two", "div_to_mul", "matmul_scale_in_left"} <= set(fired), fired
    assert report.flops_after < report.flops_before
    assert [n.op for n in out.nodes].count("Pow") == 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 32)).astype(np.float32)
    mask = (rng.uniform(size=(1, 1, 1, 16)) > 0.2).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(x, mask)[0], g.run_reference(x, mask)[0],
                               rtol=1e-4, atol=1e-4)


def test_mbconv_se_block_loses_its_batch_norms():
    g = mbconv_se_block()
    out, report = rw.rewrite(g)
    ops = [n.op for n in out.nodes]
    assert "BatchNormalization" not in ops and ops.count("Conv") == 5
    assert report.operators_after == report.operators_before - 3
    x = np.random.default_rng(0).standard_normal((1, 8, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(out.run_reference(x)[0], g.run_reference(x)[0], rtol=1e-4, atol=1e-4)
