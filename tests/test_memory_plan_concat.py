"""The memory plan's Concats assembled in place (cpp/plan/memory_plan.cc, BufferSlot::within):
a Concat's inputs that other blocks write placed at their part of its bytes, one run each
(batch 1, with only ones before the axis: at any element on the CPU, through the Reshapes of
detection heads) or rows (a channels-last Concat whose inputs convolutions write with their
pixels ldy apart); the blocks then copy nothing, which the generated code's counts show, and
the checker catches every wrong placement. The rest of the memory plan: test_memory_plan.py."""

from __future__ import annotations

import copy
import importlib
import os

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

from codegen_runner import RUN_LEVEL, _opt_level, prelude_dir  # noqa: E402
from dialects import compile_only, params  # noqa: E402
from test_memory_plan import CONV, align, broken, const_line, one_block_per_node, planned  # noqa: E402

P = importlib.import_module("dnnfusion.plan")


CONCAT = """
graph cat(%x: f32[{n},4,4,4], %y: f32[{n},4,4,4]) {{
  %a: f32[{n},4,4,4] = Relu(%x) @"a"
  %b: f32[{n},4,4,4] = Sigmoid(%y) @"b"
  %c: f32[{n},8,4,4] = Concat(%a, %b) {{axis=1}} @"c"
  %d: f32[{n},8,4,4] = Tanh(%c) @"d"
  return %d
}}"""


def test_concat_inputs_from_other_blocks_are_placed_in_its_bytes():
    """A batch-1 Concat's inputs that other blocks write are placed at their runs of the
    Concat's buffer (`within`), which is then kept from the first of them on: the Concat's own
    block copies nothing (no stage at all here), and the model still computes the reference.
    At batch 2 the runs are not contiguous: every tensor keeps a buffer of its own."""
    g = df.parse(CONCAT.format(n=1))
    plan = one_block_per_node(g)
    mem = planned(g, plan)
    b = {x["name"]: x for x in mem["buffers"]}
    assert b["a"]["within"] == b["b"]["within"] == b["c"]["value"] and b["c"]["within"] == -1
    assert (b["a"]["offset"], b["b"]["offset"]) == (b["c"]["offset"], b["c"]["offset"] + 256)
    assert (b["c"]["first"], b["c"]["last"]) == (0, 3)
    assert mem["arena_bytes"] == 512 and mem["peak_bytes"] == 512
    gen = _core.generate_cpu(g, plan, "scalar")
    (cat,) = [k for k in gen.kernels if k["block"] == 2]
    assert cat["stages"] == [] and gen.counts["passes"] == 3, gen.kernels
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32),
             "y": np.random.default_rng(1).standard_normal((1, 4, 4, 4)).astype(np.float32)}
    got = df.compile(g, planner="none").run(feeds["x"], feeds["y"])[0]  # a block per operator
    np.testing.assert_allclose(got, g.run_reference(**feeds)[0], rtol=1e-6, atol=1e-6)
    g2 = df.parse(CONCAT.format(n=2))
    assert all(x["within"] == -1 for x in planned(g2, one_block_per_node(g2))["buffers"])


def test_a_concat_its_block_convolves_gets_a_buffer_holding_its_inputs():
    """A batch-1 Concat consumed inside its own block (by a convolution there) gets an arena
    buffer live from its first input's block, with the inputs other blocks write placed in it:
    the convolution reads the Concat where it lies, and no loop writes it."""
    w = np.random.default_rng(2).standard_normal((2, 8, 3, 3)).astype("<f4") * 0.2
    g = df.parse("\n".join([
        "graph cc(%x: f32[1,4,4,4], %y: f32[1,4,4,4]) {",
        const_line("w", w),
        '  %a: f32[1,4,4,4] = Relu(%x) @"a"',
        '  %b: f32[1,4,4,4] = Sigmoid(%y) @"b"',
        '  %c: f32[1,8,4,4] = Concat(%a, %b) {axis=1} @"c"',
        f'  %d: f32[1,2,4,4] = Conv(%c, %w, _) {CONV} @"d"',
        "  return %d", "}"]))
    graph = g.graph if isinstance(g, df.ECG) else g
    plan = P.FusionPlan(graph, _core.finalize_plan(graph, [0, 1, 2, 2]))  # Concat and Conv: one block
    mem = planned(g, plan)
    b = {x["name"]: x for x in mem["buffers"]}
    assert b["a"]["within"] == b["b"]["within"] == b["c"]["value"], mem["buffers"]
    assert (b["c"]["first"], b["c"]["last"]) == (0, 2)
    gen = _core.generate_cpu(g, plan, "scalar")
    (k,) = [k for k in gen.kernels if k["block"] == 2]
    assert [s.split(" ")[0] for s in k["stages"]] == ["Conv"] and k["scratch_bytes"] == 0, k
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32),
             "y": np.random.default_rng(1).standard_normal((1, 4, 4, 4)).astype(np.float32)}
    with _opt_level(RUN_LEVEL):  # this plan's module, run
        got = _core.CpuExecutable(g, gen, "scalar", 1, prelude_dir()).run([feeds["x"], feeds["y"]])[0]
    np.testing.assert_allclose(got, g.run_reference(**feeds)[0], rtol=1e-5, atol=1e-5)


RESHAPED_CONCAT = """
graph heads(%x: f32[1,5,3,7], %y: f32[1,2,3,7]) {
  %s: i64[3] = const [1, -1, 3]
  %a: f32[1,5,3,7] = Relu(%x) @"a"
  %b: f32[1,2,3,7] = Sigmoid(%y) @"b"
  %ra: f32[1,35,3] = Reshape(%a, %s) @"ra"
  %rb: f32[1,14,3] = Reshape(%b, %s) @"rb"
  %c: f32[1,49,3] = Concat(%ra, %rb) {axis=1} @"c"
  %d: f32[1,49,3] = Tanh(%c) @"d"
  return %d
}"""


def run_plan(g, plan, isa, feeds):
    """The plan's module for `isa` and its output, run here; compiled only (output None) where
    this CPU lacks the dialect."""
    gen = _core.generate_cpu(g, plan, isa)
    with _opt_level(RUN_LEVEL):
        if compile_only(isa):
            assert os.path.getsize(_core.compile_only(gen, isa, prelude_dir())) > 0
            return gen, None
        return gen, _core.CpuExecutable(g, gen, isa, 2, prelude_dir()).run(list(feeds.values()))[0]


@pytest.mark.parametrize("isa", params())
def test_concat_of_reshaped_outputs_holds_them_at_unaligned_runs(isa):
    """SSD's heads: Concat(Reshape(conv_k), ...) with the Reshapes in the Concat's block. The
    memory plan places what each Reshape views (another block's output) at its run of the
    Concat, at any element on the CPU (run_alignment 1: here %b starts 420 bytes in), so the
    Concat's block has nothing to do; with the runs held to 64 bytes (OpenCL's rule) the Concat
    is not assembled (all its inputs or none) and copies."""
    g = df.parse(RESHAPED_CONCAT)
    graph = g.graph if isinstance(g, df.ECG) else g
    order = [n.name for n in graph.nodes]
    block = {"a": 0, "b": 1, "ra": 2, "rb": 2, "c": 2, "d": 3}
    plan = P.FusionPlan(graph, _core.finalize_plan(graph, [block[n] for n in order]))
    mem = planned(g, plan)  # runs held to the arena's alignment: %b's is not, so none is placed
    assert all(x["within"] == -1 for x in mem["buffers"]), mem["buffers"]
    mem1 = planned(g, plan, run_alignment=1)
    b = {x["name"]: x for x in mem1["buffers"]}
    assert b["a"]["within"] == b["b"]["within"] == b["c"]["value"], mem1["buffers"]
    assert b["b"]["offset"] == b["c"]["offset"] + 420 and mem1["run_alignment"] == 1
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((1, 5, 3, 7)).astype(np.float32),
             "y": rng.standard_normal((1, 2, 3, 7)).astype(np.float32)}
    gen, got = run_plan(g, plan, isa, feeds)
    (cat,) = [k for k in gen.kernels if k["block"] == 2]
    assert cat["stages"] == [] and gen.counts["passes"] == 3, gen.kernels
    if not compile_only(isa):
        np.testing.assert_allclose(got, g.run_reference(**feeds)[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("isa", params())
def test_a_convolution_in_the_concat_block_stores_into_it_through_a_reshape(isa):
    """The last head's convolution runs in the Concat's block: its output, viewed by a Reshape,
    is stored straight into its run of the Concat (an unaligned one), and the other head, made
    by another block, lies in the Concat already: one pass for the block, no copy loop."""
    w = np.random.default_rng(4).standard_normal((6, 4, 3, 3)).astype("<f4") * 0.2
    g = df.parse("\n".join([
        "graph hd(%x: f32[1,4,5,5], %y: f32[1,2,3,7]) {",
        const_line("w", w),
        "  %s: i64[3] = const [1, -1, 3]",
        '  %b: f32[1,2,3,7] = Sigmoid(%y) @"b"',
        '  %rb: f32[1,14,3] = Reshape(%b, %s) @"rb"',
        f'  %k: f32[1,6,5,5] = Conv(%x, %w, _) {CONV} @"k"',
        '  %rk: f32[1,50,3] = Reshape(%k, %s) @"rk"',
        '  %c: f32[1,64,3] = Concat(%rb, %rk) {axis=1} @"c"',
        '  %d: f32[1,64,3] = Tanh(%c) @"d"',
        "  return %d", "}"]))
    graph = g.graph if isinstance(g, df.ECG) else g
    block = {"b": 0, "rb": 1, "k": 1, "rk": 1, "c": 1, "d": 2}
    plan = P.FusionPlan(graph, _core.finalize_plan(graph, [block[n.name] for n in graph.nodes]))
    rng = np.random.default_rng(5)
    feeds = {"x": rng.standard_normal((1, 4, 5, 5)).astype(np.float32),
             "y": rng.standard_normal((1, 2, 3, 7)).astype(np.float32)}
    gen, got = run_plan(g, plan, isa, feeds)
    (k,) = [k for k in gen.kernels if k["block"] == 1]
    assert [s.split(" ")[0] for s in k["stages"]] == ["Conv"] and k["scratch_bytes"] == 0, k
    assert gen.counts["passes"] == 3, gen.kernels
    if not compile_only(isa):
        np.testing.assert_allclose(got, g.run_reference(**feeds)[0], rtol=1e-5, atol=1e-5)


CHANNELS_LAST_CONCAT = """
graph cl(%x: f32[{n},4,4,3], %y: f32[{n},4,4,5]) {{
  %a: f32[{n},4,4,3] = Relu(%x) @"a"
  %b: f32[{n},4,4,5] = Sigmoid(%y) @"b"
  %c: f32[{n},4,4,8] = Concat(%a, %b) {{axis=3}} @"c"
  %d: f32[{n},4,4,8] = Tanh(%c) @"d"
  %e: f32[{n},4,4,3] = Exp({e_reads}) @"e"
  return %d, %e
}}"""


def value_ids(g, *names):
    graph = g.graph if isinstance(g, df.ECG) else g
    by_name = {n.name: n.outputs[0].id for n in graph.nodes}
    return [by_name[n] for n in names]


@pytest.mark.parametrize("n", [1, 2])
def test_a_channels_last_concat_holds_its_inputs_as_rows_where_their_kernels_write_rows(n):
    """Along the last axis each input of a Concat is rows of its bytes (a pixel's channels):
    placed there only when the code generator says each one's kernel writes rows
    (`row_writers`), never otherwise, and never for a tensor something else reads too."""
    g = df.parse(CHANNELS_LAST_CONCAT.format(n=n, e_reads="%x"))
    plan = one_block_per_node(g)
    assert all(x["within"] == -1 for x in planned(g, plan)["buffers"])
    assert all(x["within"] == -1 for x in planned(g, plan, run_alignment=1, row_writers=value_ids(g, "a"))["buffers"])
    # rows 32 bytes apart, off a 64-byte run alignment (OpenCL's): not placed
    assert all(x["within"] == -1 for x in planned(g, plan, row_writers=value_ids(g, "a", "b"))["buffers"])
    mem = planned(g, plan, run_alignment=1, row_writers=value_ids(g, "a", "b"))
    b = {x["name"]: x for x in mem["buffers"]}
    assert b["a"]["within"] == b["b"]["within"] == b["c"]["value"], mem["buffers"]
    assert (b["a"]["offset"] - b["c"]["offset"], b["a"]["row"], b["a"]["stride"]) == (0, 12, 32)
    assert (b["b"]["offset"] - b["c"]["offset"], b["b"]["row"], b["b"]["stride"]) == (12, 20, 32)
    assert (b["c"]["first"], b["c"]["last"]) == (0, 3) and mem["arena_bytes"] == align(n * 512)
    # %a also read by another operator: no rows for any input (all or none), and the checker
    # refuses them there
    g2 = df.parse(CHANNELS_LAST_CONCAT.format(n=n, e_reads="%a"))
    plan2 = one_block_per_node(g2)
    mem2 = planned(g2, plan2, run_alignment=1, row_writers=value_ids(g2, "a", "b"))
    assert all(x["within"] == -1 for x in mem2["buffers"]), mem2["buffers"]
    forged = copy.deepcopy(mem2)
    f = {x["name"]: x for x in forged["buffers"]}
    f["c"].update(first=0)
    f["a"].update(within=f["c"]["value"], offset=f["c"]["offset"], row=12, stride=32)
    f["b"].update(within=f["c"]["value"], offset=f["c"]["offset"] + 12, row=20, stride=32)
    with pytest.raises(df.InternalError, match="%a lies in rows of %c but is read by another operator"):
        _core.check_memory_plan(g2, plan2, forged)


def test_a_concat_along_another_axis_holds_no_rows():
    """Rows are a tensor's last dim, `stride` apart (what a channels-last convolution writes
    with ConvShape::ldy): a Concat along the width of [n, h, w, c] tensors has parts of w * c
    floats per row, which no such kernel writes, so its inputs keep buffers of their own."""
    g = df.parse(CHANNELS_LAST_CONCAT.format(n=1, e_reads="%x").replace("f32[1,4,4,5]", "f32[1,4,4,3]")
                 .replace("f32[1,4,4,8]", "f32[1,4,8,3]").replace("{axis=3}", "{axis=2}"))
    mem = planned(g, one_block_per_node(g), run_alignment=1, row_writers=value_ids(g, "a", "b"))
    assert all(x["within"] == -1 for x in mem["buffers"]), mem["buffers"]


@pytest.mark.parametrize("edit,message", [
    (lambda m, b: b["a"].update(stride=24), r"not at its part of %c \(\d+, rows 12/32\)"),
    (lambda m, b: b["b"].update(row=0, stride=0), "not at its part of %c"),
    (lambda m, b: b["c"].update(row=4, stride=8), "rows outside any Concat|holds %a but lies in another Concat"),
    (lambda m, b: b["a"].update(row=5), "which do not hold its 192 bytes"),
], ids=["wrong-stride", "rows-as-a-run", "rows-outside-a-concat", "rows-not-dividing"])
def test_checker_rejects_wrong_rows(edit, message):
    g = df.parse(CHANNELS_LAST_CONCAT.format(n=1, e_reads="%x"))
    plan = one_block_per_node(g)
    mem = planned(g, plan, run_alignment=1, row_writers=value_ids(g, "a", "b"))
    with pytest.raises(df.InternalError, match=message):
        _core.check_memory_plan(g, plan, broken(mem, edit))


@pytest.mark.parametrize("edit,message", [
    (lambda m, b: b["b"].update(offset=b["a"]["offset"]), "not at its part of %c"),
    (lambda m, b: b["b"].update(within=b["a"]["value"]), "which is not a buffered Concat of it"),
    (lambda m, b: b["c"].update(first=1), "%c's buffer is not kept while %a, in it, is live"),
], ids=["wrong-run", "not-a-concat", "concat-kept-too-late"])
def test_checker_rejects_wrong_placements_in_a_concat(edit, message):
    g = df.parse(CONCAT.format(n=1))
    plan = one_block_per_node(g)
    with pytest.raises(df.InternalError, match=message):
        _core.check_memory_plan(g, plan, broken(planned(g, plan), edit))
