"""Differential fuzzing against ONNX Runtime (issue 17 part 5): random ONNX graphs from
dnnfusion/testing/onnx_fuzz.py (broadcasts, diamonds, shared inputs, layout operators
between anchors, reductions and row ops on any axis, GEMM/Conv/pools, integer arithmetic,
outputs that are also intermediates) are compiled under every planner, and through
`compile` with the rewrites and the layout pass, and must match ONNX Runtime.

CI runs a fixed set of examples (hypothesis derandomized, so a run is reproducible and a
failure is a bug to fix, not luck). A longer random search:

    DNNF_FUZZ_EXAMPLES=500 python -m pytest tests/test_fuzz_differential.py -n 2

A failure prints the graph in ONNX's text form."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from dnnfusion.testing import onnx_fuzz  # noqa: E402

from codegen_runner import compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, params  # noqa: E402

EXAMPLES = int(os.environ.get("DNNF_FUZZ_EXAMPLES", "15"))
LONG = EXAMPLES > 15  # a long run draws new cases each time; CI's (and .ci/sanitize's fewer) are fixed
MODES = ["dnnfusion", "none", "patterns", "tvm", "dp", "dnnfusion-horizontal", "compile"]


def _ort(m: onnx_fuzz.Model) -> list[np.ndarray]:
    """ONNX Runtime's result as users get it (its graph optimizations on). Where its
    optimized graph fails on a valid model, its plain kernels give the reference: found by a
    10,000-case run, a per-axis QuantizeLinear/DequantizeLinear pair feeding MatMul, which
    ORT 1.32 fuses into a MatMulIntegerToFloat that then refuses per-channel zero points
    (test_per_axis_dequantize_into_matmul_that_onnxruntime_fuses_wrongly)."""
    def run_at(level):
        so = ort.SessionOptions()
        so.log_severity_level = 4
        so.graph_optimization_level = level
        sess = ort.InferenceSession(m.proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return sess.run(None, m.feeds)

    try:
        return run_at(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    except ort.capi.onnxruntime_pybind11_state.Fail:
        return run_at(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)


def _dnnfusion(m: onnx_fuzz.Model, mode: str, monkeypatch) -> list[np.ndarray]:
    """The graph's outputs from dnnfusion in one of MODES."""
    if mode == "compile":  # rewrites, layout selection and the planner, as users compile
        monkeypatch.setenv("DNNF_OPT_LEVEL", "1")
        return df.compile(m.proto, threads=2).run(**m.feeds)
    planner, _, horizontal = mode.partition("-")
    got, _ = run(df.load(m.proto), m.feeds, planner=planner, horizontal=bool(horizontal))
    return got


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_graphs_match_onnxruntime(mode, data, monkeypatch):
    m = onnx_fuzz.build(data.draw)
    want = _ort(m)
    got = _dnnfusion(m, mode, monkeypatch)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        ctx = f"output {i} of the graph:\n{m.describe()}"
        assert a.shape == b.shape and a.dtype == b.dtype, f"{a.shape} {a.dtype} vs {b.shape} {b.dtype}; {ctx}"
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=ctx)


# ---- Cases the fuzzer found, kept as regressions ------------------------------------------
def _reduce_keepdims0_bias(shape, axis):
    """ReduceSum with keepdims=0 over a leading axis, then Add of a bias along the kept last
    axis: the epilogue's [R, C] view said C = 1 where the kernel's is the last axis, so the
    bias was read at the wrong column (found with shape [1, 2], axis 0)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    out = [d for i, d in enumerate(shape) if i != axis]
    bias = rng.standard_normal(out[-1]).astype(np.float32)
    g = h.make_graph([h.make_node("ReduceSum", ["x", "ax"], ["r"], keepdims=0),
                      h.make_node("Add", ["r", "b"], ["y"])], "found",
                     [h.make_tensor_value_info("x", T.FLOAT, shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, out)],
                     [nh.from_array(np.array([axis], np.int64), "ax"), nh.from_array(bias, "b")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    return onnx_fuzz.Model(m, {"x": rng.standard_normal(shape).astype(np.float32)}, ["ReduceSum", "Add"])


def _layer_norm_inner_axis_residual(shape, axis):
    """LayerNormalization over several trailing dims (axis not the last) with a fused Add of
    a tensor: the epilogue's view took the last dim as the row, the kernel's row is every dim
    from `axis` on, so the Add read the wrong elements (found with shape [2, 1], axis 0)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(1)
    norm = shape[axis:]
    g = h.make_graph([h.make_node("LayerNormalization", ["x", "s", "b"], ["n"], axis=axis),
                      h.make_node("Add", ["n", "x"], ["y"]), h.make_node("Mul", ["y", "k"], ["z"])], "found",
                     [h.make_tensor_value_info("x", T.FLOAT, shape)],
                     [h.make_tensor_value_info("z", T.FLOAT, shape)],
                     [nh.from_array(rng.standard_normal(norm).astype(np.float32), "s"),
                      nh.from_array(rng.standard_normal(norm).astype(np.float32), "b"),
                      nh.from_array(rng.standard_normal(shape[-1]).astype(np.float32), "k")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    return onnx_fuzz.Model(m, {"x": rng.standard_normal(shape).astype(np.float32)}, ["LayerNormalization"])


FOUND = {"reduce_unit_axis_keepdims0_bias": lambda: _reduce_keepdims0_bias([1, 2], 0),
         "reduce_leading_axis_keepdims0_bias": lambda: _reduce_keepdims0_bias([3, 5, 4], 1),
         "layer_norm_whole_tensor_residual": lambda: _layer_norm_inner_axis_residual([2, 1], 0),
         "layer_norm_two_dims_residual": lambda: _layer_norm_inner_axis_residual([3, 4, 5], 1)}


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("case", sorted(FOUND))
def test_cases_the_fuzzer_found(case, isa):
    m = FOUND[case]()
    g = df.load(m.proto)
    if lacks_here(isa):
        compile_only(g, "dnnfusion", isa)
        return
    got, gen = run(g, m.feeds, isa=isa)
    assert any("+epilogue" in s for k in gen["kernels"] for s in k["stages"])  # the fused form
    np.testing.assert_allclose(got[0], _ort(m)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["dnnfusion", "none", "compile"])
def test_per_axis_dequantize_into_matmul_that_onnxruntime_fuses_wrongly(mode, monkeypatch):
    """A per-axis QuantizeLinear/DequantizeLinear pair (uint8, axis -2) whose result feeds a
    MatMul with its own transpose: ONNX Runtime 1.32's optimizer turns it into a
    MatMulIntegerToFloat that then fails ("Per-Channel is not supported yet"), so `_ort`
    takes the reference from its unoptimized kernels. dnnfusion must run it and match."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(3)
    scale = np.array([0.078, 0.057, 0.082, 0.091], np.float32)
    zero = np.array([34, 57, 31, 42], np.uint8)
    g = h.make_graph([h.make_node("QuantizeLinear", ["y", "s", "z"], ["q"], axis=-2),
                      h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=-2),
                      h.make_node("Transpose", ["d"], ["dt"], perm=[0, 1, 3, 2]),
                      h.make_node("MatMul", ["d", "dt"], ["out"])], "found",
                     [h.make_tensor_value_info("y", T.FLOAT, [3, 5, 4, 4])],
                     [h.make_tensor_value_info("out", T.FLOAT, [3, 5, 4, 4])],
                     [nh.from_array(scale, "s"), nh.from_array(zero, "z")])
    m = onnx_fuzz.Model(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]),
                        {"y": rng.standard_normal([3, 5, 4, 4]).astype(np.float32)}, ["QuantizeLinear"])
    want = _ort(m)[0]
    # the reference itself: y quantized per row of its last two axes, then d @ d^T
    s, z = scale[:, None], zero.astype(np.float32)[:, None]
    d = (np.clip(np.round(m.feeds["y"] / s) + z, 0, 255) - z) * s
    np.testing.assert_allclose(want, d @ np.swapaxes(d, -1, -2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_dnnfusion(m, mode, monkeypatch)[0], want, rtol=1e-5, atol=1e-5)
