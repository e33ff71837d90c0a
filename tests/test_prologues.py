"""Fused GEMM prologues (issue 13 part 1, paper §4.3-4.4): the A operand of a MatMul or Gemm
that pointwise producers make inside its block (elementwise chains, Transpose, Reshape, Slice,
Concat, Expand, Gather with constant indices) is computed while the GEMM packs A, through the
producers' composed index maps, so it is never written to memory. Each case is checked against
the NumPy reference under every planner and dialect; under the dnnfusion planner its block is
one GEMM pass with no loop and no scratch, and the counts say so. Where the producer is also
needed elsewhere the value stays in memory. On OpenCL, where these small GEMMs read A once per
output column, only index composition is fused (arithmetic would be recomputed N times; the
tiled GEMMs' arithmetic prologues are in test_opencl_tiles.py). The cases
run on every x86 dialect (compiled only where the CPU lacks it) and on NEON under qemu."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

onnx = pytest.importorskip("onnx")
from onnx import helper as h  # noqa: E402

from codegen_runner import assert_matches_reference, compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, planner_params  # noqa: E402
from test_codegen import PLANNERS, f32, i64, model  # noqa: E402
from test_codegen_neon import _check_ran_neon, _run_neon, driver_obj  # noqa: E402,F401
from test_codegen_neon import _generate as _neon_generate  # noqa: E402


def case_attention_context():
    """BERT's context: [B, H, S, D] -> Transpose(0, 2, 1, 3) -> Reshape [B, S, H*D] -> MatMul W.
    A[s, h*D + d] = ctx[h, s, d]: whole vectors along d (D a multiple of the vector width)."""
    ctx, w = f32(1, 3, 5, 16), f32(48, 7)
    return model([h.make_node("Transpose", ["ctx"], ["t"], perm=[0, 2, 1, 3]),
                  h.make_node("Reshape", ["t", "s"], ["r"]),
                  h.make_node("MatMul", ["r", "w"], ["y"])], {"ctx": ctx}, ["y"],
                 [("s", i64(1, 5, 48)), ("w", w)]), 0


def case_gelu_tanh_chain():
    """GPT-2's MLP: the tanh-GELU of x (eight elementwise ops) feeding the down projection."""
    x = f32(6, 20)
    c = [("c0", np.array(0.5, np.float32)), ("c1", np.array(0.044715, np.float32)),
         ("c2", np.array(0.7978846, np.float32)), ("c3", np.array(1.0, np.float32)),
         ("c4", np.array(3.0, np.float32)), ("w", f32(20, 9)), ("bias", f32(9))]
    nodes = [h.make_node("Pow", ["x", "c4"], ["p"]), h.make_node("Mul", ["p", "c1"], ["q"]),
             h.make_node("Add", ["x", "q"], ["u"]), h.make_node("Mul", ["u", "c2"], ["v"]),
             h.make_node("Tanh", ["v"], ["t"]), h.make_node("Add", ["t", "c3"], ["o"]),
             h.make_node("Mul", ["x", "c0"], ["hx"]), h.make_node("Mul", ["hx", "o"], ["g"]),
             h.make_node("Gemm", ["g", "w", "bias"], ["y"])]
    return model(nodes, {"x": x}, ["y"], c), None


def case_scaled_query():
    """Attention's scores: (Q * 1/sqrt(d)) x K^T, Q's scale computed while A is packed."""
    q, k = f32(2, 3, 5, 8), f32(2, 3, 6, 8)
    return model([h.make_node("Mul", ["q", "s"], ["qs"]),
                  h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                  h.make_node("MatMul", ["qs", "kt"], ["y"])], {"q": q, "k": k}, ["y"],
                 [("s", np.array(0.35, np.float32))]), 1


def case_broadcast_affine_transposed_a():
    """Gemm(transA=1) of x * scale[row] + shift[1]: broadcast operands and a transposed A."""
    x = f32(7, 4)
    return model([h.make_node("Mul", ["x", "sc"], ["m"]), h.make_node("Add", ["m", "sh"], ["a"]),
                  h.make_node("Gemm", ["a", "w"], ["y"], transA=1)], {"x": x}, ["y"],
                 [("sc", f32(7, 1)), ("sh", f32(1)), ("w", f32(7, 5))]), 2


def case_concat_slice():
    """MobileBERT-like: Concat of a sliced input and another along K, then a MatMul."""
    a, b = f32(4, 10), f32(4, 3)
    return model([h.make_node("Slice", ["a", "st", "en", "ax"], ["s"]),
                  h.make_node("Concat", ["s", "b"], ["c"], axis=1),
                  h.make_node("Sigmoid", ["c"], ["g"]),
                  h.make_node("MatMul", ["g", "w"], ["y"])], {"a": a, "b": b}, ["y"],
                 [("st", i64(2)), ("en", i64(8)), ("ax", i64(1)), ("w", f32(9, 5))]), 1


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}


@pytest.mark.parametrize("planner,isa", planner_params(PLANNERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_prologues_match_reference(case, planner, isa):
    (ecg, feeds), _ = CASES[case]()
    if lacks_here(isa):  # generated and compiled, not run
        compile_only(ecg, planner, isa)
        return
    outs, _ = run(ecg, feeds, planner=planner, isa=isa)
    assert_matches_reference(ecg, feeds, outs)


def gemm_kernel(gen):
    (k,) = [k for k in gen["kernels"] if any(s.startswith("gemm") for s in k["stages"])]
    return k


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_operand_is_never_written(case):
    (ecg, feeds), ops = CASES[case]()
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs)
    k = gemm_kernel(gen)
    assert len(k["stages"]) == 1 and "+prologue(" in k["stages"][0], k
    if ops is not None:
        assert f"+prologue({ops} ops)" in k["stages"][0], k
    assert k["passes"] == 1 and k["scratch_bytes"] == 0 and k["intermediate_bytes_written"] == 0, k
    assert gen["counts"]["intermediate_bytes_written"] == 0, gen["counts"]


def test_attention_context_reads_whole_vectors():
    """The composed index h*S*D + s*D + d of A[s, h*D + d] is contiguous along d on aligned
    vectors: the prologue loads vectors, it does not gather lanes."""
    (ecg, _), _ = case_attention_context()
    src = _core.generate_cpu(ecg, df.plan.plan(ecg, planner="dnnfusion"), "avx2").source
    end = src.index("cg::make_pro(")
    body = src[src.rindex("const auto f", 0, end):end]
    assert "long row, long j, int n" in body and "cg::ld(" in body and "gather" not in body, body


def test_a_producer_needed_elsewhere_stays_in_memory():
    """The Relu's value is also a graph output: it is written once, and the GEMM reads it."""
    x, w = f32(4, 6), f32(6, 3)
    ecg, feeds = model([h.make_node("Relu", ["x"], ["r"]), h.make_node("MatMul", ["r", "w"], ["y"])],
                       {"x": x}, ["y", "r"], [("w", w)])
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs)
    assert not any("+prologue" in s for k in gen["kernels"] for s in k["stages"])


def test_two_gemms_sharing_a_producer_read_it_from_memory():
    """One Tanh feeding two GEMMs' A: computed once into memory, not twice in two prologues."""
    x = f32(5, 6)
    ecg, feeds = model([h.make_node("Tanh", ["x"], ["t"]), h.make_node("MatMul", ["t", "w1"], ["y1"]),
                        h.make_node("MatMul", ["t", "w2"], ["y2"])], {"x": x}, ["y1", "y2"],
                       [("w1", f32(6, 3)), ("w2", f32(6, 4))])
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs)
    assert not any("+prologue" in s for k in gen["kernels"] for s in k["stages"])


def test_transformer_blocks_lose_their_copy_passes():
    """TinyBERT (reduced): every attention output projection reads the heads through its
    prologue, so no block of the model runs a loop in front of a GEMM."""
    from dnnfusion import rewrite
    from dnnfusion.zoo import registry
    ecg = df.load(str(registry.export_onnx("tinybert", reduced=True)))
    ecg, _ = rewrite.rewrite(ecg)
    ecg, _ = rewrite.select_layout(ecg, "auto")
    gen = _core.generate_cpu(ecg.graph, df.plan.plan(ecg, planner="dnnfusion"), "scalar")
    stages = [s for k in gen.kernels for s in k["stages"]]
    assert sum("+prologue(" in s for s in stages) >= 2, stages
    for k in gen.kernels:
        for i, s in enumerate(k["stages"]):
            if s.startswith("gemm") and "packed-B" in s:
                assert not (i > 0 and "loop" in k["stages"][i - 1]), k["stages"]


def test_explain_says_what_the_prologue_does():
    (ecg, feeds), _ = case_gelu_tanh_chain()
    m = df.compile(ecg, threads=1)
    np.testing.assert_allclose(m(**feeds), ecg.run_reference(**feeds)[0], rtol=1e-4, atol=1e-5)
    text = m.explain()
    assert "+prologue(8 ops)" in text and "packs A once per call" in text, text
    assert m.stats["passes"] == 1 and m.stats["intermediate_bytes_written"] == 0, m.stats


@pytest.mark.parametrize("case", sorted(CASES))
def test_opencl_untiled_fuses_index_composition_only(ocl_device, case):
    (ecg, feeds), ops = CASES[case]()
    gen = _core.generate_opencl(ecg, df.plan.plan(ecg, planner="dnnfusion", target="opencl"))
    assert "__local float dn_As" not in gen.source  # one work-item per output element
    outs = _core.OpenclExecutable(gen).run([feeds[v.name] for v in ecg.inputs])
    assert_matches_reference(ecg, feeds, outs, atol=1e-4)
    labels = [s for k in gen.kernels for s in k["stages"] if s.startswith("gemm")]
    if ops == 0:
        assert all("+prologue(0 ops)" in s for s in labels), labels
    else:
        assert not any("+prologue" in s for s in labels), labels


@pytest.mark.parametrize("case", sorted(CASES))
def test_prologues_on_neon(case, driver_obj, tmp_path):
    """The same prologues cross-compiled for NEON and run under qemu (test_codegen_neon.py)."""
    (ecg, feeds), _ = CASES[case]()
    gen = _neon_generate(ecg, "dnnfusion")
    assert any("+prologue(" in s for k in gen["kernels"] for s in k["stages"])
    r, outs = _run_neon(tmp_path, driver_obj, ecg, feeds, gen)
    _check_ran_neon(r)
    assert_matches_reference(ecg, feeds, outs)
