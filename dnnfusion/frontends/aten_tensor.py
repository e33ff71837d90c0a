"""ATen -> ECG converters for reductions, shapes/layout/indexing and constants built from
static arguments; registered into ``aten_ops.TABLE`` (see :mod:`dnnfusion.frontends.aten_ops`)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from dnnfusion.dtypes import numpy_dtype
from dnnfusion.frontends.builder import FOLD_MAX_ELEMENTS
from dnnfusion.frontends.aten_common import (  # the registry and shared helpers
    TABLE, Value, _INT64_MIN, _ONNX, _binary, _cast, _dims, _i64, _out_dtype, _out_shape, _rank, _reg, _scalar, _x, aten,
)


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


@_reg(aten.cumsum, aten.cumprod)
def _cumsum(cx, a):
    x = _cast(cx, a["self"], _out_dtype(cx))
    op = "CumProd" if cx.node.target.overloadpacket is aten.cumprod else "CumSum"
    return cx.op(op, [x, _i64(cx, a["dim"] % max(_rank(x), 1), "axis")])


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


_SCATTER_REDUCE = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max", "amin": "min"}


@_reg(aten.scatter, aten.scatter_add, aten.scatter_reduce)
def _scatter(cx, a):
    """torch.scatter / scatter_add / scatter_reduce(include_self=True) as ScatterElements."""
    x = a["self"]
    axis = a["dim"] % max(_rank(x), 1)
    idx = _cast(cx, a["index"], "i64")
    packet = cx.node.target.overloadpacket
    red = "add" if packet is aten.scatter_add else a.get("reduce")
    if red is not None and red not in _SCATTER_REDUCE:
        raise cx.fail(f"scatter with reduce={red!r} is not supported (sum, prod, amax and amin are)")
    if packet is aten.scatter_reduce and not a.get("include_self", True):
        raise cx.fail("scatter_reduce with include_self=False is not supported")
    src = a.get("src", a.get("value"))
    if not isinstance(src, Value):  # a scalar: one value for every index
        src = cx.const(np.full(idx.shape, src, dtype=numpy_dtype(x.dtype)), "value")
    src = _cast(cx, src, x.dtype)
    if tuple(src.shape) != tuple(idx.shape):  # torch reads only src's leading index.shape block
        src = cx.op("Slice", [src, _i64(cx, [0] * _rank(idx), "starts"), _i64(cx, list(idx.shape), "ends"),
                              _i64(cx, list(range(_rank(idx))), "axes")])
    attrs = {"axis": axis}
    if red is not None:
        attrs["reduction"] = _SCATTER_REDUCE[red]
    return cx.op("ScatterElements", [x, idx, src], attrs)


@_reg(aten.index_put)
def _index_put(cx, a):
    """x[i0, i1, ...] = values (accumulate: +=) with integer index tensors on the leading dims, as
    ScatterND over the stacked indices."""
    x, values = a["self"], a["values"]
    indices = list(a["indices"])
    k = len(indices)
    if any(t is None or t.dtype == "bool" for t in indices):
        raise cx.fail("index_put supports integer index tensors on the leading dims only (not None "
                      "placeholders or boolean masks)")
    shapes = {tuple(t.shape) for t in indices}
    if len(shapes) != 1:
        raise cx.fail(f"index_put with index tensors of different shapes {sorted(shapes)} is not supported")
    ishape = list(shapes.pop())
    parts = [cx.op("Unsqueeze", [_cast(cx, t, "i64"), _i64(cx, [len(ishape)], "axes")]) for t in indices]
    stacked = parts[0] if k == 1 else cx.op("Concat", parts, {"axis": -1})
    upd_shape = ishape + list(x.shape[k:])
    values = _cast(cx, values, x.dtype)
    if list(values.shape) != upd_shape:
        values = cx.op("Expand", [values, _i64(cx, upd_shape, "shape")])
    attrs = {"reduction": "add"} if a.get("accumulate") else {}
    return cx.op("ScatterND", [x, stacked, values], attrs)


def _scatter_slice(cx: Any, x: Any, src: Any, dim: int, start: int, end: int, step: int) -> Any:
    """x with x[..., start:end:step, ...] (on `dim`) replaced by src. Step 1: Where(a constant
    mask along dim, src padded to x's shape, x): elementwise, so it fuses with its neighbours.
    Other steps: ScatterElements with constant indices."""
    r, size = _rank(x), x.shape[dim]
    if end <= start:
        return x
    src = _cast(cx, src, x.dtype)
    if step == 1:
        pads = [0] * (2 * r)
        pads[dim], pads[r + dim] = start, size - end
        padded = src if start == 0 and end == size else cx.op("Pad", [src, _i64(cx, pads, "pads")])
        mask = np.zeros([size if d == dim else 1 for d in range(r)], dtype=bool)
        mask[(slice(None),) * dim + (slice(start, end),)] = True
        return cx.op("Where", [cx.const(mask, "mask"), padded, x])
    pos = np.arange(start, end, step, dtype=np.int64).reshape([-1 if d == dim else 1 for d in range(r)])
    return cx.op("ScatterElements", [x, cx.const(np.broadcast_to(pos, src.shape).copy(), "indices"), src],
                 {"axis": dim})


@_reg(aten.slice_scatter)
def _slice_scatter(cx, a):
    x = a["self"]
    dim = a.get("dim", 0) % max(_rank(x), 1)
    step = int(a.get("step", 1) or 1)
    if step < 1:
        raise cx.fail(f"slice_scatter with step {step} (must be >= 1)")
    start, end, _ = slice(a.get("start"), a.get("end"), step).indices(x.shape[dim])  # as aten.slice's
    return _scatter_slice(cx, x, a["src"], dim, start, end, step)


@_reg(aten.select_scatter)
def _select_scatter(cx, a):
    x = a["self"]
    dim = a["dim"] % max(_rank(x), 1)
    size, i = x.shape[dim], int(a["index"])
    if not -size <= i < size:
        raise cx.fail(f"select_scatter index {i} is out of range for a dim of size {size}")
    i = i + size if i < 0 else i
    src = cx.op("Unsqueeze", [a["src"], _i64(cx, [dim], "axes")])
    return _scatter_slice(cx, x, src, dim, i, i + 1, 1)


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
