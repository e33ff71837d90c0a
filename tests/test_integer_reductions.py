"""Integer reductions in generated code (issue 17 part 3): ReduceSum, ReduceMax, ReduceMin,
ReduceProd, ArgMax and ArgMin on every integer element type (and CumSum on integers), exact in that type (Sum and
Prod wrap as ONNX Runtime's do), over rows, columns and scattered axes. Checked against
ONNX Runtime and the NumPy reference on every x86 dialect (compiled only where this CPU
lacks it), NEON under qemu and OpenCL; what stays refused says what to do."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from codegen_runner import assert_matches_reference, compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, params  # noqa: E402
from test_codegen_neon import _check_ran_neon, _run_neon, driver_obj  # noqa: E402,F401
from test_codegen_neon import _generate as _neon_generate  # noqa: E402

ONNX_TYPE = {np.int8: T.INT8, np.uint8: T.UINT8, np.int16: T.INT16, np.uint16: T.UINT16, np.int32: T.INT32,
             np.int64: T.INT64, np.uint32: T.UINT32, np.uint64: T.UINT64}
SHAPE = (3, 5, 7)
# Rows (last axis), columns (first axes kept around a reduced middle), scattered axes, all.
AXES = {"rows": [2], "middle": [1], "outer_inner": [0, 2], "all": [0, 1, 2]}


def _data(dtype, seed=0):
    """Values with the type's bounds among them: sums and products wrap (NumPy's rule, and
    C's for unsigned arithmetic), Max/Min meet the extremes."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    x = rng.integers(lo, hi, SHAPE, endpoint=True).astype(dtype)
    x.flat[::11] = info.max
    x.flat[5::13] = info.min
    return x


def _no_overflow(dtype, seed, op):
    """Values whose Sum and Prod fit the type: ONNX Runtime sums int64 through a wider float
    type (not exact near the bounds), so it is compared where no result overflows."""
    rng = np.random.default_rng(seed)
    if op == "ReduceProd":
        x = rng.choice(np.array([-1, 1], dtype), SHAPE)
        x.flat[::17] = 2
        return x
    if op == "ReduceSum":
        return rng.integers(-100, 100, SHAPE, endpoint=True).astype(dtype)
    return _data(dtype, seed)


def _model(dtype, op, axes, keepdims=1, then_add=False):
    """op over `axes` of x, optionally followed by an Add of the input's first row (an
    integer consumer in the same block, which cannot be an epilogue)."""
    t = ONNX_TYPE[dtype]
    inits = [nh.from_array(np.array(axes, np.int64), "axes")]
    if op.startswith("Arg"):
        nodes = [h.make_node(op, ["x"], ["y"], axis=axes[0], keepdims=keepdims)]
        out_t = T.INT64
    else:
        nodes = [h.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)]
        out_t = t
    if then_add:
        inits.append(nh.from_array(np.array(7, dtype), "seven"))
        nodes[0].output[0] = "r"
        nodes.append(h.make_node("Add", ["r", "seven"], ["y"]))
    shape = [1 if a in axes else d for a, d in enumerate(SHAPE)
             if keepdims or a not in axes]
    g = h.make_graph(nodes, "intred", [h.make_tensor_value_info("x", t, SHAPE)],
                     [h.make_tensor_value_info("y", out_t, shape)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    onnx.checker.check_model(m)
    return m


def _ort(m, x):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


REDUCE = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"]


@pytest.mark.parametrize("dtype,axes", [(np.int64, a) for a in sorted(AXES)] + [(np.int32, "outer_inner")],
                         ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("op", REDUCE)
def test_reductions_match_onnxruntime(op, axes, dtype):
    m = _model(dtype, op, AXES[axes])
    x = _no_overflow(dtype, 0, op)
    y = df.compile(m.SerializeToString(), threads=2)(x)
    want = _ort(m, x)
    assert y.dtype == want.dtype
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", REDUCE + ["ArgMax", "ArgMin"])
def test_every_integer_type_matches_the_reference(op, dtype):
    """Every integer type against NumPy, with the type's bounds in the data (wrapping sums and
    products), including the types ONNX Runtime has no kernel for (int8 sums, int16, ...)."""
    axes = [1] if op.startswith("Arg") else [0, 2]
    g = df.load(_model(dtype, op, axes).SerializeToString())
    x = _data(dtype, seed=3)
    outs, _ = run(g, {"x": x})
    assert_matches_reference(g, {"x": x}, outs)


@pytest.mark.parametrize("dtype", [np.int64, np.int32], ids=lambda d: d.__name__)
@pytest.mark.parametrize("axis", [0, 2])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reductions_match_onnxruntime(op, axis, dtype):
    m = _model(dtype, op, [axis], keepdims=0)
    x = _data(dtype, seed=1) % 4  # many ties: the first index wins
    y = df.compile(m.SerializeToString(), threads=2)(x)
    np.testing.assert_array_equal(y, _ort(m, x))


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("planner", ["dnnfusion", "none"])
def test_a_consumer_in_the_block_reads_the_integer_result(planner, isa):
    """ReduceSum then Add in one block: the Add is a loop after the reduction, not an
    epilogue (epilogues compute on float vectors)."""
    g = df.load(_model(np.int64, "ReduceSum", [1], then_add=True).SerializeToString())
    x = _data(np.int64, seed=2)
    if lacks_here(isa):
        compile_only(g, planner, isa)
        return
    outs, gen = run(g, {"x": x}, planner=planner, isa=isa)
    assert_matches_reference(g, {"x": x}, outs)
    stages = [s for k in gen["kernels"] for s in k["stages"]]
    assert any(s.startswith("ReduceSum") and "+epilogue" not in s for s in stages), stages


@pytest.mark.parametrize("op", REDUCE + ["ArgMax"])
def test_integer_reductions_on_neon(op, driver_obj, tmp_path):
    g = df.load(_model(np.int32, op, [1]).SerializeToString())
    x = _data(np.int32, seed=4)
    r, outs = _run_neon(tmp_path, driver_obj, g, {"x": x}, _neon_generate(g, "dnnfusion"))
    _check_ran_neon(r)
    assert_matches_reference(g, {"x": x}, outs)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8], ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", REDUCE + ["ArgMax", "ArgMin"])
def test_integer_reductions_on_opencl(op, dtype):
    try:
        _core.opencl_devices()
    except df.Error as e:
        pytest.skip(f"no OpenCL device: {e}")
    for axes in ([[1]] if op.startswith("Arg") else [[2], [0, 2]]):
        g = df.load(_model(dtype, op, axes).SerializeToString())
        x = _data(dtype, seed=5)
        gen = _core.generate_opencl(g, df.plan.plan(g, target="opencl"))
        outs = _core.OpenclExecutable(gen).run([x])
        assert_matches_reference(g, {"x": x}, outs)


def _position_ids(dtype, reverse=0, exclusive=0):
    """RoBERTa's position ids from an attention mask: CumSum of the integer mask along the
    sequence, times the mask, plus an offset, gathering rows of an f32 embedding."""
    emb = np.random.default_rng(6).standard_normal((40, 8)).astype(np.float32)
    t = ONNX_TYPE[dtype]
    nodes = [h.make_node("CumSum", ["mask", "ax"], ["cs"], reverse=reverse, exclusive=exclusive),
             h.make_node("Mul", ["cs", "mask"], ["m"]), h.make_node("Add", ["m", "one"], ["pos"]),
             h.make_node("Gather", ["emb", "pos"], ["e"]), h.make_node("Relu", ["e"], ["y"])]
    g = h.make_graph(nodes, "pos", [h.make_tensor_value_info("mask", t, [3, 11])],
                     [h.make_tensor_value_info("y", T.FLOAT, [3, 11, 8])],
                     [nh.from_array(np.array(1, np.int64), "ax"), nh.from_array(np.array(1, dtype), "one"),
                      nh.from_array(emb, "emb")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    mask = np.ones((3, 11), dtype)
    mask[0, 7:] = 0
    mask[2, :2] = 0
    return m, mask


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("dtype", [np.int64, np.int32], ids=lambda d: d.__name__)
def test_integer_cumsum_feeds_a_gather(dtype, isa):
    """CumSum on integers (a serial scan, no epilogue) in one block with the integer
    arithmetic and the f32 Gather after it; forward, reverse and exclusive."""
    for rev, excl in ((0, 0), (1, 0), (0, 1)):
        m, mask = _position_ids(dtype, rev, excl)
        g = df.load(m.SerializeToString())
        if lacks_here(isa):
            compile_only(g, "dnnfusion", isa)
            continue
        outs, gen = run(g, {"mask": mask}, isa=isa)
        assert_matches_reference(g, {"mask": mask}, outs)
        np.testing.assert_array_equal(outs[0], ort.InferenceSession(m.SerializeToString(), providers=[
            "CPUExecutionProvider"]).run(None, {"mask": mask})[0])
        assert any(s.startswith("CumSum") for k in gen["kernels"] for s in k["stages"])


def test_integer_cumsum_on_opencl(ocl_device):
    m, mask = _position_ids(np.int64, reverse=1)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"mask": mask})[0]
    np.testing.assert_array_equal(df.compile(m.SerializeToString(), target="opencl")(mask), want)


def test_what_stays_refused_says_what_to_do():
    for op in ("ReduceMean", "ReduceL2"):
        g = df.load(_model(np.int64, op, [1]).SerializeToString())
        with pytest.raises(df.UnsupportedOperatorError, match=f"integers with ReduceSum.*{op}.*Cast it to float"):
            df.compile(g)
    empty = h.make_graph([h.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=1)], "e",
                         [h.make_tensor_value_info("x", T.INT64, [2, 0])],
                         [h.make_tensor_value_info("y", T.INT64, [2, 1])],
                         [nh.from_array(np.array([1], np.int64), "axes")])
    with pytest.raises(df.UnsupportedOperatorError, match="empty set of i64"):
        df.compile(h.make_model(empty, opset_imports=[h.make_opsetid("", 18)]).SerializeToString())


@pytest.mark.parametrize("isa", params())
def test_integer_scalars_beyond_2_to_53_stay_exact(isa):
    """Found by the structural fuzzer: a one-element int64 constant was inlined as a literal
    through a double, so x * -2089670227099910142 lost its low bits; such constants are now
    read from memory."""
    from onnx import helper as h

    big = np.array(-2089670227099910142, np.int64)
    g = h.make_graph([h.make_node("Mul", ["x", "k"], ["m"]), h.make_node("Add", ["m", "one"], ["y"])], "big",
                     [h.make_tensor_value_info("x", T.INT64, [2, 9])], [h.make_tensor_value_info("y", T.INT64, [2, 9])],
                     [nh.from_array(big, "k"), nh.from_array(np.array(2**60 + 1, np.int64), "one")])
    ecg = df.load(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString())
    x = np.arange(-9, 9, dtype=np.int64).reshape(2, 9)
    if lacks_here(isa):
        compile_only(ecg, "dnnfusion", isa)
        return
    outs, _ = run(ecg, {"x": x}, isa=isa)
    np.testing.assert_array_equal(outs[0], x * big + np.int64(2**60 + 1))
