"""The channels-last depthwise convolution computes two output rows at once where both windows
are whole 3x3 stride-1 windows and its epilogue stores from registers (conv_nhwc_dw.h,
depthwise_row_pair on AVX-512; one row at a time elsewhere): against the NumPy reference on
planes whose row counts split into pairs and leftovers differently per thread count, with
bias, ReLU, clip and a residual, in every dialect this machine runs."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

from codegen_runner import compile_only as compile_for  # noqa: E402
from dialects import compile_only, params  # noqa: E402


def _f32(rng, *shape, scale=0.3):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def _block(n, c, h, w, act, stride=1):
    """1x1 -> depthwise 3x3 (bias) -> act -> 1x1, channels last in between (layout="nhwc")."""
    rng = np.random.default_rng(h * 100 + w)
    g = df._core.Graph("dw")
    x = g.add_input("x", "f32", [n, c, h, w])
    a = g.add_node("Conv", [x, g.add_constant("wa", _f32(rng, c, c, 1, 1))], {}, 1, "pw1", ["a"])[0]
    d = g.add_node("Conv", [a, g.add_constant("wd", _f32(rng, c, 1, 3, 3)), g.add_constant("bd", _f32(rng, c))],
                   {"group": c, "pads": [1] * 4, "strides": [stride] * 2}, 1, "dw", ["d"])[0]
    if act == "relu":
        d = g.add_node("Relu", [d], {}, 1, "act", ["r"])[0]
    elif act == "clip":
        d = g.add_node("Clip", [d, g.add_constant("lo", np.array(0, np.float32)),
                                g.add_constant("hi", np.array(0.5, np.float32))], {}, 1, "act", ["r"])[0]
    elif act == "residual":
        d = g.add_node("Add", [d, a], {}, 1, "res", ["r"])[0]
    y = g.add_node("Conv", [d, g.add_constant("wb", _f32(rng, 8, c, 1, 1))], {}, 1, "pw2", ["y"])[0]
    g.set_outputs([y])
    return df.ECG(g), _f32(rng, n, c, h, w, scale=1.0)


# Pairs with whole 8-pixel blocks and leftovers (9x20, 12x17, 8x24; two images of 10x9 rows too
# narrow for a block), each epilogue on a pair shape, and planes where no pair forms: too few
# rows (3x9, 2x8), a row too narrow (6x3), channels not whole vectors (40).
@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("n,c,h,w,act", [(1, 32, 9, 20, "clip"), (1, 16, 12, 17, "relu"), (1, 64, 8, 24, "residual"),
                                         (2, 32, 10, 9, "relu"), (1, 48, 6, 3, "relu"), (1, 64, 3, 9, "clip"),
                                         (1, 32, 2, 8, "residual"), (2, 40, 7, 12, "clip")])
def test_depthwise_rows_match_the_reference(n, c, h, w, act, isa):
    ecg, x = _block(n, c, h, w, act)
    want = ecg.run_reference(x)[0]
    if compile_only(isa):  # a dialect this CPU lacks: the channels-last module generated and compiled, not run
        gen = compile_for(df.rewrite.select_layout(ecg, "nhwc")[0], "dnnfusion", isa)
        # the call of the depthwise path (conv_shape.h: NhwcPath::Depthwise = 4), with its unit
        src = gen["source"]
        assert "conv_nhwc_paths_f32<4>" in src and "nhwcdw" in src.splitlines()[1], src[:300]
        assert any(f"NhwcConv k3 s1 g{c}" in s for k in gen["kernels"] for s in k["stages"]), gen["kernels"]
        return
    m = df.compile(ecg, threads=1, isa=isa, layout="nhwc")
    assert any(f"NhwcConv k3 s1 g{c}" in s for k in m.kernels for s in k["stages"]), m.kernels
    for threads in (1, 2, 3):  # tasks of rows split differently: pairs across task edges never form
        m.set_num_threads(threads)
        np.testing.assert_allclose(m(x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride", [1, 2])
def test_a_bias_only_epilogue_and_stride_two(stride):
    """A bias alone also stores from registers (pairs at stride 1); stride 2 keeps one row at a
    time. The reference's results either way."""
    ecg, x = _block(1, 32, 10, 10, "none", stride=stride)
    m = df.compile(ecg, threads=2, layout="nhwc")
    np.testing.assert_allclose(m(x), ecg.run_reference(x)[0], rtol=1e-4, atol=1e-4)
