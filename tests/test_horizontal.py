"""Horizontal fusion (issue 13 part 5): Many-to-Many siblings of one op that read the same
input (attention's Q/K/V projections, Inception's and YOLO's parallel convolutions) are
grouped into one kernel. The grouped plans are generated and checked against the NumPy
reference on every x86 dialect (compiled only where this CPU lacks it), on NEON under qemu
and on OpenCL. Each sibling still makes its own pass over the shared input: the group saves
kernel calls, not passes, and the counts say so. (Sibling MatMuls with constant weights are
combined into one GEMM by a rewrite instead, one pass: tests/test_rewrite_siblings.py; these
graphs go to the planner unrewritten.)"""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

onnx = pytest.importorskip("onnx")
from onnx import helper as h  # noqa: E402

from canonical_graphs import ATTENTION, ecg as text_ecg  # noqa: E402
from codegen_runner import assert_matches_reference, compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, params  # noqa: E402
from test_codegen import f32, model  # noqa: E402
from test_codegen_neon import _check_ran_neon, _run_neon, driver_obj  # noqa: E402,F401
from test_codegen_neon import _generate as _neon_generate  # noqa: E402


def case_attention():
    """Q, K and V projections of one input (the planner test's attention graph)."""
    g = text_ecg(ATTENTION)
    return g, {"x": f32(1, 16, 32)}


def case_inception():
    """Three convolutions of one input (1x1 + Relu, 3x3, 1x1 + Sigmoid) beside a max pool,
    concatenated along the channels."""
    x = f32(1, 8, 10, 10)
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["x", "w3"], ["c3"], pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["x", "w5", "b5"], ["c5"]), h.make_node("Sigmoid", ["c5"], ["s5"]),
             h.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("Concat", ["r1", "c3", "s5", "p"], ["y"], axis=1)]
    return model(nodes, {"x": x}, ["y"], [("w1", f32(4, 8, 1, 1)), ("b1", f32(4)),
                                          ("w3", f32(6, 8, 3, 3)), ("w5", f32(5, 8, 1, 1)),
                                          ("b5", f32(5))])


def case_yolo_branches():
    """CSP-style: two 1x1 convolutions of one input, one of them followed by a 3x3, added."""
    x = f32(1, 6, 9, 9)
    nodes = [h.make_node("Conv", ["x", "wa"], ["a"]), h.make_node("Conv", ["x", "wb"], ["b"]),
             h.make_node("Conv", ["b", "wc"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("Add", ["a", "c"], ["y"])]
    return model(nodes, {"x": x}, ["y"], [("wa", f32(4, 6, 1, 1)), ("wb", f32(4, 6, 1, 1)),
                                          ("wc", f32(4, 4, 3, 3))])


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}
# Siblings in the group. Inception: the 3x3 and the 1x1 + Sigmoid; the 1x1 + Relu's block also
# holds the Concat (which its epilogue writes into), so it depends on the other two.
GROUPED = {"attention": 3, "inception": 2, "yolo_branches": 2}


def _plans(g):
    return df.plan.plan(g), df.plan.plan(g, horizontal=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_planner_groups_the_siblings(case):
    g, _ = CASES[case]()
    plain, grouped = _plans(g)
    assert len(grouped) == len(plain) - (GROUPED[case] - 1), (plain.blocks, grouped.blocks)
    pairs = [r for r in grouped.reasons if r.why.startswith("horizontal:") and r.fused]
    assert len(pairs) == GROUPED[case] - 1, [r.why for r in pairs]
    assert all("the more general of the two" in r.why for r in pairs), [r.why for r in pairs]
    # A group holds Many-to-Many anchors: its type is Many-to-Many, not a red cell's result.
    for r in pairs:
        (b,) = [b for b in grouped.blocks if r.producer.name in {n.name for n in b.nodes}]
        assert r.consumer.name in {n.name for n in b.nodes}
        assert b.fused_type == "Many-to-Many"


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("case", sorted(CASES))
def test_grouped_kernels_match_reference(case, isa):
    g, feeds = CASES[case]()
    if lacks_here(isa):  # generated and compiled, not run
        compile_only(g, "dnnfusion", isa, horizontal=True)
        return
    outs, gen = run(g, feeds, isa=isa, horizontal=True)
    assert_matches_reference(g, feeds, outs)
    _, plain = run(g, feeds, isa=isa)
    # One kernel fewer per grouped sibling; every sibling still reads the input itself.
    assert gen["counts"]["kernels"] == plain["counts"]["kernels"] - (GROUPED[case] - 1)
    assert gen["counts"]["passes"] == plain["counts"]["passes"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_grouped_kernels_on_neon(case, driver_obj, tmp_path):
    g, feeds = CASES[case]()
    gen = _neon_generate(g, "dnnfusion", horizontal=True)
    r, outs = _run_neon(tmp_path, driver_obj, g, feeds, gen)
    _check_ran_neon(r)
    assert_matches_reference(g, feeds, outs)


@pytest.mark.parametrize("case", sorted(CASES))
def test_grouped_kernels_on_opencl(case):
    try:
        _core.opencl_devices()
    except df.Error as e:
        pytest.skip(f"no OpenCL device: {e}")
    g, feeds = CASES[case]()
    gen = _core.generate_opencl(g, df.plan.plan(g, target="opencl", horizontal=True))
    outs = _core.OpenclExecutable(gen).run([feeds[v.name] for v in g.inputs])
    assert_matches_reference(g, feeds, outs, atol=1e-4)


def test_compile_with_horizontal_fusion():
    g, feeds = case_inception()
    plain = df.compile(g, threads=1)
    m = df.compile(g, threads=1, horizontal=True)
    np.testing.assert_allclose(m(**feeds), g.run_reference(**feeds)[0], rtol=1e-4, atol=1e-5)
    assert m.stats["horizontal"] and not plain.stats["horizontal"]
    assert m.stats["kernels"] == plain.stats["kernels"] - (GROUPED["inception"] - 1)
    assert m.stats["passes"] == plain.stats["passes"]
    assert "grouped into one kernel" in m.explain()
    with pytest.raises(df.Error, match="horizontal fusion is an option of the dnnfusion planner"):
        df.compile(g, planner="tvm", horizontal=True)
