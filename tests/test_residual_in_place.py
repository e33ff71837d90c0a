"""Residuals added in place (cpp/codegen/cpu/render_block.cc residuals_in_place, the memory
plan's `shares`): an anchor whose affine epilogue adds a residual that dies in its block writes
its output into the residual's bytes. Each case checks where it applies and where it must
not (the residual read later, read by the anchor itself, or read at another index), and that
the model still computes the reference, on every dialect this machine runs, including the
kernels that compute aside first (several k-blocks or channel chunks, whose partial sums would
overwrite the residual before the epilogue reads it)."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dialects import runnable


def f32(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def shared(m) -> list[str]:
    """Names of the tensors written in place of another."""
    return [b["name"] for b in m.generated.memory["buffers"] if b["shares"] >= 0]


def check(m, g, ins, rtol=1e-4, atol=1e-4):
    np.testing.assert_allclose(m(*ins), g.run_reference(*ins)[0], rtol=rtol, atol=atol)


def bottleneck(c=16, hw=10, k=3, mid=8, later_read=False, shortcut_conv=False):
    """x -> Relu -> (1x1 c->mid, Relu, kxk mid->mid, Relu, 1x1 mid->c) + r -> Relu -> 1x1 conv,
    with r the Relu'd input (or a 1x1 conv of it); `later_read`: r is also added after the Relu."""
    rng = np.random.default_rng(5)
    gg = df._core.Graph("bottleneck")
    x = gg.add_input("x", "f32", [1, c, hw, hw])
    r = gg.add_node("Relu", [x], {}, 1, "r0", ["r"])[0]
    if shortcut_conv:
        r = gg.add_node("Conv", [r, gg.add_constant("ws", f32(rng, c, c, 1, 1))], {}, 1, "s", ["rs"])[0]
    a = gg.add_node("Conv", [r, gg.add_constant("wa", f32(rng, mid, c, 1, 1)), gg.add_constant("ba", f32(rng, mid))],
                    {}, 1, "a", ["a"])[0]
    a = gg.add_node("Relu", [a], {}, 1, "ar", ["ar"])[0]
    b = gg.add_node("Conv", [a, gg.add_constant("wb", f32(rng, mid, mid, k, k)), gg.add_constant("bb", f32(rng, mid))],
                    {"pads": [k // 2] * 4}, 1, "b", ["b"])[0]
    b = gg.add_node("Relu", [b], {}, 1, "br", ["br"])[0]
    c3 = gg.add_node("Conv", [b, gg.add_constant("wc", f32(rng, c, mid, 1, 1)), gg.add_constant("bc", f32(rng, c))],
                     {}, 1, "c", ["c"])[0]
    s = gg.add_node("Add", [c3, r], {}, 1, "add", ["s"])[0]
    y = gg.add_node("Relu", [s], {}, 1, "y", ["y"])[0]
    if later_read:
        y = gg.add_node("Add", [y, r], {}, 1, "again", ["y2"])[0]
    y = gg.add_node("Conv", [y, gg.add_constant("wd", f32(rng, c, c, 1, 1))], {}, 1, "d", ["z"])[0]
    gg.set_outputs([y])
    return df.ECG(gg)


def inputs(g, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal([int(d) for d in v.shape]).astype(np.float32) for v in g.inputs]


@pytest.mark.parametrize("isa", runnable())
def test_a_bottleneck_adds_its_shortcut_in_place(isa):
    g = bottleneck()
    ins = inputs(g)
    m = df.compile(g, threads=2, layout="nhwc", isa=isa)
    assert any("NhwcConv" in s and "epilogue(2 ops)" in s for k in m.kernels for s in k["stages"]), m.kernels
    assert len(shared(m)) == 1, m.generated.memory["buffers"]
    check(m, g, ins)
    # A downsampling shortcut (a 1x1 conv of its own): the conv's output is the residual.
    g = bottleneck(shortcut_conv=True)
    m = df.compile(g, threads=2, layout="nhwc", isa=isa)
    assert len(shared(m)) == 1
    check(m, g, inputs(g))


def test_off_switch_and_the_same_numbers(monkeypatch):
    g = bottleneck()
    ins = inputs(g)
    on = df.compile(g, threads=1, layout="nhwc")
    monkeypatch.setenv("DNNF_RESIDUAL_IN_PLACE", "0")
    off = df.compile(g, threads=1, layout="nhwc")
    assert len(shared(on)) == 1 and shared(off) == []
    np.testing.assert_allclose(on(*ins), off(*ins), rtol=1e-6, atol=1e-6)


def test_a_residual_read_later_keeps_its_bytes():
    g = bottleneck(later_read=True)
    m = df.compile(g, threads=2, layout="nhwc")
    assert shared(m) == []
    check(m, g, inputs(g))


@pytest.mark.parametrize("isa", runnable())
def test_an_anchor_reading_its_own_residual_is_not_in_place(isa):
    # y = Relu(Conv(r) + r): the convolution reads r while it would write over it.
    rng = np.random.default_rng(6)
    gg = df._core.Graph("self")
    x = gg.add_input("x", "f32", [1, 16, 9, 9])
    r = gg.add_node("Relu", [x], {}, 1, "r0", ["r"])[0]
    c = gg.add_node("Conv", [r, gg.add_constant("w", f32(rng, 16, 16, 3, 3)), gg.add_constant("b", f32(rng, 16))],
                    {"pads": [1] * 4}, 1, "c", ["c"])[0]
    s = gg.add_node("Add", [c, r], {}, 1, "add", ["s"])[0]
    y = gg.add_node("Relu", [s], {}, 1, "y", ["y"])[0]
    gg.set_outputs([gg.add_node("Conv", [y, gg.add_constant("wo", f32(rng, 4, 16, 1, 1))], {}, 1, "o", ["o"])[0]])
    g = df.ECG(gg)
    m = df.compile(g, threads=2, layout="nhwc", isa=isa)
    assert shared(m) == []
    check(m, g, inputs(g))


@pytest.mark.parametrize("isa", runnable())
def test_multi_pass_kernels_compute_aside(isa):
    """K over several k-blocks (a MatMul with K = 4608, beyond the k-block the GEMM derives from any
    L1 here) and a direct convolution over several channel chunks (3x3 over 12288 channels on
    a 3x3 plane: 1.8 MB of weights per m-block even with the scalar dialect's 4 columns, past
    3/4 of a 2 MB L2) write partial sums before the epilogue: in place of the residual they
    compute aside first."""
    rng = np.random.default_rng(7)
    gg = df._core.Graph("mm")
    x = gg.add_input("x", "f32", [40, 4608])
    q = gg.add_input("q", "f32", [40, 64])
    r = gg.add_node("MatMul", [q, gg.add_constant("w2", f32(rng, 64, 96))], {}, 1, "r0", ["r"])[0]
    mm = gg.add_node("MatMul", [x, gg.add_constant("w", f32(rng, 4608, 96, scale=0.04))], {}, 1, "mm", ["mm"])[0]
    mm = gg.add_node("Add", [mm, gg.add_constant("b", f32(rng, 96))], {}, 1, "bias", ["mb"])[0]
    s = gg.add_node("Add", [mm, r], {}, 1, "add", ["s"])[0]
    y = gg.add_node("Relu", [s], {}, 1, "y", ["y"])[0]
    gg.set_outputs([gg.add_node("MatMul", [y, gg.add_constant("wo", f32(rng, 96, 8))], {}, 1, "o", ["o"])[0]])
    g = df.ECG(gg)
    m = df.compile(g, threads=2, isa=isa)
    assert len(shared(m)) == 1, m.generated.memory["buffers"]
    check(m, g, inputs(g), rtol=2e-4, atol=2e-4)

    gg = df._core.Graph("chunks")
    x = gg.add_input("x", "f32", [1, 12288, 3, 3])
    q = gg.add_input("q", "f32", [1, 8, 3, 3])
    r = gg.add_node("Conv", [q, gg.add_constant("w2", f32(rng, 32, 8, 1, 1))], {}, 1, "r0", ["r"])[0]
    c = gg.add_node("Conv", [x, gg.add_constant("w", f32(rng, 32, 12288, 3, 3, scale=0.01)),
                             gg.add_constant("b", f32(rng, 32))], {"pads": [1] * 4}, 1, "c", ["c"])[0]
    s = gg.add_node("Add", [c, r], {}, 1, "add", ["s"])[0]
    y = gg.add_node("Relu", [s], {}, 1, "y", ["y"])[0]
    gg.set_outputs([gg.add_node("Conv", [y, gg.add_constant("wo", f32(rng, 4, 32, 1, 1))], {}, 1, "o", ["o"])[0]])
    g = df.ECG(gg)
    m = df.compile(g, threads=2, layout="nhwc", isa=isa)
    assert any("NhwcConv k3" in s for k in m.kernels for s in k["stages"]), m.kernels
    assert len(shared(m)) == 1, m.generated.memory["buffers"]
    check(m, g, inputs(g), rtol=2e-4, atol=2e-4)
