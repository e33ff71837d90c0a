"""Signal-processing operators ONNX gives no function body (DFT, STFT, MelWeightMatrix),
written as bodies of ECG operators.

A DFT of static length is linear in its input, so it is written as one MatMul with a constant
matrix of cos/sin values (built in float64 with NumPy, stored in the input's dtype) over the
transformed axis and the real/imaginary pair flattened together: [.., N*C] x [N*C, K*C'] with
C, C' in {1, 2}. Truncation and zero padding to dft_length, the one-sided spectrum (RFFT), the
inverse's 1/dft_length and the Hermitian reconstruction of IRFFT are all folded into that
matrix. This is an O(N^2) matrix DFT, not an FFT: fine up to a few thousand points (and fast,
as a GEMM); a matrix larger than onnx_body.MAX_CONSTANT elements is refused as a size.
STFT gathers its frames with constant indices, multiplies them by the window and applies the
same matrix. MelWeightMatrix, whose inputs fix its output, is computed at import."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import DTypeError, ShapeError
from dnnfusion.frontends.onnx_body import function_proto as _hand_body
from dnnfusion.frontends.onnx_body import node_attrs as _attrs
from dnnfusion.frontends.onnx_body import node_label as _label
from dnnfusion.frontends.onnx_body import ONNX_CODES as _ONNX_CODES
from dnnfusion.frontends.onnx_body import bounded as _bounded
from dnnfusion.frontends.onnx_body import const_node as _const
from dnnfusion.frontends.onnx_body import np_dtype as _np_dtype

_FLOATS = ("f16", "f32", "f64")


def _input(imp: Any, node: Any, i: int) -> Any | None:
    """Input i's value, or None where the node leaves the optional input out."""
    return imp.env[node.input[i]] if len(node.input) > i and node.input[i] else None


def _scalar(imp: Any, node: Any, i: int, what: str) -> Any | None:
    """A scalar input that fixes the output's shape (dft_length, axis, frame_step, ...): it
    must be a constant, since the body's matrices are built from it at import."""
    v = _input(imp, node, i)
    if v is None:
        return None
    if not v.is_constant:
        raise ShapeError(f"{_label(node)}: {what} (input {i}) must be given as a constant (an "
                         "initializer or a Constant node): dnnfusion builds the operator's constants from it at import")
    a = np.asarray(v.numpy())
    if a.size != 1:
        raise ShapeError(f"{_label(node)}: {what} (input {i}) must be a scalar, got shape {list(a.shape)}")
    return a.reshape(-1)[0]


def _static(n: Any, node: Any, what: str) -> int:
    """A size the constant matrices or indices are built from: a symbolic one is refused."""
    if not isinstance(n, int):
        raise ShapeError(f"{_label(node)} needs a static size for {what}, got '{n}'")
    return n


def _float_input(v: Any, node: Any, what: str) -> None:
    """The transforms are defined on floats (T1); anything else would reach MatMul's own error."""
    if v.dtype not in _FLOATS:
        raise DTypeError(f"{_label(node)}: {what} must be float16, float32 or float64, got {v.dtype}")


def _angles(k: np.ndarray, n: np.ndarray, length: int) -> np.ndarray:
    """2*pi*k*n/length with k*n reduced modulo length first, so the angle stays small and the
    cos/sin of large products are as exact as those of small ones."""
    return 2.0 * np.pi * (np.outer(k, n) % length) / length


def dft_matrix(n: int, c_in: int, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The float64 matrix W with x.reshape(.., n*c_in) @ W == the DFT flattened to (.., K*c_out):
    row n*c_in + c reads input element n, part c (0 real, 1 imaginary); column k*c_out + d writes
    output bin k, part d. Rows of samples past `length` stay zero (truncation); samples past n
    are zeros, so zero padding needs no row. IRFFT (inverse and onesided) reads bins 0..length//2
    of a Hermitian spectrum and writes a real signal: the other bins count twice, the DC and
    Nyquist bins once (their imaginary parts drop out, as in numpy.fft.irfft)."""
    if inverse and onesided:  # IRFFT: n bins in (complex), length samples out (real)
        bins = min(n, length // 2 + 1)
        k, t = np.arange(bins), np.arange(length)
        a = _angles(k, t, length)
        w = np.full(bins, 2.0)
        w[0] = 1.0
        if length % 2 == 0 and bins > length // 2:
            w[length // 2] = 1.0
        m = np.zeros((n, 2, length))
        m[:bins, 0] = w[:, None] * np.cos(a) / length
        m[:bins, 1] = -w[:, None] * np.sin(a) / length
        return m.reshape(n * 2, length)
    k_out = length // 2 + 1 if onesided else length
    used = min(n, length)
    a = _angles(np.arange(used), np.arange(k_out), length)  # [sample, bin]
    cos, sin = np.cos(a), np.sin(a)
    sign, scale = (1.0, 1.0 / length) if inverse else (-1.0, 1.0)
    m = np.zeros((n, c_in, k_out, 2))
    # (a + ib) * (cos + i*sign*sin): real a*cos - sign*b*sin, imaginary sign*a*sin + b*cos
    m[:used, 0, :, 0] = cos * scale
    m[:used, 0, :, 1] = sign * sin * scale
    if c_in == 2:
        m[:used, 1, :, 0] = -sign * sin * scale
        m[:used, 1, :, 1] = cos * scale
    return m.reshape(n * c_in, k_out * 2)


def _apply_matrix(imp: Any, src: str, lead: int, n: int, c_in: int, w: np.ndarray, k_out: int, c_out: int,
                  dtype: Any, out: str) -> list:
    """Nodes that multiply the last two axes [.., n, c_in] of `src` by W into [.., k_out, c_out]
    named `out`; the `lead` axes before them are copied through (Reshape's 0), so they may be
    symbolic."""
    h = imp.onnx.helper
    flat = [0] * lead + [n * c_in] if lead else [1, n * c_in]
    back = [0] * lead + [k_out, c_out] if lead else [k_out, c_out]
    return [_const(imp, "flat_shape", np.array(flat, np.int64)), h.make_node("Reshape", [src, "flat_shape"], ["flat"]),
            _const(imp, "w", w.astype(dtype)), h.make_node("MatMul", ["flat", "w"], ["prod"]),
            _const(imp, "out_shape", np.array(back, np.int64)), h.make_node("Reshape", ["prod", "out_shape"], [out])]


def dft(imp: Any, node: Any) -> Any:
    """DFT (opset 17: axis an attribute, default 1; opset 20: axis an optional input, default
    -2): the input's DFT axis moved next to the real/imaginary axis (Transpose), one MatMul
    with dft_matrix, and moved back. Sizes must be static on the DFT axis and dft_length and
    axis constants, since they fix the matrix. An O(N^2) matrix DFT, not an FFT."""
    x = imp.env[node.input[0]]
    _float_input(x, node, "the input")
    attrs = _attrs(imp, node)
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    if attrs.get("inverse", 0) not in (0, 1) or attrs.get("onesided", 0) not in (0, 1):
        raise ShapeError(f"{_label(node)}: inverse and onesided must be 0 or 1, got {attrs.get('inverse', 0)} "
                         f"and {attrs.get('onesided', 0)}")
    if imp.opset >= 20:
        if "axis" in attrs:
            raise ShapeError(f"{_label(node)}: from opset 20, axis is an input (2), not an attribute")
        axis = _scalar(imp, node, 2, "axis")
        axis = -2 if axis is None else int(axis)
    else:
        axis = int(attrs.get("axis", 1))
    shape = list(x.shape)
    rank = len(shape)
    if rank < 2:
        raise ShapeError(f"{_label(node)}: the input must have rank 2 or more ([.., N, 1] real or [.., N, 2] "
                         f"complex), got {shape}")
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise ShapeError(f"{_label(node)}: axis {axis} is outside [-{rank}, -2] and [0, {rank - 2}] for an input of "
                         f"rank {rank} (the last axis holds the real and imaginary parts)")
    axis %= rank
    c_in = shape[-1]
    if c_in not in (1, 2):
        raise ShapeError(f"{_label(node)}: the input's last axis must be 1 (real) or 2 (complex), got {c_in}")
    n = _static(shape[axis], node, f"the DFT axis {axis}")
    if onesided and not inverse and c_in == 2:
        raise ShapeError(f"{_label(node)}: onesided=1 (RFFT) takes a real input ([.., N, 1]); this one is complex")
    if onesided and inverse and c_in == 1:
        raise ShapeError(f"{_label(node)}: onesided=1 with inverse=1 (IRFFT) takes a complex one-sided input "
                         "([.., N, 2]); this one is real")
    length = _scalar(imp, node, 1, "dft_length")
    if length is None:
        length = 2 * (n - 1) if inverse and onesided else n
    length = int(length)
    if length < 1:
        raise ShapeError(f"{_label(node)}: dft_length must be positive, got {length}"
                         + (f" (the default for IRFFT, 2 * ({n} - 1))" if _input(imp, node, 1) is None else ""))
    irfft = inverse and onesided
    k_out = length if irfft else (length // 2 + 1 if onesided else length)
    c_out = 1 if irfft else 2
    _bounded(n * c_in * k_out * c_out, "a DFT matrix", node)
    w = dft_matrix(n, c_in, length, inverse, onesided)
    h = imp.onnx.helper
    nodes, src = [], "in0"
    moved = axis != rank - 2
    if moved:
        perm = [i for i in range(rank - 1) if i != axis] + [axis, rank - 1]
        nodes.append(h.make_node("Transpose", ["in0"], ["moved"], perm=perm))
        src = "moved"
    nodes += _apply_matrix(imp, src, rank - 2, n, c_in, w, k_out, c_out, _np_dtype(x.dtype),
                           "spectrum" if moved else "out0")
    if moved:
        back = [int(p) for p in np.argsort(perm)]
        nodes.append(h.make_node("Transpose", ["spectrum"], ["out0"], perm=back))
    return _hand_body(imp, "DFT", len(node.input), nodes)


def stft(imp: Any, node: Any) -> Any:
    """STFT (opset 17): frames of frame_length samples every frame_step (constants: they fix
    the frame count) taken with one Gather of constant indices [frames, frame_length] along
    the signal axis, multiplied by the window when there is one (any input of the signal's
    dtype), then the DFT of each frame as in dft (an O(N^2) matrix DFT, not an FFT). The spec
    notes that a complex signal has no one-sided output, yet onesided defaults to 1 and ONNX
    Runtime and the ONNX reference both return the first frame_length // 2 + 1 bins of the full
    spectrum for it: so does this, rather than refuse models they run."""
    x = imp.env[node.input[0]]
    _float_input(x, node, "the signal")
    attrs = _attrs(imp, node)
    onesided = attrs.get("onesided", 1)
    if onesided not in (0, 1):
        raise ShapeError(f"{_label(node)}: onesided must be 0 or 1, got {onesided}")
    shape = list(x.shape)
    if len(shape) != 3 or shape[-1] not in (1, 2):
        raise ShapeError(f"{_label(node)}: the signal must be [batch, length, 1] (real) or [batch, length, 2] "
                         f"(complex), got {shape}")
    c_in = shape[-1]  # complex and onesided (the default): the first bins, as ONNX Runtime and the reference
    signal = _static(shape[1], node, "the signal length (axis 1)")
    step = _scalar(imp, node, 1, "frame_step")
    if step is None:
        raise ShapeError(f"{_label(node)}: frame_step (input 1) is required")
    step = int(step)
    if step < 1:
        raise ShapeError(f"{_label(node)}: frame_step must be positive, got {step}")
    window = _input(imp, node, 2)
    length = _scalar(imp, node, 3, "frame_length")
    if window is not None:
        if window.dtype != x.dtype:
            raise DTypeError(f"{_label(node)}: the window is {window.dtype}, the signal {x.dtype}; they must match")
        if len(window.shape) != 1:
            raise ShapeError(f"{_label(node)}: the window must be 1-D, got shape {list(window.shape)}")
        size = _static(window.shape[0], node, "the window's length")
        if length is not None and int(length) != size:
            raise ShapeError(f"{_label(node)}: frame_length {int(length)} differs from the window's length {size}")
        length = size
    length = signal if length is None else int(length)
    if length < 1 or length > signal:
        raise ShapeError(f"{_label(node)}: frame_length {length} must be between 1 and the signal length {signal}")
    frames = 1 + (signal - length) // step
    k_out = length // 2 + 1 if onesided else length
    _bounded(frames * length, "a frame index table", node)
    _bounded(length * c_in * k_out * 2, "a DFT matrix", node)
    h = imp.onnx.helper
    idx = np.arange(frames, dtype=np.int64)[:, None] * step + np.arange(length, dtype=np.int64)[None, :]
    nodes = [_const(imp, "idx", idx), h.make_node("Gather", ["in0", "idx"], ["frames"], axis=1)]  # [B, F, L, C]
    src = "frames"
    if window is not None:
        nodes += [_const(imp, "wshape", np.array([length, 1], np.int64)),
                  h.make_node("Reshape", ["in2", "wshape"], ["win"]),
                  h.make_node("Mul", ["frames", "win"], ["windowed"])]
        src = "windowed"
    w = dft_matrix(length, c_in, length, False, bool(onesided))
    nodes += _apply_matrix(imp, src, 2, length, c_in, w, k_out, 2, _np_dtype(x.dtype), "out0")
    return _hand_body(imp, "STFT", len(node.input), nodes)


def mel_weight_matrix(num_mel_bins: Any, dft_length: Any, sample_rate: Any, lower_edge_hertz: Any,
                      upper_edge_hertz: Any) -> np.ndarray:
    """The [dft_length // 2 + 1, num_mel_bins] float64 matrix of triangular mel filters, with
    the ONNX reference's arithmetic step for step (NumPy on the inputs' own dtypes: the bin
    edges are truncated to integers, so a different rounding order would move them)."""
    bins = np.arange(0, num_mel_bins + 2)
    low_mel = 2595 * np.log1p(lower_edge_hertz / 700) / np.log(10)
    high_mel = 2595 * np.log1p(upper_edge_hertz / 700) / np.log(10)
    mel_step = (high_mel - low_mel) / bins.shape[0]
    hz = 700 * np.expm1((bins * mel_step + low_mel) / 2595 * np.log(10))
    edges = (((dft_length + 1) * hz) // sample_rate).astype(int)
    out = np.zeros((int(dft_length) // 2 + 1, int(num_mel_bins)))
    for i in range(int(num_mel_bins)):
        left, centre, right = int(edges[i]), int(edges[i + 1]), int(edges[i + 2])
        if centre == left:
            out[centre, i] = 1.0
        else:
            for j in range(left, centre + 1):
                out[j, i] = (j - left) / (centre - left)
        for j in range(centre, right):
            out[j, i] = (right - j) / (right - centre)
    return out


def mel_weights(imp: Any, node: Any) -> Any:
    """MelWeightMatrix (opset 17): its five inputs fix the whole output, so with constant
    inputs it is a constant computed at import (mel_weight_matrix); otherwise there is nothing
    to compute it with, and the output's shape would be unknown: refused."""
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    if len(node.input) != 5 or not all(node.input):
        raise ShapeError(f"{_label(node)} takes five inputs ({', '.join(names)}), got {len(node.input)}")
    values = [_scalar(imp, node, i, what) for i, what in enumerate(names)]
    mels, length, rate = (int(values[i]) for i in range(3))
    if mels < 1 or length < 1 or rate < 1:
        raise ShapeError(f"{_label(node)}: num_mel_bins, dft_length and sample_rate must be positive, got {mels}, "
                         f"{length} and {rate}")
    lo, hi = float(values[3]), float(values[4])
    if not 0 <= lo <= hi:
        raise ShapeError(f"{_label(node)}: the edges must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz, got "
                         f"{lo} and {hi}")
    code = _attrs(imp, node).get("output_datatype", 1)
    ecg = {c: t for t, c in _ONNX_CODES.items()}.get(code)
    if ecg not in _FLOATS:
        raise DTypeError(f"{_label(node)}: output_datatype {code} is not a float type dnnfusion supports "
                         "(float16, float32, float64)")
    _bounded((length // 2 + 1) * mels, "a mel weight matrix", node)
    try:
        m = mel_weight_matrix(*values)
    except IndexError:  # an edge past the spectrum: upper_edge_hertz above the Nyquist frequency
        raise ShapeError(f"{_label(node)}: upper_edge_hertz {hi} puts a filter past the {length // 2 + 1} "
                         f"spectrogram bins of dft_length {length} at sample_rate {rate}") from None
    return _hand_body(imp, "MelWeightMatrix", 5, [_const(imp, "out0", m.astype(_np_dtype(ecg)))])


# op type -> fn(imp, node) -> FunctionProto (see onnx_functions.hand_forms)
HAND_FORMS: dict[str, Any] = {"DFT": dft, "STFT": stft, "MelWeightMatrix": mel_weights}
