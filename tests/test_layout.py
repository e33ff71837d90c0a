"""Inter-block layout (cpp/rewrite/layout.cc, paper §4.4): regions of convolutions run
channels last (NhwcConv) with Transposes only at their border. Checked against the reference
interpreter, through generated code under every planner, and on what it must not touch."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import rewrite


def f32(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def mbconv_graph(n=1, c=24, hw=28, expand=4, stride=1, residual=True, se=True, clip=True):
    """A MobileNetV2/EfficientNet block: 1x1 expand -> ReLU6 -> depthwise 3x3 -> (SE gate) ->
    1x1 project (+ the input), with a per-channel constant Mul on the way."""
    rng = np.random.default_rng(0)
    g = df._core.Graph("mbconv")
    x = g.add_input("x", "f32", [n, c, hw, hw])
    e = c * expand
    y = g.add_node("Conv", [x, g.add_constant("w1", f32(rng, e, c, 1, 1)), g.add_constant("b1", f32(rng, e))],
                   {}, 1, "expand", ["y1"])[0]
    if clip:
        lo, hi = g.add_constant("lo", np.float32(0)), g.add_constant("hi", np.float32(6))
        y = g.add_node("Clip", [y, lo, hi], {}, 1, "relu6", ["y1c"])[0]
    else:
        y = g.add_node("Relu", [y], {}, 1, "relu", ["y1c"])[0]
    y = g.add_node("Conv", [y, g.add_constant("wd", f32(rng, e, 1, 3, 3)), g.add_constant("bd", f32(rng, e))],
                   {"group": e, "pads": [1, 1, 1, 1], "strides": [stride, stride]}, 1, "dw", ["y2"])[0]
    y = g.add_node("Mul", [y, g.add_constant("scale", f32(rng, e, 1, 1))], {}, 1, "chscale", ["y2s"])[0]
    if se:
        p = g.add_node("GlobalAveragePool", [y], {}, 1, "se.pool", ["sp"])[0]
        s = g.add_node("Sigmoid", [p], {}, 1, "se.gate", ["sg"])[0]
        y = g.add_node("Mul", [y, s], {}, 1, "se.scale", ["y2g"])[0]
    y = g.add_node("Conv", [y, g.add_constant("w3", f32(rng, c, e, 1, 1))], {}, 1, "project", ["y3"])[0]
    if residual and stride == 1:
        y = g.add_node("Add", [y, x], {}, 1, "residual", ["y4"])[0]
    g.set_outputs([y])
    ecg = df.ECG(g)
    ecg.verify()
    return ecg


def conv_graph(xshape, wshape, attrs, bias=True, act="Relu"):
    rng = np.random.default_rng(1)
    g = df._core.Graph("conv")
    x = g.add_input("x", "f32", list(xshape))
    ins = [x, g.add_constant("w", f32(rng, *wshape))]
    if bias:
        ins.append(g.add_constant("b", f32(rng, wshape[0])))
    y = g.add_node("Conv", ins, attrs, 1, "conv", ["y"])[0]
    if act:
        y = g.add_node(act, [y], {}, 1, "act", ["z"])[0]
    g.set_outputs([y])
    return df.ECG(g)


def inputs_of(g, seed=2):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal([int(d) for d in v.shape]).astype(np.float32) for v in g.inputs]


def ops(g):
    return [n.op for n in g.nodes]


def test_a_region_goes_channels_last_with_one_transpose_each_way():
    g = mbconv_graph(se=False)
    out, rep = rewrite.select_layout(g, "nhwc")
    assert ops(out).count("NhwcConv") == 3 and "Conv" not in ops(out)
    # x is read by the expand conv and the residual Add: transposed in once; y4 out once.
    assert ops(out).count("Transpose") == 2
    assert rep["convs_nhwc"] == 3 and rep["transposes_in"] == 1 and rep["transposes_out"] == 1
    # The per-channel constant is permuted in place ([e,1,1] -> [1,1,1,e]), not transposed per call.
    mul = next(n for n in out.nodes if n.op == "Mul")
    assert [int(d) for d in mul.inputs[1].shape] == [1, 1, 1, 96]
    ins = inputs_of(g)
    np.testing.assert_allclose(out.run_reference(*ins)[0], g.run_reference(*ins)[0], rtol=1e-5, atol=1e-5)


def test_a_squeeze_and_excitation_gate_stays_channels_last():
    g = mbconv_graph(se=True)
    out, rep = rewrite.select_layout(g, "nhwc")
    # The gate's GlobalAveragePool becomes a ReduceMean over the spatial axes of the
    # channels-last value; its [1,1,1,e] result is already the gate's channels-last image.
    assert rep["convs_nhwc"] == 3 and "GlobalAveragePool" not in ops(out)
    red = next(n for n in out.nodes if n.op == "ReduceMean")
    assert [int(d) for d in red.outputs[0].shape] == [1, 1, 1, 96]
    assert ops(out).count("Transpose") == 2  # x in, y4 out
    ins = inputs_of(g)
    np.testing.assert_allclose(out.run_reference(*ins)[0], g.run_reference(*ins)[0], rtol=1e-5, atol=1e-5)


def test_a_computed_broadcast_operand_from_outside_is_transposed():
    rng = np.random.default_rng(4)
    gg = df._core.Graph("bc")
    x = gg.add_input("x", "f32", [1, 8, 6, 6])
    s = gg.add_input("s", "f32", [8, 1, 1])  # rank 3 against rank 4: reshaped, then transposed
    y = gg.add_node("Conv", [x, gg.add_constant("w", f32(rng, 8, 8, 3, 3))], {"pads": [1] * 4}, 1, "c", ["y"])[0]
    gg.set_outputs([gg.add_node("Mul", [y, s], {}, 1, "m", ["z"])[0]])
    e = df.ECG(gg)
    out, rep = rewrite.select_layout(e, "nhwc")
    assert rep["transposes_in"] == 2 and "Reshape" in ops(out)
    ins = inputs_of(e)
    np.testing.assert_allclose(out.run_reference(*ins)[0], e.run_reference(*ins)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pool,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4}),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1],
                     "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1] * 4}),
])
def test_a_pool_between_convs_stays_in_the_region(pool, attrs):
    # Conv -> Relu -> pool -> Conv: one region (NhwcMaxPool / NhwcAveragePool), transposed
    # once in and once out; the epilogue after the pool (Add of a constant) fuses into it.
    rng = np.random.default_rng(8)
    gg = df._core.Graph("pool")
    x = gg.add_input("x", "f32", [2, 5, 15, 13])
    a = gg.add_node("Conv", [x, gg.add_constant("wa", f32(rng, 20, 5, 3, 3))], {"pads": [1] * 4}, 1, "a", ["a"])[0]
    r = gg.add_node("Relu", [a], {}, 1, "r", ["r"])[0]
    p = gg.add_node(pool, [r], attrs, 1, "p", ["p"])[0]
    q = gg.add_node("Add", [p, gg.add_constant("bias", f32(rng, 20, 1, 1))], {}, 1, "q", ["q"])[0]
    y = gg.add_node("Conv", [q, gg.add_constant("wb", f32(rng, 7, 20, 1, 1))], {}, 1, "b", ["y"])[0]
    gg.set_outputs([y])
    e = df.ECG(gg)
    out, rep = rewrite.select_layout(e, "nhwc")
    assert "Nhwc" + pool in ops(out) and pool not in ops(out)
    assert len(rep["regions"]) == 1 and ops(out).count("Transpose") == 2
    ins = inputs_of(e)
    want = e.run_reference(*ins)[0]
    np.testing.assert_allclose(out.run_reference(*ins)[0], want, rtol=1e-5, atol=1e-5)
    for planner in ("dnnfusion", "none"):
        m = df.compile(e, threads=2, layout="nhwc", planner=planner)
        assert any(n.op == "Nhwc" + pool for n in m.graph.nodes)
        np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("widths,vector", [((16, 32), True), ((16, 8), True), ((8, 16), False)])
def test_a_channels_last_concat_runs_on_vectors_when_its_inputs_are_whole_vectors(widths, vector, monkeypatch):
    # Concat along the channels is the innermost axis channels last: a vector loop when every
    # input but the last is a multiple of 16 channels wide (auto then takes it into the
    # region), else a scalar loop (auto leaves it out; nhwc mode still takes it). The loop runs
    # where the convolutions do not write rows of the Concat (DNNF_CONCAT_ROWS=0 here; by
    # default they do, and nothing copies the Concat).
    rng = np.random.default_rng(10)
    gg = df._core.Graph("cat")
    x = gg.add_input("x", "f32", [1, 8, 12, 12])
    parts = [gg.add_node("Conv", [x, gg.add_constant(f"w{i}", f32(rng, c, 8, 3, 3))], {"pads": [1] * 4}, 1,
                         f"c{i}", [f"p{i}"])[0] for i, c in enumerate(widths)]
    cat = gg.add_node("Concat", parts, {"axis": 1}, 1, "cat", ["cat"])[0]
    y = gg.add_node("Conv", [cat, gg.add_constant("wy", f32(rng, 4, sum(widths), 3, 3))], {"pads": [1] * 4}, 1,
                    "cy", ["y"])[0]
    gg.set_outputs([y])
    e = df.ECG(gg)
    ins = inputs_of(e)
    want = e.run_reference(*ins)[0]
    regions = rewrite.select_layout(e, "auto")[1]["regions"]
    assert (max(r["convs"] for r in regions) == 3) == vector  # one region through the Concat
    m = df.compile(e, threads=2, layout="nhwc", planner="none")
    stages = [s for k in m.kernels for s in k["stages"]]
    assert not any(" loop " in s for s in stages), stages  # each convolution writes its rows
    np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-5)
    monkeypatch.setenv("DNNF_CONCAT_ROWS", "0")
    m = df.compile(e, threads=2, layout="nhwc", planner="none")
    stages = [s for k in m.kernels for s in k["stages"]]
    loops = [s for s in stages if s.endswith(f" loop f32[{144 * sum(widths)}]")]  # the Concat
    assert len(loops) == 1 and loops[0].startswith("vector" if vector else "scalar"), stages
    np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-5)


def test_a_max_pool_whose_indices_are_read_stays_channels_first():
    rng = np.random.default_rng(9)
    gg = df._core.Graph("idx")
    x = gg.add_input("x", "f32", [1, 4, 8, 8])
    a = gg.add_node("Conv", [x, gg.add_constant("w", f32(rng, 4, 4, 3, 3))], {"pads": [1] * 4}, 1, "a", ["a"])[0]
    y, i = gg.add_node("MaxPool", [a], {"kernel_shape": [2, 2], "strides": [2, 2]}, 2, "p", ["y", "i"])
    gg.set_outputs([y, i])
    out, _ = rewrite.select_layout(df.ECG(gg), "nhwc")
    assert "MaxPool" in ops(out) and "NhwcMaxPool" not in ops(out)


@pytest.mark.parametrize("axis", [1, -1, 2])
def test_concat_joins_regions_on_its_new_axis(axis):
    rng = np.random.default_rng(5)
    gg = df._core.Graph("cat")
    x = gg.add_input("x", "f32", [2, 6, 8, 8])
    a = gg.add_node("Conv", [x, gg.add_constant("wa", f32(rng, 4, 6, 1, 1))], {}, 1, "a", ["a"])[0]
    b = gg.add_node("Conv", [x, gg.add_constant("wb", f32(rng, 4, 6, 3, 3))], {"pads": [1] * 4}, 1, "b", ["b"])[0]
    c = gg.add_node("Concat", [a, b], {"axis": axis}, 1, "cat", ["c"])[0]
    cin = 8 if axis == 1 else 4
    wshape = (5, cin, 3, 3)
    y = gg.add_node("Conv", [c, gg.add_constant("wc", f32(rng, *wshape))], {"pads": [1] * 4}, 1, "c2", ["y"])[0]
    gg.set_outputs([gg.add_node("Relu", [y], {}, 1, "r", ["z"])[0]])
    e = df.ECG(gg)
    out, rep = rewrite.select_layout(e, "nhwc")
    assert len(rep["regions"]) == 1 and ops(out).count("Transpose") == 2  # x in, z out
    cat = next(n for n in out.nodes if n.op == "Concat")
    assert cat.attrs["axis"] == {1: 3, -1: 2, 2: 1}[axis]
    ins = inputs_of(e)
    want = e.run_reference(*ins)[0]
    np.testing.assert_allclose(out.run_reference(*ins)[0], want, rtol=1e-5, atol=1e-5)
    m = df.compile(e, threads=2, layout="nhwc")
    np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceSum"])
@pytest.mark.parametrize("keepdims,rank", [(0, 5), (1, 5), (0, 4), (1, 4)])
def test_a_reduction_over_the_spatial_axes_stays_in_the_region(op, keepdims, rank):
    # A classifier's mean over time and space (S3D: Conv3d -> mean over dims 2, 3, 4) reduces
    # the spatial axes channels last (1 .. r-2): without keepdims its [N, C] is the result
    # itself, so nothing transposes it back (the region's only transposes are x in and, with
    # keepdims, the [N, 1.., C] image out).
    rng = np.random.default_rng(11)
    gg = df._core.Graph("red")
    spatial = [3, 5, 4][5 - rank:]
    x = gg.add_input("x", "f32", [1, 6, *spatial])
    k = [1] * (rank - 2)
    c = gg.add_node("Conv", [x, gg.add_constant("w", f32(rng, 7, 6, *k))], {}, 1, "c", ["c"])[0]
    axes = gg.add_constant("axes", np.array(list(range(2, rank)), dtype=np.int64))
    y = gg.add_node(op, [c, axes], {"keepdims": keepdims}, 1, "m", ["y"])[0]
    gg.set_outputs([y])
    e = df.ECG(gg)
    out, rep = rewrite.select_layout(e, "nhwc")
    assert ops(out).count("NhwcConv") == 1 and ops(out).count("Transpose") == 2 - (keepdims == 0), ops(out)
    ins = inputs_of(e)
    want = e.run_reference(*ins)[0]
    assert out.outputs[0].name == "y" and list(out.outputs[0].shape) == list(want.shape)
    np.testing.assert_allclose(out.run_reference(*ins)[0], want, rtol=1e-5, atol=1e-5)
    m = df.compile(e, threads=2, layout="nhwc")
    np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-5)


def test_nchw_mode_and_regions_without_convs_change_nothing():
    g = mbconv_graph()
    out, rep = rewrite.select_layout(g, "nchw")
    assert ops(out) == ops(g) and rep["regions"] == []
    rng = np.random.default_rng(0)
    gg = df._core.Graph("ew")
    x = gg.add_input("x", "f32", [1, 8, 4, 4])
    y = gg.add_node("Mul", [x, gg.add_constant("s", f32(rng, 8, 1, 1))], {}, 1, "mul", ["y"])[0]
    gg.set_outputs([gg.add_node("Relu", [y], {}, 1, "relu", ["z"])[0]])
    e = df.ECG(gg)
    for mode in ("auto", "nhwc"):
        assert ops(rewrite.select_layout(e, mode)[0]) == ["Mul", "Relu"]


def test_auto_follows_the_cost_model():
    # A block with a stride-2 depthwise conv on a large plane gains more than its two
    # transposes cost ...
    big, rep = rewrite.select_layout(mbconv_graph(c=24, hw=112, expand=6, stride=2, se=False), "auto")
    assert rep["regions"][0]["gain_us"] > rep["regions"][0]["cost_us"]
    assert "NhwcConv" in ops(big)
    # ... a stem conv on the image (3 input channels) alone gains less than its two
    # transposes cost, so auto leaves it channels first (nhwc mode takes it).
    stem = conv_graph([1, 3, 64, 64], [16, 3, 3, 3], {"pads": [1] * 4, "strides": [2, 2]})
    out, rep = rewrite.select_layout(stem, "auto")
    assert not any(r["nhwc"] for r in rep["regions"]) and ops(out) == ops(stem)
    assert all(r["gain_us"] < r["cost_us"] for r in rep["regions"])
    assert rewrite.select_layout(stem, "nhwc")[1]["convs_nhwc"] == 1
    # The model itself: depthwise convolutions are cheaper channels last.
    dw = dict(C=144, M=144, group=144, taps=9, stride=2, in_pixels=56 * 56, out_pixels=28 * 28)
    assert df._core.layout_conv_us(**dw, nhwc=True) < df._core.layout_conv_us(**dw, nhwc=False)


def test_bad_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="layout must be"):
        rewrite.select_layout(mbconv_graph(), "nchwc")
    with pytest.raises(df.Error, match="unknown layout"):
        df.compile(mbconv_graph(), layout="NHWC")


# ---- Through generated code ---------------------------------------------------------------

@pytest.mark.parametrize("planner", ["dnnfusion", "none", "patterns", "tvm", "dp"])
def test_compiled_regions_match_the_reference(planner):
    g = mbconv_graph(n=2, c=16, hw=13, expand=3)
    ins = inputs_of(g)
    want = g.run_reference(*ins)[0]
    m = df.compile(g, planner=planner, threads=2, layout="nhwc")
    assert m.stats["layout"]["convs_nhwc"] == 3
    assert any(n.op == "NhwcConv" for n in m.graph.nodes)
    np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-4)


def test_roi_aligns_read_a_channels_last_feature_map_in_place():
    """Two heads (7x7 and 14x14, as Mask R-CNN's box and mask branches) sample one feature
    map of a channels-last region: both become NhwcRoiAlign reading the region's value in
    place, so no channels-first copy of the map is written (it was, by the conv's epilogue)."""
    rng = np.random.default_rng(6)
    g = df._core.Graph("heads")
    x = g.add_input("x", "f32", [1, 8, 20, 18])
    rois = g.add_input("rois", "f32", [5, 4])
    bidx = g.add_constant("bidx", np.zeros(5, np.int64))
    y = g.add_node("Conv", [x, g.add_constant("w", f32(rng, 24, 8, 3, 3))], {"pads": [1] * 4}, 1, "conv", ["f"])[0]
    y = g.add_node("Relu", [y], {}, 1, "act", ["fr"])[0]
    outs = [g.add_node("RoiAlign", [y, rois, bidx], {"output_height": k, "output_width": k, "sampling_ratio": 2,
                                                       "spatial_scale": 0.5}, 1, f"roi{k}", [f"r{k}"])[0]
            for k in (7, 14)]
    g.set_outputs(outs)
    ecg = df.ECG(g)
    xy = rng.uniform(0, 20, (5, 2))
    r = np.concatenate([xy, xy + rng.uniform(4, 16, (5, 2))], axis=1).astype(np.float32)
    ins = [f32(rng, 1, 8, 20, 18, scale=1.0), r]
    want = ecg.run_reference(*ins)
    out, rep = rewrite.select_layout(ecg, "nhwc")
    assert ops(out).count("NhwcRoiAlign") == 2 and "RoiAlign" not in ops(out)
    assert rep["roi_aligns_nhwc"] == 2 and rep["transposes_out"] == 0
    for a, b in zip(out.run_reference(*ins), want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    for planner in ("dnnfusion", "none"):
        m = df.compile(ecg, threads=2, layout="nhwc", profile="off", planner=planner)
        if planner == "dnnfusion":
            # the map (8640 values) is written once, channels last (before, the conv's epilogue
            # also wrote a channels-first copy: 80640 bytes); the convolution reads the input
            # channels first where it lies (it was transposed first: 2880 values more)
            assert m.stats["intermediate_bytes_written"] == 8640 * 4
        for a, b in zip(m(*ins), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [
    # (x shape, w shape, attrs): strides, pads, dilations, 1-D and 3-D, odd channel counts,
    # grouped (not depthwise: only the forced mode takes it), auto_pad.
    ([2, 7, 9, 11], [5, 7, 3, 3], {"pads": [1, 0, 1, 2], "strides": [2, 1]}),
    ([1, 19, 15, 15], [19, 1, 5, 5], {"group": 19, "pads": [2] * 4, "dilations": [1, 1]}),
    ([1, 33, 12, 12], [33, 1, 3, 3], {"group": 33, "pads": [2] * 4, "dilations": [2, 2]}),
    ([1, 16, 14, 14], [24, 16, 1, 1], {"strides": [2, 2]}),
    ([1, 3, 30, 30], [8, 3, 7, 7], {"pads": [3] * 4, "strides": [2, 2]}),
    ([1, 12, 10, 10], [8, 3, 3, 3], {"group": 4, "auto_pad": "SAME_UPPER"}),
    ([2, 6, 40], [10, 6, 5], {"pads": [2, 2], "strides": [3]}),
    ([1, 4, 6, 7, 8], [5, 4, 3, 3, 3], {"pads": [1] * 6}),
])
@pytest.mark.parametrize("bias", [True, False])
def test_nhwc_conv_kernels_match_the_reference(case, bias):
    xs, ws, attrs = case
    g = conv_graph(xs, ws, attrs, bias=bias, act="Sigmoid")
    ins = inputs_of(g)
    m = df.compile(g, threads=2, layout="nhwc")
    assert m.stats["layout"]["convs_nhwc"] == 1
    np.testing.assert_allclose(m(*ins), g.run_reference(*ins)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", [
    # Depthwise planes whose pixels lie 2 KiB apart (512 channels, or 256 at stride 2): on AVX2
    # the interior then takes two channel vectors a step (conv_nhwc.h, dw_aliases); widths that
    # leave pixels to the 4-pixel loop and the edges, two images.
    ([2, 512, 9, 11], [512, 1, 3, 3], {"group": 512, "pads": [1] * 4}),
    ([1, 256, 13, 10], [256, 1, 3, 3], {"group": 256, "pads": [1] * 4, "strides": [2, 2]}),
])
@pytest.mark.parametrize("act", ["Relu", "Sigmoid"])  # stored in registers / through the row buffer
def test_nhwc_depthwise_with_aliasing_pixels_matches_the_reference(case, act):
    xs, ws, attrs = case
    g = conv_graph(xs, ws, attrs, bias=True, act=act)
    ins = inputs_of(g)
    m = df.compile(g, threads=2, layout="nhwc")
    assert m.stats["layout"]["convs_nhwc"] == 1
    np.testing.assert_allclose(m(*ins), g.run_reference(*ins)[0], rtol=1e-4, atol=1e-5)


def test_computed_weights_are_packed_per_call():
    # Conv(x * s) with an SE gate becomes Conv(x, W * s) (fold_input_scale): channels last,
    # the NhwcConv then reads weights computed in the same run.
    rng = np.random.default_rng(3)
    g = df._core.Graph("se")
    x = g.add_input("x", "f32", [1, 32, 20, 20])
    s = g.add_node("Sigmoid", [g.add_node("GlobalAveragePool", [x], {}, 1, "gap", ["p"])[0]], {}, 1, "gate", ["s"])[0]
    xs = g.add_node("Mul", [x, s], {}, 1, "scale", ["xs"])[0]
    y = g.add_node("Conv", [xs, g.add_constant("w", f32(rng, 8, 32, 1, 1))], {}, 1, "conv", ["y"])[0]
    g.set_outputs([g.add_node("Relu", [y], {}, 1, "relu", ["z"])[0]])
    e = df.ECG(g)
    ins = inputs_of(e)
    m = df.compile(e, threads=2, layout="nhwc")
    conv = next(n for n in m.graph.nodes if n.op == "NhwcConv")
    assert conv.inputs[1].producer is not None  # W * s, computed
    np.testing.assert_allclose(m(*ins), e.run_reference(*ins)[0], rtol=1e-4, atol=1e-5)


def test_tiny_convnet_every_layout():
    from dnnfusion import builtin

    g = builtin.tiny_convnet(batch=2)
    ins = inputs_of(g)
    want = g.run_reference(*ins)[0]
    for layout in ("auto", "nhwc", "nchw"):
        m = df.compile(g, threads=2, layout=layout)
        assert m.stats["layout"]["mode"] == layout
        np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-5)


def test_onnx_files_cannot_name_the_internal_op():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 4, 1, 1], np.ones(12, np.float32))
    model = helper.make_model(helper.make_graph([helper.make_node("NhwcConv", ["x", "w"], ["y"])],
                                                "g", [x], [y], [w]))
    with pytest.raises(df.UnsupportedOperatorError, match="'NhwcConv'.*does not support"):
        df.load(model.SerializeToString())
