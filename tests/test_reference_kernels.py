"""Tests of the NumPy reference interpreter (dnnfusion/reference.py).

1. Every ONNX backend node test case (generated with onnx.backend.test.case.node) whose
   single node is an ECG operator (cpp/ir/ops.def) in the default domain is run through
   ``reference.run_node`` and compared with ONNX's expected outputs. The few exceptions are
   listed below (OUT_OF_SCOPE, UNSUPPORTED, DIVERGENT, TOLERANCE), each with its reason,
   and are still tested in another way.
2. Kernels where ONNX's cases are thin are checked against PyTorch, and the geometric
   kernels (Conv, ConvTranspose, pools, Resize, RoiAlign, NonMaxSuppression) against
   onnxruntime on seeded random attribute combinations.
3. Graph execution (``run`` / ``run_nodes``) is checked on a small duck-typed graph.
"""

from __future__ import annotations

import itertools
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dnnfusion import reference
from dnnfusion.reference import run_node

ROOT = Path(__file__).resolve().parents[1]
# The ONNX operators of the table (internal ops, with "" as ONNX name, have no ONNX cases;
# NhwcConv is checked against Conv in test_layout.py).
ECG_OPS = re.findall(r'^DNNF_OP\((\w+),\s*"\w+"', (ROOT / "cpp/ir/ops.def").read_text(), re.M)

# dtypes an ECG value can have.
ECG_DTYPES = {np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.int16,
                                    np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                    np.uint64, np.bool_)}

# Cases outside the ECG's scope: element types or value kinds an ECG value cannot have.
# They are not compared with ONNX; test_out_of_scope_case checks instead that each one
# really involves such a type and that run_node refuses it when its inputs are ECG arrays
# (e.g. Cast to float8 raises NotImplementedError).
OUT_OF_SCOPE = {
    r"^test_cast(like)?_.*(BFLOAT16|FLOAT8|FLOAT4|U?INT4|U?INT2)":
        "bfloat16, float8, float4, int4 and int2 are not ECG dtypes",
    r"^test_range_bfloat16_": "bfloat16 is not an ECG dtype",
    r"^test_equal_string": "strings are not an ECG dtype",
    r"^test_identity_(sequence|opt)$": "sequence and optional values are not ECG values",
}

# Cases using a feature the oracle deliberately does not implement. The test asserts that
# run_node raises NotImplementedError for them, so this list cannot go stale silently.
UNSUPPORTED = {
    **{name: "Dropout with training_mode=True draws a random mask; the oracle is inference-only"
       for name in ("test_training_dropout", "test_training_dropout_mask",
                    "test_training_dropout_default", "test_training_dropout_default_mask")},
}

# Cases where ONNX's expected output departs from the ONNX spec text and from onnxruntime;
# the oracle follows the spec, and these cases are checked against onnxruntime instead.
DIVERGENT = {
    **{name: "ONNX's generator uses the fractional output width (scale * in) in align_corners; "
             "the spec and onnxruntime use the integer output length"
       for name in ("test_resize_downsample_scales_linear_align_corners",
                    "test_resize_downsample_scales_cubic_align_corners")},
}

# Cases whose expected values are hard-coded with 4 decimals: (rtol, atol).
TOLERANCE = {
    name: (1e-4, 1e-4) for name in ("test_roialign_aligned_false", "test_roialign_aligned_true",
                                    "test_roialign_mode_max",
                                    "test_averagepool_2d_ceil_last_window_starts_on_pad")
}

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# --------------------------------------------------------------------------------------------
# ONNX backend node cases
# --------------------------------------------------------------------------------------------
@dataclass
class NodeCase:
    name: str
    op: str
    inputs: list[Any]  # np.ndarray | None, or a non-tensor value (list, TensorProto, ...)
    attrs: dict[str, Any]
    num_outputs: int
    present_outputs: list[int]  # indices of the node outputs the case checks
    expected: list[Any]
    opset: int
    model: bytes


def _to_numpy(value: Any) -> Any:
    import onnx
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        try:
            return numpy_helper.to_array(value)
        except Exception:  # noqa: BLE001 - exotic element type
            return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def _attr_value(attr: Any) -> Any:
    import onnx
    from onnx import numpy_helper

    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value


# Attributes that became inputs: op -> (last opset with the attribute form, [(attr, input
# position, dtype; None: the data input's)]). Split also needs num_outputs before opset 18.
_ATTRS_TO_INPUTS: dict[str, tuple[int, list[tuple[str, int, type | None]]]] = {
    **{op: (17, [("axes", 1, np.int64)]) for op in
       ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2")},
    "ReduceSum": (12, [("axes", 1, np.int64)]),
    "Squeeze": (12, [("axes", 1, np.int64)]),
    "Unsqueeze": (12, [("axes", 1, np.int64)]),
    "Split": (12, [("split", 1, np.int64)]),
    "Clip": (10, [("min", 1, None), ("max", 2, None)]),
    "Pad": (10, [("pads", 1, np.int64), ("value", 2, None)]),
    "Slice": (9, [("starts", 1, np.int64), ("ends", 2, np.int64), ("axes", 3, np.int64)]),
}


def _modernize(op: str, opset: int, inputs: list[Any], attrs: dict[str, Any],
               num_outputs: int) -> None:
    """Rewrite old-opset attribute forms into the opset-21 input forms, in place."""
    last, moves = _ATTRS_TO_INPUTS.get(op, (0, []))
    if opset <= last:
        for attr, pos, dtype in moves:
            if attr in attrs:
                while len(inputs) <= pos:
                    inputs.append(None)
                inputs[pos] = np.array(attrs.pop(attr), dtype=dtype or inputs[0].dtype)
    if op == "Split" and opset < 18 and _opt(inputs, 1) is None:
        attrs.setdefault("num_outputs", num_outputs)
    if op == "Dropout" and opset < 12:
        attrs.pop("ratio", None)  # inference: ignored


def _opt(xs: list[Any], i: int) -> Any:
    return xs[i] if len(xs) > i else None


def _make_case(tc: Any) -> NodeCase:
    graph = tc.model.graph
    node = graph.node[0]
    opset = max(o.version for o in tc.model.opset_import if o.domain in ("", "ai.onnx"))
    feeds, outs = tc.data_sets[0]
    by_name = {vi.name: _to_numpy(v) for vi, v in zip(graph.input, feeds)}
    inputs = [by_name[n] if n else None for n in node.input]
    while inputs and inputs[-1] is None:
        inputs.pop()
    attrs = {a.name: _attr_value(a) for a in node.attribute}
    num_outputs = len(node.output)
    _modernize(node.op_type, opset, inputs, attrs, num_outputs)
    expected = [_to_numpy(v) for v in outs]
    present = [i for i, n in enumerate(node.output) if n]
    return NodeCase(tc.name, node.op_type, inputs, attrs, num_outputs, present, expected,
                    opset, tc.model.SerializeToString())


def _is_ecg_array(value: Any) -> bool:
    return value is None or (isinstance(value, np.ndarray) and value.dtype in ECG_DTYPES)


def out_of_scope(name: str) -> str | None:
    return next((why for pattern, why in OUT_OF_SCOPE.items() if re.match(pattern, name)), None)


def _collect() -> list[NodeCase]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    selected = [tc for tc in cases if len(tc.model.graph.node) == 1
                and tc.model.graph.node[0].domain in ("", "ai.onnx")
                and tc.model.graph.node[0].op_type in ECG_OPS]
    return [_make_case(tc) for tc in selected]


ALL_CASES = _collect()
CASES = [c for c in ALL_CASES if not out_of_scope(c.name)]
EXCLUDED = [c for c in ALL_CASES if out_of_scope(c.name)]


def _assert_same(name: str, got: np.ndarray, want: np.ndarray,
                 tolerance: tuple[float, float] = (1e-4, 1e-5)) -> None:
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    if want.dtype.kind == "f":
        rtol, atol = tolerance
        if want.dtype == np.float16:
            rtol = max(rtol, 1e-3)  # one float16 ulp is ~1e-3
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_onnx_backend_case(case: NodeCase) -> None:
    assert all(_is_ecg_array(v) for v in [*case.inputs, *case.expected]), \
        f"{case.name} uses a dtype outside the ECG; list it in OUT_OF_SCOPE"
    if case.name in UNSUPPORTED:
        with pytest.raises(NotImplementedError):
            run_node(case.op, case.inputs, case.attrs, case.num_outputs)
        return
    outputs = run_node(case.op, case.inputs, case.attrs, case.num_outputs)
    assert len(outputs) == case.num_outputs
    expected = _onnxruntime_outputs(case) if case.name in DIVERGENT else case.expected
    for i, want in zip(case.present_outputs, expected):
        _assert_same(f"{case.name} output {i}", np.asarray(outputs[i]), want,
                     TOLERANCE.get(case.name, (1e-4, 1e-5)))


def _onnxruntime_outputs(case: NodeCase) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    import onnx

    model = onnx.load_from_string(case.model)
    session = ort.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    feeds = {vi.name: x for vi, x in zip(model.graph.input, [x for x in case.inputs
                                                              if x is not None])}
    return session.run(None, feeds)


@pytest.mark.parametrize("case", EXCLUDED, ids=[c.name for c in EXCLUDED])
def test_out_of_scope_case(case: NodeCase) -> None:
    if all(_is_ecg_array(v) for v in case.inputs):
        with pytest.raises(NotImplementedError):
            run_node(case.op, case.inputs, case.attrs, case.num_outputs)
    else:
        assert not all(_is_ecg_array(v) for v in [*case.inputs, *case.expected])


def test_backend_cases_cover_every_op() -> None:
    covered = {c.op for c in CASES if c.name not in UNSUPPORTED}
    assert set(ECG_OPS) - covered == set()


def test_case_lists_are_current() -> None:
    names = {c.name for c in CASES}
    assert set(UNSUPPORTED) | set(DIVERGENT) | set(TOLERANCE) <= names
    assert all(any(re.match(p, c.name) for c in EXCLUDED) for p in OUT_OF_SCOPE)


def test_kernel_table_matches_ops_def() -> None:
    every_row = re.findall(r"^DNNF_OP\((\w+),", (ROOT / "cpp/ir/ops.def").read_text(), re.M)
    assert set(reference.KERNELS) == set(every_row)


# --------------------------------------------------------------------------------------------
# Hand-written checks
# --------------------------------------------------------------------------------------------
RNG = np.random.default_rng(0)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_unknown_op_and_unsupported_attribute() -> None:
    with pytest.raises(NotImplementedError, match="NoSuchOp"):
        run_node("NoSuchOp", [], {})
    with pytest.raises(NotImplementedError, match="Cast.*to"):
        run_node("Cast", [_rand(2)], {"to": 16})  # bfloat16
    with pytest.raises(NotImplementedError, match="Pad.*mode"):
        run_node("Pad", [_rand(2), np.array([1, 1])], {"mode": "mirror"})


def test_integer_div_truncates_toward_zero() -> None:
    a = np.array([-7, 7, -7, 7, 6], dtype=np.int32)
    b = np.array([2, -2, -2, 2, 3], dtype=np.int32)
    (y,) = run_node("Div", [a, b], {})
    np.testing.assert_array_equal(y, [-3, -3, 3, 3, 2])
    assert y.dtype == np.int32


def test_float32_stays_float32_and_erf_is_precise() -> None:
    import math

    x = np.linspace(-4, 4, 101, dtype=np.float32)
    (y,) = run_node("Erf", [x], {})
    assert y.dtype == np.float32
    want = np.array([math.erf(float(v)) for v in x], dtype=np.float32)
    np.testing.assert_allclose(y, want, rtol=1e-7, atol=0)


def test_topk_ties_prefer_lower_index() -> None:
    x = np.array([[3, 1, 3, 2, 1]], dtype=np.int64)
    values, idx = run_node("TopK", [x, np.array([3])], {"axis": 1})
    np.testing.assert_array_equal(values, [[3, 3, 2]])
    np.testing.assert_array_equal(idx, [[0, 2, 3]])
    values, idx = run_node("TopK", [x, np.array([2])], {"axis": 1, "largest": 0})
    np.testing.assert_array_equal(idx, [[1, 4]])


def test_slice_negative_steps_and_clamping() -> None:
    x = np.arange(10, dtype=np.float32)
    cases = [((-1,), (-1000,), (-1,)), ((20,), (2,), (-3,)), ((-100,), (100,), (4,))]
    for starts, ends, steps in cases:
        (y,) = run_node("Slice", [x, np.array(starts), np.array(ends), None, np.array(steps)],
                        {})
        np.testing.assert_array_equal(y, x[slice(starts[0], ends[0], steps[0])])


@pytest.fixture(scope="module")
def F() -> Any:
    """torch.nn.functional (the tests using it are skipped when torch is missing)."""
    return pytest.importorskip("torch").nn.functional


def _t(x: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(x).double()


def test_conv3d_groups_against_torch(F: Any) -> None:
    x, w, b = _rand(2, 4, 7, 8, 6), _rand(6, 2, 3, 2, 3), _rand(6)
    attrs = {"group": 2, "strides": [2, 1, 2], "dilations": [1, 2, 1],
             "pads": [1, 0, 2, 1, 0, 2]}
    (y,) = run_node("Conv", [x, w, b], attrs)
    want = F.conv3d(_t(x), _t(w), _t(b), stride=(2, 1, 2), padding=(1, 0, 2),
                    dilation=(1, 2, 1), groups=2).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_conv_same_lower_against_explicit_pads() -> None:
    x, w = _rand(1, 2, 7, 6), _rand(3, 2, 4, 3)
    (same,) = run_node("Conv", [x, w], {"auto_pad": "SAME_LOWER", "strides": [2, 2]})
    # out = ceil(in / stride) = (4, 3); total pads = (3*2+4-7, 2*2+3-6) = (3, 1); lower gets more
    (explicit,) = run_node("Conv", [x, w], {"pads": [2, 1, 1, 0], "strides": [2, 2]})
    np.testing.assert_array_equal(same, explicit)


def test_conv_transpose2d_output_padding_groups_against_torch(F: Any) -> None:
    x, w, b = _rand(2, 4, 5, 4), _rand(4, 3, 3, 2), _rand(6)
    attrs = {"group": 2, "strides": [2, 3], "dilations": [2, 1], "pads": [1, 0, 2, 0],
             "output_padding": [1, 2]}
    (y,) = run_node("ConvTranspose", [x, w, b], attrs)
    # torch pads symmetrically: run with pads (1, 0) and crop the extra end pad of dim 0.
    want = F.conv_transpose2d(_t(x), _t(w), _t(b), stride=(2, 3), padding=(1, 0),
                              output_padding=(1, 2), groups=2, dilation=(2, 1)).numpy()
    np.testing.assert_allclose(y, want[:, :, :-1, :], rtol=1e-5, atol=1e-5)


def test_conv_transpose_output_shape(F: Any) -> None:
    x, w = _rand(1, 2, 3, 3), _rand(2, 1, 3, 3)
    (y,) = run_node("ConvTranspose", [x, w], {"strides": [2, 2], "output_shape": [7, 8]})
    assert y.shape == (1, 1, 7, 8)
    want = F.conv_transpose2d(_t(x), _t(w), stride=2, output_padding=(0, 1)).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_maxpool_against_torch(F: Any, ceil_mode: bool) -> None:
    x = _rand(2, 3, 9, 10)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 1, 1, 1],
             "dilations": [1, 2], "ceil_mode": int(ceil_mode)}
    y, idx = run_node("MaxPool", [x], attrs)
    want, want_idx = F.max_pool2d(_t(x).float(), (3, 2), (2, 3), (1, 1), (1, 2),
                                  ceil_mode=ceil_mode, return_indices=True)
    np.testing.assert_array_equal(y, want.numpy())
    plane = np.arange(6).reshape(2, 3, 1, 1) * 90  # ONNX indices count N and C too
    np.testing.assert_array_equal(idx - plane, want_idx.numpy())


def test_maxpool_storage_order_column_major() -> None:
    x = _rand(1, 1, 4, 5)
    _, row = run_node("MaxPool", [x], {"kernel_shape": [2, 2]})
    _, col = run_node("MaxPool", [x], {"kernel_shape": [2, 2], "storage_order": 1})
    h, w = np.divmod(row, 5)
    np.testing.assert_array_equal(col, h + w * 4)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_averagepool_against_torch(F: Any, include_pad: int, ceil_mode: bool) -> None:
    x = _rand(2, 3, 8, 7)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
             "ceil_mode": int(ceil_mode), "count_include_pad": include_pad}
    (y,) = run_node("AveragePool", [x], attrs)
    want = F.avg_pool2d(_t(x), 3, 2, 1, ceil_mode=ceil_mode,
                        count_include_pad=bool(include_pad)).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_layernorm_against_torch(F: Any) -> None:
    x, scale, bias = _rand(3, 4, 5, 6), _rand(5, 6), _rand(5, 6)
    y, mean, inv_std = run_node("LayerNormalization", [x, scale, bias],
                                {"axis": -2, "epsilon": 1e-3})
    want = F.layer_norm(_t(x), (5, 6), _t(scale), _t(bias), eps=1e-3).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    assert mean.shape == inv_std.shape == (3, 4, 1, 1)
    assert y.dtype == mean.dtype == np.float32


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_against_torch(F: Any, approximate: str) -> None:
    x = _rand(1000) * 4
    (y,) = run_node("Gelu", [x], {"approximate": approximate})
    want = F.gelu(_t(x), approximate=approximate).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-7)


def test_resize_bilinear_and_bicubic_against_torch(F: Any) -> None:
    x = _rand(1, 2, 5, 6)
    scales = np.array([1, 1, 2.0, 1.5], dtype=np.float32)
    (y,) = run_node("Resize", [x, None, scales], {"mode": "linear"})
    want = F.interpolate(_t(x), scale_factor=(2.0, 1.5), mode="bilinear",
                         align_corners=False).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    sizes = np.array([1, 2, 9, 4], dtype=np.int64)
    (y,) = run_node("Resize", [x, None, None, sizes],
                    {"mode": "cubic", "coordinate_transformation_mode": "align_corners"})
    want = F.interpolate(_t(x), size=(9, 4), mode="bicubic", align_corners=True).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------------
# Randomised differential checks against onnxruntime (seeded, so the cases are fixed)
# --------------------------------------------------------------------------------------------
def _ort_run(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any],
             out_dtypes: list[np.dtype], opset: int = 21) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper

    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = [f"out{i}" for i in range(len(out_dtypes))]
    graph = helper.make_graph(
        [helper.make_node(op, names, outs, **attrs)], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for n, x in zip(names, inputs) if x is not None],
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(d), None)
         for n, d in zip(outs, out_dtypes)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {n: x for n, x in zip(names, inputs) if x is not None})


def _random_window(rng: np.random.Generator, nd: int, auto_pad: str) -> dict[str, Any]:
    kernel = [int(k) for k in rng.integers(1, 4, nd)]
    attrs: dict[str, Any] = {"kernel_shape": kernel,
                             "strides": [int(s) for s in rng.integers(1, 3, nd)]}
    if auto_pad == "NOTSET":
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel * 2]
        attrs["dilations"] = [int(d) for d in rng.integers(1, 3, nd)]
    else:
        attrs["auto_pad"] = auto_pad  # onnxruntime ignores dilations in SAME pool padding
    return attrs


def _differential_cases() -> list[tuple[str, list[np.ndarray | None], dict[str, Any], int]]:
    rng = np.random.default_rng(2024)

    def rand(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    cases = []
    for nd, auto_pad in itertools.product((1, 2, 3), ("NOTSET", "SAME_UPPER", "SAME_LOWER",
                                                       "VALID")):
        attrs = _random_window(rng, nd, auto_pad)
        spatial = [int(s) for s in rng.integers(5, 9, nd)]
        weights = rand(6, 2, *attrs["kernel_shape"])
        cases.append(("Conv", [rand(2, 4, *spatial), weights, rand(6)], {**attrs, "group": 2}, 1))
        pool = {**attrs, "ceil_mode": int(auto_pad == "NOTSET")}
        cases.append(("MaxPool", [rand(2, 3, *spatial)], {**pool, "storage_order": nd % 2}, 2))
        cases.append(("AveragePool", [rand(2, 3, *spatial)],
                      {**pool, "count_include_pad": nd % 2}, 1))
        transposed = {k: v for k, v in attrs.items() if k != "kernel_shape"}
        if auto_pad == "NOTSET":
            transposed["output_padding"] = [int(s) - 1 for s in transposed["strides"]]
        cases.append(("ConvTranspose", [rand(2, 4, *spatial[:nd]), rand(4, 3, *attrs[
            "kernel_shape"]), rand(6)], {**transposed, "group": 2}, 1))
    modes = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
             "asymmetric", "tf_crop_and_resize")
    for mode, ctm in itertools.product(("nearest", "linear", "cubic"), modes):
        attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
        roi = None
        if ctm == "tf_crop_and_resize":
            roi = np.array([0.1, -0.2, 0.9, 1.1], dtype=np.float32)
            attrs["extrapolation_value"] = 7.0
        if mode == "cubic":
            attrs.update(cubic_coeff_a=-0.5, exclude_outside=1)
        scales = np.array([rng.choice([0.6, 1.5, 2.7]), rng.choice([0.5, 1.3, 3.0])], np.float32)
        cases.append(("Resize", [rand(2, 3, 5, 6), roi, scales], {**attrs, "axes": [2, 3]}, 1))
    for mode in ("linear", "cubic"):
        scales = np.array([0.45, 0.3], dtype=np.float32)
        cases.append(("Resize", [rand(1, 2, 9, 11), None, scales],
                      {"mode": mode, "antialias": 1, "axes": [2, 3]}, 1))
    for mode, ctm in itertools.product(("avg", "max"), ("half_pixel", "output_half_pixel")):
        corner = rng.uniform(-2, 9, (6, 2))
        rois = np.concatenate([corner, corner + rng.uniform(0, 6, (6, 2))], 1)
        attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "output_height": 3,
                 "output_width": 2, "sampling_ratio": 2 if mode == "max" else 0,
                 "spatial_scale": 0.5}
        cases.append(("RoiAlign", [rand(2, 3, 10, 12), rois.astype(np.float32),
                                   rng.integers(0, 2, 6)], attrs, 1))
    for center_point_box in (0, 1):
        boxes = rng.uniform(0, 10, (2, 30, 4)).astype(np.float32)
        scores = np.round(rng.uniform(0, 1, (2, 3, 30)), 1).astype(np.float32)
        limits = [np.array([5]), np.array([0.4], np.float32), np.array([0.2], np.float32)]
        cases.append(("NonMaxSuppression", [boxes, scores, *limits],
                      {"center_point_box": center_point_box}, 1))
    return cases


DIFFERENTIAL = _differential_cases()


@pytest.mark.parametrize("op, inputs, attrs, num_outputs", DIFFERENTIAL,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(DIFFERENTIAL)])
def test_against_onnxruntime(op: str, inputs: list, attrs: dict, num_outputs: int) -> None:
    got = run_node(op, inputs, attrs, num_outputs)
    want = _ort_run(op, inputs, attrs, [g.dtype for g in got])
    for i, (g, w) in enumerate(zip(got, want)):
        _assert_same(f"{op} output {i}", g, w, (1e-4, 1e-4))


# --------------------------------------------------------------------------------------------
# Graph execution
# --------------------------------------------------------------------------------------------
@dataclass(eq=False)
class FakeValue:
    id: int
    name: str
    dtype: str
    shape: tuple
    data: np.ndarray | None = None

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def numpy(self) -> np.ndarray:
        assert self.data is not None
        return self.data


@dataclass(eq=False)
class FakeNode:
    op: str
    name: str
    inputs: list
    outputs: list
    attrs: dict = field(default_factory=dict)


@dataclass(eq=False)
class FakeGraph:
    inputs: list
    outputs: list
    nodes: list


def _small_graph() -> tuple[FakeGraph, np.ndarray, np.ndarray]:
    """y = Relu(x @ w + b); z = ReduceSum(y, axes=[1]) (keepdims=0)."""
    w, b = _rand(4, 3), _rand(3)
    x = FakeValue(0, "x", "f32", ("batch", 4))
    wv = FakeValue(1, "w", "f32", (4, 3), w)
    bv = FakeValue(2, "b", "f32", (3,), b)
    mm, add = FakeValue(3, "mm", "f32", ("batch", 3)), FakeValue(4, "add", "f32", ("batch", 3))
    y = FakeValue(5, "y", "f32", ("batch", 3))
    axes = FakeValue(6, "axes", "i64", (1,), np.array([1]))
    z = FakeValue(7, "z", "f32", ("batch",))
    nodes = [FakeNode("MatMul", "mm", [x, wv], [mm]), FakeNode("Add", "add", [mm, bv], [add]),
             FakeNode("Relu", "relu", [add], [y]),
             FakeNode("ReduceSum", "sum", [y, axes], [z], {"keepdims": 0})]
    return FakeGraph([x], [y, z], nodes), w, b


def test_run_small_graph() -> None:
    graph, w, b = _small_graph()
    xs = _rand(5, 4)
    y, z = reference.run(graph, {"x": xs})
    want = np.maximum(xs.astype(np.float64) @ w + b, 0)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(z, want.sum(axis=1), rtol=1e-6, atol=1e-6)
    assert y.dtype == z.dtype == np.float32
    y2, _ = reference.run(graph, [xs])
    np.testing.assert_array_equal(y, y2)


def test_run_nodes_frees_intermediates() -> None:
    graph, _, _ = _small_graph()
    env = {0: _rand(2, 4)}
    reference.run_nodes(graph.nodes[:2], env, keep={4})  # first block: keep 'add' only
    assert set(env) == {4}
    reference.run_nodes(graph.nodes[2:], env, keep={5, 7})
    assert set(env) == {5, 7}
    env = {0: _rand(2, 4)}
    reference.run_nodes(graph.nodes, env)  # no keep: nothing is dropped
    assert {3, 4, 5, 7} <= set(env)


@pytest.mark.parametrize("feeds, message", [
    ({"x": np.zeros((2, 4), dtype=np.float64)}, "dtype"),
    ({"x": np.zeros((2, 5), dtype=np.float32)}, "shape"),
    ({"x": np.zeros((2, 4, 1), dtype=np.float32)}, "rank"),
    ({}, "no feed"),
    ({"x": np.zeros((2, 4), dtype=np.float32), "q": np.zeros(1)}, "unknown"),
])
def test_run_rejects_bad_feeds(feeds: dict, message: str) -> None:
    graph, _, _ = _small_graph()
    with pytest.raises(ValueError, match=message):
        reference.run(graph, feeds)
