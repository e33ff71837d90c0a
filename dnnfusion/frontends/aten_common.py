"""The ATen -> ECG registry (``TABLE``, keyed by the overload packet, e.g. ``aten.add``) and
the helpers every converter family shares. The families register into it when imported:
:mod:`~dnnfusion.frontends.aten_ops` (elementwise), :mod:`~dnnfusion.frontends.aten_nn`
(linear algebra, convolution, normalization, pooling) and
:mod:`~dnnfusion.frontends.aten_tensor` (reductions, layout, indexing, constants); fx
imports them all. Imports go one way: fx -> the families -> this module.
See aten_ops.py for what a converter gets and returns."""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np
import torch

from dnnfusion import _core
from dnnfusion.dtypes import ONNX_CODES, TORCH_DTYPES, TORCH_FLOAT8, ecg_dtype, numpy_dtype
from dnnfusion.errors import DTypeError

aten = torch.ops.aten
Value = _core.Value

# Composite ops kept out of the default (core ATen) decomposition: the ECG has them, or
# torch would expand them into index arithmetic. See the docstring of fx.py.
_KEEP = ["linear", "matmul", "hardswish", "hardsigmoid", "silu", "mish", "softplus",
         "pixel_shuffle", "triu", "tril", "prelu", "instance_norm", "adaptive_avg_pool1d",
         "adaptive_avg_pool2d", "adaptive_avg_pool3d",
         "scaled_dot_product_attention", "upsample_nearest1d.vec", "upsample_nearest2d.vec",
         "upsample_nearest3d.vec", "upsample_linear1d.vec", "upsample_bilinear2d.vec",
         "upsample_trilinear3d.vec", "upsample_bicubic2d.vec", "_upsample_nearest_exact1d.vec",
         "_upsample_nearest_exact2d.vec", "_upsample_nearest_exact3d.vec",
         "reflection_pad1d", "reflection_pad2d", "reflection_pad3d",
         "replication_pad1d", "replication_pad2d", "replication_pad3d"]


_BASE_TABLE: list = []


def decomposition_table() -> Any:
    """The default (core ATen) decomposition table less the ops in ``_KEEP``."""
    if not _BASE_TABLE:
        table = torch.export.default_decompositions()
        for name in _KEEP:
            packet, _, overload = name.partition(".")
            table.pop(getattr(getattr(aten, packet), overload or "default"), None)
        _BASE_TABLE.append(table)
    return _BASE_TABLE[0].copy()  # run_decompositions may change the table it gets


TABLE: dict[Any, Callable[[Any, dict], Any]] = {}


def _reg(*packets: Any) -> Callable:
    def deco(fn: Callable) -> Callable:
        for p in packets:
            TABLE[p] = fn
        return fn
    return deco


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
_ONNX = ONNX_CODES
_TORCH = {ecg: getattr(torch, name) for name, ecg in TORCH_DTYPES.items()}
_INT64_MIN = -(2 ** 63)


def _x(a: dict) -> Any:
    return a["self"] if "self" in a else a["input"]


def _rank(v: Any) -> int:
    return len(v.shape)


def _is_float(dt: str) -> bool:
    return dt in ("f16", "bf16", "f32", "f64")


def _out_dtype(cx: Any, i: int | None = None) -> str:
    v = cx.meta() if i is None else cx.meta(i)
    return ecg_dtype(v.dtype)


def _out_shape(cx: Any, i: int | None = None) -> list[int]:
    v = cx.meta() if i is None else cx.meta(i)
    return [int(d) for d in v.shape]


def _i64(cx: Any, values: Any, tag: str = "c") -> Any:
    return cx.const(np.asarray(values, dtype=np.int64), tag)


def _scalar(cx: Any, value: Any, dt: str, tag: str = "scalar") -> Any:
    return cx.const(np.asarray(value, dtype=numpy_dtype(dt)), tag)


def _cast(cx: Any, v: Any, dt: str) -> Any:
    if v.dtype == dt:
        return v
    torch_name = next((n for n, e in TORCH_DTYPES.items() if e == dt), None)
    if torch_name in TORCH_FLOAT8:  # torch's own saturation (dtypes.TORCH_FLOAT8)
        saturate = TORCH_FLOAT8[torch_name]
        if saturate is None:
            raise DTypeError(f"a conversion to torch.{torch_name}: torch drops the sign (-1000 gives 1024) "
                             "where ONNX's Cast gives NaN, so dnnfusion does not compile it; convert with "
                             "torch.abs first if that is what the model means, or keep the values in float32")
        return cx.op("Cast", [v], {"to": _ONNX[dt], "saturate": int(saturate)})
    return cx.op("Cast", [v], {"to": _ONNX[dt]})


def _operand(cx: Any, x: Any, dt: str) -> Any:
    """A tensor cast to ``dt``, or a Python scalar as a constant of ``dt``."""
    return _cast(cx, x, dt) if isinstance(x, Value) else _scalar(cx, x, dt)


def _promoted(*xs: Any) -> str:
    """PyTorch's type promotion of tensors (ECG values) and Python scalars."""
    def proxy(x: Any) -> Any:
        if isinstance(x, Value):
            return torch.empty((0,) * min(_rank(x), 1), dtype=_TORCH[x.dtype])
        return x
    dt = torch.result_type(proxy(xs[0]), proxy(xs[1]))
    for x in xs[2:]:
        dt = torch.result_type(torch.empty((0,), dtype=dt), proxy(x))
    return ecg_dtype(dt)


def _dims(v: Any, dim: Any) -> list[int]:
    """Normalized reduction axes; ``None`` or ``[]`` mean all."""
    r = _rank(v)
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(r))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({d % r if r else 0 for d in dims}) if r else []


def _ntuple(v: Any, n: int) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _users_of_outputs(cx: Any) -> set[int]:
    """Which outputs of the current (multi-output) node are read."""
    return {u.args[1] for u in cx.node.users if u.target is operator.getitem}


# ---------------------------------------------------------------------------------------------
# Converter factories shared by the families
# ---------------------------------------------------------------------------------------------
def _unary(op: str, **attrs: Any) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        return cx.op(op, [_cast(cx, _x(a), _out_dtype(cx))], attrs)
    return conv


# On bool tensors torch's arithmetic is logic.
_BOOL_OP = {"Mul": "And", "Add": "Or", "Max": "Or", "Min": "And"}


def _binary(op: str) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        dt = _out_dtype(cx)
        return cx.op(_BOOL_OP.get(op, op) if dt == "bool" else op,
                     [_operand(cx, a["self"], dt), _operand(cx, a["other"], dt)])
    return conv
