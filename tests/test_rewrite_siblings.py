"""Horizontal fusion as a rewrite (cpp/rewrite/siblings.cc): MatMuls of one input with
constant weights become one wider MatMul, the elementwise steps every sibling applies moved
onto it where their operands line up, a Slice per sibling giving its part back; and the
attention scale folded into the projection's weights (fold_matmul_scale). Each is checked
against the unrewritten graph with the reference interpreter, on the cases where it must
stop, and through generated code on every dialect: one GEMM reads the shared input, and its
parts are read in place (no pass copies them)."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

from canonical_graphs import ATTENTION, ecg
from codegen_runner import run
from dialects import compile_only as lacks_here, params
from rewrite_helpers import rw
from test_codegen_neon import _check_ran_neon, _run_neon, driver_obj  # noqa: F401
from test_codegen_neon import _generate as _neon_generate


def same_values(before: df.ECG, after: df.ECG, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(v.shape).astype(np.float32) for v in before.inputs]
    for a, b in zip(before.run_reference(*xs), after.run_reference(*xs)):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def ops(g: df.ECG) -> list[str]:
    return [n.op for n in g.nodes]


def rewritten(text: str, rewrite) -> tuple[df.ECG, df.ECG]:
    """The graph of `text` and `rewrite` of it, verified."""
    g = ecg(text)
    out = rewrite(g)
    out.verify()
    return g, out


THREE = """
graph three(%x: f32[2,5,8], %m: f32[2,5,1]) {
  %w1: f32[8,4] = const rand
  %w2: f32[8,6] = const rand
  %w3: f32[8,2] = const rand
  %b1: f32[4] = const rand
  %b2: f32[6] = const rand
  %b3: f32[2] = const rand
  %half: f32[] = const [0.5]
  %a1: f32[2,5,4] = MatMul(%x, %w1) @"a1"
  %a2: f32[2,5,6] = MatMul(%x, %w2) @"a2"
  %a3: f32[2,5,2] = MatMul(%x, %w3) @"a3"
  %c1: f32[2,5,4] = Add(%a1, %b1) @"c1"
  %c2: f32[2,5,6] = Add(%a2, %b2) @"c2"
  %c3: f32[2,5,2] = Add(%a3, %b3) @"c3"
  %d1: f32[2,5,4] = Mul(%c1, %m) @"d1"
  %d2: f32[2,5,6] = Mul(%c2, %m) @"d2"
  %d3: f32[2,5,2] = Mul(%c3, %m) @"d3"
  %e1: f32[2,5,4] = Pow(%d1, %half) @"e1"
  %e2: f32[2,5,6] = Relu(%d2) @"e2"
  %e3: f32[2,5,2] = Relu(%d3) @"e3"
  return %e1, %e2, %e3
}
"""


def test_siblings_become_one_matmul_with_their_common_steps():
    g, out = rewritten(THREE, rw.combine_sibling_matmuls)
    # One MatMul over [w1 | w2 | w3], one Add of [b1 | b2 | b3], one Mul by the shared mask;
    # the siblings part at Pow/Relu, so those stay per sibling, after the Slices.
    assert ops(out).count("MatMul") == 1 and ops(out).count("Add") == 1 and ops(out).count("Mul") == 1
    assert ops(out).count("Slice") == 3 and sorted(ops(out)).count("Relu") == 2
    (mm,) = [n for n in out.nodes if n.op == "MatMul"]
    assert list(mm.outputs[0].shape) == [2, 5, 12]
    assert [o.name for o in out.outputs] == ["e1", "e2", "e3"]
    same_values(g, out)


def test_a_step_that_does_not_line_up_stops_the_hoisting():
    # d2 multiplies by a computed value of its own (not one shared, broadcast operand): only
    # the MatMuls and the bias Adds are combined.
    text = THREE.replace("%d2: f32[2,5,6] = Mul(%c2, %m)", "%d2: f32[2,5,6] = Mul(%c2, %c2)")
    g, out = rewritten(text, rw.combine_sibling_matmuls)
    assert ops(out).count("MatMul") == 1 and ops(out).count("Add") == 1 and ops(out).count("Mul") == 3
    same_values(g, out)


def test_a_sibling_read_twice_or_returned_keeps_its_value():
    text = THREE.replace("return %e1, %e2, %e3", "return %e1, %e2, %e3, %a2")
    g, out = rewritten(text, rw.combine_sibling_matmuls)
    assert ops(out).count("MatMul") == 1 and ops(out).count("Add") == 3   # a2 is returned
    assert [o.name for o in out.outputs] == ["e1", "e2", "e3", "a2"]
    same_values(g, out)


@pytest.mark.parametrize("case", ["one_reader", "weights_computed", "different_inputs", "f64"])
def test_what_is_not_combined(case):
    text = {
        "weights_computed": THREE.replace("%a2: f32[2,5,6] = MatMul(%x, %w2)", "%a2: f32[2,5,6] = MatMul(%x, %w2n)")
                                 .replace("%half: f32[] = const [0.5]",
                                          "%half: f32[] = const [0.5]\n  %w2n: f32[8,6] = Neg(%w2)")
                                 .replace("%a3: f32[2,5,2] = MatMul(%x, %w3)", "%a3: f32[2,5,2] = MatMul(%x, %w3n)")
                                 .replace("%w2n: f32[8,6] = Neg(%w2)",
                                          "%w2n: f32[8,6] = Neg(%w2)\n  %w3n: f32[8,2] = Neg(%w3)"),
    }.get(case)
    if case == "one_reader":
        text = """
graph g(%x: f32[5,8]) {
  %w1: f32[8,4] = const rand
  %w2: f32[8,4] = const rand
  %r: f32[5,8] = Relu(%x)
  %a: f32[5,4] = MatMul(%x, %w1)
  %b: f32[5,4] = MatMul(%r, %w2)
  return %a, %b
}
"""
    if case == "different_inputs":
        text = """
graph g(%x: f32[5,8], %y: f32[5,8]) {
  %w1: f32[8,4] = const rand
  %w2: f32[8,4] = const rand
  %a: f32[5,4] = MatMul(%x, %w1)
  %b: f32[5,4] = MatMul(%y, %w2)
  return %a, %b
}
"""
    if case == "f64":
        text = """
graph g(%x: f64[5,8]) {
  %w1: f64[8,4] = const 0x""" + np.ones((8, 4)).tobytes().hex() + """
  %w2: f64[8,4] = const 0x""" + np.full((8, 4), 2.0).tobytes().hex() + """
  %a: f64[5,4] = MatMul(%x, %w1)
  %b: f64[5,4] = MatMul(%x, %w2)
  return %a, %b
}
"""
    g, out = rewritten(text, rw.combine_sibling_matmuls)
    assert "Slice" not in ops(out)
    assert ops(out).count("MatMul") == ops(g).count("MatMul")


SCALED = """
graph scaled(%x: f32[1,6,8]) {
  %w: f32[8,8] = const rand
  %b: f32[8] = const rand
  %heads: i64[4] = const [1,6,2,4]
  %c: f32[] = const [0.25]
  %q: f32[1,6,8] = MatMul(%x, %w)
  %qb: f32[1,6,8] = Add(%b, %q)
  %q4: f32[1,6,2,4] = Reshape(%qb, %heads)
  %qt: f32[1,2,6,4] = Transpose(%q4) {perm=[0,2,1,3]}
  %y: f32[1,2,6,4] = Mul(%qt, %c)
  return %y
}
"""


def test_the_attention_scale_goes_into_the_weights():
    g, out = rewritten(SCALED, rw.fold_matmul_scale)
    assert ops(out) == ["MatMul", "Add", "Reshape", "Transpose"]
    assert [o.name for o in out.outputs] == ["y"]
    same_values(g, out)


@pytest.mark.parametrize("case", ["read_twice", "not_scalar", "computed_weights"])
def test_the_scale_stays_where_it_must(case):
    text = {
        "read_twice": SCALED.replace("return %y", "return %y, %q4"),
        "not_scalar": SCALED.replace("%c: f32[] = const [0.25]", "%c: f32[4] = const [0.25, 1.0, 2.0, 3.0]"),
        "computed_weights": SCALED.replace("%q: f32[1,6,8] = MatMul(%x, %w)",
                                           "%wn: f32[8,8] = Neg(%w)\n  %q: f32[1,6,8] = MatMul(%x, %wn)"),
    }[case]
    g, out = rewritten(text, rw.fold_matmul_scale)
    assert "Mul" in ops(out)
    same_values(g, out)


FUSED_QKV = """
graph fused_qkv(%x: f32[4,8]) {
  %w: f32[WSHAPE] = const rand
  %b: f32[12] = const rand
  %wide: i64[3] = const [1,4,12]
  %parts: i64[3] = const [4,4,4]
  %heads: i64[4] = const [1,4,2,2]
  %c: f32[] = const [0.125]
  %y: f32[4,12] = Gemm(%x, %w, %b) {transB=TRANSB}
  %y3: f32[1,4,12] = Reshape(%y, %wide)
  %q: f32[1,4,4], %k: f32[1,4,4], %v: f32[1,4,4] = Split(%y3, %parts) {axis=AXIS}
  %q4: f32[1,4,2,2] = Reshape(%q, %heads)
  %qt: f32[1,2,4,2] = Transpose(%q4) {perm=[0,2,1,3]}
  %qs: f32[1,2,4,2] = Mul(%qt, %c)
  return %qs, %k, %v
}
"""


@pytest.mark.parametrize("trans_b", [0, 1])
def test_a_scale_on_one_part_of_a_split_scales_its_columns(trans_b):
    """GPT-2's projection: one Gemm for Q, K and V, split along the columns; the scale on Q
    scales Q's columns of the weights and the bias only."""
    g = ecg(FUSED_QKV.replace("WSHAPE", "12,8" if trans_b else "8,12").replace("TRANSB", str(trans_b))
            .replace("AXIS", "2"))
    out = rw.fold_matmul_scale(g)
    out.verify()
    assert "Mul" not in ops(out) and [o.name for o in out.outputs] == ["qs", "k", "v"]
    same_values(g, out)


def test_a_split_along_another_axis_keeps_its_scale():
    text = (FUSED_QKV.replace("WSHAPE", "8,12").replace("TRANSB", "0").replace("AXIS", "1")
            .replace("%parts: i64[3] = const [4,4,4]", "%parts: i64[2] = const [2,2]")
            .replace("%q: f32[1,4,4], %k: f32[1,4,4], %v: f32[1,4,4] = Split(%y3, %parts)",
                     "%q: f32[1,2,12], %k: f32[1,2,12] = Split(%y3, %parts)")
            .replace("%heads: i64[4] = const [1,4,2,2]", "%heads: i64[4] = const [1,2,2,6]")
            .replace("%q4: f32[1,4,2,2]", "%q4: f32[1,2,2,6]").replace("%qt: f32[1,2,4,2]", "%qt: f32[1,2,2,6]")
            .replace("%qs: f32[1,2,4,2]", "%qs: f32[1,2,2,6]").replace("return %qs, %k, %v", "return %qs, %k"))
    g, out = rewritten(text, rw.fold_matmul_scale)
    assert "Mul" in ops(out)
    same_values(g, out)


def stages(gen: dict) -> list[str]:
    return [s for k in gen["kernels"] for s in k["stages"]]


@pytest.mark.parametrize("isa", params())
def test_attention_projections_are_one_gemm_read_in_place(isa):
    """The canonical attention graph after the default rewrites: one GEMM of x by
    [wq | wk | wv] (N = 96), and the QK^T and PV GEMMs read its parts where it wrote them,
    so no loop copies a part; the numbers match the reference on every dialect."""
    g, _ = rw.rewrite(ecg(ATTENTION))
    if lacks_here(isa):
        from codegen_runner import compile_only
        compile_only(g, "dnnfusion", isa)
        return
    x = np.random.default_rng(1).standard_normal((1, 16, 32)).astype(np.float32)
    outs, gen = run(g, {"x": x}, isa=isa)
    np.testing.assert_allclose(outs[0], ecg(ATTENTION).run_reference(x)[0], rtol=2e-4, atol=2e-4)
    st = stages(gen)
    # [M x N x K]: the projections as one 16 x 96 x 32 GEMM, then QK^T, PV (2 heads) and the
    # output projection; no loop: the parts are read in place.
    assert [s.split(" +")[0] for s in st if s.startswith("gemm")] == [
        "gemm 1x[16x96x32] packed-B", "gemm 2x[16x16x16]", "gemm 2x[16x16x16]", "gemm 1x[16x32x32] packed-B"], st
    assert not [s for s in st if "loop" in s], st
    assert gen["counts"]["passes"] == 5, gen["counts"]   # the four GEMMs and the Softmax


def test_the_combined_projection_on_opencl(ocl_device):
    g, _ = rw.rewrite(ecg(ATTENTION))
    x = np.random.default_rng(2).standard_normal((1, 16, 32)).astype(np.float32)
    gen = _core.generate_opencl(g, df.plan.plan(g, target="opencl"))
    (y,) = _core.OpenclExecutable(gen).run([x])
    np.testing.assert_allclose(y, ecg(ATTENTION).run_reference(x)[0], rtol=1e-4, atol=1e-4)


def test_the_combined_projection_on_neon(driver_obj, tmp_path):
    g, _ = rw.rewrite(ecg(ATTENTION))
    x = np.random.default_rng(3).standard_normal((1, 16, 32)).astype(np.float32)
    gen = _neon_generate(g, "dnnfusion")
    r, outs = _run_neon(tmp_path, driver_obj, g, {"x": x}, gen)
    _check_ran_neon(r)
    np.testing.assert_allclose(outs[0], ecg(ATTENTION).run_reference(x)[0], rtol=2e-4, atol=2e-4)


def test_passes_can_be_disabled_by_name(monkeypatch):
    g = ecg(ATTENTION)
    monkeypatch.setenv("DNNF_DISABLE_PASSES", "combine_sibling_matmuls, fold_matmul_scale")
    apart, report = rw.rewrite(g)
    assert ops(apart).count("MatMul") == 6 and "Slice" not in ops(apart)
    assert "combine_sibling_matmuls" not in [p.name for p in report.passes]
    monkeypatch.setenv("DNNF_DISABLE_PASSES", "combine_siblings")
    with pytest.raises(df.Error, match="'combine_siblings', not a rewrite pass; the passes are"):
        rw.rewrite(g)
    monkeypatch.delenv("DNNF_DISABLE_PASSES")
    together, _ = rw.rewrite(g)
    assert ops(together).count("MatMul") == 4


GPT2_ATTENTION = """
graph gpt2_attention(%x: f32[8,16]) {
  %w: f32[16,48] = const rand
  %b: f32[48] = const rand
  %wide: i64[3] = const [1,8,48]
  %parts: i64[3] = const [16,16,16]
  %heads: i64[4] = const [1,8,2,8]
  %c: f32[] = const [0.35]
  %y: f32[8,48] = Gemm(%x, %w, %b)
  %y3: f32[1,8,48] = Reshape(%y, %wide)
  %q: f32[1,8,16], %k: f32[1,8,16], %v: f32[1,8,16] = Split(%y3, %parts) {axis=2}
  %q4: f32[1,8,2,8] = Reshape(%q, %heads)
  %qt: f32[1,2,8,8] = Transpose(%q4) {perm=[0,2,1,3]}
  %qs: f32[1,2,8,8] = Mul(%qt, %c)
  %k4: f32[1,8,2,8] = Reshape(%k, %heads)
  %kt: f32[1,2,8,8] = Transpose(%k4) {perm=[0,2,3,1]}
  %v4: f32[1,8,2,8] = Reshape(%v, %heads)
  %vt: f32[1,2,8,8] = Transpose(%v4) {perm=[0,2,1,3]}
  %s: f32[1,2,8,8] = MatMul(%qs, %kt)
  %p: f32[1,2,8,8] = Softmax(%s) {axis=-1}
  %o: f32[1,2,8,8] = MatMul(%p, %vt)
  return %o
}
"""


def test_the_parts_of_one_projection_are_read_in_place():
    """GPT-2's attention: after the scale goes into the weights, the Gemm writes [q | k | v]
    once and both attention GEMMs read their parts in place: views seed blocks last, so no
    block grown from a view writes the parts (it wrote all three, a loop each)."""
    g, _ = rw.rewrite(ecg(GPT2_ATTENTION))
    x = np.random.default_rng(4).standard_normal((8, 16)).astype(np.float32)
    outs, gen = run(g, {"x": x}, isa="scalar")
    np.testing.assert_allclose(outs[0], ecg(GPT2_ATTENTION).run_reference(x)[0], rtol=2e-4, atol=2e-4)
    st = stages(gen)
    assert not [s for s in st if "loop" in s], st
    assert gen["counts"]["passes"] == 4, st   # the Gemm, QK^T, Softmax, PV


def test_a_split_becomes_slices():
    text = FUSED_QKV.replace("WSHAPE", "8,12").replace("TRANSB", "0").replace("AXIS", "-1")
    g, out = rewritten(text, rw.split_to_slices)
    assert "Split" not in ops(out) and ops(out).count("Slice") == 3
    assert [o.name for o in out.outputs] == ["qs", "k", "v"]
    same_values(g, out)


def test_a_split_with_an_empty_part_stays():
    g = df.ECG(_core.Graph("s"))
    x = g.graph.add_input("x", "f32", [2, 6])
    p = g.graph.add_constant("p", np.array([6, 0], np.int64))
    g.graph.set_outputs(g.graph.add_node("Split", [x, p], {"axis": 1}, 2, "sp", ["a", "b"]))
    assert ops(rw.split_to_slices(g)) == ["Split"]


def _shared_layers(equal: bool = True) -> df.ECG:
    """Two layers whose Q and K weights are equal bytes in separate constants (what an export
    of ALBERT's shared layers gives once the weights are rewritten per layer); with `equal`
    false, the second Q weight differs in its last element."""
    rng = np.random.default_rng(7)
    q, k = (rng.standard_normal((16, 16)).astype("<f4") for _ in range(2))
    wq, wk = q.tobytes().hex(), k.tobytes().hex()
    q2 = q.copy()
    q2[-1, -1] += 1.0
    wq2 = wq if equal else q2.tobytes().hex()
    return df.parse(f"""
graph shared(%x: f32[4,16]) {{
  %wq1: f32[16,16] = const 0x{wq}
  %wk1: f32[16,16] = const 0x{wk}
  %wq2: f32[16,16] = const 0x{wq2}
  %wk2: f32[16,16] = const 0x{wk}
  %q1: f32[4,16] = MatMul(%x, %wq1) @"q1"
  %k1: f32[4,16] = MatMul(%x, %wk1) @"k1"
  %s1: f32[4,16] = Mul(%q1, %k1) @"s1"
  %q2: f32[4,16] = MatMul(%s1, %wq2) @"q2"
  %k2: f32[4,16] = MatMul(%s1, %wk2) @"k2"
  %s2: f32[4,16] = Mul(%q2, %k2) @"s2"
  return %s2
}}
""")


def test_layers_sharing_weights_share_one_constant_and_one_packing():
    """CSE merges equal weights of any size (the last pass merges the combined Q/K weights
    the sibling rewrite made per layer), and the module packs each weight once: the generated
    source declares one packed B, and its values match the reference."""
    g = _shared_layers()
    out, _ = rw.rewrite(g)
    mms = [n for n in out.nodes if n.op == "MatMul"]
    assert len(mms) == 2
    assert mms[0].inputs[1].name == mms[1].inputs[1].name, [m.inputs[1].name for m in mms]
    weights = [c.name for c in out.constants if len(c.shape) == 2]
    assert weights == [mms[0].inputs[1].name], weights
    m = df.compile(g, threads=1)
    assert m.source().count("dnnf::gemm::PackedB ") == 1
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_allclose(m.run(x)[0], g.run_reference(x)[0], rtol=2e-4, atol=2e-4)
    # Unequal weights stay apart.
    kept, _ = rw.rewrite(_shared_layers(equal=False))
    assert len([c for c in kept.constants if len(c.shape) == 2]) == 2
