"""Up-convolutions in a channels-last region (cpp/rewrite/layout.cc, conv_transpose.cc): a
ConvTranspose whose windows do not overlap becomes a 1x1 NhwcConv and a DepthToSpace, a
Reshape/Transpose/Reshape of the channels-last image that the index algebra reads as whole
vectors (cpp/codegen/index.cc); channels first it stays a ConvTranspose. Checked against the
reference interpreter, through generated code under every planner, against PyTorch, and on
the cases where it must not fire."""

from __future__ import annotations

import io

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import rewrite


def f32(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def up_graph(n=1, c=12, m=8, hw=(5, 7), k=(2, 2), attrs=None, bias=True, conv_around=True,
             const_w=True, seed=0):
    """[Conv 3x3 ->] ConvTranspose(k, attrs) [-> Relu -> Conv 3x3]."""
    rng = np.random.default_rng(seed)
    g = df._core.Graph("up")
    x = g.add_input("x", "f32", [n, c, *hw])
    y = x
    if conv_around:
        y = g.add_node("Conv", [y, g.add_constant("w0", f32(rng, c, c, 3, 3))], {"pads": [1] * 4}, 1, "c0",
                       ["y0"])[0]
    a = {"strides": list(k)} if attrs is None else attrs
    w = g.add_constant("wt", f32(rng, c, m, *k)) if const_w else g.add_input("wt", "f32", [c, m, *k])
    ins = [y, w] + ([g.add_constant("bt", f32(rng, m * a.get("group", 1)))] if bias else [])
    y = g.add_node("ConvTranspose", ins, a, 1, "up", ["u"])[0]
    if conv_around:
        y = g.add_node("Relu", [y], {}, 1, "r", ["r"])[0]
        y = g.add_node("Conv", [y, g.add_constant("w1", f32(rng, 5, m * a.get("group", 1), 3, 3))], {"pads": [1] * 4}, 1, "c1",
                       ["y1"])[0]
    g.set_outputs([y])
    e = df.ECG(g)
    e.verify()
    return e


def inputs_of(g, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal([int(d) for d in v.shape]).astype(np.float32) for v in g.inputs]


def ops(g):
    return [n.op for n in g.nodes]


@pytest.mark.parametrize("k,n,bias", [((2, 2), 1, True), ((3, 3), 2, False), ((2, 2), 2, False), ((4, 4), 1, True)])
def test_a_non_overlapping_up_convolution_goes_channels_last_as_a_pointwise_conv(k, n, bias):
    e = up_graph(n=n, k=k, bias=bias, conv_around=False)
    out, rep = rewrite.select_layout(e, "nhwc")
    assert ops(out) == ["Transpose", "NhwcConv", "Reshape", "Transpose", "Reshape", "Transpose"]
    conv = out.nodes[1]
    assert [int(d) for d in conv.inputs[1].shape] == [k[0] * k[1] * 8, 12, 1, 1]
    assert len(conv.inputs) == (3 if bias else 2) and rep["convs_nhwc"] == 1
    ins = inputs_of(e)
    np.testing.assert_allclose(out.run_reference(*ins)[0], e.run_reference(*ins)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k,attrs", [
    ((3, 3), {"strides": [2, 2]}),                              # windows overlap
    ((2, 2), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),        # padding
    ((2, 2), {"strides": [2, 2], "output_padding": [1, 1]}),    # output padding
    ((2, 2), {"strides": [2, 2], "dilations": [2, 2]}),         # dilation
    ((2, 2), {"strides": [2, 2], "group": 2}),                  # groups
    ((2, 3), {"strides": [2, 3]}),                              # not square (DepthToSpace has one block size)
    ((1, 1), {"strides": [1, 1]}),                              # no upsampling
])
def test_other_conv_transposes_stay_channels_first(k, attrs):
    e = up_graph(k=k, attrs=attrs)
    out, _ = rewrite.select_layout(e, "nhwc")
    assert ops(out).count("ConvTranspose") == 1 and "DepthToSpace" not in ops(out)
    ins = inputs_of(e)
    np.testing.assert_allclose(out.run_reference(*ins)[0], e.run_reference(*ins)[0], rtol=1e-5, atol=1e-5)


def test_computed_weights_and_channels_first_regions_keep_the_conv_transpose():
    e = up_graph(conv_around=False, const_w=False)
    assert ops(rewrite.select_layout(e, "nhwc")[0]) == ["ConvTranspose"]
    e = up_graph()
    assert ops(rewrite.select_layout(e, "nchw")[0]) == ["Conv", "ConvTranspose", "Relu", "Conv"]


@pytest.mark.parametrize("planner", ["dnnfusion", "none"])
def test_the_up_convolution_stays_in_its_channels_last_region(planner):
    # Conv -> ConvTranspose -> Relu -> Conv: one channels-last region, transposed once in and
    # once out, the DepthToSpace a Reshape/Transpose/Reshape of the channels-last image.
    e = up_graph(n=2, c=16, m=16, hw=(6, 9))
    out, rep = rewrite.select_layout(e, "nhwc")
    assert "ConvTranspose" not in ops(out) and "DepthToSpace" not in ops(out) and len(rep["regions"]) == 1
    assert ops(out).count("NhwcConv") == 3 and ops(out).count("Transpose") == 3  # in, out, and the blocks'
    ins = inputs_of(e)
    want = e.run_reference(*ins)[0]
    np.testing.assert_allclose(out.run_reference(*ins)[0], want, rtol=1e-5, atol=1e-5)
    m = df.compile(e, threads=2, layout="nhwc", planner=planner)
    assert not any(n.op in ("ConvTranspose", "DepthToSpace") for n in m.graph.nodes)
    np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_between_convs_runs_channels_last_in_either_mode(mode):
    rng = np.random.default_rng(5)
    g = df._core.Graph("d2s")
    x = g.add_input("x", "f32", [2, 8, 5, 6])
    y = g.add_node("Conv", [x, g.add_constant("w0", f32(rng, 32, 8, 3, 3))], {"pads": [1] * 4}, 1, "c0", ["y0"])[0]
    y = g.add_node("DepthToSpace", [y], {"blocksize": 2, "mode": mode}, 1, "d2s", ["d"])[0]
    y = g.add_node("Conv", [y, g.add_constant("w1", f32(rng, 4, 8, 3, 3))], {"pads": [1] * 4}, 1, "c1", ["y1"])[0]
    g.set_outputs([y])
    e = df.ECG(g)
    out, rep = rewrite.select_layout(e, "nhwc")
    assert "DepthToSpace" not in ops(out) and len(rep["regions"]) == 1
    ins = inputs_of(e)
    want = e.run_reference(*ins)[0]
    np.testing.assert_allclose(out.run_reference(*ins)[0], want, rtol=1e-5, atol=1e-5)
    m = df.compile(e, threads=2, layout="nhwc")
    np.testing.assert_allclose(m(*ins), want, rtol=1e-4, atol=1e-5)
    # DCR channels last reads whole vectors (index.cc splits (v % 2) * 8 under 16 without a
    # gather); CRD's output channels are every 4th input channel, a gather either way
    assert ("cg::gather" in m.source()) == (mode == "CRD")


def test_a_pytorch_unet_decoder_stage_matches_pytorch():
    torch = pytest.importorskip("torch")

    class Stage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.down = torch.nn.Conv2d(3, 32, 3, padding=1)
            self.up = torch.nn.ConvTranspose2d(32, 16, 2, stride=2)
            self.fuse = torch.nn.Conv2d(16 + 3, 8, 3, padding=1)

        def forward(self, x):
            h = torch.relu(self.down(torch.nn.functional.max_pool2d(x, 2)))
            return self.fuse(torch.cat([x, self.up(h)], 1))

    torch.manual_seed(0)
    mod = Stage().eval()
    x = torch.randn(2, 3, 20, 28)
    m = df.compile(mod, example_inputs=[x], threads=2, layout="nhwc")
    assert not any(n.op == "ConvTranspose" for n in m.graph.nodes)
    with torch.no_grad():
        want = mod(x).numpy()
    np.testing.assert_allclose(m(x.numpy()), want, rtol=1e-4, atol=1e-4)
