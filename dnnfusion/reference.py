"""NumPy reference interpreter: the correctness oracle of dnnfusion.

Every optimisation in the project (graph rewriting, fusion planning, generated kernels) is
checked against this module, so it favours obviously-correct code over speed: it is plain
NumPy plus the standard library, computes floating-point results in float64 and rounds them
back to the input's dtype once at the end (except QuantizeLinear's quotient, which ONNX
defines in float32 and whose ties decide the rounding: _ref_quantize.py).

Conventions (fixed; the C++ core, the front-ends and the tests rely on them):

* The operators are exactly those of ``cpp/ir/ops.def``; the kernel keys are the ONNX op
  names. Semantics, attribute names and default values are ONNX's, in their newest
  (opset 21+) form. In particular these are always *inputs*, never attributes: ``axes`` of
  ReduceMean/ReduceSum/ReduceMax/ReduceMin/ReduceProd/ReduceL2/Squeeze/Unsqueeze, ``split``
  of Split, ``min``/``max`` of Clip, ``pads``/``constant_value``/``axes`` of Pad,
  ``starts``/``ends``/``axes``/``steps`` of Slice and ``roi``/``scales``/``sizes`` of Resize.
* A kernel is ``kernel(inputs, attrs) -> list[np.ndarray]``. ``inputs`` is positional;
  an absent optional input is ``None`` (also in the middle of the list) or simply missing at
  the end. ``attrs`` maps an ONNX attribute name to ``int | float | str | list[int] |
  list[float] | list[str] | np.ndarray`` (tensor attributes such as ConstantOfShape's
  ``value``); an attribute that is not in the dict takes its ONNX default. Cast's ``to`` is
  the ONNX ``TensorProto`` data-type code.
* A kernel returns all the outputs it can produce (e.g. MaxPool returns Y and Indices);
  :func:`run_node` trims the list to the outputs a node actually has.
* An attribute value a kernel does not implement raises ``NotImplementedError`` naming the
  op, the attribute and the value; so does an op without a kernel. The only such values
  are Cast to a type outside the ECG (bfloat16, float8, strings, ...), Dropout with
  ``training_mode`` true and a non-zero ratio (random), and Resize ``antialias`` with
  ``mode="nearest"`` (undefined in ONNX).
* Outputs may be views of inputs (Identity, Reshape, Slice, Transpose, ...): treat every
  array as read-only.
* Where ONNX's own reference and onnxruntime disagree, the spec text decides: Resize
  ``align_corners`` divides by the integer output length (onnxruntime agrees; ONNX's
  generated test data uses the fractional one); SAME auto-padding of pools accounts for
  dilations (ONNX shape inference agrees; onnxruntime's AveragePool/MaxPool do not); the
  ``tf_crop_and_resize`` roi also applies to axes whose length does not change
  (onnxruntime skips them). Resize source coordinates are computed in float32 with
  onnxruntime's order of operations (float64 for float64 data), so nearest-neighbour ties
  round as in float kernels.

Besides the kernels (:data:`KERNELS`, :func:`run_node`) the module executes whole graphs
(:func:`run`) or a slice of one (:func:`run_nodes`, used by the fusion planner to run a
plan block by block). A graph is duck-typed, see :func:`run`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from dnnfusion.dtypes import is_float_dtype

from . import _ref_grid
from . import _ref_nn as nn
from . import _ref_quantize as quantize
from . import _ref_shape as shape
from ._ref_elementwise import (  # the elementwise kernels and the float helpers
    _BINARY, _COMPARE, _UNARY, _VARIADIC, ONNX_DTYPES, _binary_kernel, _bit_cast, _cast, _clip,
    _compare_kernel, _dropout, _is_float, _trilu, _unary_kernel, _variadic_kernel, _where, _wide,
)
from ._ref_elementwise import erf  # noqa: F401 (re-exported: reference.erf is public)
from ._ref_nn import unsupported
from ._ref_shape import _axes, _axis, _opt, _scalar

Attrs = dict[str, Any]
Inputs = list["np.ndarray | None"]
Kernel = Callable[[Inputs, Attrs], list[np.ndarray]]

# The ECG's dtype names (Value.dtype); bf16 is ml_dtypes' bfloat16 where ml_dtypes is installed.
VALUE_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(t) for name, t in {
        "f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
        "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16,
        "u32": np.uint32, "u64": np.uint64, "bool": np.bool_,
    }.items()
}
try:
    import ml_dtypes as _ml_dtypes

    VALUE_DTYPES["bf16"] = np.dtype(_ml_dtypes.bfloat16)
    VALUE_DTYPES.update({"i4": np.dtype(_ml_dtypes.int4), "u4": np.dtype(_ml_dtypes.uint4),
                         "i2": np.dtype(_ml_dtypes.int2), "u2": np.dtype(_ml_dtypes.uint2),
                         "f8e4m3fn": np.dtype(_ml_dtypes.float8_e4m3fn),
                         "f8e4m3fnuz": np.dtype(_ml_dtypes.float8_e4m3fnuz),
                         "f8e5m2": np.dtype(_ml_dtypes.float8_e5m2),
                         "f8e5m2fnuz": np.dtype(_ml_dtypes.float8_e5m2fnuz),
                         "f4e2m1": np.dtype(_ml_dtypes.float4_e2m1fn),
                         "f8e8m0": np.dtype(_ml_dtypes.float8_e8m0fnu),
                         "f6e2m3": np.dtype(_ml_dtypes.float6_e2m3fn), "f6e3m2": np.dtype(_ml_dtypes.float6_e3m2fn)})
except ImportError:  # bfloat16 graphs then fail with the dtype named
    pass


# --------------------------------------------------------------------------------------------
# Small helpers (_is_float and _wide live in _ref_elementwise, the axis and optional-input
# ones in _ref_shape)
# --------------------------------------------------------------------------------------------
def _along(axis: int, rank: int, index: slice) -> tuple[slice, ...]:
    """An index that applies ``index`` along ``axis`` and takes everything elsewhere."""
    return tuple(index if i == axis else slice(None) for i in range(rank))


# --------------------------------------------------------------------------------------------
# Normalisation, linear algebra, softmax
# --------------------------------------------------------------------------------------------
def _channel(v: np.ndarray, rank: int) -> np.ndarray:
    """A per-channel (C,) vector shaped to broadcast against N x C x D1 x ..."""
    return _wide(v).reshape(1, -1, *[1] * (rank - 2))


def _batch_norm(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, scale, bias, mean, var = inputs
    eps = float(attrs.get("epsilon", 1e-5))
    xf = _wide(x)
    if not attrs.get("training_mode", 0):
        y = (xf - _channel(mean, x.ndim)) / np.sqrt(_channel(var, x.ndim) + eps)
        return [(y * _channel(scale, x.ndim) + _channel(bias, x.ndim)).astype(x.dtype)]
    axes = (0, *range(2, x.ndim))
    batch_mean, batch_var = xf.mean(axis=axes), xf.var(axis=axes)
    momentum = float(attrs.get("momentum", 0.9))
    y = (xf - _channel(batch_mean, x.ndim)) / np.sqrt(_channel(batch_var, x.ndim) + eps)
    y = y * _channel(scale, x.ndim) + _channel(bias, x.ndim)
    run_mean = _wide(mean) * momentum + batch_mean * (1 - momentum)
    run_var = _wide(var) * momentum + batch_var * (1 - momentum)
    return [y.astype(x.dtype), run_mean.astype(mean.dtype), run_var.astype(var.dtype)]


def _instance_norm(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, scale, bias = inputs
    xf = _wide(x)
    axes = tuple(range(2, x.ndim))
    mean, var = xf.mean(axis=axes, keepdims=True), xf.var(axis=axes, keepdims=True)
    y = (xf - mean) / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
    return [(y * _channel(scale, x.ndim) + _channel(bias, x.ndim)).astype(x.dtype)]


def _layer_norm(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, scale, bias = inputs[0], _opt(inputs, 1), _opt(inputs, 2)
    stash = int(attrs.get("stash_type", 1))
    if stash not in ONNX_DTYPES or not is_float_dtype(ONNX_DTYPES[stash]):
        raise unsupported("LayerNormalization", "stash_type", stash)
    axes = tuple(range(_axis(int(attrs.get("axis", -1)), x.ndim), x.ndim))
    xf = _wide(x)
    mean = xf.mean(axis=axes, keepdims=True)
    inv_std = 1.0 / np.sqrt(((xf - mean) ** 2).mean(axis=axes, keepdims=True)
                            + float(attrs.get("epsilon", 1e-5)))
    y = (xf - mean) * inv_std
    if scale is not None:
        y = y * _wide(scale)
    if bias is not None:
        y = y + _wide(bias)
    u = ONNX_DTYPES[stash]
    return [y.astype(x.dtype), mean.astype(u), inv_std.astype(u)]


def _matmul(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    a, b = inputs
    return [np.matmul(_wide(a), _wide(b)).astype(a.dtype, copy=False)]


def _gemm(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    a, b, c = _wide(inputs[0]), _wide(inputs[1]), _opt(inputs, 2)
    a = a.T if attrs.get("transA", 0) else a
    b = b.T if attrs.get("transB", 0) else b
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    y = a @ b
    if alpha != 1.0:
        y = alpha * y
    if c is not None and beta != 0.0:
        y = y + (beta * _wide(c) if beta != 1.0 else _wide(c))
    return [np.asarray(y).astype(inputs[0].dtype, copy=False)]


def _softmax(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x = inputs[0]
    axis = _axis(int(attrs.get("axis", -1)), x.ndim)
    e = np.exp(_wide(x) - np.max(_wide(x), axis=axis, keepdims=True))
    return [(e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)]


def _log_softmax(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x = inputs[0]
    axis = _axis(int(attrs.get("axis", -1)), x.ndim)
    shifted = _wide(x) - np.max(_wide(x), axis=axis, keepdims=True)
    return [(shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(x.dtype)]


# --------------------------------------------------------------------------------------------
# Reductions, arg-reductions, scans, TopK
# --------------------------------------------------------------------------------------------
def _reduce_sum(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.sum(_wide(x), axis=axes, keepdims=keep, dtype=None if _is_float(x) else x.dtype)


def _reduce_prod(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.prod(_wide(x), axis=axes, keepdims=keep, dtype=None if _is_float(x) else x.dtype)


def _reduce_mean(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    count = math.prod(x.shape[a] for a in axes)
    return np.sum(x.astype(np.float64), axis=axes, keepdims=keep) / count  # empty: nan


def _reduce_extreme(fn: Callable[..., np.ndarray], identity: Callable[[np.dtype], Any]
                    ) -> Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]:
    """ReduceMax / ReduceMin; the reduction of an empty set is the identity (-inf / +inf)."""
    def reducer(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
        extra = {"initial": identity(x.dtype)} if x.size == 0 else {}
        return fn(x, axis=axes, keepdims=keep, **extra)
    return reducer


def _lowest(dtype: np.dtype) -> Any:
    return False if dtype == bool else (-np.inf if is_float_dtype(dtype) else np.iinfo(dtype).min)


def _highest(dtype: np.dtype) -> Any:
    return True if dtype == bool else (np.inf if is_float_dtype(dtype) else np.iinfo(dtype).max)


_REDUCERS: dict[str, Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]] = {
    "ReduceSum": _reduce_sum,
    "ReduceProd": _reduce_prod,
    "ReduceMean": _reduce_mean,
    "ReduceMax": _reduce_extreme(np.max, _lowest),
    "ReduceMin": _reduce_extreme(np.min, _highest),
    "ReduceL2": lambda x, axes, keep: np.sqrt(np.sum(
        x.astype(np.float64) ** 2, axis=axes, keepdims=keep)),
}


def _reduce_kernel(name: str) -> Kernel:
    reducer = _REDUCERS[name]

    def kernel(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
        x, axes = inputs[0], _opt(inputs, 1)
        if axes is None or axes.size == 0:
            # noop_with_empty_axes reduces over no axis at all (ReduceL2 still yields |x|).
            axes = np.arange(0 if attrs.get("noop_with_empty_axes", 0) else x.ndim)
        y = reducer(x, _axes(axes, x.ndim), bool(attrs.get("keepdims", 1)))
        return [np.asarray(y).astype(x.dtype, copy=False)]
    return kernel


def _arg_kernel(fn: Callable[..., np.ndarray]) -> Kernel:
    def kernel(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
        x = inputs[0]
        axis = _axis(int(attrs.get("axis", 0)), x.ndim)
        if attrs.get("select_last_index", 0):
            idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
        else:
            idx = fn(x, axis=axis)
        if attrs.get("keepdims", 1):
            idx = np.expand_dims(idx, axis)
        return [np.asarray(idx, dtype=np.int64)]
    return kernel


def _cumsum(inputs: Inputs, attrs: Attrs, prod: bool = False) -> list[np.ndarray]:
    x = inputs[0]
    axis = _axis(int(_scalar(inputs[1])), x.ndim)
    reverse = bool(attrs.get("reverse", 0))
    y = np.flip(_wide(x), axis) if reverse else _wide(x)
    y = (np.cumprod if prod else np.cumsum)(y, axis=axis, dtype=y.dtype)
    if attrs.get("exclusive", 0):  # shift by one along the axis, the identity (0 or 1) first
        shifted = np.ones_like(y) if prod else np.zeros_like(y)
        shifted[_along(axis, y.ndim, slice(1, None))] = y[_along(axis, y.ndim, slice(None, -1))]
        y = shifted
    return [(np.flip(y, axis) if reverse else y).astype(x.dtype)]


def _topk(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, k = inputs[0], int(_scalar(inputs[1]))
    axis = _axis(int(attrs.get("axis", -1)), x.ndim)
    n = x.shape[axis]
    if attrs.get("largest", 1):
        # Descending with ties by lower index: stable ascending sort of the reversed axis,
        # mapped back to original indices, then reversed.
        order = np.flip(n - 1 - np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


def _is_inf(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x = inputs[0]
    pos = np.isposinf(x) if attrs.get("detect_positive", 1) else np.zeros(x.shape, bool)
    neg = np.isneginf(x) if attrs.get("detect_negative", 1) else np.zeros(x.shape, bool)
    return [pos | neg]


# --------------------------------------------------------------------------------------------
# The kernel table
# --------------------------------------------------------------------------------------------
KERNELS: dict[str, Kernel] = {
    **shape.KERNELS,
    **quantize.KERNELS,
    **{name: _unary_kernel(fn) for name, fn in _UNARY.items()},
    **{name: _binary_kernel(fn) for name, fn in _BINARY.items()},
    **{name: _compare_kernel(fn) for name, fn in _COMPARE.items()},
    **{name: _variadic_kernel(fn) for name, fn in _VARIADIC.items()},
    **{name: _reduce_kernel(name) for name in _REDUCERS},
    "Not": lambda inputs, attrs: [np.logical_not(inputs[0])],
    "BitwiseNot": lambda inputs, attrs: [np.invert(inputs[0])],
    "IsNaN": lambda inputs, attrs: [np.isnan(inputs[0])],
    "IsInf": _is_inf,
    "Cast": _cast,
    "BitCast": _bit_cast,
    "Clip": _clip,
    "Dropout": _dropout,
    "Where": _where,
    "Trilu": _trilu,
    "BatchNormalization": _batch_norm,
    "Conv": nn.conv,
    "ConvTranspose": nn.conv_transpose,
    "NhwcConv": nn.nhwc_conv,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "InstanceNormalization": _instance_norm,
    "LayerNormalization": _layer_norm,
    "MaxPool": nn.max_pool,
    "AveragePool": nn.average_pool,
    "NhwcMaxPool": nn.nhwc_max_pool,
    "NhwcAveragePool": nn.nhwc_average_pool,
    "GlobalAveragePool": nn.global_average_pool,
    "GlobalMaxPool": nn.global_max_pool,
    "ArgMax": _arg_kernel(np.argmax),
    "ArgMin": _arg_kernel(np.argmin),
    "CumSum": _cumsum,
    "CumProd": lambda inputs, attrs: _cumsum(inputs, attrs, prod=True),
    "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
    "TopK": _topk,
    "NonMaxSuppression": nn.non_max_suppression,
    "RoiAlign": nn.roi_align,
    "NhwcRoiAlign": nn.nhwc_roi_align,
    "GridSample": _ref_grid.grid_sample,
    "Size": lambda inputs, attrs: [np.array(inputs[0].size, dtype=np.int64)],
    "Tile": lambda inputs, attrs: [np.tile(inputs[0], [int(r) for r in inputs[1]])],
    "Resize": nn.resize,
}


def run_node(op: str, inputs: Sequence[np.ndarray | None], attrs: Mapping[str, Any] | None = None,
             num_outputs: int | None = None) -> list[np.ndarray]:
    """Evaluate one operator; returns its outputs (only the first ``num_outputs`` if given)."""
    kernel = KERNELS.get(op)
    if kernel is None:
        raise NotImplementedError(f"reference: no kernel for operator {op!r}")
    with np.errstate(all="ignore"):  # inf/nan results are part of the semantics
        outputs = kernel(list(inputs), dict(attrs or {}))
    return list(outputs if num_outputs is None else outputs[:num_outputs])


# --------------------------------------------------------------------------------------------
# Graph execution
# --------------------------------------------------------------------------------------------
class Value(Protocol):
    id: int
    name: str
    dtype: str
    shape: tuple[int | str, ...]
    is_constant: bool

    def numpy(self) -> np.ndarray: ...


class Node(Protocol):
    op: str
    name: str
    inputs: list[Value | None]
    outputs: list[Value | None]
    attrs: dict[str, Any]


class Graph(Protocol):
    inputs: list[Value]
    outputs: list[Value]
    nodes: list[Node]


def _read(value: Value, env: dict[int, np.ndarray]) -> np.ndarray:
    if value.id in env:
        return env[value.id]
    if value.is_constant:
        env[value.id] = np.asarray(value.numpy())
        return env[value.id]
    raise ValueError(f"reference: value {value.name!r} (id {value.id}) has not been computed")


def last_uses(nodes: Sequence[Node]) -> dict[int, int]:
    """For every value id read by ``nodes``, the index of the last node that reads it."""
    last: dict[int, int] = {}
    for i, node in enumerate(nodes):
        for v in node.inputs:
            if v is not None:
                last[v.id] = i
    return last


def run_nodes(nodes: Sequence[Node], env: dict[int, np.ndarray],
              keep: Collection[int] | None = None,
              kernels: Mapping[str, Kernel] | None = None) -> dict[int, np.ndarray]:
    """Execute ``nodes`` (in order) on ``env``, a dict value id -> array, updated in place.

    Node inputs are looked up in ``env``; constants missing from it are read with
    ``Value.numpy()`` and cached. If ``keep`` is given, every other value is dropped from
    ``env`` right after its last reader among ``nodes`` ran (and outputs nobody reads are
    dropped at once), which keeps peak memory low; ``keep`` must therefore hold the ids still
    needed afterwards (graph outputs, values read by later blocks). ``kernels`` replaces the
    oracle's kernel of some operators (the same signature; compile's host tail runs
    NonMaxSuppression in C++). Returns ``env``.
    """
    last = last_uses(nodes) if keep is not None else {}
    for i, node in enumerate(nodes):
        args = [None if v is None else _read(v, env) for v in node.inputs]
        own = kernels.get(node.op) if kernels else None
        try:
            results = (own(args, dict(node.attrs))[:len(node.outputs)] if own
                       else run_node(node.op, args, node.attrs, len(node.outputs)))
        except (NotImplementedError, ValueError) as e:
            raise type(e)(f"node {node.name!r} ({node.op}): {e}") from e
        for v, arr in zip(node.outputs, results):
            if v is not None:
                env[v.id] = arr
        if keep is None:
            continue
        for v in [*node.inputs, *node.outputs]:
            if v is not None and v.id not in keep and last.get(v.id, -1) <= i:
                env.pop(v.id, None)
    return env


def _bind_feeds(graph: Graph, feeds: Mapping[str, Any] | Sequence[Any]) -> dict[int, np.ndarray]:
    """Check the feeds against the graph inputs; returns the initial environment."""
    inputs = [v for v in graph.inputs if not v.is_constant]
    if isinstance(feeds, Mapping):
        unknown = set(feeds) - {v.name for v in inputs}
        if unknown:
            raise ValueError(f"reference: feeds for unknown graph inputs {sorted(unknown)}")
        missing = [v.name for v in inputs if v.name not in feeds]
        if missing:
            raise ValueError(f"reference: no feed for graph inputs {missing}")
        arrays = [feeds[v.name] for v in inputs]
    else:
        arrays = list(feeds)
        if len(arrays) != len(inputs):
            raise ValueError(f"reference: {len(arrays)} feeds for {len(inputs)} graph inputs")
    env: dict[int, np.ndarray] = {}
    symbols: dict[str, int] = {}
    for v, arr in zip(inputs, arrays):
        arr = np.asarray(arr)
        want = VALUE_DTYPES.get(v.dtype)
        if want is None:
            raise ValueError(f"reference: input {v.name!r} has unsupported dtype {v.dtype!r}")
        if arr.dtype != want:
            raise ValueError(f"reference: input {v.name!r} expects dtype {v.dtype} "
                             f"({want}), got {arr.dtype}")
        if arr.ndim != len(v.shape):
            raise ValueError(f"reference: input {v.name!r} expects rank {len(v.shape)} "
                             f"(shape {tuple(v.shape)}), got shape {arr.shape}")
        for axis, (dim, got) in enumerate(zip(v.shape, arr.shape)):
            if isinstance(dim, str):
                if symbols.setdefault(dim, got) != got:
                    raise ValueError(f"reference: symbolic dim {dim!r} is {symbols[dim]} "
                                     f"elsewhere but {got} in input {v.name!r}")
            elif int(dim) >= 0 and int(dim) != got:
                raise ValueError(f"reference: input {v.name!r} expects shape {tuple(v.shape)}, "
                                 f"got {arr.shape} (axis {axis})")
        env[v.id] = arr
    return env


def run(graph: Graph, feeds: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
    """Execute a whole graph; returns the outputs in ``graph.outputs`` order.

    ``graph`` is duck-typed (the C++ bindings provide it): ``graph.inputs`` / ``.outputs``
    are lists of values, ``graph.nodes`` is a topologically ordered list of nodes. A value
    has ``.id`` (unique int), ``.name``, ``.dtype`` (one of f16 f32 f64 i8 i16 i32 i64 u8
    u16 u32 u64 bool), ``.shape`` (ints, or str for a symbolic dim), ``.is_constant`` and
    ``.numpy()`` (constants only). A node has ``.op``, ``.name``, ``.inputs`` (values or
    None), ``.outputs`` and ``.attrs``. ``feeds`` maps input names to arrays, or lists them
    in graph-input order; dtypes must match exactly and static dims must agree
    (``ValueError`` otherwise). Intermediate arrays are freed after their last use.
    """
    env = _bind_feeds(graph, feeds)
    keep = {v.id for v in graph.outputs}
    run_nodes(graph.nodes, env, keep=keep)
    return [_read(v, env) for v in graph.outputs]
