"""ATen -> ECG: one small function per ATen op family, registered into the ``TABLE`` of
:mod:`~dnnfusion.frontends.aten_common` (keyed by the overload packet, e.g. ``aten.add``),
used by :mod:`dnnfusion.frontends.fx`. This module holds the elementwise ops;
:mod:`~dnnfusion.frontends.aten_nn` (linear algebra, convolution, normalization, pooling)
and :mod:`~dnnfusion.frontends.aten_tensor` (reductions, layout, indexing, constants) add
theirs.

A converter gets the importer ``cx`` (``cx.op`` adds an ECG node, ``cx.const`` a constant,
``cx.meta()`` is torch's fake output, ``cx.fail`` builds the error) and the call's arguments
bound by schema name, defaults filled in, fx nodes replaced by ECG values. It returns the
ECG value (a list for several outputs, ``None`` for outputs dnnfusion cannot produce; the
importer raises if one of those is used). Scalars become constants of the dtype PyTorch's
type promotion gives (taken from the output's fake tensor), so an f32 tensor times a Python
float stays f32 and an int tensor plus a Python float becomes f32.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from dnnfusion.frontends.aten_common import (  # the registry and shared helpers
    TABLE, Value, _binary, _cast, _i64, _is_float, _operand, _out_dtype, _out_shape, _promoted, _rank,
    _reg, _scalar, _unary, _x, aten,
)

# ---------------------------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------------------------
for _packet, _op in [(aten.relu, "Relu"), (aten.sigmoid, "Sigmoid"), (aten.tanh, "Tanh"),
                     (aten.erf, "Erf"), (aten.exp, "Exp"), (aten.log, "Log"),
                     (aten.sqrt, "Sqrt"), (aten.reciprocal, "Reciprocal"), (aten.neg, "Neg"),
                     (aten.abs, "Abs"), (aten.floor, "Floor"), (aten.ceil, "Ceil"),
                     (aten.sign, "Sign"), (aten.sgn, "Sign"), (aten.sin, "Sin"),
                     (aten.cos, "Cos"), (aten.hardswish, "HardSwish"), (aten.mish, "Mish"),
                     (aten.tan, "Tan"), (aten.asin, "Asin"), (aten.acos, "Acos"),
                     (aten.atan, "Atan"), (aten.sinh, "Sinh"), (aten.cosh, "Cosh"),
                     (aten.asinh, "Asinh"), (aten.acosh, "Acosh"), (aten.atanh, "Atanh")]:
    TABLE[_packet] = _unary(_op)
TABLE[aten.hardsigmoid] = _unary("HardSigmoid", alpha=1.0 / 6.0, beta=0.5)


@_reg(aten.round)
def _round(cx, a):
    x, d = _x(a), a.get("decimals") or 0
    if not d:
        return cx.op("Round", [x])
    s = _scalar(cx, 10.0 ** d, x.dtype)
    return cx.op("Div", [cx.op("Round", [cx.op("Mul", [x, s])]), s])


@_reg(aten.rsqrt)
def _rsqrt(cx, a):
    return cx.op("Reciprocal", [cx.op("Sqrt", [_cast(cx, _x(a), _out_dtype(cx))])])


@_reg(aten.trunc)
def _trunc(cx, a):
    x = _x(a)
    if not _is_float(x.dtype):
        return x
    return cx.op("Where", [cx.op("Less", [x, _scalar(cx, 0, x.dtype)]), cx.op("Ceil", [x]),
                           cx.op("Floor", [x])])


@_reg(aten.log1p, aten.expm1, aten.log2, aten.log10, aten.exp2)
def _log_exp_variants(cx, a):
    name = cx.node.target.overloadpacket.__name__
    dt = _out_dtype(cx)
    x = _cast(cx, _x(a), dt)
    if name == "log1p":
        return cx.op("Log", [cx.op("Add", [x, _scalar(cx, 1, dt)])])
    if name == "expm1":
        return cx.op("Sub", [cx.op("Exp", [x]), _scalar(cx, 1, dt)])
    if name == "exp2":
        return cx.op("Pow", [_scalar(cx, 2, dt), x])
    base = 2.0 if name == "log2" else 10.0
    return cx.op("Div", [cx.op("Log", [x]), _scalar(cx, math.log(base), dt)])


@_reg(aten.gelu)
def _gelu(cx, a):
    return cx.op("Gelu", [_x(a)], {"approximate": a.get("approximate") or "none"})


@_reg(aten.silu)
def _silu(cx, a):
    x = _x(a)
    return cx.op("Mul", [x, cx.op("Sigmoid", [x])])


@_reg(aten.leaky_relu)
def _leaky_relu(cx, a):
    return cx.op("LeakyRelu", [_x(a)], {"alpha": float(a["negative_slope"])})


@_reg(aten.elu)
def _elu(cx, a):
    x = _x(a)
    alpha, scale, iscale = float(a["alpha"]), float(a["scale"]), float(a["input_scale"])
    if scale == 1.0 and iscale == 1.0:
        return cx.op("Elu", [x], {"alpha": alpha})
    if iscale == 1.0:
        return cx.op("Selu", [x], {"alpha": alpha, "gamma": scale})
    # scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))
    dt = x.dtype
    neg = cx.op("Mul", [_scalar(cx, alpha, dt), cx.op("Sub", [
        cx.op("Exp", [cx.op("Mul", [x, _scalar(cx, iscale, dt)])]), _scalar(cx, 1, dt)])])
    y = cx.op("Where", [cx.op("Greater", [x, _scalar(cx, 0, dt)]), x, neg])
    return cx.op("Mul", [y, _scalar(cx, scale, dt)])


@_reg(aten.softplus)
def _softplus(cx, a):
    x, beta, threshold = _x(a), float(a["beta"]), float(a["threshold"])
    if beta == 1.0 and threshold == 20.0:
        return cx.op("Softplus", [x])
    # torch: x * beta > threshold ? x : log1p(exp(x * beta)) / beta
    xb = cx.op("Mul", [x, _scalar(cx, beta, x.dtype)]) if beta != 1.0 else x
    sp = cx.op("Softplus", [xb])
    if beta != 1.0:
        sp = cx.op("Div", [sp, _scalar(cx, beta, x.dtype)])
    return cx.op("Where", [cx.op("Greater", [xb, _scalar(cx, threshold, x.dtype)]), x, sp])


@_reg(aten.prelu)
def _prelu(cx, a):
    x, w = _x(a), a["weight"]
    if _rank(x) >= 2 and int(np.prod(w.shape)) > 1:
        w = cx.op("Reshape", [w, _i64(cx, [int(np.prod(w.shape))] + [1] * (_rank(x) - 2))])
    return cx.op("PRelu", [x, _cast(cx, w, x.dtype)])


@_reg(aten.hardtanh, aten.clamp, aten.clamp_min, aten.clamp_max)
def _clamp(cx, a):
    x, dt = _x(a), _out_dtype(cx)
    name = cx.node.target.overloadpacket.__name__
    if name == "hardtanh":
        lo, hi = a["min_val"], a["max_val"]
    elif name == "clamp":
        lo, hi = a["min"], a["max"]
    else:
        lo, hi = (a["min"], None) if name == "clamp_min" else (None, a["max"])
    x = _cast(cx, x, dt)
    if isinstance(lo, Value) or isinstance(hi, Value):  # clamp.Tensor: elementwise bounds
        if lo is not None:
            x = cx.op("Max", [x, _operand(cx, lo, dt)])
        if hi is not None:
            x = cx.op("Min", [x, _operand(cx, hi, dt)])
        return x
    if lo is None and hi is None:
        return x
    return cx.op("Clip", [x, None if lo is None else _scalar(cx, lo, dt, "min"),
                          None if hi is None else _scalar(cx, hi, dt, "max")])


TABLE[aten.mul] = _binary("Mul")
TABLE[aten.maximum] = TABLE[aten.fmax] = _binary("Max")
TABLE[aten.minimum] = TABLE[aten.fmin] = _binary("Min")


@_reg(aten.add, aten.sub, aten.rsub)
def _add_sub(cx, a):
    dt = _out_dtype(cx)
    x, y, alpha = a["self"], a["other"], a.get("alpha", 1)
    name = cx.node.target.overloadpacket.__name__
    if name == "rsub":
        x, y = y, x
    if alpha != 1:  # x + alpha * y
        y = y * alpha if not isinstance(y, Value) else cx.op(
            "Mul", [_cast(cx, y, dt), _scalar(cx, alpha, dt, "alpha")])
    op = "Add" if name == "add" else "Sub"
    if dt == "bool" and op == "Add":
        op = "Or"
    return cx.op(op, [_operand(cx, x, dt), _operand(cx, y, dt)])


@_reg(aten.div)
def _div(cx, a):
    dt, mode = _out_dtype(cx), a.get("rounding_mode")
    x, y = _operand(cx, a["self"], dt), _operand(cx, a["other"], dt)
    if mode is None or mode == "true":
        return cx.op("Div", [x, y])
    if _is_float(dt):
        q = cx.op("Div", [x, y])
        if mode == "floor":
            return cx.op("Floor", [q])
        return cx.op("Where", [cx.op("Less", [q, _scalar(cx, 0, dt)]), cx.op("Ceil", [q]),
                               cx.op("Floor", [q])])
    # Integers: x - mod(x, y) is a multiple of y, so any rounding of Div is then exact.
    r = cx.op("Mod", [x, y], {"fmod": 0 if mode == "floor" else 1})
    return cx.op("Div", [cx.op("Sub", [x, r]), y])


@_reg(aten.remainder, aten.fmod)
def _remainder(cx, a):
    dt = _out_dtype(cx)
    x, y = _operand(cx, a["self"], dt), _operand(cx, a["other"], dt)
    if cx.node.target.overloadpacket is aten.fmod:
        return cx.op("Mod", [x, y], {"fmod": 1})
    if not _is_float(dt):
        return cx.op("Mod", [x, y], {"fmod": 0})
    # ONNX Mod needs fmod=1 on floats; Python's modulo is x - floor(x / y) * y.
    return cx.op("Sub", [x, cx.op("Mul", [cx.op("Floor", [cx.op("Div", [x, y])]), y])])


@_reg(aten.pow)
def _pow(cx, a):
    dt = _out_dtype(cx)
    return cx.op("Pow", [_operand(cx, a["self"], dt), _operand(cx, a["exponent"], dt)])


def _compare(op: str, negate: bool = False) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        dt = _promoted(a["self"], a["other"])
        y = cx.op(op, [_operand(cx, a["self"], dt), _operand(cx, a["other"], dt)])
        return cx.op("Not", [y]) if negate else y
    return conv


TABLE[aten.eq] = _compare("Equal")
TABLE[aten.ne] = _compare("Equal", negate=True)
TABLE[aten.lt] = _compare("Less")
TABLE[aten.le] = _compare("LessOrEqual")
TABLE[aten.gt] = _compare("Greater")
TABLE[aten.ge] = _compare("GreaterOrEqual")


def _logical(op: str, bitwise: bool) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        dt = _out_dtype(cx)
        if bitwise and dt != "bool":  # on integers: the bits
            return cx.op("Bitwise" + op, [_operand(cx, a["self"], dt), _operand(cx, a["other"], dt)])
        return cx.op(op, [_operand(cx, a["self"], "bool"), _operand(cx, a["other"], "bool")])
    return conv


TABLE[aten.logical_and] = _logical("And", False)
TABLE[aten.logical_or] = _logical("Or", False)
TABLE[aten.logical_xor] = _logical("Xor", False)
TABLE[aten.bitwise_and] = _logical("And", True)
TABLE[aten.bitwise_or] = _logical("Or", True)
TABLE[aten.bitwise_xor] = _logical("Xor", True)


def _shift(direction: str) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        dt = _out_dtype(cx)
        return cx.op("BitShift", [_operand(cx, a["self"], dt), _operand(cx, a["other"], dt)],
                     {"direction": direction})
    return conv


TABLE[aten.bitwise_left_shift] = _shift("LEFT")
TABLE[aten.bitwise_right_shift] = _shift("RIGHT")
TABLE[aten.__lshift__] = _shift("LEFT")
TABLE[aten.__rshift__] = _shift("RIGHT")


@_reg(aten.logical_not, aten.bitwise_not)
def _not(cx, a):
    x = _x(a)
    if cx.node.target.overloadpacket is aten.bitwise_not and x.dtype != "bool":
        return cx.op("BitwiseNot", [x])
    return cx.op("Not", [_cast(cx, x, "bool")])


@_reg(aten.isnan)
def _isnan(cx, a):
    x = _x(a)
    return cx.op("Not", [cx.op("Equal", [x, x])])


@_reg(aten.where)
def _where(cx, a):
    dt = _out_dtype(cx)
    return cx.op("Where", [_cast(cx, a["condition"], "bool"), _operand(cx, a["self"], dt),
                           _operand(cx, a["other"], dt)])


@_reg(aten.masked_fill)
def _masked_fill(cx, a):
    dt = _out_dtype(cx)
    return cx.op("Where", [_cast(cx, a["mask"], "bool"), _operand(cx, a["value"], dt),
                           _cast(cx, a["self"], dt)])


@_reg(aten._to_copy, aten.to)
def _to_copy(cx, a):
    return _cast(cx, _x(a), _out_dtype(cx))


def _identity(cx: Any, a: dict) -> Any:
    return _x(a)


for _packet in (aten.clone, aten.alias, aten.detach, aten.lift_fresh_copy, aten.contiguous,
                aten.lift_fresh):
    TABLE[_packet] = _identity


def _nothing(cx: Any, a: dict) -> None:  # runtime assertions: compute nothing
    return None


for _packet in (aten._assert_tensor_metadata, aten._assert_scalar, aten._assert_async,
                aten.sym_constrain_range_for_size, aten.sym_constrain_range):
    TABLE[_packet] = _nothing


@_reg(aten.dropout, aten.native_dropout, aten.feature_dropout)
def _dropout(cx, a):
    if a.get("train"):
        raise cx.fail("dropout in training mode is random; call model.eval() first")
    x = _x(a)
    return [x, None] if cx.node.target.overloadpacket is aten.native_dropout else x


@_reg(aten.copy)
def _copy(cx, a):
    y = _cast(cx, a["src"], _out_dtype(cx))
    shape = _out_shape(cx)
    return y if list(y.shape) == shape else cx.op("Expand", [y, _i64(cx, shape)])

