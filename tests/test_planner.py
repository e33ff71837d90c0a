"""The DNNFusion planner (cpp/plan/, paper §4.3): kernel counts on canonical subgraphs
written in ECG text, no cycles on random DAGs, explanations for every pair, the
profiling database, and block-by-block reference execution equal to the whole graph's."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dnnfusion as df
from dnnfusion import _core
from dnnfusion.builtin import tiny_convnet

from canonical_graphs import (
    ATTENTION, CONV_BN, CONV_BN_RELU, DIAMOND, ELEMENTWISE, FANOUT, GEMM_BIAS_GELU,
    GEMM_BIAS_GELU_DECOMPOSED, RESHAPE_FANOUT, RESIDUAL, RESIDUAL_INNER, P, block_sets, blocks,
    check_block_by_block_equals_whole_graph, check_blocks_partition_in_order, ecg, long_chain,
    random_graphs, reasons, why)


# ---- Kernel counts, with the reasoning from the paper's rules --------------------------
def test_conv_bn_relu_chain():
    # All One-to-One ops have equal outputs, so the seed is the first, b1. Its successor r1
    # fuses (green); r1's successor c2 is Many-to-Many and deferred (prologues last); the
    # predecessor c1 fuses (Many-to-Many + One-to-One, green: an epilogue); now c2 would be
    # a second Many-to-Many (red). The next seed b2 takes r2 and c2 the same way.
    p = P.plan(ecg(CONV_BN_RELU))
    assert blocks(p) == [["c1", "b1", "r1"], ["c2", "b2", "r2"]]
    assert [b.fused_type for b in p.blocks] == ["Many-to-Many"] * 2
    assert [b.seed.name for b in p.blocks] == ["b1", "b2"]
    # removed: c1, b1, c2, b2 outputs (f32[1,8,8,8] = 2048 B each); r1's is read by c2.
    assert p.stats == {"operators_before": 6, "kernels_after": 2, "intermediates_removed": 4,
                       "intermediate_bytes_removed": 4 * 2048}
    assert blocks(P.plan(ecg(CONV_BN))) == [["c1", "b1"]]


def test_residual_block():
    # As the chain; then the second seed b2 grows along successors through add (its other
    # input is a graph input) and r3, and takes c2 as its anchor.
    p = P.plan(ecg(RESIDUAL))
    assert blocks(p) == [["c1", "b1", "r1"], ["c2", "b2", "add", "r3"]]


def test_residual_block_with_an_inner_skip():
    # Seed r0: its consumer add would form a cycle (r0 -> c1 -> ... -> add), c1 is a
    # deferred Many-to-Many, and c0 joins as the anchor. Then {c1,b1,r1} as in the chain,
    # and b2 grows through add (r0 is already fused) and r3, anchored on c2.
    p = P.plan(ecg(RESIDUAL_INNER))
    assert blocks(p) == [["c0", "r0"], ["c1", "b1", "r1"], ["c2", "b2", "add", "r3"]]
    assert "cycle" in why(p)[("r0", "add")]


def test_attention_block():
    # The only One-to-One op is the scale: it seeds, Softmax is deferred and its producer qk
    # joins (epilogue); Softmax is then red (Many-to-Many twice). The Transposes and
    # Reshapes of Q and K are yellow predecessors of the MatMul (Shuffle/Reorganize +
    # Many-to-Many); the estimate fuses them (a rank-4 index map costs 8 ops per element,
    # removing the tensor saves 32), and the Q/K projections are red. With no One-to-One op
    # left, seeds go by size and then topological order: q, k alone; v takes its Reshape
    # and Transpose as epilogues (yellow, estimate: fuse); Softmax alone (pv is red); pv
    # takes o_t and o_r; o_proj alone.
    g = ecg(ATTENTION)
    p = P.plan(g)
    assert block_sets(p) == {
        frozenset({"q"}), frozenset({"k"}), frozenset({"v", "v_r", "v_t"}),
        frozenset({"q_r", "q_t", "k_r", "k_t", "qk", "scale"}), frozenset({"softmax"}),
        frozenset({"pv", "o_t", "o_r"}), frozenset({"o_proj"})}
    assert len(p) == 7
    # Horizontal fusion groups the Q/K/V projections (same op, same input %x).
    h = P.plan(g, horizontal=True)
    assert len(h) == 5
    assert frozenset({"q", "k", "v", "v_r", "v_t"}) in block_sets(h)
    assert any(r.why.startswith("horizontal:") and r.fused for r in h.reasons)


def test_gemm_bias_gelu():
    # Seed: the bias Add (first of two equal One-to-One ops); gelu follows, gemm is the
    # anchor: one kernel.
    assert blocks(P.plan(ecg(GEMM_BIAS_GELU))) == [["gemm", "bias", "gelu"]]
    # Decomposed: h = bias has two consumers. Growing from bias, `mul` first forms a cycle
    # (bias -> div -> erf -> add1 -> mul), is retried once add1 has joined, and fuses.
    p = P.plan(ecg(GEMM_BIAS_GELU_DECOMPOSED))
    assert len(p) == 1
    assert all(r.fused for r in p.reasons)


def test_elementwise_chain():
    # One-to-One with anything fuses: one kernel.
    p = P.plan(ecg(ELEMENTWISE))
    assert blocks(p) == [["relu", "mul", "add", "sigmoid", "tanh"]]
    assert p.blocks[0].fused_type == "One-to-One"


def test_diamond():
    # Seed relu; its consumer mul fuses (no path around); predecessors nearest first:
    # sigmoid (green), then conv (green, every consumer now inside): one kernel and the
    # multi-consumer Conv output never reaches memory.
    p = P.plan(ecg(DIAMOND))
    assert blocks(p) == [["conv", "relu", "sigmoid", "mul"]]
    assert p.stats["intermediates_removed"] == 3


def test_multi_consumer_producer_still_written():
    # relu feeds mul (fused, green) and conv2 (red once conv is the anchor): relu's output
    # is still written, and the reason says so.
    p = P.plan(ecg(FANOUT))
    assert blocks(p) == [["conv", "relu", "mul"], ["conv2"]]
    rs = reasons(p)
    assert rs[("relu", "mul")].fused and "still written" in rs[("relu", "mul")].why
    assert not rs[("relu", "conv2")].fused


def test_yellow_pair_with_a_tensor_still_written_is_not_fused():
    # Reshape -> MatMul is yellow; the reshaped tensor is read by two MatMuls, so fusing it
    # into one removes nothing: rejected without profiling. Horizontal fusion groups m1, m2.
    g = ecg(RESHAPE_FANOUT)
    p = P.plan(g)
    assert len(p) == 3
    assert "still be written" in why(p)[("reshape", "m1")]
    h = P.plan(g, horizontal=True)
    assert block_sets(h) == {frozenset({"reshape"}), frozenset({"m1", "m2"})}


def test_tiny_convnet_plan():
    # se.gate (the smallest One-to-One) seeds {se.gate, se.scale}; se.pool -> gate is yellow
    # and the broadcast would recompute the pooling 64 times (rejected). Conv-BN-ReLU pairs
    # and skip.conv + residual as in the residual test; pool takes both Transposes (yellow,
    # estimate: fuse); flatten joins fc; softmax, gap and se.pool stand alone.
    p = P.plan(tiny_convnet())
    assert block_sets(p) == {
        frozenset({"block1.conv", "block1.bn", "block1.relu"}),
        frozenset({"block2.conv", "block2.bn", "block2.relu"}),
        frozenset({"skip.conv", "residual"}), frozenset({"pool", "to_nhwc", "to_nchw"}),
        frozenset({"se.pool"}), frozenset({"se.gate", "se.scale"}), frozenset({"gap"}),
        frozenset({"flatten", "fc"}), frozenset({"softmax"})}
    assert p.stats["operators_before"] == 18 and p.stats["kernels_after"] == 9


def test_opencl_kernel_argument_limit():
    g = ecg(long_chain(140))  # one input, 140 weights, one output
    assert len(P.plan(g)) == 1
    p = P.plan(g, target="opencl")
    assert len(p) == 2
    for b in p.blocks:
        assert len(b.inputs) + len(b.outputs) <= 128
    assert any("kernel-argument limit" in r.why for r in p.reasons)
    assert len(P.plan(g, max_kernel_args=10)) > 10


# ---- Invariants on random DAGs -------------------------------------------------------
OPS = ["Relu", "Sigmoid", "Add", "Mul", "Transpose", "Reshape", "Conv", "Softmax",
       "ReduceMean", "BroadcastMul", "Slice"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(OPS), st.booleans(), st.sampled_from([0, 3, 5]))
def test_random_dags_give_valid_plans(graph, horizontal, max_args):
    if not graph.nodes:
        return
    p = P.plan(graph, horizontal=horizontal, max_kernel_args=max_args)
    nodes = graph.nodes
    # Every node in exactly one block; blocks in topological order (no cycle).
    check_blocks_partition_in_order(graph, p)
    for b in p.blocks:
        anchors = [n for n in b.nodes if n.mapping_type == "Many-to-Many"]
        assert len(anchors) <= 1 or horizontal
        if max_args and len(b.nodes) > 1 and not horizontal:
            assert len(b.inputs) + len(b.outputs) <= max_args
    # Every edge has a reason, and the plan computes what the graph computes.
    pairs = {(r.producer.id, r.consumer.id) for r in p.reasons}
    for n in nodes:
        for v in n.inputs:
            if v is not None and v.producer is not None:
                assert (v.producer.id, n.id) in pairs
    assert not any("not examined" in r.why for r in p.reasons)
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32)
    want = df.ECG(graph).run_reference(x)
    for a, b in zip(p.run_reference(x), want):
        np.testing.assert_array_equal(a, b)


def test_would_create_cycle_and_finalize_checks():
    g = ecg(DIAMOND).graph  # conv(0) -> relu(1), sigmoid(2) -> mul(3)
    # {conv, mul} with relu outside: conv -> relu -> mul runs through another group.
    assert _core.would_create_cycle(g, [0, 1, 2, 0], 0, 1) is False
    assert _core.would_create_cycle(g, [0, 1, 2, 3], 0, 3) is True
    assert _core.would_create_cycle(g, [0, 1, 1, 3], 0, 1) is False
    assert _core.would_create_cycle(g, [0, 0, 2, 3], 0, 3) is True
    with pytest.raises(df.InternalError, match="cycle"):
        _core.finalize_plan(g, [0, 1, 2, 0])
    with pytest.raises(df.InternalError, match="no block"):
        _core.finalize_plan(g, [0, -1, 2, 0])
    ok = _core.finalize_plan(g, [5, 7, 7, 9], [1])
    assert [b["nodes"] for b in ok.blocks] == [[0], [1, 2], [3]]
    assert [b["fused_type"] for b in ok.blocks] == ["Many-to-Many", "One-to-One", "One-to-One"]
    assert ok.blocks[1]["seed"] == 1 and ok.blocks[0]["seed"] is None


# ---- Explanations and output formats ---------------------------------------------------
CANONICAL = [CONV_BN_RELU, CONV_BN, RESIDUAL, RESIDUAL_INNER, ATTENTION, GEMM_BIAS_GELU,
             GEMM_BIAS_GELU_DECOMPOSED, ELEMENTWISE, DIAMOND, FANOUT, RESHAPE_FANOUT]


@pytest.mark.parametrize("text", CANONICAL + [None], ids=lambda t: t.split("(")[0].split()[-1] if t else "tiny_convnet")
def test_explain_has_a_reason_for_every_pair(text):
    g = ecg(text) if text else tiny_convnet()
    p = P.plan(g)
    text_out = p.explain()
    fused_lines = [l for l in text_out.splitlines() if l.startswith("  fused ")]
    rejected = text_out.split("Not fused:")[1] if "Not fused:" in text_out else ""
    for n in g.nodes:
        for v in n.inputs:
            if v is None or v.producer is None:
                continue
            tag = f"{v.producer.name} -> {n.name}: "
            if p.block_of(v.producer) is p.block_of(n):
                assert any(tag in l for l in fused_lines), tag
            else:
                assert tag in rejected, tag
    for b in p.blocks:
        assert f"Block {b.id} ({b.fused_type}" in text_out
    for r in p.reasons:
        assert r.why and ("table:" in r.why or "already fused" in r.why or "prologue" in r.why
                          or "same block" in r.why or "horizontal" in r.why)


def test_json_and_dot():
    g = tiny_convnet()
    p = P.plan(g)
    d = json.loads(p.to_json())
    assert d["planner"] == "dnnfusion" and d["graph"] == "tiny_convnet"
    assert d["stats"]["kernels_after"] == len(d["blocks"]) == len(p)
    assert [[n["name"] for n in b["nodes"]] for b in d["blocks"]] == blocks(p)
    assert {b["seed"] for b in d["blocks"]} == {b.seed.name for b in p.blocks}
    assert len(d["reasons"]) == len(p.reasons) and all("why" in r for r in d["reasons"])
    dot = p.to_dot()
    assert dot.startswith("digraph") and dot.count("subgraph cluster_") == len(p)
    assert dot.count("->") == sum(1 for n in g.nodes for v in {x.id: x for x in n.inputs if x is not None}.values()
                                  if v.producer is not None)


def test_bad_planner_or_target_is_a_user_error():
    g = ecg(ELEMENTWISE)
    with pytest.raises(df.Error, match="unknown planner"):
        P.plan(g, planner="magic")
    with pytest.raises(df.Error, match="unknown target"):
        P.plan(g, target="tpu")
    with pytest.raises(TypeError):
        P.plan("not a graph")


# ---- Block-by-block execution == whole-graph execution ---------------------------------
@pytest.mark.parametrize("horizontal", [False, True])
@pytest.mark.parametrize("text", CANONICAL + [None], ids=lambda t: t.split("(")[0].split()[-1] if t else "tiny_convnet")
def test_block_by_block_reference_equals_whole_graph(text, horizontal):
    g = ecg(text) if text else tiny_convnet()
    check_block_by_block_equals_whole_graph(g, P.plan(g, horizontal=horizontal))


# ---- Profiling database ----------------------------------------------------------------
def flatten_fc_entry(fused_ms: float, unfused_ms: float) -> dict:
    # tiny_convnet's flatten -> fc pair: a Reorganize producer into a Many-to-Many, with
    # a [1,32] intermediate.
    return {"target": P.profile_target("cpu"), "producer": "Flatten", "consumer": "Gemm",
            "producer_type": "Reorganize", "consumer_type": "Many-to-Many",
            "bucket": P.shape_bucket(32), "fused_ms": fused_ms, "unfused_ms": unfused_ms}


def test_measured_entries_decide_yellow_cells(tmp_path):
    g = tiny_convnet()
    base = P.plan(g)
    assert "no profile entry; analytic estimate" in why(base)[("flatten", "fc")]

    db = tmp_path / "profile.jsonl"
    P.write_profile_db(db, [flatten_fc_entry(2.0, 1.0)])  # fusing measured slower
    p = P.plan(g, profile_db=db)
    r = reasons(p)[("flatten", "fc")]
    assert not r.fused and "profile: fused 2.0000 ms >= unfused 1.0000 ms -> keep apart" in r.why
    # flatten then becomes the epilogue of gap instead (Many-to-Many + Reorganize, estimate).
    assert {frozenset({"gap", "flatten"}), frozenset({"fc"})} <= block_sets(p)

    P.write_profile_db(db, [flatten_fc_entry(0.5, 1.0)])  # same key: replaced
    assert len(P.read_profile_db(db)) == 1
    p = P.plan(g, profile_db=db)
    r = reasons(p)[("flatten", "fc")]
    assert r.fused and "profile: fused 0.5000 ms < unfused 1.0000 ms -> fuse" in r.why

    # An entry for another machine is not used.
    other = dict(flatten_fc_entry(2.0, 1.0), target="cpu:some other machine|avx2")
    P.write_profile_db(db, [other], merge=False)
    assert block_sets(P.plan(g, profile_db=db)) == block_sets(base)


def test_profile_db_round_trip(tmp_path):
    db = tmp_path / "p.jsonl"
    entries = [flatten_fc_entry(1.25, 1.5),
               dict(flatten_fc_entry(3.0, 2.0), producer="Transpose", producer_type="Shuffle",
                    bucket="2^10", target='opencl:Mali "G78"\n')]
    P.write_profile_db(db, entries)
    # Written entries are stamped with the code generator whose output they measured.
    stamped = [dict(e, generator=_core.PROFILE_GENERATOR) for e in entries]
    assert P.read_profile_db(db) == stamped
    lines = db.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(l)["fused_ms"] > 0 for l in lines)
    # Other keys are ignored, blank lines skipped.
    db.write_text(lines[0][:-1] + ', "measured_on": "2024-01-01", "runs": 10}\n\n' + lines[1] + "\n")
    assert P.read_profile_db(db) == stamped


def test_rows_measured_on_another_generator_settle_nothing(tmp_path):
    """A row stamped with another code generator (or none: written before the stamp) measured
    code this version no longer generates: it stays in the file but the pair falls back to the
    estimate, and the explanation says which row was set aside."""
    g = tiny_convnet()
    base = P.plan(g, profile_db="")
    db = tmp_path / "p.jsonl"
    P.write_profile_db(db, [dict(flatten_fc_entry(2.0, 1.0), generator=_core.PROFILE_GENERATOR - 1)])
    old = P.plan(g, profile_db=db)
    assert block_sets(old) == block_sets(base)
    assert (
        f"profile (yellow): Reorganize/Shuffle with Many-to-Many needs profiling; no profile entry for this code generator (the row in {db} measured generator "
        f"{_core.PROFILE_GENERATOR - 1}'s code, now {_core.PROFILE_GENERATOR}); analytic estimate") in why(old)[("flatten", "fc")]
    line = json.loads(db.read_text())
    del line["generator"]  # a row from before the stamp
    db.write_text(json.dumps(line) + "\n")
    assert P.read_profile_db(db)[0]["generator"] == 0
    assert block_sets(P.plan(g, profile_db=db)) == block_sets(base)
    P.write_profile_db(db, [flatten_fc_entry(2.0, 1.0)])  # measured now: it settles the pair
    assert "profile: fused 2.0000 ms >= unfused 1.0000 ms -> keep apart" in why(P.plan(g, profile_db=db))[("flatten", "fc")]


@pytest.mark.parametrize("content,fragment", [
    ('{"target": "cpu"', "line 1"),
    ("not json\n", "line 1"),
    ('{"target": "x", "producer": "A", "consumer": "B", "producer_type": "Shuffle"}\n', "missing key"),
    ('{"target": "x", "producer": "A", "consumer": "B", "producer_type": "Diagonal", '
     '"consumer_type": "Shuffle", "bucket": "2^3", "fused_ms": 1, "unfused_ms": 2}\n', "not a mapping type"),
    ('{"target": "x", "producer": "A", "consumer": "B", "producer_type": "Shuffle", '
     '"consumer_type": "Shuffle", "bucket": "2^3", "fused_ms": -1, "unfused_ms": 2}\n', "positive"),
    ('{"target": ["x"]}\n', "nested"),
])
def test_corrupt_profile_db_is_a_model_format_error(tmp_path, content, fragment):
    db = tmp_path / "bad.jsonl"
    db.write_text(content)
    with pytest.raises(df.ModelFormatError, match=re.escape(fragment)):
        P.read_profile_db(db)
    with pytest.raises(df.ModelFormatError, match=re.escape(fragment)):
        P.plan(tiny_convnet(), profile_db=db)


def test_missing_profile_db_is_an_error(tmp_path):
    # (Profiling itself is tested in test_profiling.py.)
    with pytest.raises(df.ModelFormatError, match="cannot be read"):
        P.plan(tiny_convnet(), profile_db=tmp_path / "absent.jsonl")
    assert P.profile_target("cpu").startswith("cpu:")
    assert P.shape_bucket(1) == "2^0" and P.shape_bucket(1000) == "2^9" and P.shape_bucket(1024) == "2^10"


def test_blocks_stay_convex_when_a_path_crosses_another_block():
    """Regression (found by the memory-plan property test): n6 reads n2 and n8 reads n0;
    once {n2, n3} and {n0, n5} are blocks, a path can enter a block at one node and leave
    at another, so reachability must be checked between blocks, not nodes."""
    g = df.parse("""
    graph random(%x: f32[1,4,4,4]) {
      %axes: i64[2] = const [2,3]
      %t2: f32[1,4,1,1] = ReduceMean(%x, %axes) {keepdims=1} @"n0"
      %t4: f32[1,4,1,1] = ReduceMean(%x, %axes) {keepdims=1} @"n2"
      %t5: f32[1,4,1,1] = Add(%t4, %t2) @"n3"
      %t7: f32[1,4,1,1] = Relu(%t2) @"n5"
      %t8: f32[1,4,1,1] = ReduceMean(%t4, %axes) {keepdims=1} @"n6"
      %t10: f32[1,4,1,1] = Add(%t8, %t2) @"n8"
      return %t8
    }""")
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32)
    for planner in ("dnnfusion", "tvm", "dp", "patterns", "none"):
        p = df.plan.plan(g, planner=planner)
        np.testing.assert_array_equal(p.run_reference(x)[0], g.run_reference(x)[0])
