"""QuantizeLinear and DequantizeLinear from ONNX into the ECG's form (paper §3: One-to-One
operators), for QDQ-format quantized models (onnxruntime.quantization's QuantFormat.QDQ,
torch's export of fake quantization).

The ECG's operators carry no axis: a per-axis scale and zero point [C] along axis a of a
rank-r x are written with x's rank, [1, .., C, .., 1] (C at a), and broadcast to x as any
binary operand does: a constant reshaped here, a computed one through a Reshape. The fusion
planner, the layout pass and code generation then treat it as a per-channel operand, like an
Add's bias. QuantizeLinear's ``output_dtype`` (opset 21) becomes a zero zero point of that
type; DequantizeLinear's (opset 23), when it differs from the scale's type, a Cast after it.
int4, uint4, int2, uint2, float8 and float4 are ECG types (ml_dtypes', a byte an element;
compile() computes them in int8 / uint8 / float32: rewrite.narrow_to_wide).
Blocked quantization (``block_size``, opset 21) repeats each scale and zero point entry over
its block, to x's shape. Refused, naming the node, the attribute or type, and what to do: types
other than those (float8e8m0, ...; also when a
tensor of such a type feeds these operators: :func:`dtype_hint`), a division ``precision``
other than float32, and scales or zero points whose shape does not fit the axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import DTypeError, ModelFormatError, ShapeError, UnsupportedOperatorError

FLOAT, FLOAT16 = 1, 10
_QUANTIZED = {2: ("u8", np.uint8), 3: ("i8", np.int8), 4: ("u16", np.uint16), 5: ("i16", np.int16),
              21: ("u4", None), 22: ("i4", None), 25: ("u2", None), 26: ("i2", None),  # ml_dtypes' types
              17: ("f8e4m3fn", None), 18: ("f8e4m3fnuz", None), 19: ("f8e5m2", None), 20: ("f8e5m2fnuz", None),
              23: ("f4e2m1", None), 27: ("f6e2m3", None), 28: ("f6e3m2", None)}
_FLOATS = {FLOAT: "f32", FLOAT16: "f16"}
WHAT_TO_DO = ("dnnfusion (de)quantizes int8, uint8, int16, uint16, int4, uint4, int2, uint2, float8 and "
              "float4e2m1: quantize the model to one of those (onnxruntime.quantization: QuantType.QInt8, QUInt8, QInt16, QUInt16, "
              "QInt4, QUInt4)")


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
    block = int(n.attrs.pop("block_size", 0))
    axis = int(n.attrs.pop("axis", 1))
    if block:
        return _blocked(imp, n, axis, block)
    x, scale = n.inputs[0], n.inputs[1]
    zp = n.inputs[2] if len(n.inputs) > 2 else None
    one = lambda v: all(isinstance(d, int) for d in v.shape) and int(np.prod(v.shape, dtype=np.int64)) == 1  # noqa: E731
    if zp is not None and list(zp.shape) != list(scale.shape) and one(zp) and one(scale):
        # one value each, as [] and [1] (ONNX's own int4 / int2 cases; ONNX Runtime takes it)
        zp = n.inputs[2] = _reshaped(imp, zp, [int(d) for d in scale.shape], f"{n.name}:2")
    if zp is not None and list(zp.shape) != list(scale.shape):
        raise ShapeError(f"{_where(n)}: the zero point '{zp.name}' has shape {list(zp.shape)}, the scale "
                         f"'{scale.name}' {list(scale.shape)}: they must have one shape")
    r = len(x.shape)
    if len(scale.shape) > 1:
        raise ShapeError(f"{_where(n)}: the scale '{scale.name}' has shape {list(scale.shape)}; it must "
                         "be a scalar (per tensor) or 1-D (per axis), or have x's rank with block_size set (blocked)")
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


def _blocked(imp: Any, n: Any, axis: int, block: int) -> None:
    """Blocked quantization (opset 21): the scale and zero point have x's rank, with
    ceil(x.shape[axis] / block) entries along the axis, one per block of `block` indices, and
    x's size elsewhere. Written as ONNX Runtime computes it, with each scale entry repeated over
    its block to x's shape: constants at import (their (de)quantization then folds), computed
    ones through Reshape, Expand and Slice."""
    x, scale = n.inputs[0], n.inputs[1]
    zp = n.inputs[2] if len(n.inputs) > 2 else None
    r = len(x.shape)
    if block < 0:
        raise ModelFormatError(f"{_where(n)}: block_size must be positive, got {block}")
    if not -r <= axis < r:
        raise ShapeError(f"{_where(n)}: axis {axis} is out of range for x '{x.name}' of rank {r}")
    a = axis % r
    if any(not isinstance(d, int) for d in list(x.shape) + list(scale.shape)):
        raise ShapeError(f"{_where(n)}: blocked quantization needs static shapes, got x {list(x.shape)} and scale "
                         f"{list(scale.shape)}")
    xs, ss = [int(d) for d in x.shape], [int(d) for d in scale.shape]
    want = xs[:a] + [-(-xs[a] // block)] + xs[a + 1:]
    if ss != want:
        raise ShapeError(f"{_where(n)}: with block_size={block} along axis {axis}, the scale '{scale.name}' must have "
                         f"shape {want} (x '{x.name}' is {xs}), got {ss}")
    if zp is not None and [int(d) for d in zp.shape] != ss:
        raise ShapeError(f"{_where(n)}: the zero point '{zp.name}' has shape {list(zp.shape)}, the scale "
                         f"'{scale.name}' {ss}: they must have one shape")

    def spread(v: Any, i: int) -> Any:
        what = f"{n.name}:{i}:blocks"
        if v.is_constant:
            arr = np.repeat(np.asarray(v.numpy()), block, axis=a)
            return imp.b.constant(imp._fresh(what), np.ascontiguousarray(np.take(arr, np.arange(xs[a]), axis=a)))
        c = lambda name, vals: imp.b.constant(imp._fresh(f"{what}:{name}"), np.asarray(vals, np.int64))  # noqa: E731
        split = ss[:a + 1] + [1] + ss[a + 1:]
        y = imp.b.node("Reshape", [v, c("split", split)], name=imp._fresh(f"{what}:split"))[0]
        y = imp.b.node("Expand", [y, c("each", ss[:a + 1] + [block] + ss[a + 1:])], name=imp._fresh(f"{what}:each"))[0]
        y = imp.b.node("Reshape", [y, c("merged", ss[:a] + [ss[a] * block] + ss[a + 1:])],
                       name=imp._fresh(f"{what}:merged"))[0]
        if ss[a] * block == xs[a]:
            return y
        return imp.b.node("Slice", [y, c("starts", [0]), c("ends", [xs[a]]), c("axes", [a])],
                          name=imp._fresh(f"{what}:cut"))[0]

    n.inputs[1:] = [v if v is None else spread(v, i) for i, v in enumerate(n.inputs[1:], 1)]


def quantize_linear(imp: Any, n: Any) -> None:
    x, scale = n.inputs[0], n.inputs[1]
    if x.dtype not in ("f32", "f16"):
        raise DTypeError(f"{_where(n)}: x '{x.name}' is {x.dtype}; dnnfusion quantizes float32 and "
                         "float16 tensors (Cast x to float first)")
    saturate = int(n.attrs.pop("saturate", 1))  # float8 targets only
    zp0 = n.inputs[2] if len(n.inputs) > 2 else None
    out0 = int(n.attrs.get("output_dtype", 0))
    if (zp0 is not None and zp0.dtype.startswith("f8")) or out0 in (17, 18, 19, 20):
        n.attrs["saturate"] = saturate
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
            if np_type is None:
                from dnnfusion.dtypes import numpy_dtype

                np_type = numpy_dtype(ecg_type)
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
