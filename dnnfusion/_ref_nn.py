"""Spatial kernels of the NumPy reference interpreter (private to :mod:`dnnfusion.reference`).

Conv / ConvTranspose / pooling share the padding and output-size rules collected at the top
of this module; Resize, RoiAlign and NonMaxSuppression live here because they are the other
"geometric" operators. Every kernel has the signature ``kernel(inputs, attrs) -> list[ndarray]``
described in :mod:`dnnfusion.reference`. Arithmetic runs in float64 and the result is cast
back to the input's dtype.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dnnfusion.dtypes import is_float_dtype

Attrs = dict[str, Any]
Inputs = list["np.ndarray | None"]

_AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def unsupported(op: str, attr: str, value: object) -> NotImplementedError:
    """The error every kernel raises for an attribute value it does not implement."""
    return NotImplementedError(f"{op}: attribute {attr}={value!r} is not supported")


def _f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64, copy=False)


def _ints(values: Sequence[int] | np.ndarray | None, default: Sequence[int]) -> list[int]:
    return [int(v) for v in values] if values is not None else list(default)


def _input(inputs: Inputs, i: int) -> np.ndarray | None:
    """The i-th input, or None when it is absent (missing or empty list slot)."""
    return inputs[i] if len(inputs) > i else None


# --------------------------------------------------------------------------------------------
# Padding and output-size rules (Conv, ConvTranspose, MaxPool, AveragePool)
# --------------------------------------------------------------------------------------------
class Window:
    """Geometry of a sliding window over the spatial dims of an N x C x D1 x ... tensor."""

    def __init__(self, op: str, attrs: Attrs, in_shape: Sequence[int], kernel: Sequence[int]):
        nd = len(in_shape)
        self.in_shape = list(in_shape)
        self.kernel = [int(k) for k in kernel]
        self.strides = _ints(attrs.get("strides"), [1] * nd)
        self.dilations = _ints(attrs.get("dilations"), [1] * nd)
        auto_pad = attrs.get("auto_pad", "NOTSET")
        if auto_pad not in _AUTO_PADS:
            raise unsupported(op, "auto_pad", auto_pad)
        ceil_mode = bool(attrs.get("ceil_mode", 0))
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = [-(-i // s) for i, s in zip(in_shape, self.strides)]
            total = [max(0, (o - 1) * s + e - i) for o, s, e, i in
                     zip(out, self.strides, self.extents, in_shape)]
            self.begin, self.end = split_total_padding(total, upper=auto_pad == "SAME_UPPER")
        elif auto_pad == "VALID":
            self.begin, self.end = [0] * nd, [0] * nd
        else:
            pads = _ints(attrs.get("pads"), [0] * 2 * nd)
            self.begin, self.end = pads[:nd], pads[nd:]
        self.out_shape = [self._out_size(i, ceil_mode) for i in range(nd)]

    @property
    def extents(self) -> list[int]:
        """Spatial extent of one (dilated) window."""
        return [(k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations)]

    def _out_size(self, i: int, ceil_mode: bool) -> int:
        span = self.in_shape[i] + self.begin[i] + self.end[i] - self.extents[i]
        s = self.strides[i]
        if not ceil_mode:
            return span // s + 1
        out = -(-span // s) + 1
        # A window that would start in the end padding is dropped (PyTorch/ORT rule).
        if (out - 1) * s >= self.in_shape[i] + self.begin[i]:
            out -= 1
        return out

    def padded(self, x: np.ndarray, fill: float | int) -> np.ndarray:
        """x padded so that every window (including ceil_mode overhang) is in bounds."""
        widths = [(0, 0), (0, 0)]
        for i in range(len(self.in_shape)):
            need = (self.out_shape[i] - 1) * self.strides[i] + self.extents[i]
            widths.append((self.begin[i], max(0, need - self.begin[i] - self.in_shape[i])))
        return np.pad(x, widths, mode="constant", constant_values=fill)

    def taps(self) -> itertools.product:
        return itertools.product(*(range(k) for k in self.kernel))

    def tap_slices(self, tap: Sequence[int]) -> tuple[slice, ...]:
        """Slices of the padded tensor (spatial dims only) read by kernel tap ``tap``."""
        return tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in
                     zip(tap, self.dilations, self.out_shape, self.strides))

    def tap_positions(self, i: int, t: int) -> np.ndarray:
        """Input coordinates along spatial dim i read by tap t for every output position."""
        start = t * self.dilations[i] - self.begin[i]
        return np.arange(self.out_shape[i]) * self.strides[i] + start


def split_total_padding(total: Sequence[int], upper: bool) -> tuple[list[int], list[int]]:
    """SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the beginning."""
    small = [t // 2 for t in total]
    large = [t - t // 2 for t in total]
    return (small, large) if upper else (large, small)


# --------------------------------------------------------------------------------------------
# Conv / ConvTranspose
# --------------------------------------------------------------------------------------------
def _check_kernel_shape(op: str, attrs: Attrs, w: np.ndarray) -> None:
    ks = attrs.get("kernel_shape")
    if ks is not None and list(ks) != list(w.shape[2:]):
        raise ValueError(f"{op}: kernel_shape {list(ks)} does not match W's shape {w.shape}")


def conv(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, w, b = inputs[0], inputs[1], _input(inputs, 2)
    _check_kernel_shape("Conv", attrs, w)
    group = int(attrs.get("group", 1))
    win = Window("Conv", attrs, x.shape[2:], w.shape[2:])
    n, c = x.shape[:2]
    m = w.shape[0]
    xp = win.padded(_f64(x), 0.0)
    xg = xp.reshape(n, group, c // group, *xp.shape[2:])
    wg = _f64(w).reshape(group, m // group, c // group, *w.shape[2:])
    out = np.zeros((n, group, m // group, math.prod(win.out_shape)))
    for tap in win.taps():
        # explicit sizes, not -1: NumPy cannot infer -1 for an empty batch
        patch = xg[(slice(None),) * 3 + win.tap_slices(tap)].reshape(n, group, c // group,
                                                                      math.prod(win.out_shape))
        out += wg[(Ellipsis, *tap)] @ patch  # (G, Mg, Cg) @ (N, G, Cg, P) -> (N, G, Mg, P)
    y = out.reshape(n, m, *win.out_shape)
    if b is not None:
        y += _f64(b).reshape(1, m, *[1] * len(win.out_shape))
    return [y.astype(x.dtype)]


def _channels_last(op: str, kernel):
    """The channels-last twin of a channels-first kernel (X [N, spatial..., C])."""
    def run(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
        x = inputs[0]
        if x.ndim < 3:
            raise ValueError(f"{op}: X must have rank >= 3, got shape {x.shape}")
        y = kernel([np.transpose(x, (0, x.ndim - 1, *range(1, x.ndim - 1))), *inputs[1:]], attrs)[0]
        return [np.ascontiguousarray(np.transpose(y, (0, *range(2, y.ndim), 1)))]
    return run


# The internal NhwcConv of the inter-block layout pass: Conv with the channels last
# (X [N, spatial..., C], Y [N, spatial..., M]; W, B and the attributes as Conv's).
nhwc_conv = _channels_last("NhwcConv", conv)


def conv_transpose(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, w, b = inputs[0], inputs[1], _input(inputs, 2)
    _check_kernel_shape("ConvTranspose", attrs, w)
    nd = x.ndim - 2
    group = int(attrs.get("group", 1))
    in_sp = list(x.shape[2:])
    kernel = list(w.shape[2:])
    strides = _ints(attrs.get("strides"), [1] * nd)
    dil = _ints(attrs.get("dilations"), [1] * nd)
    out_pad = _ints(attrs.get("output_padding"), [0] * nd)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in _AUTO_PADS:
        raise unsupported("ConvTranspose", "auto_pad", auto_pad)
    # Length of the un-cropped ("full") result along each dim, output_padding included.
    full = [s * (i - 1) + op + (k - 1) * d + 1 for s, i, op, k, d in
            zip(strides, in_sp, out_pad, kernel, dil)]
    out_shape = attrs.get("output_shape")
    if out_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [int(o) for o in out_shape][-nd:] if out_shape is not None else \
            [i * s for i, s in zip(in_sp, strides)]
        # Like ONNX shape inference and ORT, a negative total padding counts as 0.
        total = [max(0, f - t) for f, t in zip(full, target)]
        begin, _ = split_total_padding(total, upper=auto_pad == "SAME_UPPER")
        out = target if out_shape is not None else [f - t for f, t in zip(full, total)]
    else:
        pads = [0] * 2 * nd if auto_pad == "VALID" else _ints(attrs.get("pads"), [0] * 2 * nd)
        begin = pads[:nd]
        out = [f - pb - pe for f, pb, pe in zip(full, begin, pads[nd:])]
    n, c = x.shape[:2]
    mg = w.shape[1]
    xg = _f64(x).reshape(n, group, c // group, math.prod(x.shape[2:]))
    wg = _f64(w).reshape(group, c // group, mg, *kernel)
    # The buffer covers both the full result and the requested window [begin, begin + out).
    lo = [min(0, pb) for pb in begin]
    hi = [max(f, pb + o) for f, pb, o in zip(full, begin, out)]
    buf = np.zeros((n, group, mg, *[h - l for h, l in zip(hi, lo)]))
    for tap in itertools.product(*(range(k) for k in kernel)):
        contrib = np.swapaxes(wg[(Ellipsis, *tap)], -1, -2) @ xg  # (N, G, Mg, P_in)
        dst = tuple(slice(t * d - l, t * d - l + s * (i - 1) + 1, s) for t, d, l, s, i in
                    zip(tap, dil, lo, strides, in_sp))
        buf[(slice(None),) * 3 + dst] += contrib.reshape(n, group, mg, *in_sp)
    crop = tuple(slice(pb - l, pb - l + o) for pb, l, o in zip(begin, lo, out))
    y = buf[(slice(None),) * 3 + crop].reshape(n, group * mg, *out)
    if b is not None:
        y = y + _f64(b).reshape(1, -1, *[1] * nd)
    return [y.astype(x.dtype)]


# --------------------------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------------------------
def _lowest(dtype: np.dtype) -> float | int:
    return -np.inf if is_float_dtype(dtype) else np.iinfo(dtype).min


def max_pool(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x = inputs[0]
    storage_order = int(attrs.get("storage_order", 0))
    if storage_order not in (0, 1):
        raise unsupported("MaxPool", "storage_order", storage_order)
    win = Window("MaxPool", attrs, x.shape[2:], attrs["kernel_shape"])
    xp = win.padded(x, _lowest(x.dtype))
    nd = len(win.in_shape)
    # Strides of the flattened spatial index (row-major, or column-major for storage_order=1).
    dims = win.in_shape if storage_order == 0 else win.in_shape[::-1]
    flat_strides = [math.prod(dims[i + 1:]) for i in range(nd)]
    if storage_order == 1:
        flat_strides = flat_strides[::-1]
    best = np.full((*x.shape[:2], *win.out_shape), _lowest(x.dtype), dtype=x.dtype)
    idx = np.zeros(best.shape, dtype=np.int64)
    seen = np.zeros(win.out_shape, dtype=bool)  # some in-bounds tap was read already
    for tap in win.taps():
        vals = xp[(slice(None), slice(None)) + win.tap_slices(tap)]
        inside, flat = np.ones(win.out_shape, dtype=bool), np.zeros(win.out_shape, np.int64)
        for i, t in enumerate(tap):
            pos = win.tap_positions(i, t).reshape([-1 if j == i else 1 for j in range(nd)])
            inside = inside & (pos >= 0) & (pos < win.in_shape[i])
            flat = flat + pos * flat_strides[i]
        better = inside & (~seen | (vals > best))  # strict: the first maximum wins ties
        best = np.where(better, vals, best)
        idx = np.where(better, flat, idx)
        seen |= inside
    n, c = x.shape[:2]
    offsets = np.arange(n * c).reshape(n, c, *[1] * nd) * math.prod(win.in_shape)
    return [best, (idx + offsets).astype(np.int64)]


def average_pool(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x = inputs[0]
    win = Window("AveragePool", attrs, x.shape[2:], attrs["kernel_shape"])
    include_pad = bool(attrs.get("count_include_pad", 0))
    xp = win.padded(_f64(x), 0.0)
    total = np.zeros((*x.shape[:2], *win.out_shape))
    for tap in win.taps():
        total += xp[(slice(None), slice(None)) + win.tap_slices(tap)]
    # The divisor is separable: per dim, count the taps that fall in the counted region.
    count = np.ones(win.out_shape)
    for i, size in enumerate(win.in_shape):
        lo, hi = (-win.begin[i], size + win.end[i]) if include_pad else (0, size)
        pos = [win.tap_positions(i, t) for t in range(win.kernel[i])]
        per_dim = sum(((p >= lo) & (p < hi)).astype(np.float64) for p in pos)
        count = count * per_dim.reshape([-1 if j == i else 1 for j in range(len(win.in_shape))])
    return [(total / np.maximum(count, 1)).astype(x.dtype)]


def global_average_pool(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x = inputs[0]
    return [_f64(x).mean(axis=tuple(range(2, x.ndim)), keepdims=True).astype(x.dtype)]


def global_max_pool(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x = inputs[0]
    return [x.max(axis=tuple(range(2, x.ndim)), keepdims=True)]


# --------------------------------------------------------------------------------------------
# Resize
# --------------------------------------------------------------------------------------------
def _cubic_kernel(a: float) -> Callable[[np.ndarray], np.ndarray]:
    def k(t: np.ndarray) -> np.ndarray:
        t = np.abs(t)
        near = ((a + 2) * t - (a + 3)) * t * t + 1
        far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return np.where(t <= 1, near, np.where(t < 2, far, 0.0))
    return k


def _linear_kernel(t: np.ndarray) -> np.ndarray:
    return np.clip(1 - np.abs(t), 0, 1)


def _source_coords(mode: str, out_len: int, in_len: int, scale: float,
                   roi: tuple[float, float], dtype: type) -> np.ndarray:
    """x_original for every output index along one axis (ONNX coordinate_transformation_mode).

    Computed in ``dtype`` (float32 unless the data is float64), with onnxruntime's order of
    operations, so that nearest-neighbour ties round the way ORT's float kernels do.
    """
    x = np.arange(out_len, dtype=dtype)
    scale, half, one = dtype(scale), dtype(0.5), dtype(1)
    n_in, n_out = dtype(in_len), dtype(out_len)
    if mode == "half_pixel":
        return (x + half) / scale - half
    if mode == "pytorch_half_pixel":
        return (x + half) / scale - half if out_len > 1 else np.zeros(out_len, dtype)
    if mode == "half_pixel_symmetric":
        offset = n_in / dtype(2) * (one - n_out / (scale * n_in))
        return offset + (x + half) / scale - half
    if mode == "align_corners":
        return x * (n_in - one) / (n_out - one) if out_len > 1 else np.zeros(out_len, dtype)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_crop_and_resize":
        start, end = dtype(roi[0]), dtype(roi[1])
        if out_len > 1:
            return start * (n_in - one) + x * (end - start) * (n_in - one) / (n_out - one)
        return np.full(out_len, half * (start + end) * (n_in - one), dtype)
    raise unsupported("Resize", "coordinate_transformation_mode", mode)


def _nearest_index(xo: np.ndarray, nearest_mode: str) -> np.ndarray:
    rounders = {
        "round_prefer_floor": lambda v: np.ceil(v - 0.5),
        "round_prefer_ceil": lambda v: np.floor(v + 0.5),
        "floor": np.floor,
        "ceil": np.ceil,
    }
    if nearest_mode not in rounders:
        raise unsupported("Resize", "nearest_mode", nearest_mode)
    return np.where(xo == np.floor(xo), xo, rounders[nearest_mode](xo)).astype(np.int64)


def _resize_matrix(attrs: Attrs, in_len: int, out_len: int, scale: float,
                   roi: tuple[float, float], dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """(out_len x in_len) interpolation matrix of one axis, and its extrapolation mask."""
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    mode = attrs.get("mode", "nearest")
    xo = _source_coords(ctm, out_len, in_len, scale, roi, dtype).astype(np.float64)
    outside = (xo < 0) | (xo > in_len - 1) if ctm == "tf_crop_and_resize" else \
        np.zeros(out_len, dtype=bool)
    rows = np.arange(out_len)[:, None]
    if mode == "nearest":
        idx = _nearest_index(xo, attrs.get("nearest_mode", "round_prefer_floor"))[:, None]
        coeffs = np.ones((out_len, 1))
    elif mode in ("linear", "cubic"):
        kernel, radius = ((_linear_kernel, 1) if mode == "linear" else
                          (_cubic_kernel(float(attrs.get("cubic_coeff_a", -0.75))), 2))
        antialias = bool(attrs.get("antialias", 0))
        s = min(scale, 1.0) if antialias else 1.0  # the filter is stretched by 1/s
        start = math.floor(-radius / s) + 1
        # Taps are base+start .. base-start+1 with ratio = x - base in (0, 1].
        base = np.ceil(xo) - 1
        ratio = xo - base
        offsets = np.arange(start, 2 - start)
        idx = base.astype(np.int64)[:, None] + offsets[None, :]
        coeffs = kernel((offsets[None, :] - ratio[:, None]) * s)
        if antialias:
            coeffs = coeffs / coeffs.sum(axis=1, keepdims=True)
    else:
        raise unsupported("Resize", "mode", mode)
    if attrs.get("exclude_outside", 0):
        coeffs = np.where((idx < 0) | (idx >= in_len), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    matrix = np.zeros((out_len, in_len))
    np.add.at(matrix, (np.broadcast_to(rows, idx.shape), np.clip(idx, 0, in_len - 1)), coeffs)
    return matrix, outside


def _resize_targets(x: np.ndarray, inputs: Inputs, attrs: Attrs,
                    axes: list[int]) -> tuple[dict[int, int], dict[int, float]]:
    """Output length and scale factor of every resized axis."""
    scales, sizes = _input(inputs, 2), _input(inputs, 3)
    if scales is not None and scales.size:
        scale = {a: float(s) for a, s in zip(axes, scales)}
        return {a: int(math.floor(x.shape[a] * scale[a])) for a in axes}, scale
    if sizes is None or not sizes.size:
        raise ValueError("Resize: one of 'scales' and 'sizes' must be given")
    out = {a: int(s) for a, s in zip(axes, sizes)}
    scale = {a: out[a] / x.shape[a] for a in axes}
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return out, scale
    if policy not in ("not_larger", "not_smaller"):
        raise unsupported("Resize", "keep_aspect_ratio_policy", policy)
    common = (min if policy == "not_larger" else max)(scale.values())
    return ({a: int(math.floor(common * x.shape[a] + 0.5)) for a in axes},
            {a: common for a in axes})


def resize(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, roi = inputs[0], _input(inputs, 1)
    axes = [int(a) % x.ndim for a in attrs.get("axes", range(x.ndim))]
    if attrs.get("antialias", 0) and attrs.get("mode", "nearest") == "nearest":
        raise unsupported("Resize", "antialias", "1 with mode=nearest")
    out_len, scale = _resize_targets(x, inputs, attrs, axes)
    # The roi only matters for tf_crop_and_resize; it then applies to every axis in `axes`,
    # resized or not (ORT ignores it on axes whose length does not change).
    crop = attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize" and \
        roi is not None and roi.size > 0
    coords = np.float64 if x.dtype == np.float64 else np.float32
    y = _f64(x)
    outside = np.zeros((1,) * x.ndim, dtype=bool)
    for i, a in enumerate(axes):
        if out_len[a] == x.shape[a] and scale[a] == 1.0 and not crop:
            continue  # identity along this axis
        span = (float(roi[i]), float(roi[i + len(axes)])) if crop else (0.0, 1.0)
        matrix, mask = _resize_matrix(attrs, x.shape[a], out_len[a], scale[a], span, coords)
        y = np.moveaxis(np.tensordot(matrix, y, axes=(1, a)), 0, a)
        outside = outside | mask.reshape([-1 if j == a else 1 for j in range(x.ndim)])
    if outside.any():
        y = np.where(outside, float(attrs.get("extrapolation_value", 0.0)), y)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        y = np.clip(np.round(y), info.min, info.max)
    return [y.astype(x.dtype)]


# --------------------------------------------------------------------------------------------
# RoiAlign
# --------------------------------------------------------------------------------------------
def _roi_samples(start: float, size: float, pooled: int, grid: int,
                 limit: int) -> tuple[np.ndarray, ...]:
    """Bilinear samples along one axis, each of shape (pooled, grid): low and high neighbour
    indices and their weights (zero for samples outside [-1, limit], as ORT does)."""
    bin_size = size / pooled
    pos = (start + np.arange(pooled)[:, None] * bin_size
           + (np.arange(grid)[None, :] + 0.5) * bin_size / grid)
    valid = (pos >= -1.0) & (pos <= limit)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    at_edge = low >= limit - 1
    low = np.where(at_edge, limit - 1, low)
    high = np.where(at_edge, limit - 1, low + 1)
    pos = np.where(at_edge, low, pos)
    frac = pos - low
    return low, high, (1 - frac) * valid, frac * valid


def roi_align(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    x, rois, batch_indices = inputs[0], _f64(inputs[1]), inputs[2]
    mode = attrs.get("mode", "avg")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    if mode not in ("avg", "max"):
        raise unsupported("RoiAlign", "mode", mode)
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise unsupported("RoiAlign", "coordinate_transformation_mode", ctm)
    ph, pw = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
    ratio = int(attrs.get("sampling_ratio", 0))
    spatial_scale = float(attrs.get("spatial_scale", 1.0))
    offset = 0.5 if ctm == "half_pixel" else 0.0
    height, width = x.shape[2:]
    xf = _f64(x)
    y = np.zeros((rois.shape[0], x.shape[1], ph, pw))
    for r, (x1, y1, x2, y2) in enumerate(rois * spatial_scale - offset):
        roi_w, roi_h = x2 - x1, y2 - y1
        if ctm == "output_half_pixel":  # legacy behaviour: force malformed ROIs to 1x1
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        gh = ratio if ratio > 0 else int(math.ceil(roi_h / ph))
        gw = ratio if ratio > 0 else int(math.ceil(roi_w / pw))
        ylo, yhi, wylo, wyhi = _roi_samples(y1, roi_h, ph, gh, height)
        xlo, xhi, wxlo, wxhi = _roi_samples(x1, roi_w, pw, gw, width)
        img = xf[int(batch_indices[r])]
        # Each corner term has shape (C, ph, gh, pw, gw).
        terms = [wy[None, :, :, None, None] * wx[None, None, None] *
                 img[:, yi[:, :, None, None], xi[None, None]]
                 for yi, wy in ((ylo, wylo), (yhi, wyhi)) for xi, wx in ((xlo, wxlo), (xhi, wxhi))]
        if mode == "avg":
            y[r] = sum(terms).sum(axis=(2, 4)) / max(gh * gw, 1)
        else:
            y[r] = np.maximum.reduce(terms).max(axis=(2, 4))
    return [y.astype(x.dtype)]


def nhwc_roi_align(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """The internal NhwcRoiAlign of the inter-block layout pass: RoiAlign of a channels-last
    X [N, H, W, C]; Y [num_rois, C, oh, ow] as RoiAlign's."""
    x = inputs[0]
    if x.ndim != 4:
        raise ValueError(f"NhwcRoiAlign: X must have shape [N, H, W, C], got {x.shape}")
    return roi_align([np.transpose(x, (0, 3, 1, 2)), *inputs[1:]], attrs)


# --------------------------------------------------------------------------------------------
# NonMaxSuppression
# --------------------------------------------------------------------------------------------
def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """[x_min, y_min, x_max, y_max] for every box (computed in the boxes' dtype, like ORT)."""
    if center_point_box == 0:  # [y1, x1, y2, x2], any pair of diagonal corners
        y1, x1, y2, x2 = boxes.T
        return np.stack([np.minimum(x1, x2), np.minimum(y1, y2),
                         np.maximum(x1, x2), np.maximum(y1, y2)], axis=1)
    if center_point_box == 1:  # [x_center, y_center, width, height]
        xc, yc, w, h = boxes.T
        return np.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], axis=1)
    raise unsupported("NonMaxSuppression", "center_point_box", center_point_box)


def _suppressed(box: np.ndarray, others: np.ndarray, iou_threshold: float) -> np.ndarray:
    ix = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    iy = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = ix * iy
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    ok = (ix > 0) & (iy > 0) & (area > 0) & (areas > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return ok & (inter / union > iou_threshold)


def non_max_suppression(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    boxes, scores = inputs[0], inputs[1]
    max_out, iou_t, score_t = (_input(inputs, i) for i in (2, 3, 4))
    limit = int(max_out.reshape(-1)[0]) if max_out is not None and max_out.size else 0
    iou = iou_t.reshape(-1)[0] if iou_t is not None and iou_t.size else boxes.dtype.type(0)
    center_point_box = int(attrs.get("center_point_box", 0))
    selected: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        corners = _corners(boxes[b], center_point_box)
        for c in range(scores.shape[1]):
            s = scores[b, c]
            candidates = np.arange(s.shape[0])
            if score_t is not None and score_t.size:
                candidates = candidates[s > score_t.reshape(-1)[0]]
            # Highest score first; equal scores keep the lower box index first.
            order = candidates[np.argsort(-s[candidates].astype(np.float64), kind="stable")]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if not kept or not _suppressed(corners[i], corners[kept], iou).any():
                    kept.append(int(i))
            selected.extend((b, c, i) for i in kept)
    return [np.array(selected, dtype=np.int64).reshape(-1, 3)]


# The internal channels-last pools of the inter-block layout pass (Y only).
nhwc_max_pool = _channels_last("NhwcMaxPool", lambda i, a: max_pool(i, a)[:1])
nhwc_average_pool = _channels_last("NhwcAveragePool", average_pool)
