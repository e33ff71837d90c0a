"""GridSample, the NumPy reference's kernel (private to :mod:`dnnfusion.reference`; the
signature ``kernel(inputs, attrs) -> list[ndarray]`` of :mod:`dnnfusion._ref_nn`)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._ref_nn import Attrs, Inputs, unsupported

GRID_MODES = {"linear": "linear", "nearest": "nearest", "cubic": "cubic",
              "bilinear": "linear", "bicubic": "cubic"}  # GridSample-16 spells two of them so


def _keys_cubic(t: np.ndarray) -> list[np.ndarray]:
    """Keys' cubic convolution weights (a = -0.75) of the taps at -1, 0, 1, 2 from floor(x),
    t = x - floor(x) in [0, 1), computed in t's dtype (as the ONNX reference does)."""
    a = t.dtype.type(-0.75)
    one, two = t.dtype.type(1), t.dtype.type(2)
    u = t + one
    w0 = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a
    w1 = ((a + 2) * t - (a + 3)) * t * t + one
    v = one - t
    w2 = ((a + 2) * v - (a + 3)) * v * v + one
    v2 = two - t
    w3 = ((a * v2 - 5 * a) * v2 + 8 * a) * v2 - 4 * a
    return [w0, w1, w2, w3]


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """x reflected at lo and hi (as often as it takes) into [lo, hi], in float64."""
    x = x.astype(np.float64)
    rng = hi - lo
    if rng <= 0:
        return np.where(np.isfinite(x), lo, np.nan)
    with np.errstate(invalid="ignore"):
        below = np.fmod(lo - x, 2 * rng)  # the distance past the border, modulo a round trip
        above = np.fmod(x - hi, 2 * rng)
        down = np.where(below < rng, lo + below, hi - (below - rng))
        up = np.where(above < rng, hi - above, lo + (above - rng))
        return np.where(x < lo, down, np.where(x > hi, up, x))


def grid_sample(inputs: Inputs, attrs: Attrs) -> list[np.ndarray]:
    """GridSample (opsets 16, 20, 22): X [N, C, *in] (1 to 3 spatial axes) sampled at grid
    [N, *out, nd] (normalized to [-1, 1], the innermost spatial axis first): Y [N, C, *out].

    Per spatial axis of size D, as the ONNX reference and PyTorch: the coordinate is
    denormalized in float32 (float64 for a float64 grid): align_corners=1 maps -1 and 1 to the
    centres of the end pixels (x = (n + 1) / 2 * (D - 1)), 0 to their outer edges
    (x = ((n + 1) * D - 1) / 2); nearest rounds it half to even; a coordinate outside the
    borders ([0, D - 1], or [-0.5, D - 0.5] without align_corners) is clamped to [0, D - 1]
    (border; not for cubic, see below) or reflected at them (reflection); then 1, 2 or 4 taps (nearest, linear, Keys'
    cubic with a = -0.75) are read, a tap outside the input reading 0 (zeros), the nearest edge
    pixel (border) or its reflection (reflection). The N-linear and N-cubic weights are the
    products of the axes' weights; the taps are summed in float64.

    Cubic with border padding clamps the taps, not the coordinate, as PyTorch's grid_sample
    and ONNX Runtime do (the ONNX reference clamps the coordinate first, which moves the taps
    of every point near the border: up to 0.2-0.4 apart on random data, where ONNX Runtime and
    PyTorch agree within 1e-6; no ONNX backend test has that case).

    Where ONNX does not say: a NaN coordinate gives NaN; an infinite one gives 0 with zeros
    padding (every tap is outside), the edge pixel with border, NaN with reflection."""
    x, grid = inputs[0], inputs[1]
    mode = GRID_MODES.get(str(attrs.get("mode", "linear")))
    if mode is None:
        raise unsupported("GridSample", "mode", attrs.get("mode"))
    pad = str(attrs.get("padding_mode", "zeros"))
    if pad not in ("zeros", "border", "reflection"):
        raise unsupported("GridSample", "padding_mode", pad)
    align = bool(int(attrs.get("align_corners", 0)))
    nd = x.ndim - 2
    if not 1 <= nd <= 3 or grid.ndim != x.ndim or grid.shape[0] != x.shape[0] or grid.shape[-1] != nd:
        raise ValueError(f"GridSample: X {x.shape} and grid {grid.shape} do not fit")
    n_, c_ = x.shape[:2]
    dims = x.shape[2:]
    out = grid.shape[1:-1]
    p_ = math.prod(out)
    ct = np.float64 if grid.dtype == np.float64 else np.float32
    g = grid.reshape(n_, p_, nd).astype(ct)[..., ::-1]  # axis k of g: spatial axis k of X
    nan = np.zeros((n_, p_), dtype=bool)
    taps: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = []  # per axis: (index, valid, weight)
    with np.errstate(invalid="ignore", over="ignore"):
        for k, d in enumerate(dims):
            v = g[..., k]
            if align:
                xa = (v + ct(1)) / ct(2) * ct(d - 1)
            else:
                xa = ((v + ct(1)) * ct(d) - ct(1)) / ct(2)
            lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
            if mode == "nearest":
                xa = np.rint(xa)
            outside = (xa < lo) | (xa > hi)
            if pad == "border" and mode != "cubic":
                xa = np.where(outside, np.clip(xa, 0, d - 1), xa).astype(ct)
            elif pad == "border":  # cubic: past 3 pixels out every tap is the edge pixel
                xa = np.clip(xa, -4, d + 3).astype(ct)
            elif pad == "reflection":
                xa = np.where(outside, _reflect(xa, lo, hi), xa).astype(ct)
            bad = ~np.isfinite(xa)
            nan |= np.isnan(xa)
            if pad == "reflection":
                nan |= bad
            if mode == "nearest":
                base, offs, ws = np.trunc(xa), (0,), [np.ones_like(xa)]
            else:
                base = np.floor(xa)
                t = (xa - base).astype(ct)
                offs, ws = ((0, 1), [ct(1) - t, t]) if mode == "linear" else ((-1, 0, 1, 2), _keys_cubic(t))
            axis_taps = []
            for o, w in zip(offs, ws):
                i = np.where(bad, -1.0, base.astype(np.float64) + o)
                if pad == "zeros":
                    valid = (i >= 0) & (i < d)
                    i = np.where(valid, i, 0)
                elif pad == "border":
                    valid = np.ones(i.shape, dtype=bool)
                    i = np.clip(i, 0, d - 1)
                else:
                    valid = np.ones(i.shape, dtype=bool)
                    i = np.trunc(np.nan_to_num(_reflect(i, lo, hi)))
                axis_taps.append((i.astype(np.int64), valid & ~bad, w.astype(np.float64)))
            taps.append(axis_taps)
    strides = [math.prod(dims[k + 1:]) for k in range(nd)]
    flat = x.reshape(n_, c_, -1).astype(np.float64)
    y = np.zeros((n_, c_, p_))
    for combo in itertools.product(*taps) if flat.shape[2] else ():  # an empty input: every tap outside
        idx = sum(t[0] * s for t, s in zip(combo, strides))
        valid = np.logical_and.reduce([t[1] for t in combo])
        w = np.prod([t[2] for t in combo], axis=0)
        got = np.take_along_axis(flat, idx[:, None, :], axis=2)
        y += np.where(valid[:, None, :], w[:, None, :] * got, 0.0)
    y = np.where(nan[:, None, :], np.nan, y)
    return [y.reshape(n_, c_, *out).astype(x.dtype)]
