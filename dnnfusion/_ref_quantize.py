"""QuantizeLinear and DequantizeLinear kernels of the NumPy reference interpreter (private to
:mod:`dnnfusion.reference`): ONNX's per-tensor and per-axis forms (a 1-D scale along ``axis``,
default 1), and the ECG's, where a per-axis scale has x's rank ([1, C, 1, 1]) and broadcasts
(the ONNX front-end writes it so, and the ECG node has no ``axis``), and ONNX's blocked form
(``block_size``: each scale entry covers a block of that many indices along ``axis``).

Unlike the other float kernels these do not compute in float64: ONNX defines the quotient
x / scale in the scale's precision (QuantizeLinear-23 ``precision``, default the scale's type),
and ties of round-half-to-even are decided on that float32 quotient, as ONNX Runtime does.
float16 operands are computed in float32 (the whole of a float16 model is, in compile()).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.dtypes import SMALL_FLOAT_NUMPY

Attrs = dict[str, Any]
Inputs = list["np.ndarray | None"]


def _operands(inputs: Inputs, attrs: Attrs, op: str, default: np.dtype | None = None):
    """x, and scale and zero point shaped to broadcast to x."""
    x, scale = np.asarray(inputs[0]), np.asarray(inputs[1])
    zp = inputs[2] if len(inputs) > 2 else None
    zp = np.zeros(scale.shape, default or x.dtype) if zp is None else np.asarray(zp)
    block = int(attrs.get("block_size", 0))
    if block:
        axis = int(attrs.get("axis", 1)) % x.ndim
        take = np.arange(x.shape[axis]) // block
        return x, np.take(scale, take, axis=axis), np.take(zp, take, axis=axis)
    if scale.ndim == 1 and scale.size > 1 and x.ndim > 1:  # ONNX per axis
        axis = int(attrs.get("axis", 1)) % x.ndim
        shape = [1] * x.ndim
        shape[axis] = scale.size
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return x, scale, zp


def _iinfo(dtype: np.dtype) -> Any:
    """The range of an integer type, ml_dtypes' int4, uint4, int2 and uint2 included."""
    if dtype.kind == "V":
        import ml_dtypes

        return ml_dtypes.iinfo(dtype)
    return np.iinfo(dtype)


def quantize_linear(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """y = saturate(round_half_to_even(x / scale) + zero_point), of the zero point's type
    (uint8 without one); NaN gives the type's lowest value (ONNX leaves it undefined; ONNX
    Runtime's vector path gives that)."""
    from ._ref_elementwise import ONNX_DTYPES

    out = int(attrs.get("output_dtype", 0))  # ONNX's form (opset 21): the type without a zero point
    x, scale, zp = _operands(inputs, attrs, "QuantizeLinear", ONNX_DTYPES[out] if out else np.dtype(np.uint8))
    if zp.dtype.name in SMALL_FLOAT_NUMPY:  # float8 / float4: the quotient cast
        import ml_dtypes

        q = x.astype(np.float32) / scale.astype(np.float32)
        if zp.dtype.name in ("float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"):  # (as the ONNX reference: float8 takes no zero point)
            q = q + zp.astype(np.float32)
        elif int(attrs.get("saturate", 1)):
            info = ml_dtypes.finfo(zp.dtype)
            q = np.clip(q, float(info.min), float(info.max))
        with np.errstate(invalid="ignore", over="ignore"):
            return [q.astype(zp.dtype)]
    info = _iinfo(zp.dtype)
    q = np.rint(x.astype(np.float32) / scale.astype(np.float32)).astype(np.float64) + zp.astype(np.float64)
    q = np.where(np.isnan(q), info.min, np.clip(q, info.min, info.max))
    return [q.astype(zp.dtype)]


def dequantize_linear(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """y = (x - zero_point) * scale: the difference exact, one float32 multiply, in the scale's
    type."""
    x, scale, zp = _operands(inputs, attrs, "DequantizeLinear")
    if x.dtype.name in SMALL_FLOAT_NUMPY:
        d = x.astype(np.float32) - zp.astype(np.float32)
        return [(d * scale.astype(np.float32)).astype(scale.dtype)]
    d = (x.astype(np.int64) - zp.astype(np.int64)).astype(np.float32)
    return [(d * scale.astype(np.float32)).astype(scale.dtype)]


KERNELS = {"QuantizeLinear": quantize_linear, "DequantizeLinear": dequantize_linear}
