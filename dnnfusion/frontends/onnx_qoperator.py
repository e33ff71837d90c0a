"""QOperator-format quantized operators (QLinearMatMul, QLinearConv, MatMulInteger,
ConvInteger), written as bodies of ECG operators.

Models quantized by onnxruntime.quantization in QOperator format (and ONNX's own backend
tests) use these; ONNX gives them no function body. Each is written here as:

* the integer accumulation, exact: the uint8/int8 operands Cast to int32, their zero points
  subtracted (per tensor, per row of A / column of B, per output channel of W), and an int32
  MatMul. Code generation computes MatMul on int32 itself (summed in int32, as ONNX Runtime
  does), so the accumulator is exact for any K. Conv is different: code generation computes it
  on float32 only, and its float32 paths (Winograd among them) are not exact on integers, so a
  convolution is written as an im2col (a Gather of the padded input through a constant index,
  the padding reading a zero appended to each row) and a grouped int32 MatMul. float64 was the
  fallback considered (exact while |sum| < 2^53), but it is not needed: int32 is exact and
  cheaper.
* for QLinear*, the requantization the ONNX reference (onnx.reference) computes, bit for
  bit: the multiplier a_scale * b_scale / y_scale in the scales' type (float32, or float16 at
  opset 21), the int32 accumulator times it in float64 (NumPy promotes int32 * float32 to
  float64), + y_zero_point, round half to even, saturate to the output type. ONNX Runtime
  multiplies in float32 (float(acc) * multiplier) and so can differ from the reference by one
  where the float64 product lies within a float32 rounding of a .5 tie; dnnfusion matches the
  reference (the specification's result), ONNX Runtime in all but such cases.

A per-row zero point or scale of A ([M]) is read along A's rows, as the specification says
(the reference subtracts it along the last axis, which only runs when M == K). Constant scales
(as quantizers write them) are combined here, in NumPy, into one float64 multiplier; scales
fed at run time are combined in the graph in their own type (float16 ones, in compiled code,
in float32: see multiplier()). Shapes must be static but for the batch (the im2col index and
the per-row / per-channel layouts depend on them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import DTypeError, ShapeError
from dnnfusion.frontends.onnx_body import Body, function_proto, node_attrs, node_label

# The ECG's quantized types -> (ONNX type code, lowest, highest value).
_QUANT = {"u8": (2, 0, 255), "i8": (3, -128, 127)}
_SCALE_TYPES = {"f32": np.float32, "f16": np.float16}
_I32, _F64 = 6, 11
MAX_INDEX = 1 << 24  # the largest im2col index (elements) written at import


class _Form:
    """One node's body under construction; its messages name the node and operator."""

    def __init__(self, imp: Any, node: Any):
        self.imp, self.node, self.b = imp, node, Body(imp.onnx)
        self.where = node_label(node)
        self.attrs = node_attrs(imp, node)

    def has(self, k: int) -> bool:
        return k < len(self.node.input) and bool(self.node.input[k])

    def value(self, k: int) -> Any:
        return self.imp.env[self.node.input[k]]

    def shape(self, k: int) -> list:
        return list(self.value(k).shape)

    def shape_error(self, msg: str) -> ShapeError:
        return ShapeError(f"{self.where}: {msg}")

    def dtype_error(self, msg: str) -> DTypeError:
        return DTypeError(f"{self.where}: {msg}")

    def quantized(self, k: int, what: str) -> str:
        dt = self.value(k).dtype
        if dt not in _QUANT:
            raise self.dtype_error(f"{what} (input {k}) is {dt}; uint8 and int8 are supported")
        return dt

    def const(self, array: Any, dtype: Any) -> str:
        return self.b.const(np.asarray(array, dtype), dtype)

    def reshaped(self, name: str, shape: list[int] | None) -> str:
        return name if shape is None else self.b.op("Reshape", [name, self.const(shape, np.int64)])

    def finish(self, op: str, inputs: list[str], **attrs: Any) -> Any:
        """The body, its last node writing out0."""
        self.b.nodes.append(self.imp.onnx.helper.make_node(op, inputs, ["out0"], **attrs))
        return function_proto(self.imp, self.node.op_type, len(self.node.input), self.b.nodes)

    # Zero points and scales ------------------------------------------------------------
    def layout(self, k: int, kind: str, ref: list, what: str) -> list[int] | None:
        """The shape input k (a zero point or scale) is reshaped to, to broadcast against `ref`
        (the operand it applies to); None: used as it is. kind: "tensor" (a scalar or [1]),
        "rows" ([M]: one per row of ref [..., M, K]), "cols" ([N]: per column of ref
        [..., K, N]) or "channels" ([M]: per index of ref's axis 0)."""
        s = self.shape(k)
        if not all(isinstance(d, int) for d in s):
            raise self.shape_error(f"{what} (input {k}) needs a static shape, got {s}")
        if len(s) == 0:
            return None
        if s == [1]:
            return []
        axis = {"rows": -2, "cols": -1, "channels": 0}.get(kind)
        r = len(ref)
        if axis is not None and len(s) == 1 and r >= (1 if kind == "channels" else 2):
            n = ref[axis]
            if isinstance(n, int) and s[0] != n:
                noun = {"rows": "rows", "cols": "columns", "channels": "output channels"}[kind]
                raise self.shape_error(f"{what} (input {k}) has {s[0]} entries, but there are {n} {noun} "
                                       f"in {list(ref)}")
            if kind == "rows":
                return [s[0], 1]
            return [s[0]] + [1] * (r - 1) if kind == "channels" else None
        unit = {"rows": -1, "cols": -2}.get(kind)  # the N-D form: [D1, D2, M, 1] for A, [D1, D2, 1, N] for B
        if unit is not None and len(s) == r and s[unit] == 1 and all(
                a == b or a == 1 for a, b in zip(s, ref) if isinstance(b, int)):
            return None
        allowed = {"tensor": "a scalar or [1]", "rows": "a scalar, [1] or one per row [M]",
                   "cols": "a scalar, [1] or one per column [N]",
                   "channels": "a scalar, [1] or one per output channel [M]"}[kind]
        raise self.shape_error(f"{what} (input {k}) has shape {s}; it must be {allowed} for {list(ref)}")

    def centered(self, k: int, kz: int, kind: str, what: str) -> str:
        """Input k as int32 less its zero point (input kz, absent: 0)."""
        dt = self.quantized(k, what)
        x = self.b.op("Cast", [f"in{k}"], to=_I32)
        if not self.has(kz):
            return x
        zp = self.value(kz)
        if zp.dtype != dt:
            raise self.dtype_error(f"the zero point of {what} (input {kz}) is {zp.dtype}, {what} {dt}: "
                                   "they must have one type")
        shape = self.layout(kz, kind, self.shape(k), f"the zero point of {what}")
        if zp.is_constant:
            z = np.asarray(zp.numpy()).astype(np.int32)
            if not z.any():
                return x  # symmetric quantization: nothing to subtract
            return self.b.op("Sub", [x, self.const(z.reshape(shape) if shape is not None else z, np.int32)])
        return self.b.op("Sub", [x, self.reshaped(self.b.op("Cast", [f"in{kz}"], to=_I32), shape)])

    def multiplier(self, scales: list[tuple[int, str, list, str]]) -> str:
        """a_scale * b_scale / y_scale (each (input, kind, operand shape, what)), in the
        scales' type, as float64."""
        types = {self.value(k).dtype for k, *_ in scales}
        if len(types) != 1 or next(iter(types)) not in _SCALE_TYPES:
            raise self.dtype_error("the scales (inputs " + ", ".join(str(k) for k, *_ in scales) + ") are "
                                   + ", ".join(self.value(k).dtype for k, *_ in scales)
                                   + "; they must all be float32 or all float16")
        st = _SCALE_TYPES[types.pop()]
        shapes = [self.layout(k, kind, ref, what) for k, kind, ref, what in scales]
        if all(self.value(k).is_constant for k, *_ in scales):
            v = [np.asarray(self.value(k).numpy()).astype(st) for k, *_ in scales]
            v = [a.reshape(s) if s is not None else a for a, s in zip(v, shapes)]
            with np.errstate(all="ignore"):
                m = (v[0] * v[1]) / v[2]  # in st, as NumPy (the reference) computes it
            return self.const(m.astype(np.float64), np.float64)
        # At run time: float32 operands, each result rounded to the scales' type (a float16
        # product is exact in float32, and a float32 quotient rounded to float16 is the float16
        # quotient), so float16 arithmetic where float16 is kept (dnnfusion.reference). compile()
        # computes float16 in float32 by default, where these Casts round nothing: the multiplier
        # is then float32's, as ONNX Runtime computes it, and may differ from the reference's.
        code = 10 if st is np.float16 else 1
        s = [self.b.op("Cast", [self.reshaped(f"in{k}", sh)], to=1) for (k, *_), sh in zip(scales, shapes)]
        p = self.b.op("Cast", [self.b.op("Cast", [self.b.op("Mul", [s[0], s[1]])], to=code)], to=1)
        q = self.b.op("Cast", [self.b.op("Div", [p, s[2]])], to=code)
        return self.b.op("Cast", [q], to=_F64)

    def requantize(self, acc: str, mult: str, kz: int, default: str, ref: list) -> Any:
        """saturate(round_half_to_even(acc * mult + y_zero_point)), of the zero point's type."""
        kind = "rows" if ref and self.node.op_type == "QLinearMatMul" else "tensor"
        out = self.quantized(kz, "y_zero_point") if self.has(kz) else default
        code, lo, hi = _QUANT[out]
        y = self.b.op("Mul", [self.b.op("Cast", [acc], to=_F64), mult])
        if self.has(kz):
            shape = self.layout(kz, kind, ref, "y_zero_point")
            y = self.b.op("Add", [y, self.reshaped(self.b.op("Cast", [f"in{kz}"], to=_F64), shape)])
        r = self.b.op("Round", [y])
        c = self.b.op("Clip", [r, self.const(lo, np.float64), self.const(hi, np.float64)])
        return self.finish("Cast", [c], to=code)


# ---- MatMul --------------------------------------------------------------------------------
def _matmul_acc(f: _Form, ka: int, kza: int, kb: int, kzb: int) -> str:
    a = f.centered(ka, kza, "rows", "A")
    b = f.centered(kb, kzb, "cols", "B")
    return f.b.op("MatMul", [a, b])


def _check_matmul(f: _Form, ka: int, kb: int) -> None:
    sa, sb = f.shape(ka), f.shape(kb)
    if not sa or not sb:
        raise f.shape_error(f"A {sa} and B {sb} must both have rank 1 or more")
    ka_, kb_ = sa[-1], sb[-2] if len(sb) > 1 else sb[0]
    if isinstance(ka_, int) and isinstance(kb_, int) and ka_ != kb_:
        raise f.shape_error(f"A {sa} and B {sb} do not multiply: A has {ka_} columns, B {kb_} rows")


def matmul_integer(imp: Any, node: Any) -> Any:
    """MatMulInteger: (A - a_zero_point) @ (B - b_zero_point) in int32."""
    f = _Form(imp, node)
    _check_matmul(f, 0, 1)
    acc = _matmul_acc(f, 0, 2, 1, 3)
    return f.finish("Identity", [acc])


def qlinear_matmul(imp: Any, node: Any) -> Any:
    """QLinearMatMul: the int32 accumulator of MatMulInteger, requantized."""
    f = _Form(imp, node)
    _check_matmul(f, 0, 3)
    acc = _matmul_acc(f, 0, 2, 3, 5)
    sa, sb = f.shape(0), f.shape(3)
    rows = sa if len(sa) > 1 else []  # a vector A has no rows: scalars only
    mult = f.multiplier([(1, "rows" if rows else "tensor", rows, "a_scale"),
                         (4, "cols" if len(sb) > 1 else "tensor", sb, "b_scale"),
                         (6, "rows" if rows else "tensor", rows, "y_scale")])
    return f.requantize(acc, mult, 7, f.value(0).dtype, rows)


# ---- Conv ----------------------------------------------------------------------------------
def _conv_geometry(f: _Form, xs: list, ws: list) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """(kernel, strides, dilations, pads at the start, output sizes) of the spatial axes."""
    nsp = len(ws) - 2
    if nsp < 1 or len(xs) != len(ws):
        raise f.shape_error(f"X {xs} and W {ws} must have one rank, 3 or more")
    if not all(isinstance(d, int) for d in xs[1:] + ws):
        raise f.shape_error(f"X {xs} (but its batch) and W {ws} need static shapes")
    kernel = [int(k) for k in f.attrs.get("kernel_shape", ws[2:])]
    if kernel != ws[2:]:
        raise f.shape_error(f"kernel_shape {kernel} differs from W's spatial sizes {ws[2:]}")
    strides = [int(s) for s in f.attrs.get("strides", [1] * nsp)]
    dil = [int(d) for d in f.attrs.get("dilations", [1] * nsp)]
    pads = [int(p) for p in f.attrs.get("pads", [0] * 2 * nsp)]
    if len(strides) != nsp or len(dil) != nsp or len(pads) != 2 * nsp or min(strides + dil) < 1 or min(pads) < 0:
        raise f.shape_error(f"strides {strides}, dilations {dil} and pads {pads} must be positive (pads: "
                            f"non-negative) with {nsp} (pads {2 * nsp}) entries")
    auto = f.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    span = [d * (k - 1) + 1 for d, k in zip(dil, kernel)]
    size = xs[2:]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-n // s) for n, s in zip(size, strides)]
        total = [max(0, (o - 1) * s + e - n) for o, s, e, n in zip(out, strides, span, size)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
    elif auto in ("NOTSET", "VALID"):
        begin, end = (pads[:nsp], pads[nsp:]) if auto == "NOTSET" else ([0] * nsp, [0] * nsp)
        out = [(n + b + e - sp) // s + 1 for n, b, e, sp, s in zip(size, begin, end, span, strides)]
    else:
        raise f.shape_error(f"auto_pad {auto!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    if min(out) < 1:
        raise f.shape_error(f"the kernel {kernel} (dilations {dil}) is larger than X {xs} padded")
    return kernel, strides, dil, begin, out


def _im2col_index(size: list[int], kernel: list[int], strides: list[int], dil: list[int], begin: list[int],
                  out: list[int]) -> np.ndarray:
    """[prod(kernel), prod(out)]: the flat input position each kernel tap of each output reads,
    prod(size) (the appended zero) where it falls in the padding."""
    taps = np.indices(kernel).reshape(len(kernel), -1)  # [nsp, kprod]
    outs = np.indices(out).reshape(len(out), -1)        # [nsp, oprod]
    flat = np.zeros((taps.shape[1], outs.shape[1]), np.int64)
    inside = np.ones(flat.shape, bool)
    for i, n in enumerate(size):
        c = outs[i][None, :] * strides[i] + taps[i][:, None] * dil[i] - begin[i]
        inside &= (c >= 0) & (c < n)
        flat = flat * n + np.clip(c, 0, n - 1)
    return np.where(inside, flat, int(np.prod(size)))


def _conv_acc(f: _Form, kx: int, kzx: int, kw: int, kzw: int) -> tuple[str, list]:
    """The int32 convolution of (X - x_zero_point) and (W - w_zero_point): [N, M, *out]."""
    xs, ws = f.shape(kx), f.shape(kw)
    kernel, strides, dil, begin, out = _conv_geometry(f, xs, ws)
    g = int(f.attrs.get("group", 1))
    c, m = xs[1], ws[0]
    if g < 1 or c % g or m % g or ws[1] * g != c:
        raise f.shape_error(f"group {g} does not fit X's {c} channels and W {ws} (W's axis 1 must be "
                            "X's channels / group, and W's axis 0 a multiple of group)")
    x = f.centered(kx, kzx, "tensor", "X")
    w = f.centered(kw, kzw, "channels", "W")
    size = xs[2:]
    kprod, oprod, p = int(np.prod(kernel)), int(np.prod(out)), int(np.prod(size))
    kc = ws[1] * kprod
    flat = f.b.op("Reshape", [x, f.const([-1, c, p], np.int64)])
    if kprod == 1 and all(s == 1 for s in strides) and not any(begin) and out == size:
        cols = flat  # a 1x1 convolution reads X as it is
    else:
        if kprod * oprod > MAX_INDEX:
            raise f.shape_error(f"its im2col index of {kprod * oprod} elements is larger than dnnfusion "
                                f"builds at import ({MAX_INDEX})")
        padded = f.b.op("Pad", [flat, f.const([0, 0, 0, 0, 0, 1], np.int64)])  # a zero after each row
        index = _im2col_index(size, kernel, strides, dil, begin, out)
        cols = f.b.op("Gather", [padded, f.const(index, np.int64)], axis=2)  # [N, C, kprod, oprod]
    cols = f.b.op("Reshape", [cols, f.const([-1, g, kc, oprod], np.int64)])
    wm = f.b.op("Reshape", [w, f.const([g, m // g, kc], np.int64)])
    acc = f.b.op("MatMul", [wm, cols])  # [N, g, M/g, oprod]
    return f.b.op("Reshape", [acc, f.const([-1, m, *out], np.int64)]), [m, *out]


def conv_integer(imp: Any, node: Any) -> Any:
    """ConvInteger: the convolution of (X - x_zero_point) and (W - w_zero_point) in int32."""
    f = _Form(imp, node)
    acc, _ = _conv_acc(f, 0, 2, 1, 3)
    return f.finish("Identity", [acc])


def qlinear_conv(imp: Any, node: Any) -> Any:
    """QLinearConv: the int32 accumulator of ConvInteger plus the int32 bias, requantized with
    a per-tensor or per-output-channel multiplier."""
    f = _Form(imp, node)
    acc, per_out = _conv_acc(f, 0, 2, 3, 5)
    if f.has(8):
        bias = f.value(8)
        if bias.dtype != "i32":
            raise f.dtype_error(f"the bias B (input 8) is {bias.dtype}; it must be int32")
        if f.shape(8) != [per_out[0]]:
            raise f.shape_error(f"the bias B (input 8) has shape {f.shape(8)}; it must be [{per_out[0]}], one "
                                "per output channel")
        acc = f.b.op("Add", [acc, f.reshaped("in8", [per_out[0]] + [1] * (len(per_out) - 1))])
    mult = f.multiplier([(1, "tensor", f.shape(0), "x_scale"), (4, "channels", per_out, "w_scale"),
                         (6, "tensor", per_out, "y_scale")])
    return f.requantize(acc, mult, 7, f.value(0).dtype, per_out)


# op type -> fn(imp, node) -> FunctionProto (see onnx_functions.hand_forms)
HAND_FORMS: dict[str, Any] = {"MatMulInteger": matmul_integer, "QLinearMatMul": qlinear_matmul,
                              "ConvInteger": conv_integer, "QLinearConv": qlinear_conv}
