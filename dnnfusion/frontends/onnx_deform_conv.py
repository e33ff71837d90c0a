"""DeformConv (opset 19), imported as the operators it is made of (ONNX gives it no function
body; ONNX Runtime runs it): a GridSample that reads every kernel tap's shifted input, a mask
product, and one batched MatMul per convolution group.

For output pixel (i, j) and kernel tap (a, b) the input is read at
(-pad_top + i * stride_h + a * dilation_h + dy, -pad_left + j * stride_w + b * dilation_w + dx),
(dy, dx) the offset of the tap's offset group at (i, j); bilinear, zero outside the image, as
ONNX's reference reads it (GridSample with align_corners=1 on the coordinates normalized by
size - 1). All taps of one offset group are one GridSample over a grid of K * OH rows:

    X [N, C, H, W] -> [N * og, C / og, H, W]
    grid [N * og, K * OH, OW, 2] -> samples [N * og, C / og, K * OH, OW]
    (times the mask [N, og, 1, K, OH, OW]) -> columns [N, g, C / g * K, OH * OW]
    W [OC, C / g, kh, kw] -> [g, OC / g, C / g * K];  MatMul -> [N, OC, OH, OW] (+ B)

Two spatial axes only (the ONNX reference's limit too), static shapes, and an image of at least
2 x 2 (the normalization divides by size - 1)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import ShapeError, UnsupportedOperatorError
from dnnfusion.frontends.onnx_body import Body, bounded, function_proto, node_attrs, node_label, np_dtype


def deform_conv(imp: Any, node: Any) -> Any:
    label = node_label(node)
    ins = [imp.env[i] if i else None for i in node.input] + [None] * (5 - len(node.input))
    x, w, off, bias, mask = ins[:5]
    shapes = [list(v.shape) for v in (x, w, off)]
    if not all(isinstance(d, int) for s in shapes for d in s):
        raise ShapeError(f"{label}: DeformConv needs static shapes of X, W and offset, got {shapes}")
    xs, ws, os_ = shapes
    if len(xs) != 4:
        raise UnsupportedOperatorError(f"{label}: DeformConv over {len(xs) - 2} spatial axes; dnnfusion (as the ONNX "
                                       "reference) reads two")
    a = node_attrs(imp, node)
    n, c, hh, ww = xs
    oc = ws[0]
    kh, kw = [int(k) for k in a.get("kernel_shape", ws[2:])]
    g, og = int(a.get("group", 1)), int(a.get("offset_group", 1))
    sh, sw = [int(s) for s in a.get("strides", [1, 1])]
    dh, dw = [int(d) for d in a.get("dilations", [1, 1])]
    pt, pl, pb, pr = [int(p) for p in a.get("pads", [0, 0, 0, 0])]
    k = kh * kw
    oh, ow = (hh + pt + pb - (kh - 1) * dh - 1) // sh + 1, (ww + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if g < 1 or og < 1 or c % g or oc % g or c % og or ws[1] * g != c or list(ws[2:]) != [kh, kw]:
        raise ShapeError(f"{label}: W {ws} does not fit X {xs} with group {g}, offset_group {og} and kernel "
                         f"{[kh, kw]}")
    if os_ != [n, og * k * 2, oh, ow]:
        raise ShapeError(f"{label}: offset must have shape {[n, og * k * 2, oh, ow]}, got {os_}")
    if mask is not None and list(mask.shape) != [n, og * k, oh, ow]:
        raise ShapeError(f"{label}: mask must have shape {[n, og * k, oh, ow]}, got {list(mask.shape)}")
    if bias is not None and list(bias.shape) != [oc]:
        raise ShapeError(f"{label}: B must have shape [{oc}], got {list(bias.shape)}")
    if hh < 2 or ww < 2:
        raise ShapeError(f"{label}: an image of {hh} x {ww}; DeformConv's sampling divides by size - 1")
    bounded(n * c * k * oh * ow, "a column matrix", node)
    dt = np_dtype(x.dtype)
    b = Body(imp.onnx, dt)
    i64 = np.int64
    shape = lambda *s: b.const(np.array(s, i64), i64)  # noqa: E731
    # The taps' base coordinates, [K, OH, OW], then normalized: 2 * p / (size - 1) - 1.
    ta, tb = np.meshgrid(np.arange(kh), np.arange(kw), indexing="ij")
    base_h = -pt + sh * np.arange(oh)[None, :, None] + dh * ta.reshape(k, 1, 1)
    base_w = -pl + sw * np.arange(ow)[None, None, :] + dw * tb.reshape(k, 1, 1)
    offs = b.op("Reshape", ["in2", shape(n, og, k, 2, oh, ow)])
    dy = b.op("Gather", [offs, b.const(np.array(0, i64), i64)], axis=3)  # [N, og, K, OH, OW]
    dx = b.op("Gather", [offs, b.const(np.array(1, i64), i64)], axis=3)
    gy = b.op("Sub", [b.op("Mul", [b.op("Add", [dy, b.const(base_h)]), b.const(2.0 / (hh - 1))]), b.const(1.0)])
    gx = b.op("Sub", [b.op("Mul", [b.op("Add", [dx, b.const(base_w)]), b.const(2.0 / (ww - 1))]), b.const(1.0)])
    last = b.const(np.array([-1], i64), i64)
    grid = b.op("Concat", [b.op("Unsqueeze", [gx, last]), b.op("Unsqueeze", [gy, last])], axis=-1)
    grid = b.op("Reshape", [grid, shape(n * og, k * oh, ow, 2)])
    xr = b.op("Reshape", ["in0", shape(n * og, c // og, hh, ww)])
    mode = "linear" if (imp.opset or 0) >= 20 else "bilinear"  # GridSample-20 renamed it
    s = b.op("GridSample", [xr, grid], mode=mode, padding_mode="zeros", align_corners=1)
    s = b.op("Reshape", [s, shape(n, og, c // og, k, oh, ow)])
    if mask is not None:
        s = b.op("Mul", [s, b.op("Reshape", ["in4", shape(n, og, 1, k, oh, ow)])])
    cols = b.op("Reshape", [s, shape(n, g, c // g * k, oh * ow)])
    wr = b.op("Reshape", ["in1", shape(g, oc // g, c // g * k)])
    y = b.op("Reshape", [b.op("MatMul", [wr, cols]), shape(n, oc, oh, ow)])
    if bias is not None:
        y = b.op("Add", [y, b.op("Reshape", ["in3", shape(1, oc, 1, 1)])])
    b.nodes.append(imp.onnx.helper.make_node("Identity", [y], ["out0"]))
    return function_proto(imp, "DeformConv", 5, b.nodes)
