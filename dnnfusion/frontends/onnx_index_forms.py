"""Operators written with index arithmetic (ReverseSequence, Col2Im, MaxUnpool, Compress,
TensorScatter): bodies of ECG gathers and scatters.

ONNX gives these operators no function body and the ECG has no operator for them, yet each is
pure data movement (Col2Im adds overlapping blocks): a gather or scatter at indices that are
either constants computed here in NumPy from the node's static sizes, or a little arithmetic on
a runtime input (ReverseSequence's lengths). Everything after import (fusion, code generation,
the reference) then sees ordinary Gather / Scatter operators.

Edge cases, where ONNX Runtime and the ONNX reference disagree or refuse:

* ReverseSequence: a length above the time axis's size reverses the whole sequence (the ONNX
  reference's result; ONNX Runtime refuses it at run time), a negative one reverses nothing
  (ONNX Runtime refuses it; the reference reads it as a Python slice bound).
* MaxUnpool with output_shape: I indexes the flattened output_shape tensor, as ONNX Runtime
  and the specification ("pads values are ignored") read it, so that MaxPool's indices of an
  odd-sized image unpool to their own places; the ONNX reference (and the backend case
  test_maxunpool_export_with_output_shape, generated from it) scatters into the inferred
  shape and pastes that into the corner of output_shape. An output_shape smaller than the
  inferred one is an error, as in ONNX Runtime. Duplicate indices: the last element of X (in
  row-major order) wins, as in both (dnnfusion's scatter runs its updates in order; MaxPool's
  own indices repeat only with equal values). An index outside the output fails at run time
  (negative ones count from the end, as ScatterElements does).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import DTypeError, ShapeError
from dnnfusion.frontends.onnx_body import function_proto as _hand_body
from dnnfusion.frontends.onnx_body import node_attrs as _attrs
from dnnfusion.frontends.onnx_body import bounded as _bounded
from dnnfusion.frontends.onnx_body import const_node as _const
from dnnfusion.frontends.onnx_body import np_dtype as _np_dtype

_INT64 = 7  # TensorProto.INT64


def _static(imp: Any, node: Any, k: int, what: str) -> list[int]:
    """The static shape of input k: the bodies' constants and Expand / Reshape shapes are
    computed from it at import (dnnfusion folds shape arithmetic, so a symbolic size could not
    reach them at run time)."""
    shape = list(imp.env[node.input[k]].shape)
    if not all(isinstance(d, int) for d in shape):
        raise ShapeError(f"node '{node.name}' ({node.op_type}) needs a static shape for {what} (input {k}), "
                         f"got {shape}")
    return shape


def _constant_ints(imp: Any, node: Any, k: int, what: str) -> list[int]:
    """A constant 1-D integer input (Col2Im's shapes, MaxUnpool's output_shape): the output's
    shape and the indices depend on it."""
    if len(node.input) <= k or not node.input[k]:
        raise ShapeError(f"node '{node.name}' ({node.op_type}): {what} (input {k}) is required")
    v = imp.env[node.input[k]]
    if not v.is_constant:
        raise ShapeError(f"node '{node.name}' ({node.op_type}): {what} (input {k}) must be a constant; the "
                         "output's shape and the scatter's indices are computed from it at import")
    a = np.asarray(v.numpy())
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise ShapeError(f"node '{node.name}' ({node.op_type}): {what} (input {k}) must be a 1-D integer tensor, "
                         f"got {a.dtype} of shape {list(a.shape)}")
    return [int(x) for x in a]


def _ints(attrs: dict[str, Any], key: str, n: int, default: int, least: int, node: Any) -> list[int]:
    vals = [int(x) for x in attrs.get(key, [default] * n)]
    if len(vals) != n or any(x < least for x in vals):
        raise ShapeError(f"node '{node.name}' ({node.op_type}): {key} {vals} must be {n} integers of at least {least}")
    return vals


def reverse_sequence(imp: Any, node: Any) -> Any:
    """ReverseSequence: GatherElements along the time axis at index
    where(t < len[b], len[b] - 1 - t, t), from a constant range over time and the runtime
    lengths (clamped to the time size) broadcast over [batch, time], expanded to the input's
    shape; a gather keeps every element type and needs no scatter."""
    h, name = imp.onnx.helper, node.name
    shape = _static(imp, node, 0, "the input")
    rank = len(shape)
    if rank < 2:
        raise ShapeError(f"node '{name}' (ReverseSequence): the input must have rank 2 or more, got {shape}")
    attrs = _attrs(imp, node)
    batch, time = int(attrs.get("batch_axis", 1)), int(attrs.get("time_axis", 0))
    if {batch, time} != {0, 1}:
        raise ShapeError(f"node '{name}' (ReverseSequence): batch_axis {batch} and time_axis {time} must be 0 and 1 "
                         "in either order")
    lens = imp.env[node.input[1]]
    nb, nt = shape[batch], _bounded(shape[time], "a time range", node)
    if len(lens.shape) != 1 or (isinstance(lens.shape[0], int) and lens.shape[0] != nb):
        raise ShapeError(f"node '{name}' (ReverseSequence): sequence_lens must have shape [{nb}] (the batch axis), "
                         f"got {list(lens.shape)}")
    if lens.dtype not in ("i64", "i32"):
        raise DTypeError(f"node '{name}' (ReverseSequence): sequence_lens must be int64, got {lens.dtype}")
    along = lambda axis, n: [n, 1] if axis == 0 else [1, n]  # noqa: E731 - [n] on axis of the 2-D pair
    nodes = [h.make_node("Cast", ["in1"], ["l"], to=_INT64),
             _const(imp, "nt", np.array(nt, np.int64)), h.make_node("Min", ["l", "nt"], ["lc"]),
             _const(imp, "bshape", np.array(along(batch, nb), np.int64)),
             h.make_node("Reshape", ["lc", "bshape"], ["lb"]),
             _const(imp, "t", np.arange(nt, dtype=np.int64).reshape(along(time, nt))),
             _const(imp, "one", np.array(1, np.int64)),
             h.make_node("Less", ["t", "lb"], ["inside"]), h.make_node("Sub", ["lb", "one"], ["last"]),
             h.make_node("Sub", ["last", "t"], ["back"]),
             h.make_node("Where", ["inside", "back", "t"], ["idx" if rank > 2 else "index"])]
    if rank > 2:
        nodes += [_const(imp, "s1", np.array(shape[:2] + [1] * (rank - 2), np.int64)),
                  h.make_node("Reshape", ["idx", "s1"], ["idx1"]),
                  _const(imp, "full", np.array(shape, np.int64)), h.make_node("Expand", ["idx1", "full"], ["index"])]
    nodes.append(h.make_node("GatherElements", ["in0", "index"], ["out0"], axis=time))
    return _hand_body(imp, "ReverseSequence", 2, nodes)


def _col2im_geometry(node: Any, image: list[int], block: list[int], attrs: dict[str, Any],
                     shape: list[int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """Checks Col2Im's sizes; returns (dilations, pads, strides, blocks per axis)."""
    n, name = len(image), node.name
    if len(block) != n or n < 1:
        raise ShapeError(f"node '{name}' (Col2Im): image_shape {image} and block_shape {block} must have the same "
                         "length, at least 1")
    if min(image) < 1 or min(block) < 1:
        raise ShapeError(f"node '{name}' (Col2Im): image_shape {image} and block_shape {block} must be positive")
    dil = _ints(attrs, "dilations", n, 1, 1, node)
    pads = _ints(attrs, "pads", 2 * n, 0, 0, node)
    strides = _ints(attrs, "strides", n, 1, 1, node)
    if len(shape) != 3:
        raise ShapeError(f"node '{name}' (Col2Im): the input must be [N, C * prod(block_shape), L], got {shape}")
    nblocks = [(image[i] + pads[i] + pads[n + i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(n)]
    k, nl = int(np.prod(block)), int(np.prod(nblocks)) if min(nblocks) > 0 else 0
    if shape[1] % k or nl < 1 or shape[2] != nl:
        raise ShapeError(f"node '{name}' (Col2Im): an input of shape {shape} does not hold blocks {block} of image "
                         f"{image} (dilations {dil}, pads {pads}, strides {strides}): axis 1 must be a multiple of "
                         f"{k} and axis 2 the number of blocks, {nblocks} = {nl}")
    return dil, pads, strides, nblocks


def col2im(imp: Any, node: Any) -> Any:
    """Col2Im: a ScatterND (reduction add) of the input's columns, [K*L, N, C] after a Reshape
    and Transpose, into zeros of the padded image flattened first, at the constant position
    of each (block element, block) pair: indices of K*L rows rather than ScatterElements' one
    per input element. A Slice then removes the pads (columns landing on them are dropped)."""
    h, name = imp.onnx.helper, node.name
    shape = _static(imp, node, 0, "the input")
    image = _constant_ints(imp, node, 1, "image_shape")
    block = _constant_ints(imp, node, 2, "block_shape")
    x = imp.env[node.input[0]]
    if x.dtype == "bool":
        raise DTypeError(f"node '{name}' (Col2Im): bool columns cannot be summed; cast them to an integer type")
    dil, pads, strides, nblocks = _col2im_geometry(node, image, block, _attrs(imp, node), shape)
    n = len(image)
    k, nl = int(np.prod(block)), int(np.prod(nblocks))
    _bounded(k * nl, "a Col2Im index constant", node)
    padded = [image[i] + pads[i] + pads[n + i] for i in range(n)]
    # position (in padded coordinates) of block element kk of block ll on axis i:
    # ll_i * stride_i + kk_i * dilation_i; flattened row-major over the padded image.
    kk = np.indices(block).reshape(n, k, 1)
    ll = np.indices(nblocks).reshape(n, 1, nl)
    pos = ll * np.array(strides).reshape(n, 1, 1) + kk * np.array(dil).reshape(n, 1, 1)
    flat = np.ravel_multi_index(tuple(pos), padded).reshape(k * nl, 1).astype(np.int64)
    nn, c = shape[0], shape[1] // k
    zero = imp.onnx.numpy_helper.from_array(np.zeros(1, _np_dtype(x.dtype)), "zero")
    nodes = [_const(imp, "s3", np.array([nn, c, k * nl], np.int64)), h.make_node("Reshape", ["in0", "s3"], ["cols"]),
             h.make_node("Transpose", ["cols"], ["upd"], perm=[2, 0, 1]),
             _const(imp, "zshape", np.array([int(np.prod(padded)), nn, c], np.int64)),
             h.make_node("ConstantOfShape", ["zshape"], ["zeros"], value=zero),
             _const(imp, "pos", flat),
             h.make_node("ScatterND", ["zeros", "pos", "upd"], ["sum"], reduction="add"),
             h.make_node("Transpose", ["sum"], ["img"], perm=[1, 2, 0]),
             _const(imp, "pshape", np.array([nn, c, *padded], np.int64))]
    if any(pads):
        nodes += [h.make_node("Reshape", ["img", "pshape"], ["full"]),
                  _const(imp, "starts", np.array(pads[:n], np.int64)),
                  _const(imp, "ends", np.array([pads[i] + image[i] for i in range(n)], np.int64)),
                  _const(imp, "axes", np.arange(2, 2 + n, dtype=np.int64)),
                  h.make_node("Slice", ["full", "starts", "ends", "axes"], ["out0"])]
    else:
        nodes.append(h.make_node("Reshape", ["img", "pshape"], ["out0"]))
    return _hand_body(imp, "Col2Im", 3, nodes)


def _unpool_shape(imp: Any, node: Any, xs: list[int]) -> list[int]:
    """MaxUnpool's output shape: output_shape when given (pads ignored, as the specification
    says; at least the inferred shape, as ONNX Runtime requires), else the inferred one,
    (in - 1) * stride - pads + kernel."""
    name, n = node.name, len(xs) - 2
    attrs = _attrs(imp, node)
    kernel = [int(v) for v in attrs.get("kernel_shape", [])]
    if len(kernel) != n or min(kernel, default=1) < 1:
        raise ShapeError(f"node '{name}' (MaxUnpool): kernel_shape {kernel} must give a positive size to each of the "
                         f"input's {n} spatial axes")
    strides = _ints(attrs, "strides", n, 1, 1, node)
    pads = _ints(attrs, "pads", 2 * n, 0, 0, node)
    inferred = xs[:2] + [(xs[2 + i] - 1) * strides[i] - pads[i] - pads[n + i] + kernel[i] for i in range(n)]
    if len(node.input) < 3 or not node.input[2]:
        if min(inferred) < 0:
            raise ShapeError(f"node '{name}' (MaxUnpool): the pads {pads} leave a negative output shape {inferred}")
        return inferred
    out = _constant_ints(imp, node, 2, "output_shape")
    if len(out) != len(xs) or out[:2] != xs[:2] or any(o < i for o, i in zip(out[2:], inferred[2:])):
        raise ShapeError(f"node '{name}' (MaxUnpool): output_shape {out} must keep N and C {xs[:2]} and be at least "
                         f"the inferred shape {inferred}")
    return out


def max_unpool(imp: Any, node: Any) -> Any:
    """MaxUnpool: zeros of the output's size, flattened, with X scattered at I (ScatterElements
    on axis 0, reduction none: I holds linear indices into the whole output tensor, N and C
    included, as MaxPool's Indices do), then reshaped to the output's shape."""
    h, name = imp.onnx.helper, node.name
    xs = _static(imp, node, 0, "X")
    ish = list(imp.env[node.input[1]].shape)
    if len(xs) < 3:
        raise ShapeError(f"node '{name}' (MaxUnpool): X must be [N, C, D1, ...], got {xs}")
    if ish != xs:
        raise ShapeError(f"node '{name}' (MaxUnpool): I must have X's shape {xs}, got {ish}")
    if imp.env[node.input[1]].dtype not in ("i64", "i32"):
        raise DTypeError(f"node '{name}' (MaxUnpool): I must be int64, got {imp.env[node.input[1]].dtype}")
    out = _unpool_shape(imp, node, xs)
    total = int(np.prod(out))
    zero = imp.onnx.numpy_helper.from_array(np.zeros(1, _np_dtype(imp.env[node.input[0]].dtype)), "zero")
    nodes = [_const(imp, "flat", np.array([int(np.prod(xs))], np.int64)),
             h.make_node("Reshape", ["in0", "flat"], ["xf"]), h.make_node("Reshape", ["in1", "flat"], ["at"]),
             _const(imp, "total", np.array([total], np.int64)),
             h.make_node("ConstantOfShape", ["total"], ["zeros"], value=zero),
             h.make_node("ScatterElements", ["zeros", "at", "xf"], ["yf"], axis=0),
             _const(imp, "oshape", np.array(out, np.int64)), h.make_node("Reshape", ["yf", "oshape"], ["out0"])]
    return _hand_body(imp, "MaxUnpool", 3, nodes)


def compress(imp: Any, node: Any) -> Any:
    """Compress with a constant condition (as exporters write a static mask): a Gather at the
    condition's true positions along the axis (of the flattened input without one), computed
    here. A condition computed at run time would make the output's length data-dependent:
    refused, naming the node."""
    h, name = imp.onnx.helper, node.name
    if len(node.input) < 2 or not node.input[1]:
        raise ShapeError(f"node '{name}' (Compress): the condition (input 1) is required")
    cond = imp.env[node.input[1]]
    if not cond.is_constant:
        raise ShapeError(f"node '{name}' (Compress): the condition (input 1) must be a constant: the output's "
                         "length is its number of true entries (make the mask an initializer)")
    c = np.asarray(cond.numpy())
    if c.ndim != 1 or c.dtype != np.bool_:
        raise DTypeError(f"node '{name}' (Compress): the condition must be a 1-D bool tensor, got {c.dtype} of "
                         f"shape {list(c.shape)}")
    xs = _static(imp, node, 0, "input")
    axis = _attrs(imp, node).get("axis")
    size = int(np.prod(xs)) if axis is None else None
    if axis is not None:
        if not -len(xs) <= int(axis) < len(xs):
            raise ShapeError(f"node '{name}' (Compress): axis {axis} is out of range for an input of rank {len(xs)}")
        size = xs[int(axis) % len(xs)]
    if c[size:].any():
        raise ShapeError(f"node '{name}' (Compress): the condition has a true entry at {int(np.argmax(c[size:])) + size}, "
                         f"past the {size} {'elements' if axis is None else 'entries along the axis'} of the input")
    at = np.nonzero(c[:size])[0].astype(np.int64)
    nodes = [_const(imp, "at", at)]
    if axis is None:
        nodes += [_const(imp, "flat", np.array([-1], np.int64)), h.make_node("Reshape", ["in0", "flat"], ["x"]),
                  h.make_node("Gather", ["x", "at"], ["out0"], axis=0)]
    else:
        nodes += [h.make_node("Gather", ["in0", "at"], ["out0"], axis=int(axis))]
    return _hand_body(imp, "Compress", 2, nodes)


# op type -> fn(imp, node) -> FunctionProto (see onnx_functions.hand_forms)
def tensor_scatter(imp: Any, node: Any) -> Any:
    """TensorScatter (opset 24, a KV-cache update): ScatterElements of `update` into
    `past_cache` along `axis` at index write_indices[b] + s for update position s of sample b
    (modulo the cache length in mode 'circular'; zero without write_indices), broadcast over the
    other axes. Positions past the cache in mode 'linear' fail at run time, as a scatter index
    out of range does; where 'circular' writes a position twice the later update wins, as the
    specification's loop has it (dnnfusion's scatter applies updates in order)."""
    h, name = imp.onnx.helper, node.name
    cache = _static(imp, node, 0, "past_cache")
    upd = _static(imp, node, 1, "update")
    rank = len(cache)
    attrs = _attrs(imp, node)
    mode = attrs.get("mode", "linear")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("linear", "circular"):
        raise ShapeError(f"node '{name}' (TensorScatter): mode must be 'linear' or 'circular', got {mode!r}")
    axis = int(attrs.get("axis", -2))
    if rank < 2 or not -rank <= axis < rank or axis % rank == 0:
        raise ShapeError(f"node '{name}' (TensorScatter): axis {axis} must name a sequence axis after the batch "
                         f"(1 .. {rank - 1}) of past_cache {cache}")
    axis %= rank
    if len(upd) != rank or any(u != c for i, (u, c) in enumerate(zip(upd, cache)) if i != axis) or upd[axis] > cache[axis]:
        raise ShapeError(f"node '{name}' (TensorScatter): update {upd} must match past_cache {cache} except on axis "
                         f"{axis}, where it is at most as long")
    seq, batch = _bounded(upd[axis], "a sequence range", node), cache[0]
    nodes = [_const(imp, "s", np.arange(seq, dtype=np.int64).reshape([seq] + [1] * (rank - 1 - axis)))]
    if len(node.input) > 2 and node.input[2]:
        w = imp.env[node.input[2]]
        if list(w.shape) != [batch] or w.dtype != "i64":
            raise ShapeError(f"node '{name}' (TensorScatter): write_indices must be int64 of shape [{batch}] (the "
                             f"batch), got {w.dtype}{list(w.shape)}")
        nodes += [_const(imp, "bshape", np.array([batch] + [1] * (rank - 1), np.int64)),
                  h.make_node("Reshape", ["in2", "bshape"], ["wb"]), h.make_node("Add", ["wb", "s"], ["pos"])]
    else:
        nodes.append(h.make_node("Identity", ["s"], ["pos"]))
    if mode == "circular":
        nodes += [_const(imp, "len", np.array(cache[axis], np.int64)), h.make_node("Mod", ["pos", "len"], ["wrapped"])]
    nodes += [_const(imp, "ushape", np.array(upd, np.int64)),
              h.make_node("Expand", ["wrapped" if mode == "circular" else "pos", "ushape"], ["index"]),
              h.make_node("ScatterElements", ["in0", "index", "in1"], ["out0"], axis=axis)]
    return _hand_body(imp, "TensorScatter", 3, nodes)


HAND_FORMS: dict[str, Any] = {"ReverseSequence": reverse_sequence, "Col2Im": col2im, "MaxUnpool": max_unpool,
                              "Compress": compress, "TensorScatter": tensor_scatter}
