"""The ONNX backend node tests, run through dnnfusion's ONNX front-end and NumPy reference.

The ``onnx`` wheel does not ship its test data (``onnx/backend/test/data/node``); the cases
are generated instead with ``onnx.backend.test.case.node.collect_testcases``, which builds
each model and computes its expected outputs with NumPy, exactly as onnx does to write the
data files. Every case gets a status:

* **covered**: every node of its graph is an ECG operator (``cpp/ir/ops.def``) of the
  default domain without sub-graphs, or If / Loop / Scan (:data:`CONTROL_FLOW`) whose bodies
  are such nodes, the model's opset is one the front-end accepts
  (13 or newer, or 7 to 12, which it converts to 13 with ``onnx.version_converter``), and
  every tensor it declares has an element type the ECG has. A covered case must pass; only
  those listed in :data:`UNSUPPORTED_ATTRIBUTE` may instead be refused at import with
  ``UnsupportedOperatorError``. A case written for an opset older than 7 is covered, and run
  declaring opset 13, when each of its operators has the same schema at both opsets (Not-1).
* **not covered**, with the reason (an operator outside the table, another domain, a
  sub-graph, an opset older than 7, an element type such as bfloat16 or a sequence).

:func:`run_case` freezes the graph inputs that must be constants for static shapes
(:data:`STATIC_OPERANDS`) into initializers holding the case's data, loads the model with
:func:`dnnfusion.load`, runs it with
:func:`dnnfusion.reference.run` (``ECG.run_reference``) and compares every output with the expected one: dtypes and
shapes must match; floats within ``rtol``/``atol`` (:data:`TOLERANCES`, NaN matching NaN);
integers and bools exactly (a few hand-rounded expected outputs: :data:`ROUNDED_EXPECTED`).

Run ``python -m dnnfusion.testing.onnx_node_suite`` for passed / failed / not-covered counts
and a per-operator breakdown (``-v`` lists the failures and the not-covered reasons).
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import traceback
import warnings
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnfusion.dtypes import is_float_dtype
from dnnfusion.frontends.onnx import MIN_OPSET, OLDEST_CONVERTED, ONNX_DTYPES, RENAMED_BY_CONVERSION
from dnnfusion.frontends.onnx_sequence import OPS as SEQUENCE_OPS

# Covered cases that dnnfusion refuses on purpose, because an attribute (or an input acting
# as one) asks for something the ECG does not represent. Each entry is checked: the case
# must raise UnsupportedOperatorError at import, or the test suite fails and the entry has
# to go. Nothing may be listed here to hide a wrong result.
UNSUPPORTED_ATTRIBUTE: dict[str, str] = {
    # Scan-8 (opset 8) scans a batch axis; onnx.version_converter's conversion to opset 13
    # drops that axis from the graph's inputs, so the import refuses it
    # (frontends/onnx_versions.upgrade).
    "test_scan_sum": "Scan-8 (opset 8): the conversion changes the graph's inputs",
    # BatchNormalization training_mode=1 (batch statistics, running-mean outputs):
    # dnnfusion compiles inference graphs.
    "test_batchnorm_epsilon_training_mode": "BatchNormalization training_mode=1",
    "test_batchnorm_example_training_mode": "BatchNormalization training_mode=1",
}

# dnnfusion compiles for static shapes: an operand that fixes the shape of a result must be
# a constant, as exporters write it (ONNX op -> input positions; the shape rules refuse
# anything else). Many backend tests feed such operands as graph inputs, so before import
# the suite freezes those inputs into initializers holding the case's data, together with
# any graph input they are computed from (stopping at Shape/Size, which only read a shape).
# The operator is still run on the case's data and checked against its expected outputs.
# CumSum's axis does not fix a shape, but like a reduction's axes it fixes the loop structure
# of the generated kernel, and exporters write it as a constant: it is frozen the same way.
STATIC_OPERANDS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,),
    "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "Slice": (1, 2, 3, 4),
    "Pad": (1, 3), "Resize": (2, 3), "Upsample": (1,), "TopK": (1,), "Range": (0, 1, 2), "CumSum": (1,), "CumProd": (1,),
    **{op: (1,) for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                           "ReduceProd", "ReduceL2")},
    # operators imported as their function bodies, where the operand reaches a position above
    **{op: (1,) for op in ("ReduceL1", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
                           "CenterCropPad")},
    **{op: (0,) for op in ("BlackmanWindow", "HammingWindow", "HannWindow")},
    "OneHot": (1,), "AffineGrid": (1,),
    # the signal operators' sizes (onnx_signal.py builds constant matrices from them)
    "DFT": (1, 2), "STFT": (1, 3), "MelWeightMatrix": (0, 1, 2, 3, 4),
    # the output shapes Col2Im's and MaxUnpool's scatters are built for (onnx_index_forms.py)
    "Col2Im": (1, 2), "MaxUnpool": (2,),
    # Compress's condition: its true entries are the output's length (a Gather at them)
    "Compress": (1,),
    # Loop's trip count M and initial condition: the importer unrolls loops (onnx_control.py),
    # and exported models have them as constants (Range's function body computes them from its
    # inputs, which are frozen with them)
    "Loop": (0, 1),
}

# Control flow the importer rewrites into dataflow (frontends/onnx_control.py): the nodes of
# their bodies are checked like the graph's. SequenceMap (a body mapped over sequences) is not.
CONTROL_FLOW = ("If", "Loop", "Scan")

# Operators whose outputs are random draws (frontends/onnx_random.py; Bernoulli's body draws
# with RandomUniformLike): their cases' expected outputs are one draw of numbers, so a case is
# checked for the outputs' dtype and shape and for values in what the operator can give
# ({0, 1} for Bernoulli), not compared number by number; tests/test_onnx_random.py compares
# their statistics with ONNX Runtime's.
RANDOM_OPS = ("Bernoulli", "RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike")
# Dropout with a training_mode input that is true: the mask is drawn the same way (checked:
# each output is 0 or x / (1 - ratio), the mask true where it is not 0)
TRAINING_DROPOUT = ("test_training_dropout", "test_training_dropout_default", "test_training_dropout_default_mask",
                    "test_training_dropout_mask", "test_training_dropout_zero_ratio",
                    "test_training_dropout_zero_ratio_mask")

# Cases reached by control flow (their If/Loop/Scan were refused before onnx_control.py) that
# fail to import for a reason of their own: not covered, with that reason. Checked by
# tests/test_onnx_control.py: each must still fail to import, or the entry has to go.
CASE_UNSUPPORTED: dict[str, str] = {}

# Cases whose expected outputs onnx writes by hand with 4 decimals (the rounding alone is up
# to 5e-5): compared with atol 1e-4 instead of TOLERANCES.
ROUNDED_EXPECTED: dict[str, str] = {
    "test_averagepool_2d_ceil_last_window_starts_on_pad": "y written as 0.1511 ...",
    "test_roialign_aligned_false": "Y written with 4 decimals",
    "test_roialign_aligned_true": "Y written with 4 decimals",
    "test_gridsample_bicubic": "Y written with 4 decimals (-0.1406 for -0.140625)",
}
ROUNDED_ATOL = 1e-4

# Cases whose expected outputs onnx's generator computes differently from the operator's
# spec; they are compared with onnxruntime's outputs on the same model instead.
EXPECTED_FROM_ORT: dict[str, str] = {
    # align_corners with `scales`: onnx's generator divides by the fractional resized
    # length in*scale; the spec's length_resized and onnxruntime use the integer output
    # length floor(in*scale), as does dnnfusion.
    "test_resize_downsample_scales_linear_align_corners": "fractional length_resized",
    "test_resize_downsample_scales_cubic_align_corners": "fractional length_resized",
    # MaxUnpool with output_shape: onnx's generator scatters I into the inferred shape and
    # pastes that into output_shape's corner; the spec (I indexes the output tensor) and
    # onnxruntime index the output_shape tensor itself, as dnnfusion and PyTorch do.
    "test_maxunpool_export_with_output_shape": "I indexes the output_shape tensor",
}


def _expected_from_ort(model, feeds: dict) -> list:
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)

# (rtol, atol) per float dtype. float32 is the contract; float16 carries ~3 significant
# digits, bfloat16 between 2 and 3; float64 results are computed in float64 by both sides.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-3),
    # 8 significant bits: one unit in the last place is 2^-8 relative (the reference rounds each
    # step to bfloat16; dnnfusion computes in float32 and rounds once)
    "bfloat16": (1e-2, 1e-2),
    "float32": (1e-4, 1e-5),
    "float64": (1e-7, 1e-9),
    # float8 and float4: every value is a conversion's, rounded once by both sides: exact
    **{t: (0.0, 0.0) for t in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                               "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")},
}


@dataclass
class Case:
    """One ONNX backend node test."""

    name: str
    op: str                          # the operator under test
    model: Any                       # onnx.ModelProto
    data_sets: list[tuple[list[Any], list[Any]]]
    ops: tuple[str, ...]             # the operators of the model's graph
    covered: bool
    reason: str = ""                 # why it is not covered

    @property
    def status(self) -> str:
        return "covered" if self.covered else f"not covered ({self.reason})"


@dataclass
class Outcome:
    """The result of :func:`run_case`: ``passed``, ``failed`` or ``unsupported attribute``."""

    status: str
    detail: str = ""
    exception: BaseException | None = field(default=None, repr=False)


@functools.lru_cache(maxsize=1)
def _ecg_onnx_ops() -> frozenset[str]:
    from dnnfusion import op_table

    return frozenset(row["onnx_name"] for row in op_table() if not row["internal"])


@functools.lru_cache(maxsize=1)
def collect() -> list[Case]:
    """Every ONNX backend node test, with its coverage status (computed once)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # the generators overflow float8 casts on purpose
        warnings.simplefilter("ignore")
        raw = collect_testcases()
    single_op = {t.name: t.model.graph.node[0].op_type for t in raw
                 if len(t.model.graph.node) == 1}
    cases = []
    for t in raw:
        ops = tuple(dict.fromkeys(n.op_type for n in t.model.graph.node))
        base = re.sub(r"_expanded(_ver\d+)?$", "", t.name)
        op = single_op.get(t.name) or single_op.get(base) or (ops[0] if ops else "?")
        reason = _not_covered_reason(t.model) or CASE_UNSUPPORTED.get(t.name)
        model = t.model
        opset = _default_opset(model)
        if reason is None and opset is not None and opset < OLDEST_CONVERTED:
            model = _at_min_opset(model)
        cases.append(Case(t.name, op, model, [(list(i), list(o)) for i, o in t.data_sets],
                          ops, reason is None, reason or ""))
    return cases


def _not_covered_reason(model: Any) -> str | None:
    from onnx import AttributeProto, TensorProto

    g = model.graph
    graphs = _graphs(g)
    nodes = [n for sub in graphs for n in sub.node]
    for n in nodes:
        if n.domain not in ("", "ai.onnx"):
            return f"domain '{n.domain}'"
        if n.op_type not in CONTROL_FLOW and any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
                                                 for a in n.attribute):
            return f"sub-graph in {n.op_type}"
    opset = _default_opset(model)
    missing = sorted({n.op_type for n in nodes if n.op_type not in _ecg_onnx_ops() and n.op_type not in CONTROL_FLOW
                      and n.op_type not in SEQUENCE_OPS and n.op_type not in RANDOM_OPS
                      and not _has_body(n, opset) and not RENAMED_BY_CONVERSION.get(n.op_type, 0) > (opset or 99)})
    if missing:
        return "operator not in the ECG: " + ", ".join(missing)
    if opset is not None and opset < OLDEST_CONVERTED and not _same_at_min_opset(model):
        return f"opset {opset} < {OLDEST_CONVERTED}"

    def bad(code: int) -> str | None:
        return None if code in ONNX_DTYPES else f"element type {TensorProto.DataType.Name(code)}"

    # (a body's values may leave their type to inference)
    typed = [v for sub in graphs[1:] for v in (*sub.input, *sub.output) if v.type.WhichOneof("value")]
    for v in [*g.input, *g.output, *typed]:
        kind = v.type.WhichOneof("value")
        if kind != "tensor_type":
            return f"{kind} value"
        if (r := bad(v.type.tensor_type.elem_type)):
            return r
    for t in [t for sub in graphs for t in sub.initializer]:
        if (r := bad(t.data_type)):
            return r
    for n in nodes:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and (r := bad(a.i)):
                return r
            if a.type == AttributeProto.TENSOR and (r := bad(a.t.data_type)):
                return r
    return None


def _graphs(g: Any) -> list:
    """`g` and, recursively, the bodies of its CONTROL_FLOW nodes."""
    return [g] + [sub for n in g.node for sub in _bodies(n)]


def _bodies(n: Any) -> list:
    """The bodies of a CONTROL_FLOW node (else none), the bodies nested in them included."""
    if n.op_type not in CONTROL_FLOW:
        return []
    return [sub for a in n.attribute for top in ([a.g] if a.HasField("g") else []) + list(a.graphs)
            for sub in _graphs(top)]


def _has_body(node: Any, opset: int | None) -> bool:
    """An operator the importer reads as its ONNX function body (frontends/onnx_functions.py)."""
    import onnx

    from dnnfusion.frontends import onnx_functions

    return onnx_functions.has_body(onnx, node, opset)


def _default_opset(model: Any) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _same_at_min_opset(model: Any) -> bool:
    """Whether every operator of the model has the same schema at its opset and at
    MIN_OPSET, so that the model means the same when it declares MIN_OPSET."""
    from onnx.defs import SchemaError, get_schema

    opset = _default_opset(model)
    try:
        return all(get_schema(n.op_type, opset, "").since_version
                   == get_schema(n.op_type, MIN_OPSET, "").since_version
                   for g in _graphs(model.graph) for n in g.node)
    except SchemaError:
        return False


def _at_min_opset(model: Any) -> Any:
    """A copy of the model that declares MIN_OPSET (see :func:`_same_at_min_opset`)."""
    from onnx import ModelProto

    bumped = ModelProto()
    bumped.CopyFrom(model)
    for o in bumped.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = MIN_OPSET
    return bumped


def _array(x: Any) -> np.ndarray:
    if type(x).__name__ == "TensorProto":
        from onnx import numpy_helper

        return numpy_helper.to_array(x)
    return np.asarray(x)


def static_inputs(model: Any) -> list[str]:
    """The graph inputs that feed a :data:`STATIC_OPERANDS` position, directly or through
    other nodes (but not through Shape/Size). The nodes of control-flow bodies count too, and a
    control-flow node's outputs are computed from every name its bodies read."""
    g = model.graph
    initializers = {t.name for t in g.initializer}
    graph_inputs = [v.name for v in g.input if v.name not in initializers]
    nodes = [n for sub in _graphs(g) for n in sub.node]
    producer = {o: n for n in nodes for o in n.output if o}
    reads = {id(n): [i for i in n.input if i] + [i for sub in _bodies(n) for b in sub.node for i in b.input if i]
             for n in nodes}
    stack = [n.input[i] for n in nodes for i in STATIC_OPERANDS.get(n.op_type, ())
             if i < len(n.input) and n.input[i]]
    seen: set[str] = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        p = producer.get(v)
        if p is not None and p.op_type not in ("Shape", "Size"):
            stack.extend(reads[id(p)])
    return [v for v in graph_inputs if v in seen]


def freeze(model: Any, values: dict[str, np.ndarray]) -> Any:
    """A copy of ``model`` in which the graph inputs named in ``values`` are initializers (in a
    model with control flow, Constant nodes: onnx.compose.add_prefix, which the code-generation
    suite merges cases with, leaves a body's reads of an outer initializer unrenamed)."""
    from onnx import ModelProto, helper, numpy_helper

    frozen = ModelProto()
    frozen.CopyFrom(model)
    keep = [v for v in frozen.graph.input if v.name not in values]
    del frozen.graph.input[:]
    frozen.graph.input.extend(keep)
    tensors = [numpy_helper.from_array(np.asarray(a), name) for name, a in values.items()]
    if len(_graphs(frozen.graph)) > 1:
        nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in tensors] + list(frozen.graph.node)
        del frozen.graph.node[:]
        frozen.graph.node.extend(nodes)
    else:
        frozen.graph.initializer.extend(tensors)
    return frozen


def compare(got: np.ndarray, want: np.ndarray, what: str,
            atol: float | None = None) -> str | None:
    """None when ``got`` matches ``want``, else what differs."""
    if got.dtype != want.dtype:
        return f"{what}: dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"{what}: shape {got.shape}, expected {want.shape}"
    if is_float_dtype(want.dtype):
        rtol, default_atol = TOLERANCES[want.dtype.name]
        atol = default_atol if atol is None else atol
        g, w = got.astype(np.float64), want.astype(np.float64)
        ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        if not ok.all():
            i = np.unravel_index(np.argmax(~ok), ok.shape)
            err = np.abs(g - w)[~ok].max()
            return (f"{what}: {int((~ok).sum())} of {ok.size} elements differ (max abs error "
                    f"{err:.3g}; at {tuple(int(k) for k in i)}: {g[i]!r} vs {w[i]!r}; rtol "
                    f"{rtol}, atol {atol})")
        return None
    if not np.array_equal(got, want):
        ne = got != want
        i = np.unravel_index(np.argmax(ne), ne.shape) if ne.ndim else ()
        return (f"{what}: {int(ne.sum())} of {ne.size} elements differ (at "
                f"{tuple(int(k) for k in i)}: {got[i]!r} vs {want[i]!r})")
    return None


def run_case(case: Case) -> Outcome:
    """Imports the case's model with ``dnnfusion.load`` (after freezing its
    :func:`static_inputs`), runs the reference interpreter on each data set and compares
    with the expected outputs. Never raises."""
    import dnnfusion

    initializers = {t.name for t in case.model.graph.initializer}
    input_names = [v.name for v in case.model.graph.input if v.name not in initializers]
    output_names = [v.name for v in case.model.graph.output]
    static = static_inputs(case.model)
    atol = ROUNDED_ATOL if case.name in ROUNDED_EXPECTED else None
    for inputs, outputs in case.data_sets:
        feeds = {n: _array(x) for n, x in zip(input_names, inputs)}
        model = freeze(case.model, {n: feeds.pop(n) for n in static}) if static else case.model
        try:
            g = dnnfusion.load(model)
        except dnnfusion.UnsupportedOperatorError as e:
            if case.name in UNSUPPORTED_ATTRIBUTE:
                return Outcome("unsupported attribute", str(e), e)
            return Outcome("failed", f"import: UnsupportedOperatorError: {e}", e)
        except Exception as e:  # noqa: BLE001 - any other error is a failure to report
            return Outcome("failed", f"import: {type(e).__name__}: {e}", e)
        try:
            got = g.run_reference(feeds)  # (random operators' hidden inputs drawn there)
        except Exception as e:  # noqa: BLE001
            return Outcome("failed", f"run: {type(e).__name__}: {e}", e)
        ops = {n.op_type for n in case.model.graph.node}
        if ops & set(RANDOM_OPS) or case.name in TRAINING_DROPOUT:
            for name, x, want in zip(output_names, got, outputs):
                x, want = np.asarray(x), _array(want)
                if x.dtype != want.dtype or x.shape != want.shape:
                    return Outcome("failed", f"output '{name}': {x.dtype}{list(x.shape)}, expected "
                                             f"{want.dtype}{list(want.shape)}")
                if "Bernoulli" in ops and not np.isin(x, [0, 1]).all():
                    return Outcome("failed", f"output '{name}': Bernoulli values other than 0 and 1")
            if case.name in TRAINING_DROPOUT:  # y is 0 or x / (1 - ratio), the mask where it is not 0
                given = dict(zip(input_names, (_array(v) for v in inputs)))
                x, r = given["x"], float(given["r"]) if "r" in given else 0.5
                y = np.asarray(got[0])
                kept = np.isclose(y, x / (1 - r), rtol=1e-6) if r else np.isclose(y, x, rtol=0)
                if not (kept | (y == 0)).all() or (r and not 0.2 < kept.mean() / (1 - r) < 5):
                    return Outcome("failed", "training-mode Dropout: outputs other than 0 and x / (1 - ratio)")
                if len(got) > 1 and not (np.asarray(got[1]) == (kept | (r == 0))).all():
                    return Outcome("failed", "training-mode Dropout: the mask disagrees with the output")
            continue
        if case.name in EXPECTED_FROM_ORT:
            outputs = _expected_from_ort(case.model, {n: _array(x) for n, x in zip(input_names, inputs)})
        if len(got) != len(outputs):
            return Outcome("failed", f"{len(got)} outputs, expected {len(outputs)}")
        for name, x, want in zip(output_names, got, outputs):
            problem = compare(np.asarray(x), _array(want), f"output '{name}'", atol)
            if problem:
                return Outcome("failed", problem)
    return Outcome("passed")


def main(argv: Sequence[str] | None = None) -> int:
    import onnx

    p = argparse.ArgumentParser(prog="python -m dnnfusion.testing.onnx_node_suite",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("-k", metavar="REGEX", help="only cases whose name matches")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="list failures in full and every not-covered case with its reason")
    args = p.parse_args(argv)

    cases = [c for c in collect() if not args.k or re.search(args.k, c.name)]
    per_op: dict[str, Counter] = defaultdict(Counter)
    totals: Counter = Counter()
    reasons: Counter = Counter()
    failures: list[tuple[Case, Outcome]] = []
    for c in cases:
        if not c.covered:
            status = "not covered"
            reasons[c.reason.split(":")[0]] += 1
            if args.verbose:
                print(f"not covered  {c.name}: {c.reason}")
        else:
            out = run_case(c)
            status = {"passed": "passed", "failed": "failed"}.get(out.status, "not covered")
            if out.status == "unsupported attribute":
                reasons["unsupported attribute"] += 1
            if out.status == "failed":
                failures.append((c, out))
        totals[status] += 1
        per_op[c.op][status] += 1

    print(f"ONNX backend node tests (onnx {onnx.__version__}): {len(cases)} cases")
    for s in ("passed", "failed", "not covered"):
        print(f"  {s:<12} {totals[s]:>5}")
    for r, n in reasons.most_common():
        print(f"      {n:>5}  {r}")
    print("\nper operator under test (ops with at least one covered case):")
    print(f"  {'operator':<28} {'passed':>6} {'failed':>6} {'not covered':>11}")
    for op in sorted(per_op):
        n = per_op[op]
        if n["passed"] or n["failed"]:
            print(f"  {op:<28} {n['passed']:>6} {n['failed']:>6} {n['not covered']:>11}")
    untested = sorted(op for op, n in per_op.items() if not (n["passed"] or n["failed"]))
    print(f"\noperators with no covered case ({len(untested)}): {', '.join(untested)}")
    if failures:
        print(f"\nfailures ({len(failures)}):")
        for c, out in failures:
            detail = out.detail if args.verbose else out.detail.splitlines()[0][:300]
            print(f"  {c.name} [{c.op}]: {detail}")
            if args.verbose and out.exception is not None:
                print("".join(traceback.format_exception(out.exception)).rstrip())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
