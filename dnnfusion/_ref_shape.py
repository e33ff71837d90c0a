"""Shape-manipulation kernels of the NumPy reference interpreter (private to
:mod:`dnnfusion.reference`): the Reorganize and Shuffle operators (Reshape, Transpose,
Concat, Split, Slice, Pad, Gather, ...) and the constant sources (Shape, Constant,
ConstantOfShape, Range). Signatures and conventions as described in :mod:`dnnfusion.reference`;
outputs may be views of inputs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ._ref_nn import _input as _opt  # the i-th input, or None when it is absent
from ._ref_nn import unsupported

Attrs = dict[str, Any]
Inputs = list["np.ndarray | None"]


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def _axes(axes: Iterable[int], rank: int) -> tuple[int, ...]:
    return tuple(sorted(_axis(int(a), rank) for a in axes))


def _scalar(x: np.ndarray) -> Any:
    return x.reshape(-1)[0].item()


def _reshape(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, shape = inputs[0], [int(s) for s in inputs[1]]
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return [x.reshape(shape)]


def _flatten(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x = inputs[0]
    axis = int(attrs.get("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


def _squeeze(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, axes = inputs[0], _opt(inputs, 1)
    if axes is None or axes.size == 0:
        return [np.squeeze(x)]
    return [np.squeeze(x, axis=_axes(axes, x.ndim))]


def _unsqueeze(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, axes = inputs[0], inputs[1]
    return [np.expand_dims(x, _axes(axes, x.ndim + axes.size))]


def _concat(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    xs = [x for x in inputs if x is not None]
    return [np.concatenate(xs, axis=_axis(int(attrs["axis"]), xs[0].ndim))]


def _split(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, split = inputs[0], _opt(inputs, 1)
    axis = _axis(int(attrs.get("axis", 0)), x.ndim)
    dim = x.shape[axis]
    if split is not None and split.size:
        sizes = [int(s) for s in split]
    elif "num_outputs" in attrs:
        n = int(attrs["num_outputs"])
        chunk = -(-dim // n)  # the last chunk is smaller when dim is not divisible
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    else:
        raise ValueError("Split needs the 'split' input or the 'num_outputs' attribute")
    if sum(sizes) != dim or min(sizes) < 0:
        raise ValueError(f"Split: sizes {sizes} do not partition dimension {dim}")
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _slice(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, starts, ends = inputs[:3]
    axes, steps = _opt(inputs, 3), _opt(inputs, 4)
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis, start, end, step = _axis(int(axis), x.ndim), int(start), int(end), int(step)
        dim = x.shape[axis]
        if step == 0:
            raise ValueError("Slice: steps must not be 0")
        start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        index[axis] = slice(start, end if end >= 0 else None, step)
    return [x[tuple(index)]]


_PAD_MODES = ("constant", "reflect", "edge", "wrap")  # the same names as np.pad's


def _pad(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, pads, value, axes = inputs[0], inputs[1], _opt(inputs, 2), _opt(inputs, 3)
    mode = attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        raise unsupported("Pad", "mode", mode)
    axes = [_axis(int(a), x.ndim) for a in axes] if axes is not None else list(range(x.ndim))
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes):
        raise ValueError(f"Pad: {len(pads)} pads for axes {axes}")
    begin, end = [0] * x.ndim, [0] * x.ndim
    for i, a in enumerate(axes):
        begin[a], end[a] = int(pads[i]), int(pads[i + len(axes)])
    # Negative pads crop.
    x = x[tuple(slice(-min(b, 0), x.shape[i] + min(e, 0)) for i, (b, e) in
                enumerate(zip(begin, end)))]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if mode == "constant":
        fill = _scalar(value) if value is not None and value.size else 0
        return [np.pad(x, widths, mode="constant", constant_values=fill)]
    return [np.pad(x, widths, mode=mode)]


def _shape(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    shape = inputs[0].shape
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    return [np.array(shape[start:None if end is None else int(end)], dtype=np.int64)]


def _transpose(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x = inputs[0]
    perm = attrs.get("perm")
    return [np.transpose(x, None if perm is None else [int(p) for p in perm])]


def _depth_to_space(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, bs = inputs[0], int(attrs["blocksize"])
    n, c, h, w = x.shape
    mode = attrs.get("mode", "DCR")
    if mode == "DCR":
        y = x.reshape(n, bs, bs, c // bs**2, h, w).transpose(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        y = x.reshape(n, c // bs**2, bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        raise unsupported("DepthToSpace", "mode", mode)
    return [y.reshape(n, c // bs**2, h * bs, w * bs)]


def _space_to_depth(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, bs = inputs[0], int(attrs["blocksize"])
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // bs, bs, w // bs, bs)
    mode = attrs.get("mode", "DCR")
    if mode == "DCR":
        y = y.transpose(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        y = y.transpose(0, 1, 3, 5, 2, 4)
    else:
        raise unsupported("SpaceToDepth", "mode", mode)
    return [y.reshape(n, c * bs * bs, h // bs, w // bs)]


def _expand(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, shape = inputs[0], tuple(int(s) for s in inputs[1])
    return [np.array(np.broadcast_to(x, np.broadcast_shapes(x.shape, shape)))]


def _gather(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, idx = inputs
    axis = _axis(int(attrs.get("axis", 0)), x.ndim)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    return [np.take(x, idx, axis=axis)]


def _gather_elements(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, idx = inputs
    axis = _axis(int(attrs.get("axis", 0)), x.ndim)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    return [np.take_along_axis(x, idx, axis=axis)]


def _gather_nd(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """data[batch..., *indices[batch..., i, :], rest...] (ONNX GatherND; negative indices count
    from the end of their axis)."""
    x, idx = inputs
    b = int(attrs.get("batch_dims", 0))
    k = idx.shape[-1]
    sizes = np.array(x.shape[b:b + k], dtype=np.int64)
    idx = np.where(idx < 0, idx + sizes, idx).astype(np.int64)
    bad = (idx < 0) | (idx >= sizes)
    if bad.any():
        where = np.argwhere(bad)[0]
        raise IndexError(f"GatherND: index {int(inputs[1][tuple(where)])} is out of range for axis "
                         f"{b + int(where[-1])} of size {int(sizes[where[-1]])}")
    nb = int(np.prod(x.shape[:b], dtype=np.int64))
    xs = x.reshape((nb,) + x.shape[b:])
    ix = idx.reshape((nb, -1, k))
    out = np.stack([xs[i][tuple(ix[i].T)] for i in range(nb)]) if nb else np.zeros((0,), x.dtype)
    return [out.reshape(idx.shape[:-1] + x.shape[b + k:])]


def _scatter_combine(reduction: Any, op: str):
    """y, u -> the element scattered (ONNX's reduction; max and min propagate NaN as NumPy)."""
    table = {"none": lambda y, u: u, "add": lambda y, u: y + u, "mul": lambda y, u: y * u,
             "max": np.maximum, "min": np.minimum}
    if reduction not in table:
        raise unsupported(op, "reduction", reduction)
    return table[reduction]


def _scatter_targets(op: str, coords: np.ndarray, sizes: tuple, raw: np.ndarray) -> np.ndarray:
    """coords wrapped (negative counts from the end) and range-checked, as GatherND's."""
    sizes_a = np.array(sizes, dtype=np.int64)
    wrapped = np.where(coords < 0, coords + sizes_a, coords)
    bad = (wrapped < 0) | (wrapped >= sizes_a)
    if bad.any():
        where = np.argwhere(bad)[0]
        raise IndexError(f"{op}: index {int(raw[tuple(where)])} is out of range for an axis of size "
                         f"{int(sizes_a[where[-1]])}")
    return wrapped


def _scatter_elements(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """data with updates[u] combined into data[u with its axis coordinate indices[u]], in
    row-major order of u (so with reduction none the last duplicate wins)."""
    x, idx, upd = inputs
    axis = _axis(int(attrs.get("axis", 0)), x.ndim)
    f = _scatter_combine(attrs.get("reduction", "none"), "ScatterElements")
    y = x.copy()
    at = _scatter_targets("ScatterElements", idx.astype(np.int64)[..., None], (x.shape[axis],), idx[..., None])[..., 0]
    for u in np.ndindex(*idx.shape):
        t = list(u)
        t[axis] = int(at[u])
        y[tuple(t)] = f(y[tuple(t)], upd[u])
    return [y]


def _scatter_nd(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """data with updates[i, ...] combined into data[indices[i], ...], i in row-major order."""
    x, idx, upd = inputs
    k = idx.shape[-1]
    f = _scatter_combine(attrs.get("reduction", "none"), "ScatterND")
    y = x.copy()
    at = _scatter_targets("ScatterND", idx.astype(np.int64), x.shape[:k], idx)
    for i in np.ndindex(*idx.shape[:-1]):
        t = tuple(int(v) for v in at[i])
        y[t] = f(y[t], upd[i])
    return [y]


def _nonzero(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """The coordinates of the nonzero elements, [rank, count], in row-major order."""
    return [np.array(np.nonzero(inputs[0]), dtype=np.int64).reshape(inputs[0].ndim, -1)]


def _unique(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """ONNX Unique: the distinct values of the flattened X (or slices along `axis`), ascending
    (sorted=1) or in order of first occurrence (sorted=0); the index of each one's first
    occurrence, every element's (slice's) index among them, and their counts."""
    x = inputs[0]
    axis = attrs.get("axis")
    a = None if axis is None else int(axis) % x.ndim
    data = x.reshape(-1) if a is None else x
    y, first, inverse, counts = np.unique(data, axis=a, return_index=True, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    if not int(attrs.get("sorted", 1)):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y, first, counts, inverse = np.take(y, order, axis=0 if a is None else a), first[order], counts[order], rank[inverse]
    return [np.ascontiguousarray(y), first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


def _constant_of_shape(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    value = np.asarray(attrs.get("value", np.zeros(1, dtype=np.float32)))
    shape = tuple(int(s) for s in inputs[0])
    return [np.full(shape, value.reshape(-1)[0], dtype=value.dtype)]


_CONSTANT_ATTRS: dict[str, np.dtype] = {
    "value_float": np.dtype(np.float32), "value_floats": np.dtype(np.float32),
    "value_int": np.dtype(np.int64), "value_ints": np.dtype(np.int64),
}


def _constant(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    if "value" in attrs:
        return [np.array(attrs["value"])]
    for name, dtype in _CONSTANT_ATTRS.items():
        if name in attrs:
            return [np.array(attrs[name], dtype=dtype)]
    raise NotImplementedError(f"Constant: attributes {sorted(attrs)} are not supported")


def _range(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    start, limit, delta = (x.reshape(-1)[0] for x in inputs)
    dtype = inputs[0].dtype
    if dtype.kind in "iu":
        s, lim, d = int(start), int(limit), int(delta)
        n = max(-((s - lim) // d), 0)  # ceil((limit - start) / delta), exact
        return [(s + np.arange(n, dtype=np.int64) * d).astype(dtype)]
    n = max(int(math.ceil((limit - start) / delta)), 0)  # in the input dtype, like ORT
    return [(float(start) + np.arange(n) * float(delta)).astype(dtype)]



def _identity(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    return [inputs[0]]


# The kernels by ONNX op name, merged into reference.KERNELS.
KERNELS = {
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Concat": _concat,
    "Split": _split,
    "Slice": _slice,
    "Pad": _pad,
    "Shape": _shape,
    "Transpose": _transpose,
    "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth,
    "Expand": _expand,
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "GatherND": _gather_nd,
    "NonZero": _nonzero,
    "Unique": _unique,
    "ScatterElements": _scatter_elements,
    "ScatterND": _scatter_nd,
    "ConstantOfShape": _constant_of_shape,
    "Constant": _constant,
    "Range": _range,
    "Identity": _identity,
}
