"""ATen -> ECG converters for linear algebra, convolution, normalization, pooling and
resizing; registered into ``aten_ops.TABLE`` (see :mod:`dnnfusion.frontends.aten_ops`)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from dnnfusion.dtypes import numpy_dtype
from dnnfusion.frontends.aten_common import (  # the registry and shared helpers
    TABLE, _cast, _i64, _ntuple, _out_dtype, _out_shape, _rank, _reg, _scalar, _users_of_outputs, _x, aten,
)


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


@_reg(aten.grid_sampler_2d, aten.grid_sampler_3d)
def _grid_sampler(cx, a):
    # torch numbers the modes as GridSample's attribute values in order: interpolation
    # bilinear, nearest, bicubic; padding zeros, border, reflection
    modes, pads = ("linear", "nearest", "cubic"), ("zeros", "border", "reflection")
    im, pm = int(a["interpolation_mode"]), int(a["padding_mode"])
    if not (0 <= im < 3 and 0 <= pm < 3):
        raise cx.fail(f"grid_sampler with interpolation_mode {im} / padding_mode {pm} is not supported")
    return cx.op("GridSample", [a["input"], a["grid"]],
                 {"mode": modes[im], "padding_mode": pads[pm], "align_corners": int(bool(a["align_corners"]))})


@_reg(aten.pixel_shuffle)
def _pixel_shuffle(cx, a):
    x = a["self"]
    if _rank(x) != 4:
        raise cx.fail(f"pixel_shuffle of a rank-{_rank(x)} input is not supported")
    return cx.op("DepthToSpace", [x], {"blocksize": int(a["upscale_factor"]), "mode": "CRD"})
