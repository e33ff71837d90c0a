"""ONNX operators that are functions of other operators (issue 17 part 3: what ONNX Runtime
runs), imported as their schema's function body (dnnfusion/frontends/onnx_functions.py):
results against ONNX Runtime through generated code, the body's operators in the ECG under the
node's name, attributes and their defaults put where the body refers to them, refusals that
name the function; and float64 reductions (reduce_f64, which ReduceLogSumExp's body needs) on
every x86 dialect (compiled only where this CPU lacks it) and OpenCL against NumPy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from codegen_runner import compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, params  # noqa: E402

# name: (operator, attributes, input shapes, opset, element type, constant inputs {index: array})
CASES = {
    "celu": ("Celu", {"alpha": 1.5}, [(3, 7)], 18, np.float32, {}),
    "celu_default_alpha": ("Celu", {}, [(3, 7)], 18, np.float32, {}),
    "shrink": ("Shrink", {"lambd": 0.3, "bias": 0.1}, [(3, 7)], 18, np.float32, {}),
    "thresholded_relu": ("ThresholdedRelu", {"alpha": 0.2}, [(4, 5)], 22, np.float32, {}),
    "swish": ("Swish", {"alpha": 0.7}, [(2, 9)], 24, np.float32, {}),
    "mvn_axes": ("MeanVarianceNormalization", {"axes": [0, 2]}, [(2, 3, 4, 5)], 18, np.float32, {}),
    "group_norm": ("GroupNormalization", {"num_groups": 2, "epsilon": 1e-3}, [(2, 4, 3, 3), (4,), (4,)], 21,
                   np.float32, {}),
    "rms_norm_two_axes": ("RMSNormalization", {"axis": -2}, [(2, 3, 8), (3, 8)], 23, np.float32, {}),
    "reduce_l1": ("ReduceL1", {"keepdims": 0}, [(2, 3, 4)], 18, np.float32, {1: np.array([1], np.int64)}),
    "reduce_sum_square": ("ReduceSumSquare", {}, [(2, 3, 4)], 18, np.float32, {1: np.array([0, 2], np.int64)}),
    "reduce_log_sum_exp": ("ReduceLogSumExp", {}, [(2, 3, 4)], 18, np.float32, {1: np.array([-1], np.int64)}),
    "reduce_log_sum_exp_f64": ("ReduceLogSumExp", {"keepdims": 0}, [(2, 3, 4)], 18, np.float64, {}),
    "cast_like": ("CastLike", {}, [(2, 3)], 19, np.float32, {1: np.array([7], np.int32)}),
}
ONNX_TYPE = {np.float32: T.FLOAT, np.float64: T.DOUBLE}


def _model(case):
    op, attrs, shapes, opset, dtype, consts = CASES[case]
    ins, inits, node_in = [], [], []
    for i, s in enumerate(shapes):
        ins.append(h.make_tensor_value_info(f"x{i}", ONNX_TYPE[dtype], s))
        node_in.append(f"x{i}")
    for i, a in sorted(consts.items()):
        inits.append(nh.from_array(a, f"c{i}"))
        node_in.insert(i, f"c{i}")
    out_type = T.INT32 if op == "CastLike" else ONNX_TYPE[dtype]
    g = h.make_graph([h.make_node(op, node_in, ["y"], name="fn", **attrs)], case, ins,
                     [h.make_tensor_value_info("y", out_type, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _feeds(case, seed=0):
    _, _, shapes, _, dtype, _ = CASES[case]
    rng = np.random.default_rng(seed)
    return {f"x{i}": rng.standard_normal(s).astype(dtype) for i, s in enumerate(shapes)}


def _compile(model, **kw):
    with warnings.catch_warnings():  # the output's type is left to inference (the checker says so)
        warnings.simplefilter("ignore", df.ModelWarning)
        return df.compile(model.SerializeToString(), **kw)


@pytest.mark.parametrize("case", list(CASES))
def test_function_matches_onnxruntime(case):
    m = _model(case)
    feeds = _feeds(case)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = _compile(m)(**feeds)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-12 if want.dtype == np.float64 else 2e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("case,opset", [("reduce_log_sum_exp", 18), ("reduce_log_sum_exp_f64", 18),
                                        ("reduce_log_sum_exp", 13)])
def test_log_sum_exp_of_large_values_is_finite_as_in_onnxruntime(case, opset):
    """ReduceLogSumExp takes its maximum out first, as ONNX Runtime does: the schema's body
    (log of a sum of exps) gave inf from 89 in float32 (a random graph of the sequence fuzzer
    found it), and 710 in double. A row of -inf stays -inf, one with +inf is +inf. Opset 13
    gives the axes as an attribute."""
    op, attrs, shapes, _, dtype, consts = CASES[case]
    if opset < 18:
        attrs = {**attrs, "axes": [int(a) for a in consts.get(1, np.array([0, 1, 2]))]}
    ins = [h.make_tensor_value_info("x0", ONNX_TYPE[dtype], shapes[0])]
    inits = [nh.from_array(consts[1], "c1")] if 1 in consts and opset >= 18 else []
    node = h.make_node(op, ["x0"] + (["c1"] if inits else []), ["y"], name="fn", **attrs)
    g = h.make_graph([node], case, ins, [h.make_tensor_value_info("y", ONNX_TYPE[dtype], None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    x = (np.random.default_rng(1).standard_normal(shapes[0]) * 1000).astype(dtype)
    if 1 in consts:  # one axis reduced: a row of -inf and a row with +inf among finite ones
        x[0, 0, :] = -np.inf
        x[1, 2, 1] = np.inf
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x0": x})[0]
    got = _compile(m)(x0=x)
    assert np.isfinite(want).sum() > 0
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_body_is_in_the_ecg_under_the_node_name():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        ecg = df.load(_model("group_norm").SerializeToString())
    ops = [n.op for n in ecg.nodes]
    assert "GroupNormalization" not in ops
    assert {"Reshape", "ReduceMean", "Sqrt"} <= set(ops), ops
    assert all(n.name.startswith("fn/") for n in ecg.nodes), [n.name for n in ecg.nodes]


def test_attributes_and_their_defaults_reach_the_body():
    """Celu's alpha given, and left to its default (1.0), gives different results."""
    x = {"x0": np.linspace(-3, 1, 21, dtype=np.float32).reshape(3, 7)}
    given, default = _compile(_model("celu"))(**x), _compile(_model("celu_default_alpha"))(**x)
    np.testing.assert_allclose(given, np.where(x["x0"] > 0, x["x0"], 1.5 * np.expm1(x["x0"] / 1.5)), rtol=1e-6)
    np.testing.assert_allclose(default, np.where(x["x0"] > 0, x["x0"], np.expm1(x["x0"])), rtol=1e-6)


def test_a_body_operator_dnnfusion_lacks_is_refused_with_the_function_named(monkeypatch):
    # No schema body in this onnx uses an operator dnnfusion lacks any more (Bernoulli's
    # RandomUniformLike was the last: frontends/onnx_random.py), so one is taken away: the
    # refusal names the body's node under the function's
    from dnnfusion.frontends import onnx_versions

    monkeypatch.delitem(onnx_versions.ECG_OPS, "Greater")
    g = h.make_graph([h.make_node("Bernoulli", ["p"], ["y"], name="coin")], "bernoulli",
                     [h.make_tensor_value_info("p", T.FLOAT, (2, 3))], [h.make_tensor_value_info("y", T.FLOAT, (2, 3))])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
    with pytest.raises(df.UnsupportedOperatorError, match=r"node 'coin/Greater\d*' uses operator 'Greater'"):
        _compile(m)


def test_a_body_written_for_a_later_opset_defines_the_same_schema():
    """Shrink-9's only body uses opset-18 operators; a model at opset 13 gets it, read at 18."""
    m = _model("shrink")
    m.opset_import[0].version = 13
    feeds = _feeds("shrink")
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(_compile(m)(**feeds), want, rtol=1e-6)


def test_a_schema_version_without_a_body_is_refused():
    """ReduceL1-13 has no function body (ReduceL1-18 has): at opset 17 it is refused."""
    m = _model("reduce_l1")
    m.opset_import[0].version = 17
    m.graph.node[0].input.pop()  # axes as an attribute before 18
    m.graph.node[0].attribute.append(h.make_attribute("axes", [1]))
    del m.graph.initializer[:]
    with pytest.raises(df.UnsupportedOperatorError, match=r"operator 'ReduceL1' .*opset 17.*does not support"):
        _compile(m)


# ---- float64 reductions (reduce_f64) --------------------------------------------------------
REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"]
NUMPY = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max, "ReduceMin": np.min,
         "ReduceProd": np.prod, "ReduceL2": lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis, keepdims=keepdims))}
AXES = {"rows": [2], "middle": [1], "outer_inner": [0, 2]}


def _reduce_models():
    from onnx import compose

    parts = []
    for op in REDUCE_OPS:
        for k, axes in AXES.items():
            g = h.make_graph([h.make_node(op, ["x", "axes"], ["y"], keepdims=0)], f"{op}_{k}",
                             [h.make_tensor_value_info("x", T.DOUBLE, (3, 5, 7))],
                             [h.make_tensor_value_info("y", T.DOUBLE, None)],
                             [nh.from_array(np.array(axes, np.int64), "axes")])
            parts.append(compose.add_prefix(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]),
                                            f"{op}_{k}_").graph)
    g = h.make_graph([n for p in parts for n in p.node], "reduce_f64", [i for p in parts for i in p.input],
                     [o for p in parts for o in p.output], [t for p in parts for t in p.initializer])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


def _reduce_feeds():
    x = np.random.default_rng(4).uniform(0.5, 1.5, (3, 5, 7))
    x[0, 0, 0] = 1 + 1e-12  # kept in double, lost in float32
    x[2, 4, 6] = np.nan     # Max and Min return NaN where it is (NumPy's rule)
    feeds = {f"{op}_{k}_x": x for op in REDUCE_OPS for k in AXES}
    want = [NUMPY[op](x, axis=tuple(a), keepdims=False) for op in REDUCE_OPS for a in AXES.values()]
    return feeds, want


@pytest.mark.parametrize("isa", params())
def test_double_reductions_on_every_dialect(isa):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        ecg = df.load(_reduce_models().SerializeToString())
    if lacks_here(isa):
        compile_only(ecg, "dnnfusion", isa)
        return
    feeds, want = _reduce_feeds()
    outs, _ = run(ecg, feeds, planner="dnnfusion", isa=isa)
    for got, w in zip(outs, want):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, w, rtol=1e-13, equal_nan=True)


def test_double_reductions_on_opencl(ocl_device):
    if not ocl_device["fp64"]:  # a device without doubles refuses them, saying so
        with pytest.raises(df.UnsupportedOperatorError, match="float64"):
            _compile(_reduce_models(), target="opencl")
        return
    feeds, want = _reduce_feeds()
    outs = _compile(_reduce_models(), target="opencl")(**feeds)
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got, w, rtol=1e-13, equal_nan=True)


# ---- Gemm, BatchNormalization, LayerNormalization on doubles (double_form) --------------------
def _double_model(op, attrs, shapes, consts=None, outputs=1):
    consts = consts or {}
    ins = [h.make_tensor_value_info(f"x{i}", T.DOUBLE, s) for i, s in enumerate(shapes) if i not in consts]
    inits = [nh.from_array(a, f"x{i}") for i, a in consts.items()]
    outs = [h.make_tensor_value_info(f"y{k}", T.DOUBLE, None) for k in range(outputs)]
    g = h.make_graph([h.make_node(op, [f"x{i}" for i in range(len(shapes))], [o.name for o in outs], **attrs)],
                     op, ins, outs, inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


DOUBLE_CASES = {
    "gemm_plain": ("Gemm", {}, [(3, 4), (4, 5)], {}),
    "gemm_trans_alpha_beta_bias_row": ("Gemm", {"transA": 1, "transB": 1, "alpha": 0.5, "beta": -2.0},
                                       [(4, 3), (5, 4), (1, 5)], {}),
    "gemm_constant_weights_bias": ("Gemm", {"transB": 1}, [(2, 6), (3, 6), (3,)],
                                   {1: np.linspace(-1, 1, 18).reshape(3, 6), 2: np.array([0.5, -1.0, 2.0])}),
    "batchnorm_constant_stats": ("BatchNormalization", {"epsilon": 1e-3}, [(2, 3, 4, 5), (3,), (3,), (3,), (3,)],
                                 {1: np.array([1.0, 2.0, -0.5]), 2: np.array([0.1, 0.0, -0.3]),
                                  3: np.array([0.2, -0.1, 0.05]), 4: np.array([1.5, 0.25, 4.0])}),
    "batchnorm_1d_input_stats": ("BatchNormalization", {}, [(4, 3, 6), (3,), (3,), (3,), (3,)], {}),
    "layernorm_last_two_axes": ("LayerNormalization", {"axis": -2, "epsilon": 1e-4}, [(2, 3, 4), (3, 4), (3, 4)], {}),
}


def _double_feeds(case):
    _, _, shapes, consts = DOUBLE_CASES[case]
    rng = np.random.default_rng(9)
    feeds = {f"x{i}": rng.standard_normal(s) for i, s in enumerate(shapes) if i not in consts}
    if DOUBLE_CASES[case][0] == "BatchNormalization" and "x4" in feeds:
        feeds["x4"] = np.abs(feeds["x4"]) + 0.1  # a variance
    return feeds


@pytest.mark.parametrize("target", ["cpu", "opencl"])
@pytest.mark.parametrize("case", list(DOUBLE_CASES))
def test_double_gemm_and_normalizations_match_onnxruntime(case, target, request):
    if target == "opencl":
        request.getfixturevalue("ocl_device")
    op, attrs, shapes, consts = DOUBLE_CASES[case]
    m = _double_model(op, attrs, shapes, consts)
    feeds = _double_feeds(case)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = _compile(m, target=target)(**feeds)
    assert got.dtype == np.float64
    # LayerNormalization computes in its stash_type (float32) by the ONNX function body, as the
    # specification has it; ONNX Runtime's kernel computes in double
    tol = 1e-6 if op == "LayerNormalization" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_a_double_gemm_is_matmul_in_double():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        ecg = df.load(_double_model("Gemm", {"transB": 1, "alpha": 2.0}, [(2, 6), (3, 6), (3,)]).SerializeToString())
    assert "Gemm" not in [n.op for n in ecg.nodes] and "MatMul" in [n.op for n in ecg.nodes]
    a = np.array([[1.0, 1e-12, -1.0, 0, 0, 0]] * 2)  # the sum keeps 1e-12 in double, not in float32
    b = np.ones((3, 6))
    out = df.compile(ecg)(x0=a, x1=b, x2=np.zeros(3))
    np.testing.assert_array_equal(out, np.full((2, 3), 2 * ((1.0 + 1e-12) - 1.0)))


def test_double_batchnorm_in_training_mode_is_still_refused():
    m = _double_model("BatchNormalization", {"training_mode": 1}, [(2, 3, 4), (3,), (3,), (3,), (3,)], outputs=3)
    with pytest.raises(df.UnsupportedOperatorError, match="training"):
        _compile(m)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("p,axis", [(2, -1), (1, 0), (2, 1)])
def test_lp_normalization_matches_onnxruntime_zero_slices_included(p, axis, dtype):
    tp = ONNX_TYPE[dtype]
    g = h.make_graph([h.make_node("LpNormalization", ["x"], ["y"], p=p, axis=axis)], "lp",
                     [h.make_tensor_value_info("x", tp, (3, 4))], [h.make_tensor_value_info("y", tp, (3, 4))])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(dtype)
    x[1, :] = 0.0
    x[:, 2] = 0.0
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = _compile(m)(x=x)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13, atol=1e-7)


# ---- Einsum (onnx_einsum.py) ------------------------------------------------------------------
EINSUMS = {
    "transpose": ("ij->ji", [(3, 4)]),
    "row_sums": ("ij->i", [(3, 4)]),
    "batch_diagonal": ("...ii ->...i", [(3, 5, 5)]),
    "inner_product": ("i,i", [(5,), (5,)]),
    "attention_scores": ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    "attention_values": ("bhqk,bhkd->bhqd", [(2, 3, 4, 5), (2, 3, 5, 8)]),
    "chain_of_three": ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    "ellipsis_broadcast_implicit_output": ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 6)]),
    "outer_product": ("i,j->ij", [(3,), (4,)]),
    "size_one_batch_broadcast": ("bid,bjd->bij", [(1, 3, 4), (2, 5, 4)]),
    "trace": ("ii", [(4, 4)]),
    "sum_all": ("ijk->", [(2, 3, 4)]),
}


def _einsum_model(eq, shapes):
    ins = [h.make_tensor_value_info(f"x{i}", T.FLOAT, s) for i, s in enumerate(shapes)]
    g = h.make_graph([h.make_node("Einsum", [f"x{i}" for i in range(len(shapes))], ["y"], equation=eq)], "einsum",
                     ins, [h.make_tensor_value_info("y", T.FLOAT, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("case", list(EINSUMS))
def test_einsum_matches_numpy_and_onnxruntime(case):
    eq, shapes = EINSUMS[case]
    m = _einsum_model(eq, shapes)
    rng = np.random.default_rng(5)
    feeds = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    got = _compile(m)(**feeds)
    np.testing.assert_allclose(got, np.einsum(eq.replace(" ", ""), *feeds.values()), rtol=1e-5, atol=1e-5)
    if case == "ellipsis_broadcast_implicit_output":  # NumPy's rule; ONNX Runtime 1.32 wants equal ellipses
        with pytest.raises(Exception, match="Ellipsis"):
            ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        return
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_einsum_on_opencl(ocl_device):
    eq, shapes = EINSUMS["attention_scores"]
    feeds = {f"x{i}": np.random.default_rng(i).standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    got = _compile(_einsum_model(eq, shapes), target="opencl")(**feeds)
    np.testing.assert_allclose(got, np.einsum(eq, *feeds.values()), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq,shapes,error,match", [
    ("ij,jk->ik", [(2, 3), (4, 5)], df.ShapeError, r"summed index 'j' has sizes 3 and 4"),
    ("ij->ik", [(2, 3)], df.ShapeError, r"output 'ik'.*names an index no operand has"),
    ("ijk->i", [(2, 3)], df.ShapeError, r"operand 'ijk'.*rank 2"),
    ("iii->i", [(2, 2, 2)], df.UnsupportedOperatorError, r"index 'i' three times"),
])
def test_einsum_errors_say_what_is_wrong(eq, shapes, error, match):
    with pytest.raises(error, match=match):
        _compile(_einsum_model(eq, shapes))


def test_einsum_with_a_symbolic_dimension_asks_for_static_shapes():
    m = _einsum_model("ij,jk->ik", [("n", 3), (3, 4)])
    with pytest.raises(df.ShapeError, match=r"static input shapes.*input_shapes"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", df.ModelWarning)
            df.load(m.SerializeToString())
    x = np.ones((2, 3), np.float32)
    out = _compile(m, example_inputs=[x, np.ones((3, 4), np.float32)])(x, np.ones((3, 4), np.float32))
    np.testing.assert_allclose(out, np.full((2, 4), 3.0))


# ---- OneHot, Hardmax, EyeLike (written in onnx_functions.py) -----------------------------------
def _ort_and_ours(m, feeds, **kw):
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = _compile(m, **kw)(**feeds)
    return (got if isinstance(got, (list, tuple)) else [got]), want


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_matches_onnxruntime_with_negative_and_outside_indices(axis):
    g = h.make_graph([h.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=axis)], "onehot",
                     [h.make_tensor_value_info("i", T.INT64, (2, 3))], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(np.array(4.0, np.float32), "depth"), nh.from_array(np.array([-1.5, 2.0], np.float32), "values")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    feeds = {"i": np.array([[0, 3, -1], [-4, 7, -5]], np.int64)}  # -1 and -4 wrap; 7 and -5 are outside
    (got,), (want,) = _ort_and_ours(m, feeds)
    np.testing.assert_array_equal(got, want)


def test_one_hot_needs_a_constant_depth():
    g = h.make_graph([h.make_node("OneHot", ["i", "depth", "values"], ["y"])], "onehot",
                     [h.make_tensor_value_info("i", T.INT64, (3,)), h.make_tensor_value_info("depth", T.INT64, ())],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [nh.from_array(np.array([0.0, 1.0], np.float32), "values")])
    with pytest.raises(df.ShapeError, match=r"OneHot.*depth.*constant"):
        _compile(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]))


@pytest.mark.parametrize("axis", [0, -1])
def test_hardmax_marks_the_first_maximum(axis):
    g = h.make_graph([h.make_node("Hardmax", ["x"], ["y"], axis=axis)], "hardmax",
                     [h.make_tensor_value_info("x", T.FLOAT, (3, 4))], [h.make_tensor_value_info("y", T.FLOAT, (3, 4))])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    x = np.array([[1, 5, 5, 0], [2, 2, 2, 2], [5, -1, 3, 7]], np.float32)  # ties: the first wins
    (got,), (want,) = _ort_and_ours(m, {"x": x})
    np.testing.assert_array_equal(got, want)


def test_eye_like_with_an_offset_and_a_dtype():
    g = h.make_graph([h.make_node("EyeLike", ["x"], ["y"], k=-1, dtype=T.DOUBLE)], "eye",
                     [h.make_tensor_value_info("x", T.INT32, (3, 5))], [h.make_tensor_value_info("y", T.DOUBLE, (3, 5))])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    (got,), (want,) = _ort_and_ours(m, {"x": np.zeros((3, 5), np.int32)})
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.eye(3, 5, k=-1))


@pytest.mark.parametrize("node", [
    h.make_node("Hardmax", ["x"], ["y"], axis=7),
    h.make_node("LpNormalization", ["x"], ["y"], p=3),
    h.make_node("Einsum", ["x"], ["y"], equation="a.b->a"),
    h.make_node("Einsum", ["x"], ["y"], equation="ab,->c"),
    h.make_node("EyeLike", ["x"], ["y"], dtype=99),
    h.make_node("OneHot", ["x", "d", "v"], ["y"], axis=5),
], ids=["hardmax_axis", "lp_p3", "einsum_dot", "einsum_operands", "eyelike_dtype", "onehot_axis"])
def test_malformed_nodes_get_clear_errors_naming_the_node(node):
    g = h.make_graph([node], "bad", [h.make_tensor_value_info("x", T.FLOAT, (2, 3))],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(np.array(3, np.int64), "d"), nh.from_array(np.array([0.0, 1.0], np.float32), "v")])
    with pytest.raises(df.Error, match=rf"{node.op_type}_0|'{node.op_type}"):
        _compile(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))


@pytest.mark.parametrize("shape,size", [((2, 5, 4, 3), 3), ((1, 6, 7), 4), ((2, 3, 2, 2), 5)],
                         ids=["4d_odd", "3d_even", "window_wider_than_channels"])
def test_lrn_matches_onnxruntime(shape, size):
    g = h.make_graph([h.make_node("LRN", ["x"], ["y"], size=size, alpha=0.3, beta=0.8, bias=1.5)], "lrn",
                     [h.make_tensor_value_info("x", T.FLOAT, shape)], [h.make_tensor_value_info("y", T.FLOAT, shape)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    sq, lo, hi = x.astype(np.float64) ** 2, (size - 1) // 2, size - 1 - (size - 1) // 2
    sums = np.stack([sq[:, max(0, c - lo):min(shape[1], c + hi + 1)].sum(1) for c in range(shape[1])], 1)
    spec = x / (1.5 + 0.3 / size * sums) ** 0.8  # the ONNX specification's formula
    got = _compile(m)(x=x)
    np.testing.assert_allclose(got, spec, rtol=2e-6, atol=1e-6)
    if size % 2:  # ONNX Runtime 1.32 takes odd sizes only
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("attrs,shape,oracle", [
    ({"kernel_shape": [3, 2], "p": 3, "strides": [2, 1], "pads": [1, 0, 1, 1]}, (2, 3, 7, 6), "ort"),
    # ONNX Runtime 1.32 pads SAME_UPPER as if there were no dilation (7 outputs of 9, for MaxPool
    # too); ONNX's reference evaluator gives 9 outputs but puts all the padding at the end for
    # LpPool and AveragePool (its MaxPool splits it, as the specification says): the
    # specification's sums, written out below, are the oracle.
    ({"kernel_shape": [3], "p": 1, "dilations": [2], "auto_pad": "SAME_UPPER"}, (1, 4, 9), "spec"),
    # ceil_mode changes no size here (every window fits): accepted
    ({"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, (1, 2, 6, 4), "ort"),
], ids=["p3_strided_padded", "p1_dilated_same_upper", "ceil_mode_without_effect"])
def test_lp_pool_matches_onnxruntime(attrs, shape, oracle):
    g = h.make_graph([h.make_node("LpPool", ["x"], ["y"], **attrs)], "lppool",
                     [h.make_tensor_value_info("x", T.FLOAT, shape)], [h.make_tensor_value_info("y", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    if oracle == "ort":
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    else:  # 1-D, p=1, kernel 3, dilation 2, stride 1, SAME_UPPER: 4 pads, 2 on each side
        xp = np.pad(np.abs(x), [(0, 0), (0, 0), (2, 2)])
        want = xp[:, :, 0:9] + xp[:, :, 2:11] + xp[:, :, 4:13]
    got = _compile(m)(x=x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


def test_lp_pool_ceil_mode_that_adds_a_window_is_refused():
    g = h.make_graph([h.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
                     "lppool", [h.make_tensor_value_info("x", T.FLOAT, (1, 2, 5, 4))],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(df.UnsupportedOperatorError, match="ceil_mode"):
        _compile(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))
