"""Canonical subgraphs in ECG text and the helpers that plan and check them, shared by
test_planner.py (DNNFusion's planner) and test_baseline_planners.py (the baselines)."""

from __future__ import annotations

import importlib
import re
import textwrap

import numpy as np
from hypothesis import strategies as st

import dnnfusion as df
from dnnfusion import _core

# The module, even if the package also exports a function named `plan`.
P = importlib.import_module("dnnfusion.plan")

# ---- Canonical subgraphs ------------------------------------------------------------------
# `const rand` / `const pos` stand for seeded random data of the declared f32 type
# (normal * 0.5, or 1 + uniform * 0.1 for BN variances); small constants are written inline.
_CONST = re.compile(r"%([\w.]+): f32\[([\d,]*)\] = const (rand|pos)")


def ecg(text: str, seed: int = 0) -> df.ECG:
    rng = np.random.default_rng(seed)

    def fill(m: re.Match) -> str:
        shape = [int(d) for d in m.group(2).split(",") if d]
        a = rng.standard_normal(shape) * 0.5 if m.group(3) == "rand" else 1 + 0.1 * rng.random(shape)
        return f"%{m.group(1)}: f32[{m.group(2)}] = const 0x{a.astype('<f4').tobytes().hex()}"

    return df.parse(_CONST.sub(fill, textwrap.dedent(text)))


def bn_params(prefix: str, c: int) -> str:
    return "\n".join(f"  %{prefix}.{p}: f32[{c}] = const {'pos' if p == 'var' else 'rand'}"
                     for p in ("scale", "bias", "mean", "var"))


def bn(out: str, x: str, prefix: str, shape: str, name: str) -> str:
    return (f"  %{out}: f32[{shape}] = BatchNormalization(%{x}, %{prefix}.scale, %{prefix}.bias, "
            f"%{prefix}.mean, %{prefix}.var) @\"{name}\"")


CONV = '{kernel_shape=[3,3], pads=[1,1,1,1]}'


def conv_bn_relu_conv_bn(x: str) -> str:
    """Conv c1 of %x (weight %w1), BatchNormalization b1 (parameters bn1), Relu r1, Conv c2
    (weight %w2) and BatchNormalization b2 (parameters bn2) into %t5, all f32[1,8,8,8]."""
    return "\n".join([
        f'  %t1: f32[1,8,8,8] = Conv(%{x}, %w1, _) {CONV} @"c1"',
        bn("t2", "t1", "bn1", "1,8,8,8", "b1"),
        '  %t3: f32[1,8,8,8] = Relu(%t2) @"r1"',
        f'  %t4: f32[1,8,8,8] = Conv(%t3, %w2, _) {CONV} @"c2"',
        bn("t5", "t4", "bn2", "1,8,8,8", "b2"),
    ])


CONV_BN_RELU = f"""
graph conv_bn_relu(%x: f32[1,4,8,8]) {{
  %w1: f32[8,4,3,3] = const rand
  %w2: f32[8,8,3,3] = const rand
{bn_params("bn1", 8)}
{bn_params("bn2", 8)}
{conv_bn_relu_conv_bn("x")}
  %y: f32[1,8,8,8] = Relu(%t5) @"r2"
  return %y
}}"""

CONV_BN = f"""
graph conv_bn(%x: f32[1,4,8,8]) {{
  %w1: f32[8,4,3,3] = const rand
{bn_params("bn1", 8)}
  %t1: f32[1,8,8,8] = Conv(%x, %w1, _) {CONV} @"c1"
{bn("y", "t1", "bn1", "1,8,8,8", "b1")}
  return %y
}}"""

# The skip connection comes from the graph input.
RESIDUAL = f"""
graph residual(%x: f32[1,8,8,8]) {{
  %w1: f32[8,8,3,3] = const rand
  %w2: f32[8,8,3,3] = const rand
{bn_params("bn1", 8)}
{bn_params("bn2", 8)}
{conv_bn_relu_conv_bn("x")}
  %t6: f32[1,8,8,8] = Add(%t5, %x) @"add"
  %y: f32[1,8,8,8] = Relu(%t6) @"r3"
  return %y
}}"""

# The skip connection is an intermediate with two consumers (c1 and add).
RESIDUAL_INNER = f"""
graph residual_inner(%x: f32[1,4,8,8]) {{
  %w0: f32[8,4,3,3] = const rand
  %w1: f32[8,8,3,3] = const rand
  %w2: f32[8,8,3,3] = const rand
{bn_params("bn1", 8)}
{bn_params("bn2", 8)}
  %s0: f32[1,8,8,8] = Conv(%x, %w0, _) {CONV} @"c0"
  %s1: f32[1,8,8,8] = Relu(%s0) @"r0"
{conv_bn_relu_conv_bn("s1")}
  %t6: f32[1,8,8,8] = Add(%t5, %s1) @"add"
  %y: f32[1,8,8,8] = Relu(%t6) @"r3"
  return %y
}}"""

# One attention head pair: hidden 32 = 2 heads x 16, sequence 16.
ATTENTION = """
graph attention(%x: f32[1,16,32]) {
  %wq: f32[32,32] = const rand
  %wk: f32[32,32] = const rand
  %wv: f32[32,32] = const rand
  %wo: f32[32,32] = const rand
  %heads: i64[4] = const [1,16,2,16]
  %merged: i64[3] = const [1,16,32]
  %scale: f32[] = const [4.0]
  %q: f32[1,16,32] = MatMul(%x, %wq) @"q"
  %q4: f32[1,16,2,16] = Reshape(%q, %heads) @"q_r"
  %qt: f32[1,2,16,16] = Transpose(%q4) {perm=[0,2,1,3]} @"q_t"
  %k: f32[1,16,32] = MatMul(%x, %wk) @"k"
  %k4: f32[1,16,2,16] = Reshape(%k, %heads) @"k_r"
  %kt: f32[1,2,16,16] = Transpose(%k4) {perm=[0,2,3,1]} @"k_t"
  %v: f32[1,16,32] = MatMul(%x, %wv) @"v"
  %v4: f32[1,16,2,16] = Reshape(%v, %heads) @"v_r"
  %vt: f32[1,2,16,16] = Transpose(%v4) {perm=[0,2,1,3]} @"v_t"
  %s: f32[1,2,16,16] = MatMul(%qt, %kt) @"qk"
  %ss: f32[1,2,16,16] = Div(%s, %scale) @"scale"
  %p: f32[1,2,16,16] = Softmax(%ss) {axis=-1} @"softmax"
  %o: f32[1,2,16,16] = MatMul(%p, %vt) @"pv"
  %ot: f32[1,16,2,16] = Transpose(%o) {perm=[0,2,1,3]} @"o_t"
  %o3: f32[1,16,32] = Reshape(%ot, %merged) @"o_r"
  %y: f32[1,16,32] = MatMul(%o3, %wo) @"o_proj"
  return %y
}"""

GEMM_BIAS_GELU = """
graph gemm_bias_gelu(%x: f32[8,32]) {
  %w: f32[32,64] = const rand
  %b: f32[64] = const rand
  %h0: f32[8,64] = MatMul(%x, %w) @"gemm"
  %h: f32[8,64] = Add(%h0, %b) @"bias"
  %y: f32[8,64] = Gelu(%h) @"gelu"
  return %y
}"""

# GELU as exporters write it: 0.5 * h * (1 + erf(h / sqrt 2)); h has two consumers.
GEMM_BIAS_GELU_DECOMPOSED = """
graph gemm_bias_gelu_erf(%x: f32[8,32]) {
  %w: f32[32,64] = const rand
  %b: f32[64] = const rand
  %sqrt2: f32[] = const [1.41421354]
  %one: f32[] = const [1.0]
  %half: f32[] = const [0.5]
  %h0: f32[8,64] = MatMul(%x, %w) @"gemm"
  %h: f32[8,64] = Add(%h0, %b) @"bias"
  %a: f32[8,64] = Div(%h, %sqrt2) @"div"
  %e: f32[8,64] = Erf(%a) @"erf"
  %e1: f32[8,64] = Add(%e, %one) @"add1"
  %m: f32[8,64] = Mul(%h, %e1) @"mul"
  %y: f32[8,64] = Mul(%m, %half) @"half"
  return %y
}"""

# GPT-2's tanh GELU as torch exports it: 0.5 * x is computed on a side branch first.
TANH_GELU = """
graph tanh_gelu(%x: f32[8,64]) {
  %half: f32[] = const [0.5]
  %three: f32[] = const [3.0]
  %c: f32[] = const [0.044715]
  %k: f32[] = const [0.7978846]
  %one: f32[] = const [1.0]
  %xh: f32[8,64] = Mul(%x, %half) @"half_x"
  %p: f32[8,64] = Pow(%x, %three) @"cube"
  %pc: f32[8,64] = Mul(%p, %c) @"cube_scale"
  %s: f32[8,64] = Add(%x, %pc) @"inner"
  %sk: f32[8,64] = Mul(%s, %k) @"inner_scale"
  %t: f32[8,64] = Tanh(%sk) @"tanh"
  %t1: f32[8,64] = Add(%t, %one) @"add1"
  %y: f32[8,64] = Mul(%xh, %t1) @"out"
  return %y
}"""

ELEMENTWISE = """
graph elementwise(%x: f32[4,64]) {
  %c1: f32[64] = const rand
  %c2: f32[64] = const rand
  %t1: f32[4,64] = Relu(%x) @"relu"
  %t2: f32[4,64] = Mul(%t1, %c1) @"mul"
  %t3: f32[4,64] = Add(%t2, %c2) @"add"
  %t4: f32[4,64] = Sigmoid(%t3) @"sigmoid"
  %y: f32[4,64] = Tanh(%t4) @"tanh"
  return %y
}"""

ADD_RELU = """
graph add_relu(%x: f32[4,64], %z: f32[4,64]) {
  %s: f32[4,64] = Add(%x, %z) @"add"
  %y: f32[4,64] = Relu(%s) @"relu"
  return %y
}"""

# A Conv read by two branches that meet again.
DIAMOND = f"""
graph diamond(%x: f32[1,4,8,8]) {{
  %w: f32[8,4,3,3] = const rand
  %c: f32[1,8,8,8] = Conv(%x, %w, _) {CONV} @"conv"
  %r: f32[1,8,8,8] = Relu(%c) @"relu"
  %s: f32[1,8,8,8] = Sigmoid(%c) @"sigmoid"
  %y: f32[1,8,8,8] = Mul(%r, %s) @"mul"
  return %y
}}"""

# relu's output feeds a second Conv and a Mul, both returned, so it stays in memory.
FANOUT = f"""
graph fanout(%x: f32[1,4,8,8]) {{
  %w1: f32[8,4,3,3] = const rand
  %w2: f32[8,8,3,3] = const rand
  %k: f32[8,1,1] = const rand
  %c: f32[1,8,8,8] = Conv(%x, %w1, _) {CONV} @"conv"
  %r: f32[1,8,8,8] = Relu(%c) @"relu"
  %y1: f32[1,8,8,8] = Conv(%r, %w2, _) {CONV} @"conv2"
  %y2: f32[1,8,8,8] = Mul(%r, %k) @"mul"
  return %y1, %y2
}}"""

# One Reshape read by two MatMuls: a yellow pair whose tensor would still be written.
RESHAPE_FANOUT = """
graph reshape_fanout(%x: f32[4,8,8]) {
  %shape: i64[2] = const [32,8]
  %w1: f32[8,16] = const rand
  %w2: f32[8,16] = const rand
  %r: f32[32,8] = Reshape(%x, %shape) @"reshape"
  %y1: f32[32,16] = MatMul(%r, %w1) @"m1"
  %y2: f32[32,16] = MatMul(%r, %w2) @"m2"
  return %y1, %y2
}"""


# LayerNormalization as opset < 17 exporters write it.
LAYERNORM = """
graph layernorm(%x: f32[4,16]) {
  %axes: i64[1] = const [-1]
  %two: f32[] = const [2.0]
  %eps: f32[] = const [0.00001]
  %gamma: f32[16] = const rand
  %beta: f32[16] = const rand
  %m: f32[4,1] = ReduceMean(%x, %axes) {keepdims=1} @"mean"
  %d: f32[4,16] = Sub(%x, %m) @"sub"
  %sq: f32[4,16] = Pow(%d, %two) @"pow"
  %v: f32[4,1] = ReduceMean(%sq, %axes) {keepdims=1} @"var"
  %ve: f32[4,1] = Add(%v, %eps) @"add_eps"
  %s: f32[4,1] = Sqrt(%ve) @"sqrt"
  %n: f32[4,16] = Div(%d, %s) @"div"
  %g: f32[4,16] = Mul(%n, %gamma) @"gamma"
  %y: f32[4,16] = Add(%g, %beta) @"beta"
  return %y
}"""

# A transformer feed-forward tail: residual add, LayerNormalization, two dense layers.
FFN = """
graph ffn(%x: f32[8,32], %r: f32[8,32]) {
  %gamma: f32[32] = const rand
  %beta: f32[32] = const rand
  %w1: f32[32,64] = const rand
  %b1: f32[64] = const rand
  %w2: f32[64,32] = const rand
  %b2: f32[32] = const rand
  %s: f32[8,32] = Add(%x, %r) @"skip"
  %n: f32[8,32] = LayerNormalization(%s, %gamma, %beta) {axis=-1} @"ln"
  %h0: f32[8,64] = MatMul(%n, %w1) @"fc1"
  %h1: f32[8,64] = Add(%h0, %b1) @"bias1"
  %h: f32[8,64] = Gelu(%h1) @"gelu"
  %o0: f32[8,32] = MatMul(%h, %w2) @"fc2"
  %y: f32[8,32] = Add(%o0, %b2) @"bias2"
  return %y
}"""

REDUCE = """
graph reduce(%x: f32[4,8,16]) {
  %axes: i64[1] = const [-1]
  %t: f32[4,16,8] = Transpose(%x) {perm=[0,2,1]} @"transpose"
  %r: f32[4,16,8] = Relu(%t) @"relu"
  %s: f32[4,16,1] = ReduceSum(%r, %axes) {keepdims=1} @"sum"
  %y: f32[4,16,1] = Sigmoid(%s) @"sigmoid"
  return %y
}"""

SOFTMAX_DECOMPOSED = """
graph softmax_decomposed(%x: f32[4,16]) {
  %axes: i64[1] = const [-1]
  %e: f32[4,16] = Exp(%x) @"exp"
  %s: f32[4,1] = ReduceSum(%e, %axes) {keepdims=1} @"sum"
  %y: f32[4,16] = Div(%e, %s) @"div"
  return %y
}"""


def long_chain(n: int) -> str:
    lines = ["graph chain(%x: f32[4]) {"]
    lines += [f"  %c{i}: f32[4] = const [{i}.0,1.0,2.0,3.0]" for i in range(n)]
    prev = "x"
    for i in range(n):
        lines.append(f"  %t{i}: f32[4] = Add(%{prev}, %c{i}) @\"add{i}\"")
        prev = f"t{i}"
    lines += [f"  return %{prev}", "}"]
    return "\n".join(lines)


# ---- Reading plans -----------------------------------------------------------------------
def blocks(p: P.FusionPlan) -> list[list[str]]:
    return [[n.name for n in b.nodes] for b in p.blocks]


def block_sets(p: P.FusionPlan) -> set[frozenset[str]]:
    return {frozenset(b) for b in blocks(p)}


def reasons(p: P.FusionPlan) -> dict[tuple[str, str], P.Reason]:
    """The reason of each (producer, consumer) pair, by node names."""
    return {(r.producer.name, r.consumer.name): r for r in p.reasons}


def why(p: P.FusionPlan) -> dict[tuple[str, str], str]:
    return {pair: r.why for pair, r in reasons(p).items()}


def feeds_for(g: df.ECG, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in g.inputs}


# ---- Checking plans ----------------------------------------------------------------------
def check_blocks_partition_in_order(g, p: P.FusionPlan) -> None:
    """Every node in exactly one block, and the blocks in topological order (every edge goes
    forward, so there is no cycle)."""
    assert sorted(n.id for b in p.blocks for n in b.nodes) == [n.id for n in g.nodes]
    block_of = {n.id: b.id for b in p.blocks for n in b.nodes}
    for n in g.nodes:
        for v in n.inputs:
            if v is not None and v.producer is not None:
                assert block_of[v.producer.id] <= block_of[n.id]


def check_block_by_block_equals_whole_graph(g: df.ECG, p: P.FusionPlan) -> None:
    """Running the plan block by block computes exactly what the graph computes."""
    feeds = feeds_for(g)
    want = g.run_reference(feeds)
    got = p.run_reference(feeds)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


# ---- Random DAGs -------------------------------------------------------------------------
@st.composite
def random_graphs(draw, ops: list[str]):
    """Small DAGs over [1,4,4,4] tensors with every mapping type, diamonds and fan-out, drawn
    from `ops` (op names, and BroadcastMul: a Mul by a computed [1,4,1,1] gate)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    g = _core.Graph("random")
    vals = [g.add_input("x", "f32", [1, 4, 4, 4])]
    w = g.add_constant("w", (rng.standard_normal((4, 4, 3, 3)) * 0.2).astype(np.float32))
    shape = g.add_constant("shape", np.array([1, 4, 4, 4], np.int64))
    axes = g.add_constant("axes", np.array([2, 3], np.int64))
    starts = g.add_constant("starts", np.array([0], np.int64))
    ends = g.add_constant("ends", np.array([4], np.int64))
    if "BatchNormalization" in ops:
        bnp = [g.add_constant(f"bn{i}", (1 + 0.1 * rng.random(4)).astype(np.float32)) for i in range(4)]
    small = []  # [1,4,1,1] tensors from reductions
    for i in range(draw(st.integers(1, 14))):
        op = draw(st.sampled_from(ops))
        a = vals[draw(st.integers(0, len(vals) - 1))]
        b = vals[draw(st.integers(0, len(vals) - 1))]
        if op in ("Relu", "Sigmoid", "Gelu", "Clip"):
            out = g.add_node(op, [a], {}, 1, f"n{i}")
        elif op in ("Add", "Mul"):
            out = g.add_node(op, [a, b], {}, 1, f"n{i}")
        elif op == "Transpose":
            out = g.add_node(op, [a], {"perm": [0, 1, 3, 2]}, 1, f"n{i}")
        elif op == "Reshape":
            out = g.add_node(op, [a, shape], {}, 1, f"n{i}")
        elif op == "Slice":
            out = g.add_node(op, [a, starts, ends], {}, 1, f"n{i}")
        elif op == "BatchNormalization":
            out = g.add_node(op, [a, *bnp], {}, 1, f"n{i}")
        elif op == "Conv":
            out = g.add_node(op, [a, w, None], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 1, f"n{i}")
        elif op == "Softmax":
            out = g.add_node(op, [a], {"axis": -1}, 1, f"n{i}")
        elif op == "ReduceMean":
            small += g.add_node(op, [a, axes], {"keepdims": 1}, 1, f"n{i}")
            continue
        else:  # BroadcastMul: a computed [1,4,1,1] gate (One-to-Many)
            if not small:
                small += g.add_node("ReduceMean", [b, axes], {"keepdims": 1}, 1, f"n{i}.gate")
            gate = small[draw(st.integers(0, len(small) - 1))]
            out = g.add_node("Mul", [a, gate], {}, 1, f"n{i}")
        vals += out
    used = {v.id for n in g.nodes for v in n.inputs if v is not None}
    outs = [v for v in vals[1:] + small if v.id not in used] or [vals[-1]]
    g.set_outputs(outs)
    return g
