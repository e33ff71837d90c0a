"""The memory plan (cpp/runtime/memory_plan.cc): intermediate tensors that survive fusion
share one arena by liveness. Tensors live at the same time never share a byte, a chain of
equal tensors needs two slots, a diamond keeps both branches, and the checker catches
every way a plan can go wrong; random DAGs under every planner always pass it."""

from __future__ import annotations

import copy
import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dnnfusion as df
from dnnfusion import _core
from dnnfusion.builtin import tiny_convnet


P = importlib.import_module("dnnfusion.plan")

CONV = "{kernel_shape=[3,3], pads=[1,1,1,1]}"


def const_line(name: str, a: np.ndarray) -> str:
    """A graph-text line binding %name to the f32 array a."""
    return f"  %{name}: f32[{','.join(map(str, a.shape))}] = const 0x{a.astype('<f4').tobytes().hex()}"


def one_block_per_node(g: df.ECG) -> P.FusionPlan:
    """The unfused plan: every operator its own kernel, in graph order."""
    graph = g.graph if isinstance(g, df.ECG) else g
    return P.FusionPlan(graph, _core.finalize_plan(graph, list(range(len(graph.nodes)))))


def align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


def independent_check(plan: P.FusionPlan, mem: dict) -> None:
    """The checker's promise, restated in Python: lifetimes from the Python plan's blocks,
    then no two tensors live at one time share a byte."""
    outputs = {v.id for v in plan.graph.outputs}
    live = {}
    for t, b in enumerate(plan.blocks):
        for v in b.outputs:
            if v.id not in outputs:
                live[v.id] = [t, t]
    for t, b in enumerate(plan.blocks):
        for v in b.inputs:
            if v.id in live:
                live[v.id][1] = max(live[v.id][1], t)
    bufs = {b["value"]: b for b in mem["buffers"]}
    handed = set()  # (y, r): y written in place of r, in r's last block
    for b in mem["buffers"]:
        if b.get("shares", -1) >= 0:
            r = bufs[b["shares"]]
            assert (b["offset"], b["size"]) == (r["offset"], r["size"]), (b, r)
            assert r["within"] == -1 and b["within"] == -1, (b, r)
            handed.add((b["value"], r["value"]))
    for b in mem["buffers"]:  # a Concat its own block consumes holds its inputs: live there
        if b["within"] >= 0 and b["within"] not in live:
            (t,) = [t for t, blk in enumerate(plan.blocks) if any(n.outputs[0].id == b["within"] for n in blk.nodes)]
            live[b["within"]] = [t, t]
    assert set(bufs) == set(live)
    for y, r in handed:
        assert live[r][1] == live[y][0], (y, r, live[r], live[y])  # handed over in r's last block
    assert len({r for _, r in handed}) == len(handed)  # r's bytes go to one tensor
    for vid, (first, last) in live.items():
        b = bufs[vid]
        assert b["first"] <= first and b["last"] >= last
        # a Concat's input placed in its bytes starts at its run, aligned as the plan's runs are
        assert b["offset"] % (mem["alignment"] if b["within"] < 0 else mem.get("run_alignment", mem["alignment"])) == 0
        assert b["offset"] + extent(b) <= mem["arena_bytes"]
        if b["within"] >= 0:  # a Concat's input in the Concat's bytes: at its part, while they are kept
            x = bufs[b["within"]]
            at, row, stride = concat_part(plan.graph, b["within"], vid)
            assert (b["offset"], b.get("row", 0), b.get("stride", 0)) == (x["offset"] + at, row, stride), (b, x)
            assert x["first"] <= first and x["last"] >= last, (b, x)
        else:
            assert b.get("row", 0) == 0, b  # rows only inside a Concat
    def root(b):
        while b.get("shares", -1) >= 0:
            b = bufs[b["shares"]]
        return b["value"]

    items = list(bufs.values())
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            if a["within"] == b["value"] or b["within"] == a["value"]:
                continue
            if a["within"] >= 0 and a["within"] == b["within"]:  # parts of one Concat, each checked above
                continue
            if root(a) == root(b):  # one chain of in-place results: handed over, checked above
                continue
            if a["first"] <= b["last"] and b["first"] <= a["last"] and a["size"] and b["size"]:
                assert (a["offset"] + extent(a) <= b["offset"] or b["offset"] + extent(b) <= a["offset"]), (a, b)


FLAT_VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")  # the same bytes in the same order


def bytes_of(graph, v: int, u: int) -> bool:
    """Whether value v is u, or a chain of flat views of u."""
    producer = {o.id: n for n in graph.nodes for o in n.outputs}
    while v != u:
        n = producer.get(v)
        if n is None or n.op not in FLAT_VIEWS:
            return False
        v = n.inputs[0].id
    return True


def extent(b: dict) -> int:
    """The bytes from a buffer's first to its last (rows: the gaps between them too)."""
    if not b.get("row", 0) or not b["size"]:
        return b["size"]
    return (b["size"] // b["row"] - 1) * b["stride"] + b["row"]


def concat_part(graph, x: int, u: int) -> tuple[int, int, int]:
    """(at, row, stride): where input u of x = Concat(...) lies in x's bytes: one run from
    `at` (row 0; only ones before the axis, where u may also be what an input is a flat view
    of), or rows of `row` bytes `stride` apart, the first at `at`."""
    (cat,) = [n for n in graph.nodes if n.outputs[0].id == x]
    assert cat.op == "Concat", cat.op
    shape = cat.outputs[0].shape
    axis = cat.attrs["axis"] % len(shape)
    inner = 4 * int(np.prod(shape[axis + 1:]))
    outer = int(np.prod(shape[:axis]))
    at = 0
    for v in cat.inputs:
        if (bytes_of(graph, v.id, u) if outer == 1 else v.id == u):
            return (at, 0, 0) if outer == 1 else (at, v.shape[axis] * inner, shape[axis] * inner)
        at += v.shape[axis] * inner
    raise AssertionError(f"{u} is not an input of {x}")


def planned(g, plan, in_place=(), run_alignment=0, row_writers=()) -> dict:
    mem = _core.plan_memory(g, plan, in_place=list(in_place), run_alignment=run_alignment,
                            row_writers=list(row_writers))
    _core.check_memory_plan(g, plan, mem)
    independent_check(plan, mem)
    assert mem["peak_bytes"] <= mem["arena_bytes"] <= mem["naive_bytes"]
    assert mem["intermediate_bytes"] == sum(b["size"] for b in mem["buffers"])
    return mem


# ---- Models ------------------------------------------------------------------------------
@pytest.mark.parametrize("planner", ["dnnfusion", "unfused"])
def test_tiny_convnet(planner):
    g = tiny_convnet()
    plan = one_block_per_node(g) if planner == "unfused" else P.plan(g)
    mem = planned(g, plan)
    assert mem["buffers"] and mem["arena_bytes"] <= mem["intermediate_bytes"]
    assert mem["arena_bytes"] < mem["intermediate_bytes"]  # reuse happens
    # The buffers are exactly the block outputs that are not graph outputs, with their sizes.
    outs = {v.id for v in g.outputs}
    expect = {v.id: v for b in plan.blocks for v in b.outputs if v.id not in outs}
    assert {b["value"] for b in mem["buffers"]} == set(expect)
    for b in mem["buffers"]:
        v = expect[b["value"]]
        assert b["name"] == v.name
        assert b["size"] == int(np.prod(v.shape)) * df.ecg.numpy_dtype(v.dtype).itemsize
    # Accepts the C++ objects as well as the Python wrappers.
    assert _core.plan_memory(g.graph, plan.core) == mem


def test_fusion_shrinks_what_needs_memory():
    g = tiny_convnet()
    fused, unfused = planned(g, P.plan(g)), planned(g, one_block_per_node(g))
    assert len(fused["buffers"]) < len(unfused["buffers"])
    assert fused["intermediate_bytes"] < unfused["intermediate_bytes"]


# ---- Canonical graphs in ECG text ------------------------------------------------------
def relu_chain(n: int, width: int = 1000) -> df.ECG:
    lines = [f"graph chain(%x: f32[1,{width}]) {{"]
    prev = "x"
    for i in range(1, n + 1):
        lines.append(f'  %t{i}: f32[1,{width}] = Relu(%{prev}) @"r{i}"')
        prev = f"t{i}"
    lines += [f"  return %{prev}", "}"]
    return df.parse("\n".join(lines))


@pytest.mark.parametrize("n", [3, 4, 8, 16])
def test_chain_needs_two_slots(n):
    g = relu_chain(n)
    mem = planned(g, one_block_per_node(g))
    assert len(mem["buffers"]) == n - 1  # the last tensor is the graph output
    assert mem["arena_bytes"] == 2 * align(4000)
    assert len({b["offset"] for b in mem["buffers"]}) == 2
    assert mem["intermediate_bytes"] == (n - 1) * 4000


def test_fused_chain_needs_no_arena():
    g = relu_chain(6)
    mem = planned(g, P.plan(g))  # One-to-One ops fuse into one kernel
    assert mem["buffers"] == [] and mem["arena_bytes"] == 0


def test_conv_chain_planned_by_dnnfusion_needs_two_slots():
    # Conv + Relu fuse, Conv + Conv do not: one tensor between each pair of blocks.
    n = 5
    lines = ["graph convs(%x: f32[1,8,8,8]) {"]
    lines += [const_line(f"w{i}", np.full((8, 8, 3, 3), 0.01, np.float32))
              for i in range(n)]
    prev = "x"
    for i in range(n):
        lines.append(f'  %c{i}: f32[1,8,8,8] = Conv(%{prev}, %w{i}, _) {CONV} @"conv{i}"')
        lines.append(f'  %r{i}: f32[1,8,8,8] = Relu(%c{i}) @"relu{i}"')
        prev = f"r{i}"
    lines += [f"  return %{prev}", "}"]
    g = df.parse("\n".join(lines))
    plan = P.plan(g)
    assert len(plan.blocks) == n
    mem = planned(g, plan)
    assert len(mem["buffers"]) == n - 1
    assert mem["arena_bytes"] == 2 * 8 * 8 * 8 * 4


DIAMOND = """
graph diamond(%x: f32[1,256]) {
  %a: f32[1,256] = Relu(%x) @"a"
  %b: f32[1,256] = Sigmoid(%a) @"b"
  %c: f32[1,256] = Tanh(%a) @"c"
  %d: f32[1,256] = Add(%b, %c) @"d"
  return %d
}"""


def test_diamond_keeps_both_branches():
    g = df.parse(DIAMOND)
    mem = planned(g, one_block_per_node(g))
    by_name = {b["name"]: b for b in mem["buffers"]}
    assert (by_name["a"]["first"], by_name["a"]["last"]) == (0, 2)  # read by both branches
    assert (by_name["b"]["first"], by_name["b"]["last"]) == (1, 3)  # alive until the join
    assert (by_name["c"]["first"], by_name["c"]["last"]) == (2, 3)
    assert len({by_name[v]["offset"] for v in "abc"}) == 3
    assert mem["arena_bytes"] == 3 * 1024 == mem["peak_bytes"]


SKIP = """
graph skip(%x: f32[1,64]) {
  %s: f32[1,64] = Relu(%x) @"s"
  %t1: f32[1,128] = Concat(%s, %s) {axis=1} @"t1"
  %t2: f32[1,128] = Sigmoid(%t1) @"t2"
  %t3: f32[1,128] = Tanh(%t2) @"t3"
  %t4: f32[1,64] = Slice(%t3, %st, %en, %ax) @"t4"
  %y: f32[1,64] = Add(%t4, %s) @"y"
  return %y
}"""


def test_long_lived_skip_tensor_is_never_overwritten():
    text = SKIP.replace("{\n", ("{\n  %st: i64[1] = const [0]\n  %en: i64[1] = const [64]\n"
                                "  %ax: i64[1] = const [1]\n"), 1)
    g = df.parse(text)
    mem = planned(g, one_block_per_node(g))
    by_name = {b["name"]: b for b in mem["buffers"]}
    s = by_name["s"]
    assert (s["first"], s["last"]) == (0, 5)
    for other in ("t1", "t2", "t3", "t4"):
        o = by_name[other]
        assert o["offset"] >= s["offset"] + s["size"] or o["offset"] + o["size"] <= s["offset"]
    # t1 and t3 are not live together: they may (and with best fit, do) share memory.
    assert by_name["t1"]["offset"] == by_name["t3"]["offset"]


def test_graph_outputs_that_later_blocks_read_are_not_in_the_arena():
    g = df.parse("""
graph twoout(%x: f32[1,32]) {
  %a: f32[1,32] = Relu(%x) @"a"
  %b: f32[1,32] = Sigmoid(%a) @"b"
  return %a, %b
}""")
    mem = planned(g, one_block_per_node(g))
    assert mem["buffers"] == [] and mem["arena_bytes"] == 0


def test_alignment():
    g = df.parse(DIAMOND.replace("256", "5"))
    mem = _core.plan_memory(g, one_block_per_node(g), alignment=128)
    assert all(b["offset"] % 128 == 0 for b in mem["buffers"])
    assert mem["arena_bytes"] == 3 * 128 and mem["naive_bytes"] == 3 * 128
    assert mem["intermediate_bytes"] == 3 * 20
    with pytest.raises(df.Error, match="power of two"):
        _core.plan_memory(g, one_block_per_node(g), alignment=48)


def test_symbolic_shapes_are_refused():
    g = df.parse("""
graph dyn(%x: f32[batch,8]) {
  %a: f32[batch,8] = Relu(%x) @"a"
  %b: f32[batch,8] = Sigmoid(%a) @"b"
  return %b
}""")
    with pytest.raises(df.ShapeError, match=r"%a has type f32\[batch,8\]"):
        _core.plan_memory(g, one_block_per_node(g))


# ---- The checker catches broken plans ---------------------------------------------------
def broken(mem: dict, edit) -> dict:
    bad = copy.deepcopy(mem)
    edit(bad, {b["name"]: b for b in bad["buffers"]})
    return bad


@pytest.mark.parametrize("edit,message", [
    (lambda m, b: b["c"].update(offset=b["b"]["offset"]), "overlap in memory while both are live"),
    (lambda m, b: b["c"].update(offset=b["b"]["offset"] + 64), "overlap in memory"),
    (lambda m, b: b["a"].update(offset=b["a"]["offset"] + 4), "not aligned"),
    (lambda m, b: b["a"].update(last=1), "is live in blocks [0, 2] but recorded as [0, 1]"),
    (lambda m, b: b["b"].update(size=16), "needs 1024 bytes, its buffer has 16"),
    (lambda m, b: m.update(arena_bytes=1024), "past the arena"),
    (lambda m, b: m["buffers"].remove(b["c"]), "%c has no buffer"),
    (lambda m, b: m["buffers"].append(dict(b["c"])), "%c has two buffers"),
    (lambda m, b: m["buffers"].append(dict(b["c"], value=0)), "%x has a buffer but is not an intermediate"),
], ids=["same-offset", "partial", "misaligned", "short-life", "small", "arena", "missing", "twice", "input"])
def test_checker_rejects(edit, message):
    g = df.parse(DIAMOND)
    plan = one_block_per_node(g)
    mem = planned(g, plan)
    with pytest.raises(df.InternalError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _core.check_memory_plan(g, plan, broken(mem, edit))


def test_sharing_between_tensors_not_live_together_is_allowed():
    g = relu_chain(5)
    plan = one_block_per_node(g)
    mem = planned(g, plan)
    # t1 [0,1] and t3 [2,3] never live together: putting them at one offset is fine.
    ok = broken(mem, lambda m, b: b["t3"].update(offset=b["t1"]["offset"]))
    _core.check_memory_plan(g, plan, ok)


RESIDUALS = """
graph res(%x: f32[1,64]) {
  %a: f32[1,64] = Relu(%x) @"a"
  %b: f32[1,64] = Sigmoid(%a) @"b"
  %c: f32[1,64] = Add(%b, %a) @"c"
  %d: f32[1,64] = Tanh(%c) @"d"
  %e: f32[1,64] = Add(%d, %c) @"e"
  %f: f32[1,64] = Neg(%e) @"f"
  %h: f32[1,32] = Slice(%f, %st, %en, %ax) @"h"
  %k: f32[1,32] = Relu(%h) @"k"
  return %k
}"""


def residuals():
    return df.parse(RESIDUALS.replace("{\n", ("{\n  %st: i64[1] = const [0]\n  %en: i64[1] = const [32]\n"
                                                "  %ax: i64[1] = const [1]\n"), 1))


def test_results_in_place_of_a_residual_take_over_its_bytes():
    """(y, r) pairs a code generator may write in place: y gets r's bytes where r's last reader
    is y's block; a chain (a <- c <- e, a residual stream) is one buffer. A pair whose r is
    read later, whose sizes differ or whose r is taken already keeps its own buffers."""
    g = residuals()
    plan = one_block_per_node(g)
    ids = {v.name: v.id for b in plan.blocks for v in b.outputs}
    mem = planned(g, plan, [(ids["c"], ids["a"]), (ids["e"], ids["c"]), (ids["b"], ids["a"]),
                            (ids["h"], ids["f"]), (ids["d"], ids["c"]), (ids["f"], ids["e"])])
    b = {x["name"]: x for x in mem["buffers"]}
    assert b["c"]["shares"] == ids["a"] and b["e"]["shares"] == ids["c"] and b["f"]["shares"] == ids["e"]
    assert b["a"]["offset"] == b["c"]["offset"] == b["e"]["offset"] == b["f"]["offset"]
    assert (b["a"]["first"], b["a"]["last"]) == (0, 6)  # the chain's root, kept over all of it
    # b: a is read after b's block; h: another size; d: c's bytes went to e (c is read by e).
    assert b["b"]["shares"] == b["h"]["shares"] == b["d"]["shares"] == b["a"]["shares"] == -1
    for name in ("b", "d", "h"):
        assert b[name]["offset"] != b["a"]["offset"], name
    # Without pairs nothing is shared, and the arena is no smaller.
    plain = planned(g, plan)
    assert all(x["shares"] == -1 for x in plain["buffers"])
    assert mem["arena_bytes"] <= plain["arena_bytes"]


@pytest.mark.parametrize("edit,message", [
    (lambda m, b: b["c"].update(offset=b["c"]["offset"] + 256), "shares the bytes of %a but not its offset"),
    (lambda m, b: (b["c"].update(shares=-1), b["b"].update(shares=b["a"]["value"], offset=b["a"]["offset"])),
     "takes over the bytes of %a in block 1, but that tensor's last reader is block 2"),
    (lambda m, b: b["d"].update(shares=b["c"]["value"], offset=b["c"]["offset"]), "taken over by two tensors"),
    (lambda m, b: b["c"].update(shares=0), "%c shares the bytes of %x, which has no buffer"),
], ids=["offset", "read-later", "twice", "no-buffer"])
def test_checker_rejects_wrong_in_place_results(edit, message):
    g = residuals()
    plan = one_block_per_node(g)
    ids = {v.name: v.id for b in plan.blocks for v in b.outputs}
    mem = planned(g, plan, [(ids["c"], ids["a"]), (ids["e"], ids["c"])])
    with pytest.raises(df.InternalError, match=message):
        _core.check_memory_plan(g, plan, broken(mem, edit))


# ---- Random DAGs ------------------------------------------------------------------------
@st.composite
def random_graphs(draw):
    """Small DAGs whose tensors differ in size (Concat doubles channels, ReduceMean shrinks
    to [1,C,1,1]), with fan-out, diamonds, broadcasts and intermediates that are also
    graph outputs."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    g = _core.Graph("random")
    vals = [g.add_input("x", "f32", [1, 4, 4, 4])]
    axes = g.add_constant("axes", np.array([2, 3], np.int64))
    for i in range(draw(st.integers(1, 12))):
        op = draw(st.sampled_from(["Relu", "Sigmoid", "Add", "Mul", "Concat", "ReduceMean", "Conv", "Gate"]))
        a = vals[draw(st.integers(0, len(vals) - 1))]
        same = [v for v in vals if v.shape == a.shape]
        b = same[draw(st.integers(0, len(same) - 1))]
        if op in ("Relu", "Sigmoid"):
            out = g.add_node(op, [a], {}, 1, f"n{i}")
        elif op in ("Add", "Mul"):
            out = g.add_node(op, [a, b], {}, 1, f"n{i}")
        elif op == "Concat" and a.shape[1] <= 8:
            out = g.add_node(op, [a, b], {"axis": 1}, 1, f"n{i}")
        elif op == "ReduceMean":
            out = g.add_node(op, [a, axes], {"keepdims": 1}, 1, f"n{i}")
        elif op == "Gate":  # a * mean(a): a One-to-Many broadcast of a computed tensor
            m = g.add_node("ReduceMean", [a, axes], {"keepdims": 1}, 1, f"n{i}.mean")
            out = g.add_node("Mul", [a, m[0]], {}, 1, f"n{i}")
        else:  # Conv to 4 channels (also the fallback for a Concat that would grow too wide)
            w = g.add_constant(f"w{i}", (rng.standard_normal((4, a.shape[1], 3, 3)) * 0.2).astype(np.float32))
            out = g.add_node("Conv", [a, w, None], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 1, f"n{i}")
        vals += out
    used = {v.id for n in g.nodes for v in n.inputs if v is not None}
    outs = [v for v in vals[1:] if v.id not in used] or [vals[-1]]
    extra = [v for v in vals[1:] if v.id in used and draw(st.integers(0, 5)) == 0]
    g.set_outputs(outs + extra)
    return g


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(), st.sampled_from(["dnnfusion", "dnnfusion-horizontal", "unfused"]))
def test_random_dags_always_pass_the_checker(graph, planner):
    if planner == "unfused":
        plan = one_block_per_node(graph)
    else:
        plan = P.plan(graph, horizontal=planner.endswith("horizontal"))
    planned(graph, plan)
