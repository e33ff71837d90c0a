"""The recognised epilogue (issue 14: small kernels' overhead): where a GEMM's or a
convolution's fused epilogue is v = act(v + bias[col] (+ residual[row, col])), act none,
Relu, Clip or Swish (without a residual), the generator passes its parts with the lambda (cg::make_ep_affine) and the
register-tiled kernels apply it in registers, without the tile's copy through L1 and the
indirect call (1x1 convolutions with 16-32 input channels spent a fifth of their time
there). Each case is checked against the NumPy reference on every x86 dialect, with
the form the source names; forms outside it keep the lambda."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dnnfusion import rewrite

onnx = pytest.importorskip("onnx")
from onnx import helper as h  # noqa: E402

from codegen_runner import assert_matches_reference, compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, params  # noqa: E402
from test_codegen import f32, model  # noqa: E402

SIX = [("lo", np.array(0.0, np.float32)), ("hi", np.array(6.0, np.float32))]


def case_gemm_bias_relu():
    """Linear + Relu, K over one k-block (partial sums in C, the epilogue on the last),
    a row tail and a column tail."""
    return model([h.make_node("Gemm", ["x", "w", "b"], ["g"]), h.make_node("Relu", ["g"], ["y"])],
                 {"x": f32(37, 1100)}, ["y"], [("w", f32(1100, 40)), ("b", f32(40))]), (1, False)


def case_batched_matmul_bias_residual():
    """Batched MatMul + bias + a residual: the batches' row offsets reach the residual."""
    return model([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "b"], ["a"]),
                  h.make_node("Add", ["r", "a"], ["y"])],
                 {"x": f32(4, 9, 20), "r": f32(4, 9, 24)}, ["y"], [("w", f32(20, 24)), ("b", f32(24))]), (0, True)


def case_pointwise_conv_relu6():
    """MobileNet's expand convolution channels last: 1x1 + bias + Clip(0, 6), then a
    depthwise one (whose epilogue stores the channels-first output)."""
    return model([h.make_node("Conv", ["x", "w", "b"], ["c"]), h.make_node("Clip", ["c", "lo", "hi"], ["r"]),
                  h.make_node("Conv", ["r", "dw"], ["y"], group=40, pads=[1, 1, 1, 1])],
                 {"x": f32(1, 16, 9, 11)}, ["y"],
                 [("w", f32(40, 16, 1, 1)), ("b", f32(40)), ("dw", f32(40, 1, 3, 3))] + SIX), (2, False)


def case_conv_residual_relu():
    """ResNet's block end: 3x3 (the direct kernel) + bias + identity + Relu, read by a 1x1
    convolution (whose epilogue, storing the graph's channels-first output, keeps the lambda)."""
    return model([h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                  h.make_node("Add", ["c", "x"], ["a"]), h.make_node("Relu", ["a"], ["r"]),
                  h.make_node("Conv", ["r", "w2"], ["y"])],
                 {"x": f32(1, 24, 7, 9)}, ["y"],
                 [("w", f32(24, 24, 3, 3)), ("b", f32(24)), ("w2", f32(8, 24, 1, 1))]), (1, True)


def _swish(x):
    return [h.make_node("Sigmoid", [x], [x + "s"]), h.make_node("Mul", [x, x + "s"], [x + "w"])]


def case_depthwise_swish():
    """EfficientNet's depthwise convolution: 3x3 + bias + Swish (x * sigmoid(x)) channels last,
    whole channel vectors (two rows at once on AVX-512) and edges; then a 1x1 (its epilogue
    storing the channels-first output keeps the lambda)."""
    return model([h.make_node("Conv", ["x", "kd", "b"], ["d"], group=32, pads=[1, 1, 1, 1]), *_swish("d"),
                  h.make_node("Conv", ["dw", "w2"], ["y"])],
                 {"x": f32(1, 32, 9, 11)}, ["y"], [("kd", f32(32, 1, 3, 3)), ("b", f32(32)), ("w2", f32(8, 32, 1, 1))]), \
        (3, False)


def case_depthwise5_swish_stride2():
    """The same with a 5x5 window at stride 2 (the specialised interior: rows 20 pixels wide,
    two blocks of 8 between the edges) and two images."""
    return model([h.make_node("Conv", ["x", "kd", "b"], ["d"], group=48, pads=[2, 2, 2, 2], strides=[2, 2]),
                  *_swish("d"), h.make_node("Conv", ["dw", "w2"], ["y"])],
                 {"x": f32(2, 48, 9, 40)}, ["y"], [("kd", f32(48, 1, 5, 5)), ("b", f32(48)), ("w2", f32(8, 48, 1, 1))]), \
        (3, False)


def case_gemm_swish():
    """Linear + Swish: recognised, and the GEMM's tile leaves it to the lambda (act 3 is the
    depthwise kernels' only), which must still give the reference."""
    return model([h.make_node("Gemm", ["x", "w", "b"], ["g"]), *_swish("g")[:1],
                  h.make_node("Mul", ["gs", "g"], ["y"])],
                 {"x": f32(29, 70)}, ["y"], [("w", f32(70, 40)), ("b", f32(40))]), (3, False)


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}


def channels_last(ecg):
    out, _ = rewrite.select_layout(ecg, "nhwc")
    return out


def affine_calls(src):
    return re.findall(r"cg::make_ep_affine\(f\d+, [^,]+, (\w+), (\w+), (\d+)L, (\d), ([^,]+), ([^)]+)\)", src)


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("case", sorted(CASES))
def test_recognised_epilogue_matches_reference(case, isa):
    (ecg, feeds), (act, residual) = CASES[case]()
    ecg = channels_last(ecg)
    if lacks_here(isa):  # generated and compiled, not run
        gen = compile_only(ecg, "dnnfusion", isa)
    else:
        outs, gen = run(ecg, feeds, isa=isa)
        assert_matches_reference(ecg, feeds, outs, atol=1e-4)  # sums of 1100 products near 0
    calls = affine_calls(gen["source"])
    assert len(calls) == 1, gen["source"]
    bias, res, ld, got_act, lo, hi = calls[0]
    assert bias != "nullptr" and (res != "nullptr") == residual and int(got_act) == act, calls
    if act == 2:
        assert (lo, hi) == ("0.0f", "6.0f"), calls


def test_other_epilogues_keep_the_lambda():
    """Sigmoid is outside the form, and so is a Relu before the residual (the form adds the
    residual first): both run through the lambda and still match the reference."""
    for act_first in (False, True):
        nodes = [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "b"], ["a"])]
        if act_first:
            nodes += [h.make_node("Relu", ["a"], ["r"]), h.make_node("Add", ["r", "s"], ["y"])]
        else:
            nodes += [h.make_node("Sigmoid", ["a"], ["y"])]
        ecg, feeds = model(nodes, {"x": f32(6, 10), "s": f32(6, 8)} if act_first else {"x": f32(6, 10)}, ["y"],
                           [("w", f32(10, 8)), ("b", f32(8))])
        outs, gen = run(ecg, feeds)
        assert_matches_reference(ecg, feeds, outs)
        assert not affine_calls(gen["source"]) and "cg::make_ep<false>" in gen["source"]


def test_nan_and_signed_zero_as_the_lambda():
    """The registers' form computes what the lambda computes, bit for bit: a NaN input stays
    NaN through Relu and Clip (the vocabulary's operand order), the rest equals the reference."""
    x = f32(14, 32)  # one full 14 x 32 tile on AVX-512 (the form runs in full tiles)
    x[3, 5] = np.nan
    w = np.eye(32, dtype=np.float32)
    b = np.zeros(32, np.float32)
    for act in ("Relu", "Clip"):
        ins = ["a"] + (["lo", "hi"] if act == "Clip" else [])
        ecg, feeds = model([h.make_node("Gemm", ["x", "w", "b"], ["a"]), h.make_node(act, ins, ["y"])],
                           {"x": x}, ["y"], [("w", w), ("b", b)] + (SIX if act == "Clip" else []))
        outs, gen = run(ecg, feeds)
        assert affine_calls(gen["source"]), gen["source"]
        ref = ecg.run_reference(**feeds)[0]
        np.testing.assert_array_equal(np.isnan(outs[0]), np.isnan(ref))
        np.testing.assert_array_equal(outs[0][~np.isnan(ref)], ref[~np.isnan(ref)])
