"""Tests of the NumPy reference interpreter (dnnfusion/reference.py) against ONNX's own cases.

Every ONNX backend node test case (generated with onnx.backend.test.case.node) whose single
node is an ECG operator (cpp/ir/ops.def) in the default domain is run through
``reference.run_node`` and compared with ONNX's expected outputs. The few exceptions are
listed below (OUT_OF_SCOPE, UNSUPPORTED, DIVERGENT, TOLERANCE), each with its reason, and are
still tested in another way. Hand-written and differential checks of single kernels are in
test_reference_differential.py, graph execution in test_reference_graph.py.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dnnfusion import reference
from dnnfusion.reference import run_node

from reference_helpers import _assert_same

ROOT = Path(__file__).resolve().parents[1]
# The ONNX operators of the table (internal ops, with "" as ONNX name, have no ONNX cases;
# NhwcConv is checked against Conv in test_layout.py).
ECG_OPS = re.findall(r'^DNNF_OP\((\w+),\s*"\w+"', (ROOT / "cpp/ir/ops.def").read_text(), re.M)

# dtypes an ECG value can have.
ECG_DTYPES = {np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.int16,
                                    np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                    np.uint64, np.bool_)} | {np.dtype("bfloat16")}  # (ml_dtypes, via onnx)
ECG_DTYPES |= {np.dtype(getattr(__import__("ml_dtypes"), t)) for t in (
    "int4", "uint4", "int2", "uint2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float4_e2m1fn", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn")}

# Cases outside the ECG's scope: element types or value kinds an ECG value cannot have.
# They are not compared with ONNX; test_out_of_scope_case checks instead that each one
# really involves such a type and that run_node refuses it when its inputs are ECG arrays
# (e.g. Cast to float8 raises NotImplementedError).
OUT_OF_SCOPE = {
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
                                    "test_roialign_mode_max", "test_gridsample_bicubic",
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
