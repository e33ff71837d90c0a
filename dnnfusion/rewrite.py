"""Graph rewriting (paper §4.2): the passes of ``cpp/rewrite/`` one by one, and ``rewrite``,
which runs the default pipeline, verifies the graph after every pass and reports what each
pass did."""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from dnnfusion import _core
from dnnfusion.ecg import ECG
from dnnfusion.dtypes import (HALF_DTYPES, NARROW_DTYPES, NARROW_NUMPY, ONNX_CODES, SMALL_FLOAT_NAMES, SMALL_FLOAT_NUMPY,
                              SMALL_FLOATS, is_bfloat16, numpy_dtype)
from dnnfusion.errors import Error, UnsupportedOperatorError

# evaluator(op, inputs, attrs, num_outputs) -> outputs: the signature of reference.run_node.
Evaluator = Callable[[str, list, dict, int], Sequence[np.ndarray]]
Pass = Callable[[ECG], ECG]


def _reference_evaluator() -> Evaluator:
    from dnnfusion import reference

    return reference.run_node


# The passes, each ECG -> ECG ---------------------------------------------------------------
def remove_identities(ecg: ECG) -> ECG:
    """Removes nodes that return their input unchanged (Identity, inference Dropout, ...)."""
    return ECG(_core.remove_identities(ecg.graph))


def fold_constants(ecg: ECG, evaluator: Evaluator | None = None) -> ECG:
    """Replaces nodes whose inputs are all constants by the constants they compute.
    ``evaluator`` computes one node (default: the NumPy reference, ``reference.run_node``);
    nodes whose result would be more than 64 KiB larger than their inputs are kept."""
    return ECG(_core.fold_constants(ecg.graph, evaluator or _reference_evaluator()))


def fold_batch_norm(ecg: ECG) -> ECG:
    """Folds inference BatchNormalization and per-channel constant Mul/Add/Sub/Div into the
    weights and bias of the Conv or Gemm before them."""
    return ECG(_core.fold_batch_norm(ecg.graph))


def fold_input_scale(ecg: ECG) -> ECG:
    """Conv(x * s, W) -> Conv(x, W * s) for a computed per-input-channel scale s (the
    squeeze-and-excitation gate of MobileNetV3/EfficientNet blocks): the Conv is linear in
    each input channel. Taken where W is under half the size of x, so the scaling moves from
    the activation to the (smaller) weights; group 1 only; x * s must have no other reader."""
    return ECG(_core.fold_input_scale(ecg.graph))


def select_layout(ecg: ECG, mode: str = "auto") -> tuple[ECG, dict]:
    """Inter-block layout (paper §4.4): regions of convolutions joined by elementwise
    operators run channels last (the internal ``NhwcConv``) where the cost model's estimated
    gain exceeds the cost of the Transposes at the region's border. ``mode``: ``auto`` (the
    cost model), ``nhwc`` (every region that has a convolution) or ``nchw`` (none). Returns
    the graph and a report: ``regions`` (convs, gain_us, cost_us, nhwc per region),
    ``convs_nhwc``, ``transposes_in``, ``transposes_out``."""
    graph, report = _core.select_layout(ecg.graph, mode)
    out = merge_layout_chains(ECG(graph))
    return out, dict(report)


def apply_algebraic_rules(ecg: ECG) -> ECG:
    """Rewrites with the algebraic rule table (``algebra_rules()``) where FLOPs drop."""
    return ECG(_core.apply_algebraic_rules(ecg.graph))


def merge_layout_chains(ecg: ECG) -> ECG:
    """Collapses Reshape/Squeeze/Unsqueeze/Flatten chains and Transpose chains."""
    return ECG(_core.merge_layout_chains(ecg.graph))


def fold_matmul_scale(ecg: ECG) -> ECG:
    """MatMul(x, W) (+ b) (-> Reshape/Transpose ...) * c -> MatMul(x, W * c) (+ b * c) (-> ...)
    for constant W, b and a finite scalar constant c, each value read only by the next: the
    attention scale 1/sqrt(d) is paid once, on the weights. Gemm too, and through a Split along
    the last axis (one projection for Q, K and V), which scales that part's columns only."""
    return ECG(_core.fold_matmul_scale(ecg.graph))


def split_to_slices(ecg: ECG) -> ECG:
    """A Split becomes one Slice per part: each part is a view its reader's block can own
    (a Split shared by the blocks of its parts made one of them write the parts)."""
    return ECG(_core.split_to_slices(ecg.graph))


def combine_sibling_matmuls(ecg: ECG) -> ECG:
    """Horizontal fusion as a rewrite: MatMuls reading one input with constant weights (the
    Q/K/V projections) become one MatMul over the weights side by side, so the input is read
    once by one wider GEMM; the elementwise steps every sibling applies next (the bias Add,
    an activation) move onto the wide result where their operands line up, and a Slice per
    sibling gives its part back (the anchors reading it read it in place)."""
    return ECG(_core.combine_sibling_matmuls(ecg.graph))


def eliminate_common_subexpressions(ecg: ECG) -> ECG:
    """Merges nodes with equal op, inputs and attributes."""
    return ECG(_core.eliminate_common_subexpressions(ecg.graph))


def eliminate_dead_code(ecg: ECG) -> ECG:
    """Removes nodes and constants nothing uses."""
    return ECG(_core.eliminate_dead_code(ecg.graph))


def uses_float16(ecg: ECG) -> bool:
    """Whether any value of the graph (input, constant, intermediate, output) is float16 or
    bfloat16."""
    return any(v.dtype in HALF_DTYPES for v in ecg.graph.values)


_HALF_CODES, _F32_CODE = (10, 16), 1  # ONNX element type codes (float16, bfloat16), as Cast's `to` holds them


def _is_half_array(a: np.ndarray) -> bool:
    return a.dtype == np.float16 or is_bfloat16(a.dtype)


def float16_to_float32(ecg: ECG) -> ECG:
    """The same graph computing in float32 where it computed in float16 or bfloat16: their
    inputs become float32 inputs, their constants and tensor attributes are converted (exactly:
    every float16 and every bfloat16 is a float32), and Cast/`dtype` attributes that name
    them name float32;
    every other type follows by shape inference. Names are kept, so a caller converts the
    float16 inputs and outputs at the boundary (``compile(..., float16="f32")`` does).
    Results are the float32 computation, rounded once where the caller converts back, so
    they typically sit closer to the exact result than a float16 evaluation would; a model
    that relies on float16 overflow or rounding inside (Cast to float16 and back to clamp or
    quantize) computes without it."""
    g = ecg.graph
    out = _core.Graph(g.name)
    new: dict[int, object] = {}
    for v in g.inputs:
        new[v.id] = out.add_input(v.name, "f32" if v.dtype in HALF_DTYPES else v.dtype, v.shape)
    for v in g.constants:
        data = v.numpy()
        new[v.id] = out.add_constant(v.name, data.astype(np.float32) if _is_half_array(data) else data)
    for n in g.nodes:
        attrs = {}
        for k, a in n.attrs.items():
            if isinstance(a, np.ndarray) and _is_half_array(a):
                a = a.astype(np.float32)
            elif k in ("to", "dtype") and isinstance(a, int) and a in _HALF_CODES:
                a = _F32_CODE
            attrs[k] = a
        outs = n.outputs
        made = out.add_node(n.op, [None if i is None else new[i.id] for i in n.inputs], attrs,
                            len(outs), n.name, [o.name for o in outs])
        for o, m in zip(outs, made):
            new[o.id] = m
    out.set_outputs([new[v.id] for v in g.outputs])
    return ECG(out)


def uses_narrow(ecg: ECG) -> bool:
    """Whether any value of the graph is int4, uint4, int2, uint2, float8 or float4."""
    return any(v.dtype in NARROW_DTYPES or v.dtype in SMALL_FLOAT_NAMES for v in ecg.graph.values)


_ADDS_ZERO_POINT = ("f4e2m1", "f6e2m3", "f6e3m2")  # QuantizeLinear to these adds it (not to float8)


def narrow_to_wide(ecg: ECG) -> ECG:
    """The same graph computing int4, uint4, int2 and uint2 in int8 / uint8, and float8 and
    float4 in float32, exactly: their inputs and constants become the wide type (every value is
    one of it), and each operator that makes a narrow value from a wider one is written out
    with its ONNX meaning:

    * Cast from a float: truncation toward zero where the result is in range; out of range,
      which ONNX leaves undefined, 0 (what the ONNX reference and ml_dtypes give);
    * Cast from an integer or bool: the low bits, reinterpreted (ONNX: "discard higher bits");
    * QuantizeLinear to a narrow zero point: saturated to the narrow range (a Clip after the
      wide quantization, which saturates to the wide one: the same value);
    * Cast and QuantizeLinear to float8 / float4: the float32 value rounded to the type's
      precision, half to even (x / q rounded and times q, with q the power of two of the type's
      last mantissa bit at x's exponent, read off x's bits, and at least its subnormal step:
      every step exact), then saturated or made NaN / infinite as ``saturate`` says. NaN to
      float4 (which has none) gives -0, as ml_dtypes does.

    The other operators that take narrow values (DequantizeLinear, those that move data) are
    exact on the wide ones. Names are kept, so a caller converts the narrow inputs and outputs
    at the boundary (``compile`` does)."""
    g = ecg.graph
    out = _core.Graph(g.name)
    new: dict[int, object] = {}
    taken = {v.name for v in g.values}
    count = [0]

    def fresh(base: str) -> str:
        while True:
            count[0] += 1
            name = f"{base}:narrow{count[0]}"
            if name not in taken:
                taken.add(name)
                return name

    def const(base: str, value: Any, dtype: Any) -> Any:
        return out.add_constant(fresh(base), np.asarray(value, dtype=dtype))

    def op(kind: str, ins: list, attrs: dict, name: str, out_name: str | None = None) -> Any:
        return out.add_node(kind, ins, attrs, 1, fresh(name), [out_name or fresh(name)])[0]

    def wide(dtype: str) -> str:
        return NARROW_DTYPES[dtype][0] if dtype in NARROW_DTYPES else "f32" if dtype in SMALL_FLOAT_NAMES else dtype

    # a `to` / `dtype` attribute naming a narrow type names its wide one (Cast is written out below)
    wide_code = {ONNX_CODES[t]: ONNX_CODES[wide(t)] for t in (*NARROW_DTYPES, *SMALL_FLOAT_NAMES)}

    def rounded(x: Any, t: str, saturate: bool, name: str) -> Any:
        """float32 x rounded to small float type t (see above), in float32."""
        mbits, emin, top, over = SMALL_FLOATS[t]
        u32 = lambda v: const(name, v, np.uint32)  # noqa: E731
        f32 = lambda v: const(name, v, np.float32)  # noqa: E731
        bits = op("BitCast", [x], {"to": 12}, name)
        e = op("BitwiseAnd", [op("BitShift", [bits, u32(23)], {"direction": "RIGHT"}, name), u32(255)], {}, name)
        e = op("Max", [e, u32(emin + 127)], {}, name)
        q = op("BitCast", [op("BitShift", [op("Sub", [e, u32(mbits)], {}, name), u32(23)], {"direction": "LEFT"}, name)],
               {"to": 1}, name)
        r = op("Mul", [op("Round", [op("Div", [x, q], {}, name)], {}, name), q], {}, name)
        nan = op("IsNaN", [x], {}, name)
        if over == "max":  # float4: always saturating; NaN as ml_dtypes gives it
            return op("Where", [nan, f32(-0.0), op("Clip", [r, f32(-top), f32(top)], {}, name)], {}, name)
        if saturate:
            return op("Where", [nan, x, op("Clip", [r, f32(-top), f32(top)], {}, name)], {}, name)
        beyond = op("Greater", [op("Abs", [r], {}, name), f32(top)], {}, name)
        if over == "inf":
            past = op("Mul", [r, f32(np.inf)], {}, name)
        else:  # NaN with r's sign (e4m3fn has -NaN; the fnuz types' one NaN has none)
            past = op("Where", [op("Less", [r, f32(0)], {}, name), f32(np.copysign(np.nan, -1)), f32(np.nan)], {}, name)
        return op("Where", [beyond, past, r], {}, name)

    def e8m0(x: Any, saturate: bool, mode: str, name: str) -> Any:
        """float32 x as float8e8m0, in float32 (see _ref_elementwise.to_e8m0 for the rules):
        the exponent of x's bits, plus one where the mode rounds up, then 2^(e - 127) (the
        float32 subnormal 2^-127 for 0), NaN for 255."""
        u32 = lambda v: const(name, v, np.uint32)  # noqa: E731
        bits = op("BitCast", [x], {"to": 12}, name)
        e = op("BitwiseAnd", [op("BitShift", [bits, u32(23)], {"direction": "RIGHT"}, name), u32(255)], {}, name)
        frac = lambda mask: op("Greater", [op("BitwiseAnd", [bits, u32(mask)], {}, name), u32(0)], {}, name)  # noqa: E731
        if mode == "up":
            inc = frac(0x7FFFFF)
        elif mode == "nearest":
            inc = op("And", [frac(0x400000), op("Or", [frac(0x3FFFFF), op("Greater", [e, u32(0)], {}, name)], {}, name)],
                     {}, name)
        elif mode == "down":
            inc = None
        else:
            raise UnsupportedOperatorError(f"Cast to float8e8m0: round_mode {mode!r} is not one of up, down, nearest")
        if inc is not None and saturate:
            inc = op("And", [inc, op("Not", [op("Equal", [e, u32(0xFE)], {}, name)], {}, name)], {}, name)
        c = e if inc is None else op("Add", [e, op("Cast", [inc], {"to": 12}, name)], {}, name)
        special = op("Equal", [e, u32(0xFF)], {}, name)
        pow2 = op("Where", [op("Equal", [c, u32(0)], {}, name), u32(0x00400000),
                            op("BitShift", [c, u32(23)], {"direction": "LEFT"}, name)], {}, name)
        value = op("BitCast", [pow2], {"to": 1}, name)
        nan = op("Or", [special, op("Equal", [c, u32(0xFF)], {}, name)], {}, name)
        return op("Where", [nan, const(name, np.nan, np.float32), value], {}, name)

    def as_f32(x: Any, src: str | None, name: str) -> Any:
        return x if src in ("f32",) or src in SMALL_FLOAT_NAMES else op("Cast", [x], {"to": 1}, name)

    for v in g.inputs:
        new[v.id] = out.add_input(v.name, wide(v.dtype), v.shape)
    for v in g.constants:
        data = v.numpy()
        new[v.id] = out.add_constant(v.name, data.astype(numpy_dtype(wide(v.dtype)))
                                     if v.dtype in NARROW_DTYPES or v.dtype in SMALL_FLOAT_NAMES else data)
    for n in g.nodes:
        ins = [None if i is None else new[i.id] for i in n.inputs]
        attrs = {}
        for k, a in n.attrs.items():
            if isinstance(a, np.ndarray) and a.dtype.name in NARROW_NUMPY | SMALL_FLOAT_NUMPY:
                a = a.astype(np.float32 if a.dtype.name in SMALL_FLOAT_NUMPY
                             else np.int8 if a.dtype.name in ("int4", "int2") else np.uint8)
            elif k in ("to", "dtype") and isinstance(a, int) and a in wide_code and n.op != "Cast":
                a = wide_code[a]
            attrs[k] = a
        outs = n.outputs
        narrow_out = [o.dtype for o in outs if o.dtype in NARROW_DTYPES]
        small_out = [o.dtype for o in outs if o.dtype in SMALL_FLOAT_NAMES]
        src = n.inputs[0].dtype if n.inputs and n.inputs[0] is not None else None
        if n.op == "Cast" and small_out == ["f8e8m0"]:
            r = e8m0(as_f32(ins[0], src, n.name), bool(int(n.attrs.get("saturate", 1))),
                     str(n.attrs.get("round_mode", "up")), n.name)
            made = [op("Identity", [r], {}, n.name, outs[0].name)]
        elif n.op == "Cast" and small_out:
            r = rounded(as_f32(ins[0], src, n.name), small_out[0], bool(int(n.attrs.get("saturate", 1))), n.name)
            made = [op("Identity", [r], {}, n.name, outs[0].name)]
        elif n.op == "QuantizeLinear" and small_out:
            x = op("Div", [ins[0], ins[1]], {}, n.name)
            if small_out[0] in _ADDS_ZERO_POINT and len(ins) > 2 and ins[2] is not None:  # (float8 takes none)
                x = op("Add", [x, ins[2]], {}, n.name)
            r = rounded(x, small_out[0], bool(int(n.attrs.get("saturate", 1))), n.name)
            made = [op("Identity", [r], {}, n.name, outs[0].name)]
        elif n.op == "DequantizeLinear" and src in SMALL_FLOAT_NAMES:
            x = op("Sub", [ins[0], ins[2]], {}, n.name) if len(ins) > 2 and ins[2] is not None else ins[0]
            made = [op("Mul", [x, ins[1]], {}, n.name, outs[0].name)]
        elif n.op == "Cast" and narrow_out:  # (from a narrow type too: uint4 15 is int4 -1)
            t = narrow_out[0]
            w, lo, hi = NARROW_DTYPES[t]
            x = ins[0]
            if src in ("f32", "f64", "f16", "bf16"):
                fdt = numpy_dtype(src)
                keep = op("And", [op("Greater", [x, const(n.name, lo - 1, fdt)], {}, n.name),
                                  op("Less", [x, const(n.name, hi + 1, fdt)], {}, n.name)], {}, n.name)
                x = op("Where", [keep, x, const(n.name, 0, fdt)], {}, n.name)
                made = [op("Cast", [x], {"to": ONNX_CODES[w]}, n.name, outs[0].name)]
            elif src == "bool":
                made = [op("Cast", [x], {"to": ONNX_CODES[w]}, n.name, outs[0].name)]
            else:  # the low bits, reinterpreted
                bits = (hi - lo + 1).bit_length() - 1
                t32 = op("Cast", [x], {"to": 6}, n.name)
                low = op("BitwiseAnd", [t32, const(n.name, (1 << bits) - 1, np.int32)], {}, n.name)
                if lo < 0:
                    sign = const(n.name, 1 << (bits - 1), np.int32)
                    low = op("Sub", [op("BitwiseXor", [low, sign], {}, n.name), sign], {}, n.name)
                made = [op("Cast", [low], {"to": ONNX_CODES[w]}, n.name, outs[0].name)]
        elif n.op == "QuantizeLinear" and narrow_out:
            w, lo, hi = NARROW_DTYPES[narrow_out[0]]
            wdt = numpy_dtype(w)
            q = out.add_node(n.op, ins, attrs, 1, n.name, [fresh(n.name)])[0]
            made = [op("Clip", [q, const(n.name, lo, wdt), const(n.name, hi, wdt)], {}, n.name, outs[0].name)]
        else:
            made = out.add_node(n.op, ins, attrs, len(outs), n.name, [o.name for o in outs])
        for o, m in zip(outs, made):
            new[o.id] = m
    out.set_outputs([new[v.id] for v in g.outputs])
    return ECG(out)


@dataclass(frozen=True)
class AlgebraRule:
    """One row of the rule table in ``cpp/rewrite/algebra.cc``."""

    name: str
    pattern: str
    replacement: str
    math: str


def algebra_rules() -> list[AlgebraRule]:
    """The algebraic rules, in priority order (pattern language: ``cpp/rewrite/pattern.h``)."""
    return [AlgebraRule(*row) for row in _core.algebra_rules()]


def flops(ecg: ECG) -> int:
    """FLOPs of the whole graph, as the rewrites count them (``cpp/rewrite/cost.cc``)."""
    return _core.graph_flops(ecg.graph)


# The default pipeline: order matters, each line says why it is where it is.
DEFAULT_PASSES: list[Pass] = [
    remove_identities,                # no-ops (Identity, Dropout, same-shape Reshape) hide patterns
    fold_constants,                   # shape arithmetic and weight preprocessing become constants
    fold_batch_norm,                  # Conv/Gemm + BN (+ per-channel scale/shift) -> one Conv/Gemm
    fold_input_scale,                 # Conv(x * s) -> Conv(x, W * s): SE gates scale the weights
    eliminate_common_subexpressions,  # exports duplicate nodes; the rules need one x in x*a + x*b
    apply_algebraic_rules,            # Table 3 identities, where they lower FLOPs, to a fixpoint
    merge_layout_chains,              # the rules can leave Reshape/Transpose chains adjacent
    eliminate_common_subexpressions,  # the rules can create equal nodes (e.g. two x*c)
    fold_matmul_scale,                # the rules leave the attention scale on Q: into its weights
    combine_sibling_matmuls,          # Q/K/V projections of one input -> one wider GEMM
    split_to_slices,                  # after fold_matmul_scale, which looks through Splits
    eliminate_common_subexpressions,  # the weight rewrites above repeat equal weights per layer
    eliminate_dead_code,              # whatever the passes above made unreachable
]


@dataclass
class PassStats:
    """What one pass did to the graph."""

    name: str
    operators_before: int
    operators_after: int
    flops_before: int
    flops_after: int
    seconds: float


@dataclass
class RewriteReport:
    """Per-pass operator and FLOP counts, and how often each algebraic rule fired."""

    passes: list[PassStats] = field(default_factory=list)
    rules_fired: Counter = field(default_factory=Counter)

    @property
    def operators_before(self) -> int:
        return self.passes[0].operators_before if self.passes else 0

    @property
    def operators_after(self) -> int:
        return self.passes[-1].operators_after if self.passes else 0

    @property
    def flops_before(self) -> int:
        return self.passes[0].flops_before if self.passes else 0

    @property
    def flops_after(self) -> int:
        return self.passes[-1].flops_after if self.passes else 0

    def __str__(self) -> str:
        lines = [f"{'pass':<34}{'operators':>18}{'FLOPs':>30}"]
        for p in self.passes:
            lines.append(f"{p.name:<34}{p.operators_before:>8} -> {p.operators_after:<7}"
                         f"{p.flops_before:>14,} -> {p.flops_after:<14,}")
        if self.rules_fired:
            lines.append("rules fired: " + ", ".join(f"{k} x{v}" for k, v in
                                                     sorted(self.rules_fired.items())))
        return "\n".join(lines)


def _run(p: Pass, ecg: ECG, evaluator: Evaluator | None) -> tuple[ECG, list[str]]:
    if p is fold_constants:
        return fold_constants(ecg, evaluator), []
    if p is apply_algebraic_rules:
        graph, fired = _core.apply_algebraic_rules_traced(ecg.graph)
        return ECG(graph), list(fired)
    return p(ecg), []


def enabled_default_passes() -> list[Pass]:
    """``DEFAULT_PASSES`` less those named in ``$DNNF_DISABLE_PASSES`` (comma-separated
    function names, e.g. ``combine_sibling_matmuls,fold_matmul_scale``), for measuring what one
    pass buys; an unknown name is an error, not ignored."""
    names = [n.strip() for n in os.environ.get("DNNF_DISABLE_PASSES", "").split(",") if n.strip()]
    known = {p.__name__ for p in DEFAULT_PASSES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise Error(f"DNNF_DISABLE_PASSES names {', '.join(map(repr, unknown))}, not a rewrite pass; "
                    f"the passes are {', '.join(sorted(known))}")
    return [p for p in DEFAULT_PASSES if p.__name__ not in names]


def rewrite(ecg: ECG, passes: Sequence[Pass] | None = None,
            evaluator: Evaluator | None = None) -> tuple[ECG, RewriteReport]:
    """Runs ``passes`` (default ``DEFAULT_PASSES``, less any ``$DNNF_DISABLE_PASSES`` names)
    in order, verifying the graph after each one. ``evaluator`` is given to
    ``fold_constants`` (default: the NumPy reference)."""
    report = RewriteReport()
    for p in enabled_default_passes() if passes is None else passes:
        ops, fl = len(ecg), flops(ecg)
        start = time.perf_counter()
        ecg, fired = _run(p, ecg, evaluator)
        seconds = time.perf_counter() - start
        ecg.verify()
        report.rules_fired.update(fired)
        report.passes.append(PassStats(getattr(p, "__name__", repr(p)), ops, len(ecg), fl,
                                       flops(ecg), seconds))
    return ecg, report


__all__ = [
    "rewrite", "RewriteReport", "PassStats", "DEFAULT_PASSES", "AlgebraRule", "algebra_rules",
    "flops", "remove_identities", "fold_constants", "fold_batch_norm", "fold_input_scale",
    "apply_algebraic_rules", "select_layout", "combine_sibling_matmuls",
    "fold_matmul_scale", "split_to_slices",
    "merge_layout_chains", "eliminate_common_subexpressions", "eliminate_dead_code",
    "uses_float16", "float16_to_float32",
]
