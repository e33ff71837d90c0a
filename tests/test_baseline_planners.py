"""The baseline planners (cpp/plan/baselines*.cc, paper §5): no fusion, the fixed patterns
of TFLite and ONNX Runtime, TVM's FuseOps and the dynamic-programming search of Gao et al.
Block structures on canonical subgraphs written in ECG text are reasoned from each scheme's
own rules (the comments say why); every plan computes what the graph computes, block by
block; every producer/consumer pair has a reason; random DAGs always give valid plans."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dnnfusion as df
from dnnfusion import _core
from dnnfusion.builtin import tiny_convnet

from canonical_graphs import (
    ADD_RELU, ATTENTION, CONV_BN_RELU, DIAMOND, ELEMENTWISE, FANOUT, FFN, GEMM_BIAS_GELU,
    GEMM_BIAS_GELU_DECOMPOSED, LAYERNORM, REDUCE, RESIDUAL, RESIDUAL_INNER, SOFTMAX_DECOMPOSED,
    TANH_GELU, P, block_sets, blocks, check_block_by_block_equals_whole_graph,
    check_blocks_partition_in_order, ecg, long_chain, random_graphs, why)

BASELINES = ("none", "patterns", "tvm", "dp")

# The canonical subgraphs (canonical_graphs.py) by name.
CANONICAL = {
    "conv_bn_relu": CONV_BN_RELU, "residual": RESIDUAL, "residual_inner": RESIDUAL_INNER,
    "attention": ATTENTION, "gemm_bias_gelu": GEMM_BIAS_GELU,
    "gemm_bias_gelu_erf": GEMM_BIAS_GELU_DECOMPOSED, "tanh_gelu": TANH_GELU,
    "elementwise": ELEMENTWISE, "add_relu": ADD_RELU, "diamond": DIAMOND, "fanout": FANOUT,
    "layernorm": LAYERNORM, "ffn": FFN, "reduce": REDUCE, "softmax_decomposed": SOFTMAX_DECOMPOSED,
}
_graphs: dict[str, df.ECG] = {}


def graph(name: str) -> df.ECG:
    if name not in _graphs:
        _graphs[name] = tiny_convnet() if name == "tiny_convnet" else ecg(CANONICAL[name])
    return _graphs[name]


ALL_GRAPHS = list(CANONICAL) + ["tiny_convnet"]


# ---- none -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL_GRAPHS)
def test_none_is_one_kernel_per_operator(name):
    g = graph(name)
    p = P.plan(g, planner="none")
    assert blocks(p) == [[n.name] for n in g.nodes]
    assert p.stats["kernels_after"] == p.stats["operators_before"] == len(g.nodes)
    assert p.stats["intermediates_removed"] == 0
    assert all(not r.fused and r.why.startswith("none:") for r in p.reasons)


# ---- patterns ---------------------------------------------------------------------------
def test_patterns_conv_chains():
    # Conv + BN (ConvBNFusion) + Relu (ConvActivationFusion); the second Conv starts its own.
    assert blocks(P.plan(graph("conv_bn_relu"), planner="patterns")) == [["c1", "b1", "r1"], ["c2", "b2", "r2"]]
    # The residual Add of a same-shape tensor is FusedConv's "Z" input (ConvAddActivation).
    assert blocks(P.plan(graph("residual"), planner="patterns")) == [["c1", "b1", "r1"], ["c2", "b2", "add", "r3"]]
    # r0 ends its match, so its output may be read by both c1 and add.
    assert blocks(P.plan(graph("residual_inner"), planner="patterns")) == [
        ["c0", "r0"], ["c1", "b1", "r1"], ["c2", "b2", "add", "r3"]]


def test_patterns_need_a_chain_whose_intermediates_stay_inside():
    # conv's output is read by relu and sigmoid: Conv + activation would leave it written, so
    # no pattern matches; relu * sigmoid is no listed pattern either.
    p = P.plan(graph("diamond"), planner="patterns")
    assert blocks(p) == [["conv"], ["relu"], ["sigmoid"], ["mul"]]
    assert "also read outside the chain" in why(p)[("conv", "relu")]
    # relu is the last step of Conv + activation, so its two readers do not matter.
    assert blocks(P.plan(graph("fanout"), planner="patterns")) == [["conv", "relu"], ["conv2"], ["mul"]]


def test_patterns_dense_and_gelu():
    # MatMul + bias (MatMulAddFusion) + activation (GemmActivationFusion).
    assert blocks(P.plan(graph("gemm_bias_gelu"), planner="patterns")) == [["gemm", "bias", "gelu"]]
    # bias's output has two readers, which ends the dense chain there; the decomposed GELU
    # is its own match (GeluFusion: its Mul reads the pattern's input h).
    assert blocks(P.plan(graph("gemm_bias_gelu_erf"), planner="patterns")) == [
        ["gemm", "bias"], ["div", "erf", "add1", "mul", "half"]]
    # FastGeluFusion takes in the 0.5 * x side op.
    p = P.plan(graph("tanh_gelu"), planner="patterns")
    assert len(p) == 1 and p.stats["intermediates_removed"] == 7


def test_patterns_transformer_fusions():
    # The decomposed LayerNormalization is one match (LayerNormFusion).
    assert len(P.plan(graph("layernorm"), planner="patterns")) == 1
    # SkipLayerNormFusion (Add + LayerNormalization), then two dense chains.
    assert blocks(P.plan(graph("ffn"), planner="patterns")) == [
        ["skip", "ln"], ["fc1", "bias1", "gelu"], ["fc2", "bias2"]]
    # Attention: only MatMul + constant scale (MatMulScaleFusion); Reshape, Transpose and
    # Softmax are in no pattern.
    p = P.plan(graph("attention"), planner="patterns")
    assert len(p) == 15 and [b for b in blocks(p) if len(b) > 1] == [["qk", "scale"]]


def test_patterns_elementwise():
    # TFLite's ADD carries a fused RELU.
    assert blocks(P.plan(graph("add_relu"), planner="patterns")) == [["add", "relu"]]
    # Sigmoid is no fused activation and no pattern chains elementwise ops: five kernels.
    p = P.plan(graph("elementwise"), planner="patterns")
    assert len(p) == 5
    assert "no pattern in the list has Relu followed by Mul" in why(p)[("relu", "mul")]


def test_patterns_tiny_convnet():
    # Conv-BN-ReLU twice, skip.conv + residual (the Z input); nothing else is a pattern.
    p = P.plan(graph("tiny_convnet"), planner="patterns")
    assert [b for b in blocks(p) if len(b) > 1] == [
        ["block1.conv", "block1.bn", "block1.relu"], ["block2.conv", "block2.bn", "block2.relu"],
        ["skip.conv", "residual"]]
    assert len(p) == 13


# ---- tvm --------------------------------------------------------------------------------
def test_tvm_conv_chains():
    # conv2d (kOutEWiseFusable) fuses into its post-dominator when the path is elementwise:
    # c1 into b1, then b1's group (now kOutEWiseFusable) into r1. r1's post-dominator c2 is
    # reached through a kOutEWiseFusable edge, so r1 does not fuse into it.
    p = P.plan(graph("conv_bn_relu"), planner="tvm")
    assert blocks(p) == [["c1", "b1", "r1"], ["c2", "b2", "r2"]]
    assert "post-dominator" in why(p)[("c1", "b1")] and "-> fused" in why(p)[("c1", "b1")]
    assert "-> not fused" in why(p)[("r1", "c2")]
    # Residual adds are elementwise on the edge from b2 (same shape): one group to r3.
    assert blocks(P.plan(graph("residual"), planner="tvm")) == [["c1", "b1", "r1"], ["c2", "b2", "add", "r3"]]
    # r0's post-dominator is add, reached through c1 (kOutEWiseFusable): not fused.
    p = P.plan(graph("residual_inner"), planner="tvm")
    assert blocks(p) == [["c0", "r0"], ["c1", "b1", "r1"], ["c2", "b2", "add", "r3"]]
    assert "post-dominator add" in why(p)[("r0", "add")]


def test_tvm_post_dominators():
    # conv's post-dominator is mul, and both paths to it are elementwise: one group.
    assert blocks(P.plan(graph("diamond"), planner="tvm")) == [["conv", "relu", "sigmoid", "mul"]]
    # Both of relu's readers return their outputs: relu has no post-dominator.
    p = P.plan(graph("fanout"), planner="tvm")
    assert blocks(p) == [["conv", "relu"], ["conv2"], ["mul"]]
    assert "no post-dominator" in why(p)[("relu", "mul")]
    # bias's post-dominator is mul through elementwise paths; gemm's group fuses all of it.
    assert len(P.plan(graph("gemm_bias_gelu_erf"), planner="tvm")) == 1
    assert len(P.plan(graph("elementwise"), planner="tvm")) == 1


def test_tvm_reductions_and_injective_ops():
    # relu (elementwise) fuses into its post-dominator, the reduction; the reduction never
    # fuses into its successor; the transpose (injective) would need an injective sink.
    p = P.plan(graph("reduce"), planner="tvm")
    assert blocks(p) == [["transpose"], ["relu", "sum"], ["sigmoid"]]
    assert "reduction" in why(p)[("sum", "sigmoid")]
    # exp's post-dominator div is reached through the reduction, which may only be the sink.
    assert len(P.plan(graph("softmax_decomposed"), planner="tvm")) == 3
    # Decomposed LayerNorm: pow fuses into the variance reduction, the tail from add_eps is
    # elementwise; sub's paths meet at div through a reduction; mean stands alone.
    assert blocks(P.plan(graph("layernorm"), planner="tvm")) == [
        ["mean"], ["sub"], ["pow", "var"], ["add_eps", "sqrt", "div", "gamma", "beta"]]


def test_tvm_attention_and_tiny_convnet():
    # Reshape + Transpose fuse (injective into injective, phase 1) but not into a MatMul;
    # MatMul + scale; Softmax is opaque; o_t + o_r.
    p = P.plan(graph("attention"), planner="tvm")
    assert block_sets(p) == {
        frozenset({"q"}), frozenset({"q_r", "q_t"}), frozenset({"k"}), frozenset({"k_r", "k_t"}),
        frozenset({"v"}), frozenset({"v_r", "v_t"}), frozenset({"qk", "scale"}), frozenset({"softmax"}),
        frozenset({"pv"}), frozenset({"o_t", "o_r"}), frozenset({"o_proj"})}
    assert "opaque" in why(p)[("softmax", "pv")]
    # The two Transposes fuse; se.pool (global pooling, kOutEWiseFusable) takes se.gate, but
    # se.gate reaches se.scale through a broadcast edge; LayerNormalization is
    # out-elementwise fusable and the skip add cannot fuse into it.
    p = P.plan(graph("tiny_convnet"), planner="tvm")
    assert {frozenset({"to_nhwc", "to_nchw"}), frozenset({"se.pool", "se.gate"}), frozenset({"se.scale"}),
            frozenset({"skip.conv", "residual"})} <= block_sets(p)
    assert len(p) == 11
    assert blocks(P.plan(graph("ffn"), planner="tvm")) == [
        ["skip"], ["ln"], ["fc1", "bias1", "gelu"], ["fc2", "bias2"]]


def test_tvm_max_fuse_depth():
    # A chain of 300 elementwise adds: the group stops at TVM's max_fuse_depth of 256.
    p = P.plan(ecg(long_chain(300)), planner="tvm")
    assert [len(b) for b in blocks(p)] == [256, 44]
    assert "max_fuse_depth" in why(p)[("add255", "add256")]


# ---- dp ---------------------------------------------------------------------------------
def test_dp_conv_chains():
    # One Many-to-Many op per kernel forces a cut between the convolutions; cutting before
    # or after b1/r1 costs the same (equal tensors), and ties go to the epilogue.
    p = P.plan(graph("conv_bn_relu"), planner="dp")
    assert blocks(p) == [["c1", "b1", "r1"], ["c2", "b2", "r2"]]
    assert "cheapest partition" in why(p)[("c1", "b1")]
    assert "second Many-to-Many" in why(p)[("r1", "c2")] or "reject" in why(p)[("r1", "c2")]
    assert blocks(P.plan(graph("residual"), planner="dp")) == [["c1", "b1", "r1"], ["c2", "b2", "add", "r3"]]
    assert len(P.plan(graph("residual_inner"), planner="dp")) == 3


def test_dp_windows_are_contiguous_in_its_order():
    # Order: conv, relu, conv2, mul. conv2 and mul only meet through relu, so the one
    # two-kernel partition puts relu with both (One-to-One before a Many-to-Many is green).
    assert blocks(P.plan(graph("fanout"), planner="dp")) == [["conv"], ["relu", "conv2", "mul"]]
    # Transpose + Relu (green), + ReduceSum (yellow: the estimate fuses, no index map at
    # either end), + Sigmoid (green): one kernel.
    assert len(P.plan(graph("reduce"), planner="dp")) == 1
    # sum -> div is Many-to-Many followed by a One-to-Many broadcast (yellow): the estimate
    # rejects it (the sum would be recomputed per broadcast read).
    p = P.plan(graph("softmax_decomposed"), planner="dp")
    assert blocks(p) == [["exp", "sum"], ["div"]]
    assert "keep apart" in why(p)[("sum", "div")]


def test_dp_attention_and_tiny_convnet():
    # Each projection takes its Reshape and Transpose (yellow, estimate: fuse); qk + scale;
    # Softmax and pv alone (two Many-to-Many ops); o_t, o_r join o_proj.
    p = P.plan(graph("attention"), planner="dp")
    assert block_sets(p) == {
        frozenset({"q", "q_r", "q_t"}), frozenset({"k", "k_r", "k_t"}), frozenset({"v", "v_r", "v_t"}),
        frozenset({"qk", "scale"}), frozenset({"softmax"}), frozenset({"pv"}),
        frozenset({"o_t", "o_r", "o_proj"})}
    # se.gate -> se.scale broadcasts the pooled gate 64 times: the estimate rejects it.
    p = P.plan(graph("tiny_convnet"), planner="dp")
    assert len(p) == 9
    assert {frozenset({"se.pool", "se.gate"}), frozenset({"se.scale"}),
            frozenset({"pool", "to_nhwc", "to_nchw"})} <= block_sets(p)


def test_dp_window_limit():
    # 100 adds in a chain: at most 32 per window gives 4 kernels; ties go to the shortest
    # last block.
    p = P.plan(ecg(long_chain(100)), planner="dp")
    assert [len(b) for b in blocks(p)] == [32, 32, 32, 4]
    assert "over its limit of 32" in why(p)[("add31", "add32")]


# ---- All planners -----------------------------------------------------------------------
@pytest.mark.parametrize("planner", BASELINES)
@pytest.mark.parametrize("name", ALL_GRAPHS)
def test_block_by_block_reference_equals_whole_graph(name, planner):
    g = graph(name)
    check_block_by_block_equals_whole_graph(g, P.plan(g, planner=planner))


def check_reasons(g, p) -> None:
    """One reason per producer/consumer pair, saying whether it was fused, with a why."""
    edges = {(v.producer.id, n.id) for n in g.nodes for v in n.inputs
             if v is not None and v.producer is not None}
    got = {(r.producer.id, r.consumer.id) for r in p.reasons}
    assert got == edges and len(p.reasons) == len(edges)
    for r in p.reasons:
        assert r.why.startswith(p.planner + ": ") and len(r.why) > len(p.planner) + 10
        assert r.fused == (p.block_of(r.producer) is p.block_of(r.consumer))


@pytest.mark.parametrize("planner", BASELINES)
@pytest.mark.parametrize("name", ALL_GRAPHS)
def test_every_pair_has_a_reason(name, planner):
    g = graph(name)
    p = P.plan(g, planner=planner)
    check_reasons(g, p)
    assert "Block 0" in p.explain()


@pytest.mark.parametrize("name", ["tiny_convnet", "attention"])
def test_dnnfusion_needs_no_more_kernels_than_tvm_or_patterns(name):
    # The paper's claim (§5): DNNFusion's classification fuses at least as much.
    n = {pl: len(P.plan(graph(name), planner=pl)) for pl in ("dnnfusion", "tvm", "patterns")}
    assert n["dnnfusion"] <= n["tvm"] and n["dnnfusion"] <= n["patterns"], n


@pytest.mark.parametrize("planner", ["patterns", "tvm", "dp"])
def test_kernel_argument_limit(planner):
    g = ecg(long_chain(140))  # one input, 140 weights, one output
    p = P.plan(g, planner=planner, target="opencl")
    for b in p.blocks:
        assert len(b.nodes) == 1 or len(b.inputs) + len(b.outputs) <= 128
    if planner == "tvm":
        # 126 adds take 1 input + 126 weights + 1 output = 128 arguments.
        assert [len(b) for b in blocks(p)] == [126, 14]
        assert "kernel-argument limit" in why(p)[("add125", "add126")]


# ---- Random DAGs and a large graph -------------------------------------------------------
OPS = ["Relu", "Sigmoid", "Add", "Mul", "Transpose", "Reshape", "Conv", "Softmax",
       "ReduceMean", "BroadcastMul", "Slice", "BatchNormalization", "Clip", "Gelu"]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(OPS), st.sampled_from([0, 3, 5]))
def test_random_dags_give_valid_plans(g, max_args):
    if not g.nodes:
        return
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32)
    want = df.ECG(g).run_reference(x)
    for planner in BASELINES:
        p = P.plan(g, planner=planner, max_kernel_args=max_args)  # raises InternalError if invalid
        check_blocks_partition_in_order(g, p)
        for b in p.blocks:
            if max_args and len(b.nodes) > 1:
                assert len(b.inputs) + len(b.outputs) <= max_args
            if planner == "dp":
                assert sum(n.mapping_type == "Many-to-Many" for n in b.nodes) <= 1
        check_reasons(g, p)
        for a, b in zip(p.run_reference(x), want):
            np.testing.assert_array_equal(a, b)


def resnet_like(blocks_: int) -> _core.Graph:
    """Conv-BN-ReLU-Conv-BN-gate-Add-ReLU residual blocks: 10 ops a block."""
    rng = np.random.default_rng(0)
    g = _core.Graph("resnet_like")
    x = g.add_input("x", "f32", [1, 4, 8, 8])
    w = g.add_constant("w", (rng.standard_normal((4, 4, 3, 3)) * 0.2).astype(np.float32))
    bnp = [g.add_constant(f"bn{i}", (1 + 0.1 * rng.random(4)).astype(np.float32)) for i in range(4)]
    axes = g.add_constant("axes", np.array([2, 3], np.int64))
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    for i in range(blocks_):
        (t,) = g.add_node("Conv", [x, w, None], conv, 1, f"b{i}.c1")
        (t,) = g.add_node("BatchNormalization", [t, *bnp], {}, 1, f"b{i}.bn1")
        (t,) = g.add_node("Relu", [t], {}, 1, f"b{i}.r1")
        (t,) = g.add_node("Conv", [t, w, None], conv, 1, f"b{i}.c2")
        (t,) = g.add_node("BatchNormalization", [t, *bnp], {}, 1, f"b{i}.bn2")
        (m,) = g.add_node("ReduceMean", [t, axes], {"keepdims": 1}, 1, f"b{i}.pool")
        (s,) = g.add_node("Sigmoid", [m], {}, 1, f"b{i}.gate")
        (t,) = g.add_node("Mul", [t, s], {}, 1, f"b{i}.scale")
        (t,) = g.add_node("Add", [t, x], {}, 1, f"b{i}.add")
        (x,) = g.add_node("Relu", [t], {}, 1, f"b{i}.r2")
    g.set_outputs([x])
    return g


def test_large_graph_plans_for_every_planner():
    # 3000 ops: every planner gives a valid plan (finalize_plan checks convexity); the DP's
    # windows keep it linear in the graph size.
    g = resnet_like(300)
    for planner in BASELINES + ("dnnfusion",):
        p = P.plan(g, planner=planner)
        assert p.stats["operators_before"] == 3000
        assert sum(len(b.nodes) for b in p.blocks) == 3000
