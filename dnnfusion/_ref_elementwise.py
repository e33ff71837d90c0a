"""Elementwise kernels of the NumPy reference interpreter (private to
:mod:`dnnfusion.reference`): the unary operators (activations, math functions, Cast, Clip,
Dropout), the binary ones (arithmetic, comparisons), the variadic Max/Min/Sum/Mean, Where and
Trilu. Signatures and conventions as described in :mod:`dnnfusion.reference`; floating-point
arithmetic runs in float64 and the result is cast back to the input's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import reduce
from typing import Any

import numpy as np

from dnnfusion.dtypes import is_float_dtype

from ._ref_nn import unsupported
from ._ref_shape import _opt, _scalar

Attrs = dict[str, Any]
Inputs = list["np.ndarray | None"]
Kernel = Callable[[Inputs, Attrs], list[np.ndarray]]

# ONNX TensorProto data-type codes of the dtypes the ECG supports.
ONNX_DTYPES: dict[int, np.dtype] = {
    code: np.dtype(t) for code, t in {
        1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
        7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
    }.items()
}
try:
    import ml_dtypes as _ml_dtypes

    ONNX_DTYPES[16] = np.dtype(_ml_dtypes.bfloat16)
    # the narrow integers: a cast to them is ml_dtypes' (in range: truncation toward zero, as
    # to int8; out of range, which ONNX leaves undefined, 0, as the ONNX reference gives)
    ONNX_DTYPES.update({21: np.dtype(_ml_dtypes.uint4), 22: np.dtype(_ml_dtypes.int4),
                        25: np.dtype(_ml_dtypes.uint2), 26: np.dtype(_ml_dtypes.int2),
                        17: np.dtype(_ml_dtypes.float8_e4m3fn), 18: np.dtype(_ml_dtypes.float8_e4m3fnuz),
                        19: np.dtype(_ml_dtypes.float8_e5m2), 20: np.dtype(_ml_dtypes.float8_e5m2fnuz),
                        23: np.dtype(_ml_dtypes.float4_e2m1fn), 24: np.dtype(_ml_dtypes.float8_e8m0fnu),
                        27: np.dtype(_ml_dtypes.float6_e2m3fn), 28: np.dtype(_ml_dtypes.float6_e3m2fn)})
except ImportError:
    pass
_FLOAT8_CODES = (17, 18, 19, 20)


# --------------------------------------------------------------------------------------------
# Small helpers (reference.py computes with them too)
# --------------------------------------------------------------------------------------------
def _is_float(x: np.ndarray) -> bool:
    return is_float_dtype(x.dtype)


def _wide(x: np.ndarray) -> np.ndarray:
    """x in the precision used for computing: float64 for floats, unchanged otherwise."""
    return x.astype(np.float64, copy=False) if _is_float(x) else x


# --------------------------------------------------------------------------------------------
# Elementwise unary
# --------------------------------------------------------------------------------------------
_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """Correctly rounded erf in float64 (math.erf, vectorised)."""
    return np.asarray(_erf(x), dtype=np.float64).reshape(np.shape(x))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))


def _gelu(x: np.ndarray, a: Attrs) -> np.ndarray:
    approximate = a.get("approximate", "none")
    if approximate == "none":
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    raise unsupported("Gelu", "approximate", approximate)


_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875

# fn(x, attrs) on float64 arrays (or on the raw integer array for the ops that accept ints).
_UNARY: dict[str, Callable[[np.ndarray, Attrs], np.ndarray]] = {
    "Relu": lambda x, a: np.maximum(x, 0),
    "LeakyRelu": lambda x, a: np.where(x >= 0, x, a.get("alpha", 0.01) * x),
    "Elu": lambda x, a: np.where(x > 0, x, a.get("alpha", 1.0) * np.expm1(x)),
    "Selu": lambda x, a: a.get("gamma", _SELU_GAMMA) * np.where(
        x > 0, x, a.get("alpha", _SELU_ALPHA) * np.expm1(x)),
    "Sigmoid": lambda x, a: _sigmoid(x),
    "HardSigmoid": lambda x, a: np.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1),
    "HardSwish": lambda x, a: x * np.clip(x / 6.0 + 0.5, 0, 1),
    "Tanh": lambda x, a: np.tanh(x),
    "Softplus": lambda x, a: np.logaddexp(0.0, x),
    "Softsign": lambda x, a: x / (1.0 + np.abs(x)),
    "Mish": lambda x, a: x * np.tanh(np.logaddexp(0.0, x)),
    "Gelu": _gelu,
    "Erf": lambda x, a: erf(x),
    "Sqrt": lambda x, a: np.sqrt(x),
    "Reciprocal": lambda x, a: 1.0 / x,
    "Round": lambda x, a: np.round(x),  # half to even, like ONNX
    # attribute-free ones: NumPy's function of x
    **{op: (lambda f: lambda x, a: f(x))(f) for op, f in {
        "Exp": np.exp, "Log": np.log, "Neg": np.negative, "Abs": np.abs, "Floor": np.floor, "Ceil": np.ceil,
        "Sign": np.sign, "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
        "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh, "Acosh": np.arccosh,
        "Atanh": np.arctanh}.items()},
}


def _unary_kernel(fn: Callable[[np.ndarray, Attrs], np.ndarray]) -> Kernel:
    def kernel(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
        x = inputs[0]
        return [np.asarray(fn(_wide(x), attrs)).astype(x.dtype, copy=False)]
    return kernel


def _bit_cast(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """The bytes reinterpreted (little endian, as ONNX says and x86 and ARM are); a bool is
    whether its byte is nonzero."""
    to = int(attrs["to"])
    if to not in ONNX_DTYPES:
        raise unsupported("BitCast", "to", to)
    x = np.array(inputs[0], order="C")  # (ascontiguousarray would make a scalar 1-D)
    dt = np.dtype(ONNX_DTYPES[to])
    if dt == np.bool_:
        return [x.view(np.uint8) != 0]
    return [x.view(dt)]


def _cast(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    to = int(attrs["to"])
    if to not in ONNX_DTYPES:
        raise unsupported("Cast", "to", to)
    if to == 24:  # float8e8m0
        return [to_e8m0(inputs[0], bool(int(attrs.get("saturate", 1))), str(attrs.get("round_mode", "up")))]
    if to in _FLOAT8_CODES and int(attrs.get("saturate", 1)):  # to float8, saturating (ONNX's default)
        info = _ml_dtypes.finfo(ONNX_DTYPES[to])
        with np.errstate(invalid="ignore"):
            return [np.clip(inputs[0].astype(np.float32), float(info.min), float(info.max)).astype(ONNX_DTYPES[to])]
    with np.errstate(invalid="ignore", over="ignore"):
        return [inputs[0].astype(ONNX_DTYPES[to])]


def to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float8e8m0 (a biased power of two, 255 NaN) of float32 x, as ONNX's Cast defines it:
    the exponent of |x|; "up" adds one for any fraction, "nearest" for one of at least a half
    (for float32 subnormals: more than a half), "down" none; saturating keeps 254 (2^127), else
    it becomes NaN; NaN and infinities give NaN."""
    if round_mode not in ("up", "down", "nearest"):
        raise unsupported("Cast", "round_mode", round_mode)
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    e = ((bits >> 23) & 0xFF).astype(np.uint16)
    if round_mode == "up":
        inc = (bits & 0x7FFFFF) != 0
    elif round_mode == "nearest":
        half, rest = (bits & 0x400000) != 0, (bits & 0x3FFFFF) != 0
        inc = half & (rest | (e > 0))
    else:
        inc = np.zeros(e.shape, bool)
    if saturate:
        inc &= e != 0xFE
    out = np.where(e == 0xFF, 0xFF, e + inc).astype(np.uint8)
    return out.view(_ml_dtypes.float8_e8m0fnu)


def _clip(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, lo, hi = inputs[0], _opt(inputs, 1), _opt(inputs, 2)
    y = x
    if lo is not None and lo.size:
        y = np.maximum(y, lo.astype(x.dtype))
    if hi is not None and hi.size:
        y = np.minimum(y, hi.astype(x.dtype))  # min > max yields max, as ONNX specifies
    return [np.asarray(y, dtype=x.dtype)]


def _dropout(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, ratio, training = inputs[0], _opt(inputs, 1), _opt(inputs, 2)
    if training is not None and bool(_scalar(training)):
        if ratio is None or _scalar(ratio) != 0:  # default ratio is 0.5
            raise unsupported("Dropout", "training_mode", True)
    return [x, np.ones(x.shape, dtype=bool)]


# --------------------------------------------------------------------------------------------
# Elementwise binary and variadic
# --------------------------------------------------------------------------------------------
def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C semantics); x / 0 gives 0."""
    safe = np.where(b == 0, 1, b)
    q = a // safe
    if a.dtype.kind == "i":
        q = q + (((a % safe) != 0) & ((a < 0) != (safe < 0)))
    return np.where(b == 0, 0, q)


def _div(a: np.ndarray, b: np.ndarray, attrs: Attrs) -> np.ndarray:
    return a / b if _is_float(a) else _int_div(a, b.astype(a.dtype))


def _pow(a: np.ndarray, b: np.ndarray, attrs: Attrs) -> np.ndarray:
    if not _is_float(a) and not _is_float(b) and np.all(b >= 0):
        return np.power(a, b.astype(a.dtype))  # exact integer power (wraps like C)
    return np.power(a.astype(np.float64), b.astype(np.float64))


def _mod(a: np.ndarray, b: np.ndarray, attrs: Attrs) -> np.ndarray:
    fmod = int(attrs.get("fmod", 0))
    if fmod not in (0, 1):
        raise unsupported("Mod", "fmod", fmod)
    if not _is_float(a):
        b = np.where(b == 0, 1, b).astype(a.dtype)  # x mod 0 is undefined; give 0 not a crash
    return np.fmod(a, b) if fmod else np.mod(a, b)


def _prelu(x: np.ndarray, slope: np.ndarray, attrs: Attrs) -> np.ndarray:
    return np.where(x < 0, _wide(x) * _wide(slope), x)


def _bit_shift(a: np.ndarray, b: np.ndarray, attrs: Attrs) -> np.ndarray:
    """BitShift-28: an arithmetic right shift on signed types; a shift by a negative amount or
    by the width or more leaves only the sign fill (-1 right of a negative value, else 0)."""
    direction = attrs.get("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise unsupported("BitShift", "direction", direction)
    bits = a.dtype.itemsize * 8
    b = np.asarray(b, dtype=a.dtype)
    out = (b < 0) | (b >= bits) if b.dtype.kind == "i" else b >= bits
    safe = np.where(out, 0, b).astype(a.dtype)
    y = np.left_shift(a, safe) if direction == "LEFT" else np.right_shift(a, safe)
    fill = np.where(a < 0, -1, 0) if direction == "RIGHT" and a.dtype.kind == "i" else 0
    return np.where(out, fill, y).astype(a.dtype)


# fn(a, b, attrs); the result takes the dtype of the first operand.
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray, Attrs], np.ndarray]] = {
    "Add": lambda a, b, _: a + b,
    "Sub": lambda a, b, _: a - b,
    "Mul": lambda a, b, _: a * b,
    "Div": _div,
    "Pow": _pow,
    "Mod": _mod,
    "PRelu": _prelu,
    "BitwiseAnd": lambda a, b, _: a & b,
    "BitwiseOr": lambda a, b, _: a | b,
    "BitwiseXor": lambda a, b, _: a ^ b,
    "BitShift": _bit_shift,
}

_COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal,
    "Greater": np.greater, "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor,
}


def _binary_kernel(fn: Callable[[np.ndarray, np.ndarray, Attrs], np.ndarray]) -> Kernel:
    def kernel(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
        a, b = inputs
        return [np.asarray(fn(a, b, attrs)).astype(a.dtype, copy=False)]
    return kernel


def _compare_kernel(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Kernel:
    return lambda inputs, attrs: [np.asarray(fn(inputs[0], inputs[1]), dtype=bool)]


def _variadic_kernel(fn: Callable[[list[np.ndarray]], np.ndarray]) -> Kernel:
    def kernel(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
        xs = [x for x in inputs if x is not None]
        return [np.asarray(fn([_wide(x) for x in xs])).astype(xs[0].dtype, copy=False)]
    return kernel


_VARIADIC: dict[str, Callable[[list[np.ndarray]], np.ndarray]] = {
    "Max": lambda xs: reduce(np.maximum, xs),
    "Min": lambda xs: reduce(np.minimum, xs),
    "Sum": lambda xs: reduce(np.add, xs),
    "Mean": lambda xs: reduce(np.add, xs) / len(xs),
}


def _where(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    cond, x, y = inputs
    return [np.where(cond, x, y).astype(x.dtype, copy=False)]


def _trilu(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, k = inputs[0], _opt(inputs, 1)
    k = int(_scalar(k)) if k is not None else 0
    return [np.triu(x, k) if attrs.get("upper", 1) else np.tril(x, k)]
