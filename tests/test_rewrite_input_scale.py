"""fold_input_scale (cpp/rewrite/fold.cc): Conv(x * s, W) -> Conv(x, W * s) for a computed
per-input-channel scale s, checked against the reference interpreter, through generated
code, and on the cases where it must not fire."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import rewrite


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def se_graph(n=1, c=16, hw=10, m=8, k=1, group=1, s_shape=None, extra_reader=False, mw=None):
    """x -> GlobalAveragePool -> Sigmoid = s; Conv(x * s, W, b); optionally Relu(x * s) too."""
    rng = np.random.default_rng(0)
    b = df.ECG(df._core.Graph("se"))
    g = b.graph
    x = g.add_input("x", "f32", [n, c, hw, hw])
    if s_shape is None:
        pooled = g.add_node("GlobalAveragePool", [x], {}, 1, "gap", ["pooled"])[0]
        s = g.add_node("Sigmoid", [pooled], {}, 1, "gate", ["s"])[0]
    else:
        sx = g.add_input("sx", "f32", list(s_shape))
        s = g.add_node("Sigmoid", [sx], {}, 1, "gate", ["s"])[0]
    xs = g.add_node("Mul", [x, s], {}, 1, "scale", ["xs"])[0]
    w = g.add_constant("w", f32(rng, mw or m, c // group, k, k))
    bias = g.add_constant("b", f32(rng, mw or m))
    y = g.add_node("Conv", [xs, w, bias], {"group": group, "pads": [k // 2] * 4}, 1, "conv", ["y"])[0]
    outs = [y]
    if extra_reader:
        outs.append(g.add_node("Relu", [xs], {}, 1, "relu", ["r"])[0])
    g.set_outputs(outs)
    b.verify()
    return b


def inputs_of(g, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal([int(d) for d in v.shape]).astype(np.float32) for v in g.inputs]


def ops(g):
    return [n.op for n in g.nodes]


def conv_input_producer(g):
    conv = next(n for n in g.nodes if n.op == "Conv")
    p = conv.inputs[0].producer
    return None if p is None else p.op


def test_se_gate_moves_into_the_weights():
    g = se_graph()
    out = rewrite.fold_input_scale(g)
    assert conv_input_producer(g) == "Mul"
    assert conv_input_producer(out) is None  # the Conv reads x itself
    conv = next(n for n in out.nodes if n.op == "Conv")
    assert conv.inputs[1].producer.op == "Mul"  # W * s, computed per call
    ins = inputs_of(g)
    np.testing.assert_allclose(out.run_reference(*ins)[0], g.run_reference(*ins)[0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k", [1, 3])
def test_through_the_default_pipeline_and_generated_code(k):
    g = se_graph(c=24, hw=20, m=16, k=k)
    g2, report = rewrite.rewrite(g)
    assert conv_input_producer(g2) is None
    assert any(p.name == "fold_input_scale" for p in report.passes)
    ins = inputs_of(g)
    want = g.run_reference(*ins)[0]
    for planner in ("dnnfusion", "none"):
        m = df.compile(g, planner=planner, threads=2)
        np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [
    {"n": 2},                                  # a different gate per image
    {"s_shape": [1, 16, 10, 10]},              # not per channel
    {"s_shape": [1, 1, 10, 1]},                # varies along the height
    {"group": 2, "mw": 8},                     # grouped
    {"extra_reader": True},                    # x * s is read by another node too
    {"c": 64, "hw": 4, "m": 64, "k": 3},       # weights larger than half the activation
])
def test_does_not_fire(kw):
    g = se_graph(**kw)
    out = rewrite.fold_input_scale(g)
    assert conv_input_producer(out) == "Mul"
    ins = inputs_of(g)
    for a, b in zip(out.run_reference(*ins), g.run_reference(*ins)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_a_per_channel_input_of_rank_three_fires():
    g = se_graph(s_shape=[16, 1, 1])  # broadcasts against [1, 16, 10, 10] along C only
    out = rewrite.fold_input_scale(g)
    assert conv_input_producer(out) is None
    ins = inputs_of(g)
    np.testing.assert_allclose(out.run_reference(*ins)[0], g.run_reference(*ins)[0],
                               rtol=1e-5, atol=1e-5)
