"""QuantizeLinear and DequantizeLinear from ONNX into the ECG's form (paper §3: One-to-One
operators), for QDQ-format quantized models (onnxruntime.quantization's QuantFormat.QDQ,
torch's export of fake quantization).

The ECG's operators carry no axis: a per-axis scale and zero point [C] along axis a of a
rank-r x are written with x's rank, [1, .., C, .., 1] (C at a), and broadcast to x as any
binary operand does: a constant reshaped here, a computed one through a Reshape. The fusion
planner, the layout pass and code generation then treat it as a per-channel operand, like an
Add's bias. QuantizeLinear's ``output_dtype`` (opset 21) becomes a zero zero point of that
type; DequantizeLinear's (opset 23), when it differs from the scale's type, a Cast after it.
Refused, naming the node, the attribute or type, and what to do: blocked quantization
(``block_size``), types other than int8/uint8/int16/uint16 (float8, int4, ...; also when a
tensor of such a type feeds these operators: :func:`dtype_hint`), a division ``precision``
other than float32, and scales or zero points whose shape does not fit the axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import DTypeError, ModelFormatError, ShapeError, UnsupportedOperatorError

FLOAT, FLOAT16 = 1, 10
_QUANTIZED = {2: ("u8", np.uint8), 3: ("i8", np.int8), 4: ("u16", np.uint16), 5: ("i16", np.int16)}
_FLOATS = {FLOAT: "f32", FLOAT16: "f16"}
WHAT_TO_DO = ("dnnfusion (de)quantizes int8, uint8, int16 and uint16: quantize the model to one of "
              "those (onnxruntime.quantization: QuantType.QInt8, QUInt8, QInt16, QUInt16)")


def _type_name(code: int) -> str:
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(int(code))
    except ValueError:
        return f"code {code}"


def dtype_hint(graph: Any, tensor: str) -> str:
    """For a refused element type: the QuantizeLinear / DequantizeLinear nodes that read
    `tensor` and what to do, or "" when none does."""
    if not tensor:
        return ""
    readers = [f"node '{n.name or n.op_type}' ({n.op_type})" for n in graph.node
               if n.op_type in ("QuantizeLinear", "DequantizeLinear") and tensor in n.input]
    return f"; it is read by {', '.join(readers)}: {WHAT_TO_DO}" if readers else ""


def _where(n: Any) -> str:
    return f"node '{n.name}' ({n.op})"


def _reshaped(imp: Any, v: Any, shape: list[int], what: str) -> Any:
    if v.is_constant:
        return imp.b.constant(imp._fresh(f"{what}:per_axis"), np.asarray(v.numpy()).reshape(shape))
    dims = imp.b.constant(imp._fresh(f"{what}:per_axis_shape"), np.asarray(shape, np.int64))
    return imp.b.node("Reshape", [v, dims], name=imp._fresh(f"{what}:per_axis"))[0]


def _per_axis(imp: Any, n: Any) -> None:
    """Checks block_size, axis and the scale's and zero point's shapes; reshapes a per-axis
    scale and zero point to broadcast along the axis."""
    block = n.attrs.pop("block_size", 0)
    if block:
        raise UnsupportedOperatorError(
            f"{_where(n)}: attribute block_size={block} (blocked quantization, opset 21) is not "
            "supported; dnnfusion (de)quantizes per tensor or per axis: quantize per tensor or "
            "per channel instead (onnxruntime.quantization: per_channel=True)")
    axis = int(n.attrs.pop("axis", 1))
    x, scale = n.inputs[0], n.inputs[1]
    zp = n.inputs[2] if len(n.inputs) > 2 else None
    if zp is not None and list(zp.shape) != list(scale.shape):
        raise ShapeError(f"{_where(n)}: the zero point '{zp.name}' has shape {list(zp.shape)}, the scale "
                         f"'{scale.name}' {list(scale.shape)}: they must have one shape")
    r = len(x.shape)
    if len(scale.shape) > 1:
        raise ShapeError(f"{_where(n)}: the scale '{scale.name}' has shape {list(scale.shape)}; it must "
                         "be a scalar (per tensor) or 1-D (per axis); blocked quantization is not supported")
    if len(scale.shape) == 0 or scale.shape[0] == 1:  # per tensor (a [1] scale too, as ONNX Runtime)
        if len(scale.shape) == 1 and r == 0:
            n.inputs[1:] = [v if v is None else _reshaped(imp, v, [], f"{n.name}:{i}")
                            for i, v in enumerate(n.inputs[1:], 1)]
        return
    if not -r <= axis < r:
        raise ShapeError(f"{_where(n)}: axis {axis} is out of range for x '{x.name}' of rank {r}")
    a = axis % r
    if x.shape[a] != scale.shape[0]:
        raise ShapeError(f"{_where(n)}: the scale '{scale.name}' has {scale.shape[0]} entries, but x "
                         f"'{x.name}' {list(x.shape)} has {x.shape[a]} along axis {axis}: a per-axis "
                         "scale has one entry per index of the axis")
    if r > 1:
        shape = [1] * a + [scale.shape[0]] + [1] * (r - 1 - a)
        n.inputs[1:] = [v if v is None else _reshaped(imp, v, shape, f"{n.name}:{i}")
                        for i, v in enumerate(n.inputs[1:], 1)]


def quantize_linear(imp: Any, n: Any) -> None:
    x, scale = n.inputs[0], n.inputs[1]
    if x.dtype not in ("f32", "f16"):
        raise DTypeError(f"{_where(n)}: x '{x.name}' is {x.dtype}; dnnfusion quantizes float32 and "
                         "float16 tensors (Cast x to float first)")
    n.attrs.pop("saturate", None)  # float8 targets only, which are refused as types
    precision = int(n.attrs.pop("precision", 0))
    if precision not in (0, FLOAT) and not (precision == FLOAT16 and scale.dtype == "f16"):
        raise UnsupportedOperatorError(
            f"{_where(n)}: attribute precision={_type_name(precision)} is not supported: dnnfusion "
            "divides x by the scale in float32 (leave precision unset, or FLOAT)")
    out = int(n.attrs.pop("output_dtype", 0))
    zp = n.inputs[2] if len(n.inputs) > 2 else None
    if out:
        if out not in _QUANTIZED:
            raise DTypeError(f"{_where(n)}: output_dtype {_type_name(out)} is not supported; {WHAT_TO_DO}")
        ecg_type, np_type = _QUANTIZED[out]
        if zp is not None and zp.dtype != ecg_type:
            raise ModelFormatError(f"{_where(n)}: output_dtype {_type_name(out)} differs from the type "
                                   f"{zp.dtype} of the zero point '{zp.name}'")
        if zp is None:
            zero = np.zeros([int(d) for d in scale.shape], np_type)
            n.inputs = [x, scale, imp.b.constant(imp._fresh(f"{n.name}:zero_point"), zero)]
    _per_axis(imp, n)


def dequantize_linear(imp: Any, n: Any) -> None:
    out = int(n.attrs.pop("output_dtype", 0))
    _per_axis(imp, n)
    scale = n.inputs[1]
    if not out or _FLOATS.get(out) == scale.dtype:
        return
    if out not in _FLOATS:
        raise DTypeError(f"{_where(n)}: output_dtype {_type_name(out)} is not supported; dnnfusion "
                         "dequantizes to float32 or float16")
    # In the scale's type, then converted, as ONNX Runtime computes it.
    y = imp.b.node("DequantizeLinear", n.inputs, n.attrs, name=n.name,
                   output_names=[imp._fresh(f"{n.name}:y")])[0]
    n.op, n.inputs, n.attrs, n.name = "Cast", [y], {"to": out}, imp._fresh(f"{n.name}:cast")


NORMALIZE = {"QuantizeLinear": quantize_linear, "DequantizeLinear": dequantize_linear}
