"""ATen -> ECG: one small function per ATen op family (``TABLE``, keyed by the overload
packet, e.g. ``aten.add``), used by :mod:`dnnfusion.frontends.fx`.

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
import operator
from typing import Any, Callable

import numpy as np
import torch

from dnnfusion import _core
from dnnfusion.ecg import numpy_dtype
from dnnfusion.frontends.builder import FOLD_MAX_ELEMENTS
from dnnfusion.frontends.fx import _DTYPES, ecg_dtype

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
_ONNX = {"f32": 1, "u8": 2, "i8": 3, "u16": 4, "i16": 5, "i32": 6, "i64": 7, "bool": 9,
         "f16": 10, "f64": 11, "u32": 12, "u64": 13}
_TORCH = {ecg: getattr(torch, name) for name, ecg in _DTYPES.items()}
_INT64_MIN = -(2 ** 63)


def _x(a: dict) -> Any:
    return a["self"] if "self" in a else a["input"]


def _rank(v: Any) -> int:
    return len(v.shape)


def _is_float(dt: str) -> bool:
    return dt in ("f16", "f32", "f64")


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
    return v if v.dtype == dt else cx.op("Cast", [v], {"to": _ONNX[dt]})


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
# Elementwise
# ---------------------------------------------------------------------------------------------
def _unary(op: str, **attrs: Any) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        return cx.op(op, [_cast(cx, _x(a), _out_dtype(cx))], attrs)
    return conv


for _packet, _op in [(aten.relu, "Relu"), (aten.sigmoid, "Sigmoid"), (aten.tanh, "Tanh"),
                     (aten.erf, "Erf"), (aten.exp, "Exp"), (aten.log, "Log"),
                     (aten.sqrt, "Sqrt"), (aten.reciprocal, "Reciprocal"), (aten.neg, "Neg"),
                     (aten.abs, "Abs"), (aten.floor, "Floor"), (aten.ceil, "Ceil"),
                     (aten.sign, "Sign"), (aten.sgn, "Sign"), (aten.sin, "Sin"),
                     (aten.cos, "Cos"), (aten.hardswish, "HardSwish"), (aten.mish, "Mish")]:
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


# On bool tensors torch's arithmetic is logic.
_BOOL_OP = {"Mul": "And", "Add": "Or", "Max": "Or", "Min": "And"}


def _binary(op: str) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        dt = _out_dtype(cx)
        return cx.op(_BOOL_OP.get(op, op) if dt == "bool" else op,
                     [_operand(cx, a["self"], dt), _operand(cx, a["other"], dt)])
    return conv


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
        if bitwise and _out_dtype(cx) != "bool":
            raise cx.fail("bitwise operations on integer tensors are not supported")
        return cx.op(op, [_operand(cx, a["self"], "bool"), _operand(cx, a["other"], "bool")])
    return conv


TABLE[aten.logical_and] = _logical("And", False)
TABLE[aten.logical_or] = _logical("Or", False)
TABLE[aten.logical_xor] = _logical("Xor", False)
TABLE[aten.bitwise_and] = _logical("And", True)
TABLE[aten.bitwise_or] = _logical("Or", True)
TABLE[aten.bitwise_xor] = _logical("Xor", True)


@_reg(aten.logical_not, aten.bitwise_not)
def _not(cx, a):
    x = _x(a)
    if cx.node.target.overloadpacket is aten.bitwise_not and x.dtype != "bool":
        raise cx.fail("bitwise operations on integer tensors are not supported")
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


# ---------------------------------------------------------------------------------------------
# Linear algebra, convolution, normalization
# ---------------------------------------------------------------------------------------------
@_reg(aten.mm, aten.bmm, aten.matmul, aten.dot, aten.mv)
def _matmul(cx, a):
    return cx.op("MatMul", [_x(a), a.get("other", a.get("mat2", a.get("tensor", a.get("vec"))))])


@_reg(aten.linear)
def _linear(cx, a):
    x, w, b = a["input"], a["weight"], a["bias"]
    if _rank(w) != 2:
        raise cx.fail(f"a weight of rank {_rank(w)} is not supported")
    if _rank(x) == 2:
        return cx.op("Gemm", [x, w] + ([b] if b is not None else []), {"transB": 1})
    y = cx.op("MatMul", [x, cx.op("Transpose", [w], {"perm": [1, 0]})])
    return y if b is None else cx.op("Add", [y, b])


@_reg(aten.addmm)
def _addmm(cx, a):
    alpha, beta = float(a["alpha"]), float(a["beta"])
    inputs = [a["mat1"], a["mat2"]] + ([a["self"]] if beta != 0 else [])
    attrs = {"alpha": alpha} if alpha != 1.0 else {}
    if beta not in (0.0, 1.0):
        attrs["beta"] = beta
    return cx.op("Gemm", inputs, attrs)


@_reg(aten.baddbmm)
def _baddbmm(cx, a):
    dt = _out_dtype(cx)
    y = cx.op("MatMul", [a["batch1"], a["batch2"]])
    if a["alpha"] != 1:
        y = cx.op("Mul", [y, _scalar(cx, a["alpha"], dt)])
    if a["beta"] == 0:
        return y
    c = a["self"] if a["beta"] == 1 else cx.op("Mul", [a["self"], _scalar(cx, a["beta"], dt)])
    return cx.op("Add", [y, c])


@_reg(aten.convolution)
def _convolution(cx, a):
    x, w, b = a["input"], a["weight"], a["bias"]
    nd = _rank(w) - 2
    pads = _ntuple(a["padding"], nd)
    attrs = {"kernel_shape": list(w.shape[2:]), "strides": _ntuple(a["stride"], nd),
             "pads": pads + pads, "dilations": _ntuple(a["dilation"], nd),
             "group": int(a["groups"])}
    op = "Conv"
    if a["transposed"]:
        op = "ConvTranspose"
        if any(_ntuple(a["output_padding"], nd)):
            attrs["output_padding"] = _ntuple(a["output_padding"], nd)
    return cx.op(op, [x, w] + ([b] if b is not None else []), attrs)


def _ones_or(cx: Any, v: Any, n: int, dt: str, fill: float, tag: str) -> Any:
    return v if v is not None else cx.const(np.full([n], fill, dtype=numpy_dtype(dt)), tag)


def _batch_norm(cx: Any, a: dict) -> Any:
    name = cx.node.target.overloadpacket.__name__
    training = a.get("training", False) or name in ("_native_batch_norm_legit_functional",)
    if training or a.get("running_mean") is None:
        raise cx.fail("batch normalization with batch statistics (training mode) is not "
                      "supported; call model.eval() first")
    x = a["input"]
    c = x.shape[1]
    y = cx.op("BatchNormalization", [
        x, _ones_or(cx, a["weight"], c, x.dtype, 1.0, "scale"),
        _ones_or(cx, a["bias"], c, x.dtype, 0.0, "bias"), a["running_mean"], a["running_var"]],
        {"epsilon": float(a["eps"])})
    return y if name == "batch_norm" else [y, None, None]


for _packet in (aten._native_batch_norm_legit_no_training, aten._native_batch_norm_legit,
                aten.native_batch_norm, aten._native_batch_norm_legit_functional,
                aten.batch_norm):
    TABLE[_packet] = _batch_norm


@_reg(aten.native_layer_norm, aten.layer_norm)
def _layer_norm(cx, a):
    x, shape = a["input"], list(a["normalized_shape"])
    scale = a["weight"]
    if scale is None:
        scale = cx.const(np.ones(shape, dtype=numpy_dtype(x.dtype)), "scale")
    inputs = [x, scale] + ([a["bias"]] if a["bias"] is not None else [])
    attrs = {"axis": _rank(x) - len(shape), "epsilon": float(a["eps"])}
    if cx.node.target.overloadpacket is aten.layer_norm:
        return cx.op("LayerNormalization", inputs, attrs)
    if _users_of_outputs(cx) - {0}:
        return cx.op("LayerNormalization", inputs, attrs, num_outputs=3)
    return [cx.op("LayerNormalization", inputs, attrs), None, None]


@_reg(aten.native_group_norm)
def _group_norm(cx, a):
    # ONNX's own decomposition: InstanceNormalization over [N, G, -1], then the affine map.
    x, g = a["input"], int(a["group"])
    n, c = x.shape[0], x.shape[1]
    dt = x.dtype
    y = cx.op("Reshape", [x, _i64(cx, [n, g, -1])])
    y = cx.op("InstanceNormalization", [y, cx.const(np.ones([g], numpy_dtype(dt)), "ones"),
                                        cx.const(np.zeros([g], numpy_dtype(dt)), "zeros")],
              {"epsilon": float(a["eps"])})
    y = cx.op("Reshape", [y, _i64(cx, list(x.shape))])
    per_channel = _i64(cx, [c] + [1] * (_rank(x) - 2), "channel_shape")
    if a["weight"] is not None:
        y = cx.op("Mul", [y, cx.op("Reshape", [a["weight"], per_channel])])
    if a["bias"] is not None:
        y = cx.op("Add", [y, cx.op("Reshape", [a["bias"], per_channel])])
    return [y, None, None]


@_reg(aten.instance_norm)
def _instance_norm(cx, a):
    x = a["input"]
    c = x.shape[1]
    scale = _ones_or(cx, a["weight"], c, x.dtype, 1.0, "scale")
    bias = _ones_or(cx, a["bias"], c, x.dtype, 0.0, "bias")
    if a["use_input_stats"]:
        return cx.op("InstanceNormalization", [x, scale, bias], {"epsilon": float(a["eps"])})
    return cx.op("BatchNormalization", [x, scale, bias, a["running_mean"], a["running_var"]],
                 {"epsilon": float(a["eps"])})


def _repeat_heads(cx: Any, t: Any, n: int) -> Any:
    """[..., H, S, E] -> [..., H*n, S, E], each head repeated n times (repeat_interleave)."""
    shape = list(t.shape)
    t = cx.op("Unsqueeze", [t, _i64(cx, [len(shape) - 2], "axes")])
    t = cx.op("Expand", [t, _i64(cx, shape[:-2] + [n] + shape[-2:], "shape")])
    return cx.op("Reshape", [t, _i64(cx, shape[:-3] + [shape[-3] * n] + shape[-2:], "shape")])


@_reg(aten.scaled_dot_product_attention)
def _sdpa(cx, a):
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    if a["dropout_p"]:
        raise cx.fail("attention dropout is random; pass dropout_p=0 in eval mode")
    dt, r = q.dtype, _rank(k)
    if a.get("enable_gqa") and q.shape[-3] != k.shape[-3]:
        k, v = (_repeat_heads(cx, t, q.shape[-3] // t.shape[-3]) for t in (k, v))
    scale = a["scale"] if a["scale"] is not None else 1.0 / math.sqrt(q.shape[-1])
    perm = list(range(r - 2)) + [r - 1, r - 2]
    s = cx.op("MatMul", [q, cx.op("Transpose", [k], {"perm": perm})])
    s = cx.op("Mul", [s, _scalar(cx, scale, dt, "scale")])
    ninf = None
    if a["is_causal"]:
        causal = np.tril(np.ones((q.shape[-2], k.shape[-2]), dtype=bool))
        ninf = _scalar(cx, -np.inf, dt, "ninf")
        s = cx.op("Where", [cx.const(causal, "causal"), s, ninf])
    if mask is not None:
        if mask.dtype == "bool":
            if ninf is None:
                ninf = _scalar(cx, -np.inf, dt, "ninf")
            s = cx.op("Where", [mask, s, ninf])
        else:
            s = cx.op("Add", [s, _cast(cx, mask, dt)])
    return cx.op("MatMul", [cx.op("Softmax", [s], {"axis": -1}), v])


# ---------------------------------------------------------------------------------------------
# Pooling and resizing
# ---------------------------------------------------------------------------------------------
def _pool_attrs(a: dict, nd: int) -> dict:
    k = _ntuple(a["kernel_size"], nd)
    stride = _ntuple(a["stride"], nd) if a["stride"] not in (None, []) else k
    pads = _ntuple(a["padding"], nd)
    return {"kernel_shape": k, "strides": stride, "pads": pads + pads,
            "ceil_mode": int(bool(a["ceil_mode"]))}


def _batched(cx: Any, x: Any, nd: int, op: str, attrs: dict | None = None) -> Any:
    """``op`` on an N x C x spatial input; an unbatched C x spatial one gets a batch of 1."""
    if _rank(x) == nd + 2:
        return cx.op(op, [x], attrs)
    if _rank(x) != nd + 1:
        raise cx.fail(f"an input of rank {_rank(x)} has no {nd} spatial dims")
    axes = _i64(cx, [0], "batch_axis")
    y = cx.op(op, [cx.op("Unsqueeze", [x, axes])], attrs)
    return cx.op("Squeeze", [y, axes])


@_reg(aten.max_pool2d_with_indices, aten.max_pool3d_with_indices, aten.max_pool2d,
      aten.max_pool3d, aten.max_pool1d)
def _max_pool(cx, a):
    x = a["self"]
    nd = int(cx.node.target.overloadpacket.__name__[8])
    attrs = _pool_attrs(a, nd)
    attrs["dilations"] = _ntuple(a["dilation"], nd)
    if "with_indices" not in cx.node.target.overloadpacket.__name__:
        return _batched(cx, x, nd, "MaxPool", attrs)
    if 1 not in _users_of_outputs(cx) or _rank(x) != nd + 2:
        return [_batched(cx, x, nd, "MaxPool", attrs), None]
    # ONNX's indices count over N*C*spatial, PyTorch's within each plane
    y, idx = cx.op("MaxPool", [x], attrs, num_outputs=2)
    plane = _i64(cx, int(np.prod(x.shape[2:])), "plane")
    return [y, cx.op("Mod", [idx, plane], {"fmod": 0})]


@_reg(aten.avg_pool2d, aten.avg_pool3d, aten.avg_pool1d)
def _avg_pool(cx, a):
    if a.get("divisor_override") is not None:
        raise cx.fail("avg_pool with divisor_override is not supported")
    x = a["self"]
    nd = int(cx.node.target.overloadpacket.__name__[8])
    attrs = _pool_attrs(a, nd)
    attrs["count_include_pad"] = int(bool(a["count_include_pad"]))
    return _batched(cx, x, nd, "AveragePool", attrs)


@_reg(aten._adaptive_avg_pool2d, aten._adaptive_avg_pool3d, aten.adaptive_avg_pool1d,
      aten.adaptive_avg_pool2d, aten.adaptive_avg_pool3d,
      aten.adaptive_max_pool2d, aten.adaptive_max_pool3d, aten.adaptive_max_pool1d)
def _adaptive_pool(cx, a):
    x = a["self"]
    name = cx.node.target.overloadpacket.__name__
    is_max = "max" in name
    out = list(a["output_size"])
    nd = len(out)
    size = list(x.shape[-nd:])
    if all(o == 1 for o in out):
        y = _batched(cx, x, nd, "GlobalMaxPool" if is_max else "GlobalAveragePool")
    elif all(o > 0 and s % o == 0 for s, o in zip(size, out)):
        k = [s // o for s, o in zip(size, out)]
        y = _batched(cx, x, nd, "MaxPool" if is_max else "AveragePool",
                     {"kernel_shape": k, "strides": k})
    else:
        raise cx.fail(f"adaptive pooling from {size} to {out} needs windows of different "
                      "sizes, which dnnfusion does not support")
    return [y, None] if is_max else y


def _upsample(mode: str, nearest_mode: str | None = None) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        x = _x(a)
        nd = _rank(x) - 2
        align = bool(a.get("align_corners"))
        scales = a.get("scale_factors")
        if scales is None:
            s = [a.get(k) for k in ("scales_d", "scales_h", "scales_w", "scales") if k in a]
            scales = s if s and all(v is not None for v in s) else None
        attrs: dict[str, Any] = {"mode": mode}
        if mode == "nearest":
            exact = nearest_mode == "exact"
            attrs["coordinate_transformation_mode"] = "half_pixel" if exact else "asymmetric"
            attrs["nearest_mode"] = "round_prefer_ceil" if exact else "floor"
        else:
            attrs["coordinate_transformation_mode"] = "align_corners" if align else "half_pixel"
            if mode == "cubic":
                attrs["cubic_coeff_a"] = -0.75
        if scales is not None and not align:
            # torch then maps coordinates with 1/scale, as ONNX does with a scales input
            sc = cx.const(np.asarray([1.0, 1.0] + _ntuple(list(scales), nd), np.float32),
                          "scales")
            return cx.op("Resize", [x, None, sc], attrs)
        sizes = _i64(cx, _out_shape(cx), "sizes")
        return cx.op("Resize", [x, None, None, sizes], attrs)
    return conv


for _packet, _mode, _nm in [
        (aten.upsample_nearest1d, "nearest", None), (aten.upsample_nearest2d, "nearest", None),
        (aten.upsample_nearest3d, "nearest", None),
        (aten._upsample_nearest_exact1d, "nearest", "exact"),
        (aten._upsample_nearest_exact2d, "nearest", "exact"),
        (aten._upsample_nearest_exact3d, "nearest", "exact"),
        (aten.upsample_linear1d, "linear", None), (aten.upsample_bilinear2d, "linear", None),
        (aten.upsample_trilinear3d, "linear", None), (aten.upsample_bicubic2d, "cubic", None)]:
    TABLE[_packet] = _upsample(_mode, _nm)


@_reg(aten.pixel_shuffle)
def _pixel_shuffle(cx, a):
    x = a["self"]
    if _rank(x) != 4:
        raise cx.fail(f"pixel_shuffle of a rank-{_rank(x)} input is not supported")
    return cx.op("DepthToSpace", [x], {"blocksize": int(a["upscale_factor"]), "mode": "CRD"})


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------
def _reduce(op: str) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        x = _cast(cx, a["self"], _out_dtype(cx))
        axes = _dims(x, a.get("dim"))
        if not axes:
            return x
        return cx.op(op, [x, _i64(cx, axes, "axes")], {"keepdims": int(bool(a.get("keepdim")))})
    return conv


TABLE[aten.mean] = _reduce("ReduceMean")
TABLE[aten.sum] = _reduce("ReduceSum")
TABLE[aten.amax] = _reduce("ReduceMax")
TABLE[aten.amin] = _reduce("ReduceMin")
TABLE[aten.prod] = _reduce("ReduceProd")


@_reg(aten.max, aten.min)
def _max_min(cx, a):
    is_max = cx.node.target.overloadpacket is aten.max
    x = a["self"]
    if "other" in a:  # max.other: elementwise
        return _binary("Max" if is_max else "Min")(cx, a)
    if "dim" not in a:  # max.default: the whole tensor
        return _reduce("ReduceMax" if is_max else "ReduceMin")(cx, {"self": x, "dim": None})
    axis, keep = a["dim"] % max(_rank(x), 1), int(bool(a["keepdim"]))
    vals = cx.op("ReduceMax" if is_max else "ReduceMin", [x, _i64(cx, [axis], "axes")],
                 {"keepdims": keep})
    idx = cx.op("ArgMax" if is_max else "ArgMin", [x], {"axis": axis, "keepdims": keep})
    return [vals, idx]


@_reg(aten.argmax, aten.argmin)
def _argmax(cx, a):
    op = "ArgMax" if cx.node.target.overloadpacket is aten.argmax else "ArgMin"
    x, dim, keep = a["self"], a["dim"], int(bool(a["keepdim"]))
    if dim is None:
        y = cx.op(op, [cx.op("Reshape", [x, _i64(cx, [-1])])], {"axis": 0, "keepdims": 0})
        if keep:
            y = cx.op("Reshape", [y, _i64(cx, [1] * _rank(x))])
        return y
    return cx.op(op, [x], {"axis": dim % max(_rank(x), 1), "keepdims": keep})


@_reg(aten.any, aten.all)
def _any_all(cx, a):
    x = cx.op("Cast", [_cast(cx, a["self"], "bool")], {"to": _ONNX["i32"]})
    op = "ReduceMax" if cx.node.target.overloadpacket is aten.any else "ReduceMin"
    axes = _dims(x, a.get("dim"))
    if axes:
        x = cx.op(op, [x, _i64(cx, axes, "axes")], {"keepdims": int(bool(a.get("keepdim")))})
    return _cast(cx, x, "bool")


def _variance(cx: Any, a: dict, keepdim: bool) -> Any:
    x = _x(a)
    axes = _dims(x, a.get("dim"))
    corr = a.get("correction")
    corr = 1 if corr is None else corr
    n = int(np.prod([x.shape[d] for d in axes]))
    ax = _i64(cx, axes, "axes")
    d = cx.op("Sub", [x, cx.op("ReduceMean", [x, ax], {"keepdims": 1})])
    s = cx.op("ReduceSum", [cx.op("Mul", [d, d]), ax], {"keepdims": int(keepdim)})
    return cx.op("Div", [s, _scalar(cx, max(n - corr, 0), x.dtype, "count")])


@_reg(aten.var, aten.std)
def _var_std(cx, a):
    v = _variance(cx, a, bool(a.get("keepdim")))
    return cx.op("Sqrt", [v]) if cx.node.target.overloadpacket is aten.std else v


@_reg(aten.var_mean)
def _var_mean(cx, a):
    x, keep = _x(a), bool(a.get("keepdim"))
    mean = cx.op("ReduceMean", [x, _i64(cx, _dims(x, a.get("dim")), "axes")],
                 {"keepdims": int(keep)})
    return [_variance(cx, a, keep), mean]


@_reg(aten.linalg_vector_norm)
def _vector_norm(cx, a):
    x = _cast(cx, a["self"], _out_dtype(cx))
    p, axes = float(a["ord"]), _i64(cx, _dims(x, a["dim"]), "axes")
    keep = {"keepdims": int(bool(a["keepdim"]))}
    if p == 2:
        return cx.op("ReduceL2", [x, axes], keep)
    if p == 1:
        return cx.op("ReduceSum", [cx.op("Abs", [x]), axes], keep)
    if p == math.inf or p == -math.inf:
        return cx.op("ReduceMax" if p > 0 else "ReduceMin", [cx.op("Abs", [x]), axes], keep)
    if p == 0:
        nz = _cast(cx, cx.op("Not", [cx.op("Equal", [x, _scalar(cx, 0, x.dtype)])]), x.dtype)
        return cx.op("ReduceSum", [nz, axes], keep)
    powed = cx.op("Pow", [cx.op("Abs", [x]), _scalar(cx, p, x.dtype, "ord")])
    return cx.op("Pow", [cx.op("ReduceSum", [powed, axes], keep),
                         _scalar(cx, 1.0 / p, x.dtype, "inv_ord")])


@_reg(aten.cumsum)
def _cumsum(cx, a):
    x = _cast(cx, a["self"], _out_dtype(cx))
    return cx.op("CumSum", [x, _i64(cx, a["dim"] % max(_rank(x), 1), "axis")])


@_reg(aten._softmax, aten.softmax, aten._log_softmax, aten.log_softmax)
def _softmax(cx, a):
    op = "LogSoftmax" if "log" in cx.node.target.overloadpacket.__name__ else "Softmax"
    return cx.op(op, [_cast(cx, a["self"], _out_dtype(cx))], {"axis": int(a["dim"])})


@_reg(aten.topk, aten.sort)
def _topk(cx, a):
    x = a["self"]
    axis = a["dim"] % max(_rank(x), 1)
    if cx.node.target.overloadpacket is aten.topk:
        k, attrs = a["k"], {"largest": int(bool(a["largest"])), "sorted": int(bool(a["sorted"]))}
    else:
        k, attrs = x.shape[axis], {"largest": int(bool(a["descending"])), "sorted": 1}
    attrs["axis"] = axis
    return cx.op("TopK", [x, _i64(cx, [k], "k")], attrs, num_outputs=2)


# ---------------------------------------------------------------------------------------------
# Shapes, layout, indexing
# ---------------------------------------------------------------------------------------------
@_reg(aten.view, aten._unsafe_view, aten.reshape, aten.view_copy, aten.flatten,
      aten.unflatten, aten._reshape_alias)
def _reshape(cx, a):
    x, shape = _x(a), _out_shape(cx)
    if list(x.shape) == shape:
        return x
    return cx.op("Reshape", [x, _i64(cx, shape, "shape")], {"allowzero": 1} if 0 in shape else {})


@_reg(aten.permute, aten.permute_copy)
def _permute(cx, a):
    x = a["self"]
    perm = [d % _rank(x) for d in a["dims"]]
    return x if perm == sorted(perm) else cx.op("Transpose", [x], {"perm": perm})


@_reg(aten.t, aten.transpose, aten.transpose_copy)
def _transpose(cx, a):
    x = a["self"]
    r = _rank(x)
    if r < 2:
        return x
    d0, d1 = (0, 1) if "dim0" not in a else (a["dim0"] % r, a["dim1"] % r)
    perm = list(range(r))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return x if d0 == d1 else cx.op("Transpose", [x], {"perm": perm})


@_reg(aten.expand, aten.expand_copy)
def _expand(cx, a):
    x, shape = a["self"], _out_shape(cx)
    return x if list(x.shape) == shape else cx.op("Expand", [x, _i64(cx, shape, "shape")])


@_reg(aten.repeat)
def _repeat(cx, a):
    x, reps = a["self"], list(a["repeats"])
    if len(reps) > _rank(x):
        x = cx.op("Reshape", [x, _i64(cx, [1] * (len(reps) - _rank(x)) + list(x.shape))])
    return cx.op("Tile", [x, _i64(cx, reps, "repeats")])


@_reg(aten.cat, aten.concat)
def _cat(cx, a):
    dt, shape = _out_dtype(cx), _out_shape(cx)
    # torch skips legacy empty 1-D tensors in cat
    xs = [_cast(cx, t, dt) for t in a["tensors"] if not (list(t.shape) == [0] and len(shape) > 1)]
    if len(xs) == 1:
        return xs[0]
    return cx.op("Concat", xs, {"axis": a["dim"] % len(shape)})


@_reg(aten.split_with_sizes, aten.split, aten.unsafe_split, aten.split_with_sizes_copy,
      aten.unbind)
def _split(cx, a):
    x = a["self"]
    axis = a["dim"] % _rank(x)
    size = x.shape[axis]
    name = cx.node.target.overloadpacket.__name__
    if name == "unbind":
        sizes = [1] * size
    elif "split_sizes" in a:
        sizes = list(a["split_sizes"])
    else:
        step = int(a["split_size"])
        sizes = [min(step, size - i) for i in range(0, size, step)] or [0]
    outs = cx.op("Split", [x, _i64(cx, sizes, "split")], {"axis": axis},
                 num_outputs=len(sizes)) if len(sizes) > 1 else [x]
    if name == "unbind":
        axes = _i64(cx, [axis], "axes")
        outs = [cx.op("Squeeze", [o, axes]) for o in outs]
    return list(outs)


@_reg(aten.slice, aten.slice_copy)
def _slice(cx, a):
    x = a["self"]
    axis = a["dim"] % _rank(x)
    size = x.shape[axis]
    start, end, step = slice(a["start"], a["end"], a["step"] or 1).indices(size)
    end = max(end, start)
    if (start, end, step) == (0, size, 1):
        return x
    return cx.op("Slice", [x, _i64(cx, [start], "starts"), _i64(cx, [end], "ends"),
                           _i64(cx, [axis], "axes"), _i64(cx, [step], "steps")])


@_reg(aten.select, aten.select_copy)
def _select(cx, a):
    x = a["self"]
    axis = a["dim"] % _rank(x)
    idx = a["index"] % x.shape[axis] if x.shape[axis] else a["index"]
    return cx.op("Gather", [x, _i64(cx, idx, "index")], {"axis": axis})


@_reg(aten.index_select)
def _index_select(cx, a):
    x, idx = a["self"], _cast(cx, a["index"], "i64")
    if _rank(idx) == 0:
        idx = cx.op("Reshape", [idx, _i64(cx, [1])])
    return cx.op("Gather", [x, idx], {"axis": a["dim"] % max(_rank(x), 1)})


@_reg(aten.embedding)
def _embedding(cx, a):
    return cx.op("Gather", [a["weight"], _cast(cx, a["indices"], "i64")], {"axis": 0})


@_reg(aten.gather)
def _gather(cx, a):
    x, idx = a["self"], _cast(cx, a["index"], "i64")
    axis = a["dim"] % max(_rank(x), 1)
    # torch lets the index be smaller than the input on the other axes: crop the input
    crop = [d for d in range(_rank(x)) if d != axis and idx.shape[d] != x.shape[d]]
    if crop:
        x = cx.op("Slice", [x, _i64(cx, [0] * len(crop), "starts"),
                            _i64(cx, [idx.shape[d] for d in crop], "ends"),
                            _i64(cx, crop, "axes")])
    return cx.op("GatherElements", [x, idx], {"axis": axis})


@_reg(aten.index)
def _index(cx, a):
    """Advanced indexing with integer tensors: one indexed dim is a Gather; several are
    linearized (row-major) into one Gather over the merged dims."""
    x = a["self"]
    indices = list(a["indices"])
    pos = [i for i, t in enumerate(indices) if t is not None]
    if not pos:
        return x
    if any(indices[p].dtype == "bool" for p in pos):
        raise cx.fail("indexing with a boolean mask has a data-dependent shape, which "
                      "dnnfusion does not support")
    idx = [_cast(cx, indices[p], "i64") for p in pos]
    if len(pos) == 1:
        return cx.op("Gather", [x, idx[0]], {"axis": pos[0]})
    r = _rank(x)
    if pos != list(range(pos[0], pos[-1] + 1)):
        # Separated index tensors: numpy puts the indexed dims first.
        perm = pos + [d for d in range(r) if d not in pos]
        x = cx.op("Transpose", [x], {"perm": perm})
        pos = list(range(len(pos)))
    shape = list(x.shape)
    sizes = [shape[p] for p in pos]
    flat = None
    for j, t in enumerate(idx):
        if not (t.is_constant and np.all(np.asarray(t.numpy()) >= 0)):
            t = cx.op("Mod", [t, _i64(cx, sizes[j], "dim")], {"fmod": 0})  # -1 -> size-1
        stride = int(np.prod(sizes[j + 1:]))
        if stride != 1:
            t = cx.op("Mul", [t, _i64(cx, stride, "stride")])
        flat = t if flat is None else cx.op("Add", [flat, t])
    merged = shape[:pos[0]] + [int(np.prod(sizes))] + shape[pos[-1] + 1:]
    x = cx.op("Reshape", [x, _i64(cx, merged, "shape")])
    return cx.op("Gather", [x, flat], {"axis": pos[0]})


@_reg(aten.unsqueeze, aten.unsqueeze_copy)
def _unsqueeze(cx, a):
    x = a["self"]
    return cx.op("Unsqueeze", [x, _i64(cx, [a["dim"] % (_rank(x) + 1)], "axes")])


@_reg(aten.squeeze, aten.squeeze_copy)
def _squeeze(cx, a):
    x = a["self"]
    r = _rank(x)
    dims = a.get("dim", None)
    cand = range(r) if dims is None else ([dims] if isinstance(dims, int) else dims)
    axes = sorted({d % r for d in cand if r and x.shape[d % r] == 1})
    return x if not axes else cx.op("Squeeze", [x, _i64(cx, axes, "axes")])


def _torch_pads(cx: Any, x: Any, pad: list[int]) -> Any:
    """torch's (last-dim-first) begin/end pairs as ONNX pads over every dim."""
    r = _rank(x)
    begin, end = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        begin[r - 1 - i], end[r - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return _i64(cx, begin + end, "pads")


@_reg(aten.constant_pad_nd)
def _constant_pad(cx, a):
    x = a["self"]
    if not any(a["pad"]):
        return x
    return cx.op("Pad", [x, _torch_pads(cx, x, list(a["pad"])),
                         _scalar(cx, a["value"], x.dtype, "value")], {"mode": "constant"})


def _mode_pad(mode: str) -> Callable:
    def conv(cx: Any, a: dict) -> Any:
        x = a["self"]
        return cx.op("Pad", [x, _torch_pads(cx, x, list(a["padding"]))], {"mode": mode})
    return conv


for _n in (1, 2, 3):
    TABLE[getattr(aten, f"reflection_pad{_n}d")] = _mode_pad("reflect")
    TABLE[getattr(aten, f"replication_pad{_n}d")] = _mode_pad("edge")


@_reg(aten.flip)
def _flip(cx, a):
    x = a["self"]
    axes = sorted({d % _rank(x) for d in a["dims"]})
    if not axes:
        return x
    n = len(axes)
    return cx.op("Slice", [x, _i64(cx, [-1] * n, "starts"), _i64(cx, [_INT64_MIN] * n, "ends"),
                           _i64(cx, axes, "axes"), _i64(cx, [-1] * n, "steps")])


@_reg(aten.triu, aten.tril)
def _trilu(cx, a):
    upper = int(cx.node.target.overloadpacket is aten.triu)
    return cx.op("Trilu", [a["self"], _i64(cx, int(a["diagonal"]), "k")], {"upper": upper})


# ---------------------------------------------------------------------------------------------
# Tensors built from static arguments: constants
# ---------------------------------------------------------------------------------------------
_FILL = {"zeros": 0, "zeros_like": 0, "new_zeros": 0, "empty": 0, "empty_like": 0,
         "new_empty": 0, "empty_strided": 0, "new_empty_strided": 0, "ones": 1, "ones_like": 1,
         "new_ones": 1}


def _filled(cx: Any, value: Any) -> Any:
    dt, shape = _out_dtype(cx), _out_shape(cx)
    if int(np.prod(shape)) <= FOLD_MAX_ELEMENTS:
        return cx.const(np.full(shape, value, dtype=numpy_dtype(dt)), "value")
    return cx.op("Expand", [_scalar(cx, value, dt, "value"), _i64(cx, shape, "shape")])


@_reg(aten.full, aten.full_like, aten.new_full, aten.zeros, aten.zeros_like, aten.new_zeros,
      aten.ones, aten.ones_like, aten.new_ones, aten.empty, aten.empty_like, aten.new_empty,
      aten.empty_strided, aten.new_empty_strided, aten.scalar_tensor, aten.fill)
def _full(cx, a):
    name = cx.node.target.overloadpacket.__name__
    if name in _FILL:
        value = _FILL[name]
    elif name == "scalar_tensor":
        value = a["s"]
    else:
        value = a["fill_value"] if "fill_value" in a else a["value"]
    if isinstance(value, Value):  # fill.Tensor with a computed value
        return cx.op("Expand", [_cast(cx, value, _out_dtype(cx)),
                                _i64(cx, _out_shape(cx), "shape")])
    return _filled(cx, value)


@_reg(aten.arange)
def _arange(cx, a):
    kwargs = dict(cx.node.kwargs)
    kwargs["device"] = "cpu"
    t = cx.node.target(*cx.node.args, **kwargs)
    return cx.const(t.numpy(), "value")
