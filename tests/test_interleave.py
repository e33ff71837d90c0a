"""Pointwise loops whose bodies call costly functions (exp, tanh, erf, sigmoid, division)
run several vectors a step, instruction by instruction (cpp/codegen/cpu/render_block.cc,
BlockRenderer::loop): the interleaved copies read the inner index shifted by whole vectors,
so broadcasts along the rows, per-row operands, flat loops and the vector tails after the
wide steps are all checked against the NumPy reference in every x86 dialect, and the
generated source is checked to take the wide step where it should and only there."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

from codegen_runner import assert_matches_reference, compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, params  # noqa: E402

RNG = np.random.default_rng(11)


def _model(nodes, inputs, outputs, inits=()):
    ins = [h.make_tensor_value_info(n, T.FLOAT, a.shape) for n, a in inputs.items()]
    outs = [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in outputs]
    g = h.make_graph(nodes, "t", ins, outs, [nh.from_array(v, k) for k, v in inits])
    return df.load(h.make_model(g, opset_imports=[h.make_opsetid("", 20)]).SerializeToString()), dict(inputs)


def heavy_graph():
    """Two heavy chains: rows of 77 (4 wide steps' worth on AVX2 plus a tail; one wide step and
    a tail of 13 on AVX-512) with a bias broadcast along the rows and a per-row scale, and a
    flat loop of 4100 elements (a 4096-element row and a 4-element one)."""
    x, r, f = (RNG.standard_normal(s).astype(np.float32) for s in ((2, 5, 77), (2, 5, 1), (4100,)))
    b = RNG.standard_normal(77).astype(np.float32)
    nodes = [h.make_node("Add", ["x", "b"], ["a"]), h.make_node("Tanh", ["a"], ["t"]),
             h.make_node("Mul", ["t", "r"], ["m"]), h.make_node("Erf", ["m"], ["e"]),
             h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Div", ["e", "s"], ["y"]),
             h.make_node("Sigmoid", ["f"], ["fs"]), h.make_node("Exp", ["fs"], ["fe"]),
             h.make_node("Tanh", ["f"], ["ft"]), h.make_node("Mul", ["fe", "ft"], ["z"])]
    return _model(nodes, {"x": x, "r": r, "f": f}, [("y", [2, 5, 77]), ("z", [4100])], [("b", b)])


def cheap_graph():
    x = RNG.standard_normal((4, 300)).astype(np.float32)
    b = RNG.standard_normal(300).astype(np.float32)
    nodes = [h.make_node("Add", ["x", "b"], ["a"]), h.make_node("Relu", ["a"], ["u"]),
             h.make_node("Mul", ["u", "x"], ["y"])]
    return _model(nodes, {"x": x}, [("y", [4, 300])], [("b", b)])


def _wide_copies(source: str) -> set[str]:
    """Names of the interleaved copies (t<k>_1, t<k>_2, ...) the source binds."""
    return set(re.findall(r"\b(t\d+_\d+) = ", source))


@pytest.mark.parametrize("isa", params())
def test_heavy_loops_interleave_and_match_reference(isa):
    ecg, feeds = heavy_graph()
    if lacks_here(isa):  # generated and compiled, not run
        gen = compile_only(ecg, "dnnfusion", isa)
    else:
        outs, gen = run(ecg, feeds, planner="dnnfusion", isa=isa)
        assert_matches_reference(ecg, feeds, outs)
    src = gen["source"]
    loops = [s for k in gen["kernels"] for s in k["stages"] if "loop" in s]
    assert sorted(loops) == ["vector loop f32[4100]", "vector loop f32[770]"], loops
    # rows of 77 take 4 vectors a step (8 of the widest would pass the row), the flat loop's
    # 4096-element chunks 8; each wide step is followed by its tail, one vector a step
    assert sorted(re.findall(r"j \+= (\d) \* cg::W", src)) == ["4", "8"], src
    assert src.count("for (; j < je; j += cg::W)") == 2
    copies = _wide_copies(src)
    bases = {c.rsplit("_", 1)[0] for c in copies}
    # the values of both chains bound in the wide steps (loads, calls, products), each with all
    # its extra copies: 3 in one loop, 7 in the other
    per_base = {b: sum(c.rsplit("_", 1)[0] == b for c in copies) for b in bases}
    assert len(bases) >= 8 and set(per_base.values()) == {3, 7}, sorted(copies)
    for b, k in per_base.items():
        assert {f"{b}_{u}" for u in range(1, k + 1)} <= copies, (b, k)


def test_loops_of_cheap_ops_stay_one_vector_a_step():
    ecg, feeds = cheap_graph()
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs)
    assert not _wide_copies(gen["source"])
    assert not re.search(r"\d \* cg::W", gen["source"])


def test_heavy_loops_split_across_threads_by_their_work():
    """A loop's fork/join decision weighs each costly call: the flat loop's 4100 elements of
    three of them (Sigmoid, Exp, Tanh) count as two chunks of 4096 * 13, past par_rows' 32768
    threshold (the generated source is enough: nothing here needs to run)."""
    ecg, _ = heavy_graph()
    src = _core.generate_cpu(ecg, df.plan.plan(ecg, planner="dnnfusion"), "scalar").to_dict()["source"]
    work = {int(rows) * int(per) for rows, per in re.findall(r"cg::par_rows\((\d+)L, (\d+)L", src)}
    assert 2 * 4096 * 13 in work, work
