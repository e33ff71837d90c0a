"""A channels-last convolution reading a channel Concat in place (InputSegments: a pointer per
input, conv_direct.h) takes the path its shape chooses: Winograd for a 3x3 stride-1 one with
enough channels (conv_winograd.h transforms each segment from where it lies; U-Net's decoder
convolutions), else the direct kernel. Checked against the reference interpreter under both
planners, with segments whose channels end mid-vector, 2-D and 3-D."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dnnfusion as df


def f32(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def concat_conv(spatial=(12, 10), c1=24, c2=40, m=40, n=2):
    """A U-Net decoder's shape: a = Relu(Conv 3x3 (c1) of x), which a MaxPool -> Conv 1x1
    (a second output) also reads, so it is not written into the Concat's bytes; z a second
    input (c2); Concat(a, z) -> Conv 3x3 (m) -> Relu, reading a and z as two segments."""
    rng = np.random.default_rng(4)
    nd = len(spatial)
    g = df._core.Graph("concat_conv")
    x = g.add_input("x", "f32", [n, 8, *spatial])
    z = g.add_input("z", "f32", [n, c2, *spatial])
    pads = {"pads": [1] * (2 * nd)}
    a = g.add_node("Conv", [x, g.add_constant("wa", f32(rng, c1, 8, *[3] * nd))], pads, 1, "a", ["a"])[0]
    a = g.add_node("Relu", [a], {}, 1, "ra", ["ra"])[0]
    p = g.add_node("MaxPool", [a], {"kernel_shape": [2] * nd, "strides": [2] * nd}, 1, "pool", ["p"])[0]
    p = g.add_node("Conv", [p, g.add_constant("wp", f32(rng, 8, c1, *[1] * nd))], {}, 1, "pc", ["pc"])[0]
    cat = g.add_node("Concat", [a, z], {"axis": 1}, 1, "cat", ["cat"])[0]
    y = g.add_node("Conv", [cat, g.add_constant("wy", f32(rng, m, c1 + c2, *[3] * nd)), g.add_constant("by", f32(rng, m))],
                   pads, 1, "y", ["y"])[0]
    y = g.add_node("Relu", [y], {}, 1, "ry", ["out"])[0]
    g.set_outputs([y, p])
    e = df.ECG(g)
    e.verify()
    return e


def segmented_calls(src):
    """The path sets (NhwcPath bits) of the calls that read InputSegments."""
    return [int(p) for p in re.findall(r"conv_nhwc_paths_f32<(\d+)>\([^;]*InputSegments", src)]


@pytest.mark.parametrize("spatial,c1,c2", [((12, 10), 24, 40), ((9, 11), 32, 32), ((3, 8, 9), 16, 24)])
@pytest.mark.parametrize("planner", ["dnnfusion", "none"])
@pytest.mark.parametrize("winograd", ["auto", "0"])
def test_a_concat_read_in_place_takes_its_shapes_path(spatial, c1, c2, planner, winograd, monkeypatch):
    if winograd == "0":
        monkeypatch.setenv("DNNF_WINOGRAD", "0")
    else:
        monkeypatch.delenv("DNNF_WINOGRAD", raising=False)
    e = concat_conv(spatial, c1, c2)
    rng = np.random.default_rng(7)
    ins = [rng.standard_normal([int(d) for d in v.shape]).astype(np.float32) for v in e.inputs]
    want = e.run_reference(*ins)
    m = df.compile(e, threads=2, layout="nhwc", planner=planner)
    if planner == "dnnfusion":  # under "none" the Concat is a block of its own, its copy dense
        assert segmented_calls(m.source()) == [2 if winograd == "auto" else 1]  # Winograd, direct (NhwcPath)
    for got, ref in zip(m(*ins), want):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_a_strided_1x1_compiles_both_paths_its_l2_chooses_between():
    """A strided 1x1 convolution runs as a GEMM where its weights fill half of L2 or more, else
    on the direct kernel (conv_shape.h gemm_pointwise): the module is generated with both, since
    it asks the machine again when it packs the weights. Here a 2 MiB one (a GEMM on every
    L2 up to 4 MiB) and a small one, after each other, against the reference interpreter."""
    rng = np.random.default_rng(5)
    g = df._core.Graph("strided_1x1")
    x = g.add_input("x", "f32", [1, 512, 9, 7])
    big = g.add_node("Conv", [x, g.add_constant("wb", f32(rng, 1024, 512, 1, 1, scale=0.05))],
                     {"strides": [2, 3]}, 1, "big", ["big"])[0]
    big = g.add_node("Relu", [big], {}, 1, "rb", ["rb"])[0]
    small = g.add_node("Conv", [big, g.add_constant("ws", f32(rng, 24, 1024, 1, 1, scale=0.05))],
                       {"strides": [2, 2]}, 1, "small", ["out"])[0]
    g.set_outputs([small])
    e = df.ECG(g)
    e.verify()
    ins = [f32(rng, 1, 512, 9, 7, scale=1.0)]
    want = e.run_reference(*ins)
    m = df.compile(e, threads=2, layout="nhwc")
    sets = [int(p) for p in re.findall(r"conv_nhwc_paths_f32<(\d+)>", m.source())]
    assert sets == [9, 9], sets  # NhwcPath Direct | Pointwise, each
    got = m(*ins)
    np.testing.assert_allclose(got[0] if isinstance(got, list) else got, want[0], rtol=1e-4, atol=1e-4)
