"""Row and irregular anchor kernels (cpp/codegen/prelude/rowops.h, reduce.h, irregular.h,
resize.h) against the NumPy oracle (dnnfusion.reference.run_node).

One C++ driver (tests/prelude_rowops_driver.cc) reads a list of cases (an op code, int and
float parameters, input buffers) from a file, runs the kernel and writes its outputs back. It
is compiled once per dialect (scalar, AVX2, AVX-512 when the CPU has them; NEON
cross-compiled and run under qemu-aarch64 on a subset) and every output is compared with the
oracle: exactly for indices, NMS, GatherElements and nearest Resize, within a float32
tolerance otherwise. Shapes have odd sizes (vector tails), inner == 1 and inner > 1; softmax,
layer norm, reductions and others also run with an epilogue (add a per-column bias, then
relu) and with a kStores epilogue (writes 2 * v into its own buffer; y is only scratch).
"""

from __future__ import annotations

import math
import os
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from dnnfusion import _ref_nn
from dnnfusion.reference import run_node
from dialects import params
from native_toolchain import PRELUDE, CompiledOnly, Job, build_and_run, dialect_commands

# -O1 as in test_prelude_conv_pool.py: the drivers' compiles were most of this file's time, and
# the kernels hold no optimisation-dependent semantics (no -ffast-math).
COMMON = ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{PRELUDE}"]

# The C++ side: reads the cases, runs the kernels, writes their outputs.
DRIVER = (Path(__file__).resolve().parent / "prelude_rowops_driver.cc").read_text()

OPS = {"softmax": 0, "layer_norm": 1, "instance_norm": 2, "reduce": 3, "arg": 4, "cumsum": 5,
       "topk": 6, "gather_elements": 7, "nms": 8, "roi_align": 9, "resize": 10}
REDUCE_KINDS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"]
RESIZE_MODES = ["nearest", "linear", "cubic"]
RESIZE_COORDS = ["half_pixel", "pytorch_half_pixel", "half_pixel_symmetric", "align_corners",
                 "asymmetric", "tf_crop_and_resize"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
EPS = ["none", "bias_relu", "stores"]


@dataclass
class Case:
    """One kernel call: what the driver reads, and what the oracle says it must write."""
    name: str
    op: str
    ints: list[int]
    floats: list[float] = field(default_factory=list)
    bufs: list[np.ndarray] = field(default_factory=list)
    want: list[np.ndarray] = field(default_factory=list)  # or a str: the error to expect
    rtol: float = 2e-5
    atol: float = 1e-6
    exact: bool = False

    def record(self) -> bytes:
        kinds = {np.dtype(np.float32): 0, np.dtype(np.int64): 1, np.dtype(np.int32): 2}
        parts = [struct.pack(f"<qq{len(self.ints)}q", OPS[self.op], len(self.ints), *self.ints),
                 struct.pack(f"<q{len(self.floats)}d", len(self.floats), *self.floats),
                 struct.pack("<q", len(self.bufs))]
        for b in self.bufs:
            b = np.ascontiguousarray(b)
            parts.append(struct.pack("<qq", kinds[b.dtype], b.nbytes) + b.tobytes())
        return b"".join(parts)


def _epilogue(want: np.ndarray, ep: str, C: int, bias: np.ndarray) -> np.ndarray:
    """The oracle's output after the case's epilogue, over the [R, C] view."""
    w = want.astype(np.float64).reshape(-1, max(C, 1))
    if ep == "bias_relu":
        w = np.maximum(w + bias.astype(np.float64)[None, :C], 0)
    elif ep == "stores":
        w = 2 * w
    return w.reshape(-1)


def _u(rng, *shape, lo=-1.0, hi=1.0) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(np.float32)


# ---- case builders (each mirrors one driver op) -------------------------------------------
def softmax_case(rng, shape, axis, log=False, ep="none", x=None) -> Case:
    x = _u(rng, *shape, lo=-4, hi=4) if x is None else x
    axis %= x.ndim
    outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    n = x.shape[axis]
    C = n if inner == 1 else inner
    bias = _u(rng, C + 1)
    want = run_node("LogSoftmax" if log else "Softmax", [x], {"axis": axis})[0]
    return Case(f"{'log_' if log else ''}softmax{shape}@{axis}-{ep}", "softmax",
                [outer, n, inner, EPS.index(ep), int(log)], [], [x, bias],
                [_epilogue(want, ep, C, bias)], rtol=3e-5, atol=2e-6)


def layer_norm_case(rng, shape, axis, scale=True, bias=True, ep="none", offset=0.0) -> Case:
    x = _u(rng, *shape) + np.float32(offset)
    outer, norm = math.prod(shape[:axis]), math.prod(shape[axis:])
    s, b, eb = _u(rng, *shape[axis:]), _u(rng, *shape[axis:]), _u(rng, norm + 1)
    y, mean, inv = run_node("LayerNormalization", [x, s if scale else None, b if bias else None],
                            {"axis": axis, "epsilon": 1e-5})
    return Case(f"layer_norm{shape}@{axis}-s{int(scale)}b{int(bias)}-{ep}", "layer_norm",
                [outer, norm, int(scale), int(bias), EPS.index(ep)], [1e-5], [x, s, b, eb],
                [_epilogue(y, ep, norm, eb), mean.reshape(-1), inv.reshape(-1)],
                rtol=3e-5, atol=1e-5)


def instance_norm_case(rng, shape, ep="none") -> Case:
    x = _u(rng, *shape) * 3 + 1
    N, C, S = shape[0], shape[1], math.prod(shape[2:])
    s, b, eb = _u(rng, C), _u(rng, C), _u(rng, S + 1)
    y = run_node("InstanceNormalization", [x, s, b], {"epsilon": 1e-5})[0]
    return Case(f"instance_norm{shape}-{ep}", "instance_norm", [N, C, S, EPS.index(ep)], [1e-5],
                [x, s, b, eb], [_epilogue(y, ep, S, eb)], rtol=3e-5, atol=1e-5)


def reduce_case(rng, kind, shape, axes, keepdims=1, ep="none", x=None) -> Case:
    if x is None:
        x = _u(rng, *shape, lo=0.7, hi=1.3) if kind == "ReduceProd" else _u(rng, *shape)
    rank = len(shape)
    mask = sum(1 << (a % rank) for a in axes)
    attrs = {"keepdims": keepdims}
    if not axes:
        attrs["noop_with_empty_axes"] = 1
    want = run_node(kind, [x, np.array(axes, dtype=np.int64)], attrs)[0]
    last_kept = rank == 0 or not (mask >> (rank - 1)) & 1
    C = shape[-1] if rank and last_kept else 1
    eb = _u(rng, C + 1)
    count = math.prod(s for a, s in enumerate(shape) if (mask >> a) & 1)
    return Case(f"{kind}{shape}{tuple(axes)}k{keepdims}-{ep}", "reduce",
                [REDUCE_KINDS.index(kind), rank, mask, EPS.index(ep), *shape], [], [x, eb],
                [_epilogue(want, ep, C, eb)], rtol=3e-5,
                atol=2e-6 * math.sqrt(max(count, 1)))


def arg_case(rng, shape, axis, is_max, last, keepdims=1, x=None) -> Case:
    x = np.round(_u(rng, *shape) * 3) / 3 if x is None else x  # few values: many ties
    x = x.astype(np.float32)
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    want = run_node("ArgMax" if is_max else "ArgMin", [x],
                    {"axis": axis, "select_last_index": int(last), "keepdims": keepdims})[0]
    return Case(f"arg{'max' if is_max else 'min'}{shape}@{axis}-last{int(last)}", "arg",
                [int(is_max), outer, shape[axis], inner, int(last)], [], [x],
                [want.reshape(-1)], exact=True)


def cumsum_case(rng, shape, axis, exclusive, reverse, ep="none") -> Case:
    x = _u(rng, *shape)
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    C = shape[axis] if inner == 1 else inner
    eb = _u(rng, C + 1)
    want = run_node("CumSum", [x, np.array(axis)], {"exclusive": exclusive, "reverse": reverse})[0]
    return Case(f"cumsum{shape}@{axis}-e{exclusive}r{reverse}-{ep}", "cumsum",
                [outer, shape[axis], inner, exclusive, reverse, EPS.index(ep)], [], [x, eb],
                [_epilogue(want, ep, C, eb)], rtol=3e-5, atol=1e-5)


def topk_case(rng, shape, axis, k, largest, x=None) -> Case:
    x = (np.round(_u(rng, *shape) * 4) / 4).astype(np.float32) if x is None else x
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    v, i = run_node("TopK", [x, np.array([k])], {"axis": axis, "largest": int(largest)})
    return Case(f"topk{shape}@{axis}k{k}-l{int(largest)}", "topk",
                [outer, shape[axis], inner, k, int(largest)], [], [x],
                [v.reshape(-1), i.reshape(-1)], exact=True)


def gather_case(rng, dshape, ishape, axis, i32=False, bad=False) -> Case:
    x = _u(rng, *dshape)
    n = dshape[axis]
    idx = rng.integers(-n, n, ishape).astype(np.int32 if i32 else np.int64)
    if bad:
        idx.reshape(-1)[-1] = n + 2
        want = f"index {n + 2} is out of range for axis {axis} of size {n}"
    else:
        want = [run_node("GatherElements", [x, idx], {"axis": axis})[0].reshape(-1)]
    return Case(f"gather_elements{dshape}{ishape}@{axis}{'-i32' if i32 else ''}"
                f"{'-bad' if bad else ''}", "gather_elements",
                [len(dshape), axis, int(i32), *dshape, *ishape], [], [x, idx], want, exact=True)


def nms_case(rng, B, classes, n, max_out, iou, score_t=None, center=0) -> Case:
    centers = rng.uniform(0, 10, (B, n, 2))
    sizes = rng.uniform(1, 4, (B, n, 2))
    if center:
        boxes = np.concatenate([centers, sizes], axis=2)
    else:  # [y1, x1, y2, x2] with some corners given the other way round
        corners = np.concatenate([centers - sizes / 2, centers + sizes / 2], axis=2)
        boxes = corners[..., [1, 0, 3, 2]]
        boxes[:, ::3] = boxes[:, ::3][..., [2, 3, 0, 1]]
    boxes = boxes.astype(np.float32)
    scores = np.round(rng.uniform(0, 1, (B, classes, n)) * 8).astype(np.float32) / 8  # ties
    inputs = [boxes, scores, np.array([max_out], np.int64), np.array([iou], np.float32)]
    if score_t is not None:
        inputs.append(np.array([score_t], np.float32))
    want = run_node("NonMaxSuppression", inputs, {"center_point_box": center})[0]
    return Case(f"nms{B}x{classes}x{n}-max{max_out}-iou{iou}-st{score_t}-c{center}", "nms",
                [B, classes, n, max_out, int(score_t is not None), center],
                [iou, score_t or 0.0], [boxes, scores], [want.reshape(-1)], exact=True)


def roi_case(rng, N, C, H, W, num, oh, ow, ratio, scale, ctm, mode, ep="none",
             channels_last=False) -> Case:
    x = _u(rng, N, C, H, W)
    img_h, img_w = H / scale, W / scale
    xy1 = rng.uniform(-0.1, 0.8, (num, 2)) * [img_w, img_h]
    wh = rng.uniform(0.05, 0.6, (num, 2)) * [img_w, img_h]
    rois = np.concatenate([xy1, xy1 + wh], axis=1).astype(np.float32)
    if not (mode == "max" and ratio == 0 and ctm == "half_pixel"):  # (the oracle fails then)
        rois[0, 2] = rois[0, 0] - 1  # a malformed ROI: empty in half_pixel, 1 wide otherwise
    bidx = rng.integers(0, N, num).astype(np.int64)
    eb = _u(rng, ow + 1)
    attrs = {"output_height": oh, "output_width": ow, "sampling_ratio": ratio,
             "spatial_scale": scale, "coordinate_transformation_mode": ctm, "mode": mode}
    want = run_node("RoiAlign", [x, rois, bidx], attrs)[0]
    return Case(f"roi_align{(N, C, H, W)}-{num}x{oh}x{ow}-r{ratio}-{ctm}-{mode}-{ep}"
                + ("-nhwc" if channels_last else ""),
                "roi_align", [N, C, H, W, num, oh, ow, ratio, int(ctm == "half_pixel"),
                              int(mode == "max"), EPS.index(ep), int(channels_last)],
                [np.float32(scale).item()], [x, rois, bidx, eb], [_epilogue(want, ep, ow, eb)],
                rtol=3e-5, atol=3e-6)


def resize_case(rng, shape, mode="nearest", ctm="half_pixel", nearest="round_prefer_floor",
                scales=None, sizes=None, roi=None, exclude=0, antialias=0, ep="none",
                cubic_a=-0.75, extrapolation=0.0) -> Case:
    x = _u(rng, *shape)
    rank = len(shape)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "nearest_mode": nearest,
             "exclude_outside": exclude, "antialias": antialias, "cubic_coeff_a": cubic_a,
             "extrapolation_value": extrapolation}
    roi_a = None if roi is None else np.array(roi, np.float32)
    inputs = [x, roi_a, None if scales is None else np.array(scales, np.float32),
              None if sizes is None else np.array(sizes, np.int64)]
    want = run_node("Resize", inputs, attrs)[0]
    out_len, scale = _ref_nn._resize_targets(x, inputs, attrs, list(range(rank)))
    out_shape = [out_len[a] for a in range(rank)]
    assert list(want.shape) == out_shape
    C = out_shape[-1] if rank else 1
    eb = _u(rng, C + 1)
    return Case(f"resize{shape}->{tuple(out_shape)}-{mode}-{ctm}-{nearest}-x{exclude}"
                f"a{antialias}-{ep}", "resize",
                [rank, RESIZE_MODES.index(mode), RESIZE_COORDS.index(ctm),
                 NEAREST_MODES.index(nearest), exclude, antialias, int(roi is not None),
                 EPS.index(ep), *shape, *out_shape],
                [np.float32(cubic_a).item(), extrapolation, *[scale[a] for a in range(rank)]],
                [x, roi_a if roi_a is not None else np.zeros(1, np.float32), eb],
                [_epilogue(want, ep, C, eb)], rtol=3e-5, atol=2e-6,
                exact=mode == "nearest" and ep != "bias_relu")


def cases_x86(rng) -> list[Case]:
    cs: list[Case] = []
    # softmax / log_softmax: inner == 1 and > 1, odd lengths, several column blocks, masks
    for log in (False, True):
        for shape, axis in [((3, 37), -1), ((1, 1), -1), ((5, 7), 0), ((2, 5, 7), 1),
                            ((4, 1000), -1), ((2, 3, 300), 1), ((3, 17, 33), 1), ((2, 1, 9), 1)]:
            cs.append(softmax_case(rng, shape, axis, log))
        for shape, axis in [((6, 19), -1), ((2, 5, 21), 1)]:
            for ep in EPS[1:]:
                cs.append(softmax_case(rng, shape, axis, log, ep))
        masked = _u(rng, 4, 23, lo=-3, hi=3)
        masked[0, 3:] = -np.inf
        masked[1, :] = -np.inf  # all masked: NaN, like the oracle
        masked[2, 5] = np.nan
        masked[3, :7] = -1e9
        cs.append(softmax_case(rng, masked.shape, -1, log, x=masked))
    # layer norm: scale/bias present or absent, normalised axes flattened, an offset mean
    for shape, axis, s, b in [((5, 37), 1, 1, 1), ((3, 4, 19), 1, 1, 1), ((7, 16), 1, 0, 0),
                              ((2, 3, 5), 2, 1, 0), ((1, 1000), 1, 0, 1), ((33, 1), 1, 1, 1)]:
        cs.append(layer_norm_case(rng, shape, axis, s, b))
    cs.append(layer_norm_case(rng, (4, 300), 1, offset=10.0))
    for ep in EPS[1:]:
        cs.append(layer_norm_case(rng, (6, 45), 1, ep=ep))
    for shape in [(2, 3, 5, 7), (1, 4, 100), (3, 2, 1)]:
        cs.append(instance_norm_case(rng, shape))
    cs.append(instance_norm_case(rng, (2, 3, 19), ep="bias_relu"))
    # reductions: rows, columns, middle, generic, unit dims, noop, empty, keepdims variants
    shapes_axes = [((7, 37), [1]), ((37, 13), [0]), ((5, 3, 19), [1]), ((2, 3, 4, 5), [1, 3]),
                   ((2, 3, 4, 5), [0, 2]), ((1, 7, 1, 9), [1, 2]), ((6, 5), []), ((3, 0, 4), [1]),
                   ((4, 6), [0, 1]), ((3, 5000), [1]), ((2000, 40), [0]), ((1, 3, 17, 17), [2, 3]),
                   ((2, 70, 3), [0, 1])]
    for kind in REDUCE_KINDS:
        for i, (shape, axes) in enumerate(shapes_axes):
            if kind == "ReduceProd" and math.prod(shape) > 200:
                continue
            cs.append(reduce_case(rng, kind, shape, axes, keepdims=i % 2))
    for kind in ("ReduceMax", "ReduceMin"):  # NaN propagates
        x = _u(rng, 5, 20)
        x[1, 3] = x[3, 19] = np.nan
        cs.append(reduce_case(rng, kind, (5, 20), [1], x=x))
        cs.append(reduce_case(rng, kind, (5, 20), [0], x=x))
    for ep in EPS[1:]:
        cs.append(reduce_case(rng, "ReduceMean", (5, 3, 19), [1], ep=ep))
        cs.append(reduce_case(rng, "ReduceSum", (7, 37), [1], ep=ep))
        cs.append(reduce_case(rng, "ReduceMax", (2, 3, 4, 5), [0, 2], ep=ep))
    # ArgMax / ArgMin: ties, NaN, inner == 1 and > 1 (below and above a vector)
    for shape, axis in [((5, 37), 1), ((40, 3), 0), ((2, 19, 5), 1), ((2, 7, 33), 1),
                        ((1, 1), 0), ((3, 100), 1)]:
        for is_max in (True, False):
            for last in (False, True):
                cs.append(arg_case(rng, shape, axis, is_max, last, keepdims=int(last)))
    x = _u(rng, 4, 20)
    x[0, 3] = x[0, 9] = x[1, 0] = x[2, 19] = np.nan
    for is_max in (True, False):
        for last in (False, True):
            cs.append(arg_case(rng, (4, 20), 1, is_max, last, x=x))
            cs.append(arg_case(rng, (4, 20), 0, is_max, last, x=x))
    # CumSum
    for shape, axis in [((3, 37), 1), ((5, 7), 0), ((2, 9, 21), 1), ((1, 1), 0)]:
        for ex in (0, 1):
            for rev in (0, 1):
                cs.append(cumsum_case(rng, shape, axis, ex, rev))
    for ep in EPS[1:]:
        cs.append(cumsum_case(rng, (3, 37), 1, 0, 1, ep=ep))
        cs.append(cumsum_case(rng, (2, 9, 21), 1, 1, 0, ep=ep))
    # TopK: every selection branch, ties, NaN, inner > 1
    for shape, axis, k in [((3, 50), 1, 1), ((3, 50), 1, 5), ((3, 50), 1, 30), ((3, 50), 1, 50),
                           ((2, 17, 5), 1, 4), ((9, 3), 0, 9), ((2, 4), 1, 0)]:
        for largest in (True, False):
            cs.append(topk_case(rng, shape, axis, k, largest))
    x = (np.round(_u(rng, 2, 30) * 4) / 4).astype(np.float32)
    x[0, [2, 7, 29]] = np.nan
    for largest in (True, False):
        cs.append(topk_case(rng, (2, 30), 1, 10, largest, x=x))
    # GatherElements
    cs += [gather_case(rng, (3, 5, 4), (3, 6, 4), 1), gather_case(rng, (4, 7), (4, 3), 1, True),
           gather_case(rng, (5, 3), (8, 3), 0), gather_case(rng, (2, 5, 6), (2, 5, 2), 2),
           gather_case(rng, (4, 5), (4, 5), 1, bad=True)]
    # NonMaxSuppression
    cs += [nms_case(rng, 1, 1, 30, 10, 0.5), nms_case(rng, 2, 3, 40, 100, 0.3, 0.4),
           nms_case(rng, 1, 2, 25, 5, 0.0, center=1), nms_case(rng, 2, 1, 20, 0, 0.5),
           nms_case(rng, 1, 1, 50, 50, 0.7, 0.9, center=1)]
    # RoiAlign
    for ratio, scale, ctm, mode in [(2, 0.25, "output_half_pixel", "avg"),
                                    (0, 1.0, "half_pixel", "avg"), (0, 0.5, "half_pixel", "max"),
                                    (3, 0.0625, "output_half_pixel", "max")]:
        cs.append(roi_case(rng, 2, 3, 11, 13, 6, 3, 5, ratio, scale, ctm, mode))
    cs.append(roi_case(rng, 1, 4, 15, 9, 3, 7, 7, 2, 0.5, "half_pixel", "avg", ep="bias_relu"))
    # a channels-last feature map read through strides: vectors over the channels (a tail
    # past the last whole vector), the adaptive grid, the epilogue; max mode stays scalar
    cs.append(roi_case(rng, 2, 37, 12, 10, 7, 3, 4, 2, 0.25, "output_half_pixel", "avg",
                       channels_last=True))
    cs.append(roi_case(rng, 1, 40, 9, 11, 5, 7, 7, 0, 1.0, "half_pixel", "avg", ep="bias_relu",
                       channels_last=True))
    cs.append(roi_case(rng, 2, 20, 8, 9, 4, 3, 5, 2, 0.5, "half_pixel", "max",
                       channels_last=True))
    # Resize: nearest (every nearest_mode), linear and cubic in every coordinate mode, down-
    # and upsampling, antialias, exclude_outside, tf_crop_and_resize, leading-axis resize
    img = (1, 3, 7, 9)
    for nm in NEAREST_MODES:
        cs.append(resize_case(rng, img, "nearest", "asymmetric", nm, scales=[1, 1, 2, 2]))
        cs.append(resize_case(rng, img, "nearest", "half_pixel", nm, sizes=[1, 3, 11, 5]))
    cs.append(resize_case(rng, (2, 4, 5, 6), "nearest", "asymmetric", "floor",
                          scales=[1, 1, 2, 2], ep="stores"))
    for mode in ("linear", "cubic"):
        for ctm in RESIZE_COORDS[:5]:
            cs.append(resize_case(rng, img, mode, ctm, scales=[1, 1, 2.0, 1.5]))
            cs.append(resize_case(rng, img, mode, ctm, sizes=[1, 3, 4, 17]))
        cs.append(resize_case(rng, img, mode, "half_pixel", sizes=[1, 3, 3, 4], antialias=1))
        cs.append(resize_case(rng, img, mode, "half_pixel", scales=[1, 1, 1.7, 0.6], exclude=1))
        cs.append(resize_case(rng, img, mode, "tf_crop_and_resize", sizes=[1, 3, 8, 10],
                              roi=[0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], extrapolation=-3.0))
    cs.append(resize_case(rng, (2, 3, 4, 5), "linear", "align_corners", sizes=[2, 3, 9, 11],
                          ep="bias_relu"))
    cs.append(resize_case(rng, (3, 4, 5), "linear", "half_pixel", scales=[2, 1, 1.5]))
    cs.append(resize_case(rng, (2, 6), "cubic", "asymmetric", scales=[1.5, 2], ep="bias_relu"))
    cs.append(resize_case(rng, (13,), "linear", "pytorch_half_pixel", sizes=[6]))
    cs.append(resize_case(rng, (4, 5), "nearest", "tf_crop_and_resize", "round_prefer_ceil",
                          sizes=[3, 8], roi=[0.1, -0.2, 0.8, 1.1], extrapolation=7.0))
    # large enough to be split across threads (DNNF_NUM_THREADS=2) and to sum in blocks
    cs += [softmax_case(rng, (64, 1000), -1, ep="bias_relu"), softmax_case(rng, (8, 30, 200), 1),
           layer_norm_case(rng, (64, 768), 1), reduce_case(rng, "ReduceSum", (2, 40000), [1]),
           reduce_case(rng, "ReduceMean", (300, 7, 50), [1]),
           reduce_case(rng, "ReduceL2", (4, 300, 200), [0, 2]),
           # fewer column blocks than threads (channels-last global pools): rows split in parts
           reduce_case(rng, "ReduceMean", (1, 60, 90, 40), [1, 2], ep="bias_relu"),
           reduce_case(rng, "ReduceMax", (1, 5000, 20), [1]), reduce_case(rng, "ReduceL2", (1, 6000, 24), [1]),
           arg_case(rng, (256, 300), 1, True, False), arg_case(rng, (4, 300, 40), 1, False, True),
           cumsum_case(rng, (40, 100, 20), 1, 0, 0), topk_case(rng, (300, 200), 1, 7, True),
           roi_case(rng, 1, 16, 20, 24, 12, 7, 7, 2, 0.25, "half_pixel", "avg"),
           resize_case(rng, (1, 8, 32, 40), "linear", "half_pixel", scales=[1, 1, 2, 2]),
           resize_case(rng, (1, 8, 32, 40), "nearest", "asymmetric", "floor", scales=[1, 1, 2, 2])]
    return cs


def cases_neon(rng) -> list[Case]:
    return [softmax_case(rng, (3, 37), -1), softmax_case(rng, (2, 5, 7), 1, ep="bias_relu"),
            softmax_case(rng, (2, 5, 9), 1, log=True),
            layer_norm_case(rng, (5, 37), 1, ep="bias_relu"),
            instance_norm_case(rng, (2, 3, 5, 7)),
            reduce_case(rng, "ReduceMean", (5, 3, 19), [1], ep="stores"),
            reduce_case(rng, "ReduceMax", (7, 37), [1]),
            reduce_case(rng, "ReduceSum", (2, 3, 4, 5), [1, 3]),
            arg_case(rng, (5, 37), 1, True, False), arg_case(rng, (2, 7, 9), 1, False, True),
            cumsum_case(rng, (2, 9, 21), 1, 1, 0), topk_case(rng, (3, 50), 1, 5, True),
            roi_case(rng, 2, 3, 11, 13, 4, 3, 5, 2, 0.25, "output_half_pixel", "avg"),
            resize_case(rng, (1, 3, 7, 9), "nearest", "asymmetric", "floor", scales=[1, 1, 2, 2]),
            resize_case(rng, (1, 3, 7, 9), "linear", "half_pixel", scales=[1, 1, 2, 1.5],
                        ep="bias_relu"),
            nms_case(rng, 1, 2, 25, 5, 0.3)]


# ---- running ------------------------------------------------------------------------------
def _read_outputs(data: bytes) -> list[list[np.ndarray | str]]:
    pos, res = 0, []
    while pos < len(data):
        (n,), pos = struct.unpack_from("<q", data, pos), pos + 8
        outs: list[np.ndarray | str] = []
        for _ in range(n):
            kind, size = struct.unpack_from("<qq", data, pos)
            pos += 16
            raw = data[pos:pos + size]
            pos += size
            outs.append(raw.decode() if kind == 3 else
                        np.frombuffer(raw, [np.float32, np.int64, np.int32][kind]))
        res.append(outs)
    return res


def _run_dialect(workdir: Path, isa: str, job: Job,
                 cases: list[Case]) -> list[list[np.ndarray | str]] | CompiledOnly:
    res = build_and_run(workdir, isa, job,
                        struct.pack("<q", len(cases)) + b"".join(c.record() for c in cases),
                        timeout=300, env={"DNNF_NUM_THREADS": "2"})
    if isinstance(res, CompiledOnly):
        return res
    raw, _ = res
    got = _read_outputs(raw)
    assert len(got) == len(cases)
    return got


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, tuple[list[Case], list] | str]:
    d = tmp_path_factory.mktemp("rowops")
    src = d / "driver.cc"
    src.write_text(DRIVER)
    jobs, out = {}, {}
    for isa, cmd in dialect_commands(src, COMMON).items():
        if isinstance(cmd, str):
            out[isa] = cmd
        else:
            jobs[isa] = (cmd, cases_neon(np.random.default_rng(8)) if isa == "neon"
                         else cases_x86(np.random.default_rng(7)))
    # Compiles dominate (~10 s each); DNNF_TEST_JOBS=1 runs them one at a time.
    with ThreadPoolExecutor(max_workers=int(os.environ.get("DNNF_TEST_JOBS", "2"))) as ex:
        futs = {isa: ex.submit(_run_dialect, d, isa, *job) for isa, job in jobs.items()}
        for isa, f in futs.items():
            res = f.result()
            out[isa] = res if isinstance(res, CompiledOnly) else (jobs[isa][1], res)
    return out


def _compare(c: Case, got: list) -> str | None:
    if isinstance(c.want, str):
        if len(got) == 1 and isinstance(got[0], str) and c.want in got[0]:
            return None
        return f"{c.name}: expected the error {c.want!r}, got {got!r}"
    if len(got) == 1 and isinstance(got[0], str):
        return f"{c.name}: threw {got[0]!r}"
    if len(got) != len(c.want):
        return f"{c.name}: {len(got)} outputs, want {len(c.want)}"
    for k, (g, w) in enumerate(zip(got, c.want)):
        w = np.asarray(w).reshape(-1)
        if g.shape != w.shape:
            return f"{c.name}: output {k} has {g.size} elements, want {w.size}"
        if c.exact or w.dtype.kind in "iu":
            ok = (g == w.astype(g.dtype)) | (np.isnan(w) & np.isnan(g) if w.dtype.kind == "f"
                                              else False)
        else:
            w64, g64 = w.astype(np.float64), g.astype(np.float64)
            with np.errstate(invalid="ignore"):
                ok = (np.abs(g64 - w64) <= c.atol + c.rtol * np.abs(w64)) | (g64 == w64) | \
                     (np.isnan(w64) & np.isnan(g64))
        if not ok.all():
            i = int(np.argmin(ok))
            return f"{c.name}: output {k}[{i}] = {g[i]} want {w[i]} ({int((~ok).sum())} bad)"
    return None


@pytest.mark.parametrize("isa", params(["scalar", "avx2", "avx512", "neon"]))
def test_rowops_match_reference(results, isa):
    res = results[isa]
    if isinstance(res, str):
        pytest.skip(res)
    if isinstance(res, CompiledOnly):
        return res.check()
    cases, got = res
    failures = [f for c, g in zip(cases, got) if (f := _compare(c, g))]
    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures[:40])
