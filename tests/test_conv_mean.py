"""A spatial mean taken by the depthwise convolution whose output it reduces
(cpp/plan/reduced_by_anchor.cc, cpp/codegen/conv_mean.cc): the squeeze-and-excitation gate's
global pool runs inside the depthwise kernel's call, which adds up each row of pixels right
after storing it, so the pool is no kernel and no pass of its own. Counted from the generated
code, checked against the NumPy reference; the cases it must leave alone keep their stage.
(Every dialect, NEON included, runs the case through test_codegen's and test_codegen_neon's
`se_gate_channels_last`; the kernel itself is test_prelude_conv_pool's conv_nhwc_mean.)"""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
from onnx import helper as h  # noqa: E402

from codegen_runner import assert_matches_reference, run  # noqa: E402
from test_codegen import _build, f32, model  # noqa: E402


def stages(gen):
    return [s for k in gen["kernels"] for s in k["stages"]]


def test_the_gates_pool_runs_in_the_depthwise_kernel():
    ecg, feeds = _build("se_gate_channels_last")
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs)
    st = stages(gen)
    assert sum("+mean of its pixels" in s for s in st) == 1, st
    assert not any(s.startswith("ReduceMean") for s in st), st
    # one pass per kernel: the depthwise conv (with the pool), the gate's two convs, the
    # projection with the gate (its own stage or a loop before it)
    assert gen["counts"]["passes"] == len(st)
    plan = df.plan.plan(ecg, planner="dnnfusion")
    assert "reduces its output as it stores it" in plan.explain()
    # Without the pool in the kernel (one kernel per operator) it is a pass of its own.
    outs0, gen0 = run(ecg, feeds, planner="none")
    assert_matches_reference(ecg, feeds, outs0)
    assert any(s.startswith("ReduceMean") for s in stages(gen0))


def _conv_then(reduce_nodes, group, k=3):
    x = f32(1, 16, 7, 9)
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], group=group, kernel_shape=[k, k], pads=[k // 2] * 4),
             h.make_node("Relu", ["c"], ["a"]), *reduce_nodes, h.make_node("Add", ["a", "a"], ["z"])]
    ecg, feeds = model(nodes, {"x": x}, ["p", "z"], [("w", f32(16, 16 // group, k, k)),
                                                       ("ax", np.array([2, 3], np.int64)),
                                                       ("ax1", np.array([1], np.int64))])
    return df.rewrite.select_layout(ecg, "nhwc")[0], feeds


@pytest.mark.parametrize("what", ["dense conv", "max", "not the pixels"])
def test_a_reduction_the_kernel_does_not_take_keeps_its_stage(what):
    """Only a depthwise kernel takes a mean or sum, and only over the pixels: a dense 3x3
    convolution, a ReduceMax and a mean over the channels stay a stage of their own."""
    reduce = {"dense conv": h.make_node("GlobalAveragePool", ["a"], ["p"]),
              "max": h.make_node("GlobalMaxPool", ["a"], ["p"]),
              "not the pixels": h.make_node("ReduceMean", ["a", "ax1"], ["p"], keepdims=1)}[what]
    ecg, feeds = _conv_then([reduce], group=1 if what == "dense conv" else 16)
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs)
    st = stages(gen)
    assert not any("+mean" in s or "+sum" in s for s in st), st
    assert gen["counts"]["passes"] == len(st)


def test_a_sum_over_the_pixels_is_taken_too():
    ecg, feeds = _conv_then([h.make_node("ReduceSum", ["a", "ax"], ["p"], keepdims=0)], group=16)
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs, rtol=1e-4, atol=1e-4)
    assert sum("+sum of its pixels" in s for s in stages(gen)) == 1, stages(gen)


def test_opencl_plans_keep_the_pool_apart():
    """The OpenCL kernels do not reduce as they store: that target's plan keeps the pool a
    block of its own."""
    ecg, _ = _build("se_gate_channels_last")
    cpu = df.plan.plan(ecg, planner="dnnfusion")
    ocl = df.plan.plan(ecg, planner="dnnfusion", target="opencl")
    assert len(ocl.blocks) == len(cpu.blocks) + 1
    assert "reduces its output as it stores it" not in ocl.explain()


def test_with_the_switch_off_the_mean_is_a_pass_of_its_own(monkeypatch):
    """DNNF_CONV_MEANS=0 (for comparisons) keeps the same plan and runs the mean as a stage
    of the same kernel: one pass more, the same kernels."""
    ecg, feeds = _build("se_gate_channels_last")
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    monkeypatch.setenv("DNNF_CONV_MEANS", "0")
    outs0, gen0 = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs0)
    assert gen0["counts"]["kernels"] == gen["counts"]["kernels"]
    assert gen0["counts"]["passes"] == gen["counts"]["passes"] + 1
    assert any(s.startswith("ReduceMean") for s in stages(gen0))
