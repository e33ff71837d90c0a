"""Det, imported as the operators it is made of (ONNX gives it no function body; ONNX Runtime
runs it): Gaussian elimination with partial pivoting over the last two axes, unrolled over
the (static) matrix size M, every matrix of the leading axes at once.

Step k finds the row of the largest |A[i, k]| among rows i >= k (ArgMax, the first of equal
ones), swaps it with row k (a GatherElements of a permutation built with Where; the sign
flips when it moved), multiplies the running product by the pivot A[k, k] and subtracts
A[i, k] / A[k, k] times row k from every row below it. The determinant is the sign times the
product of the pivots: LU with partial pivoting, as Eigen's determinant (ONNX Runtime) and
NumPy's (LAPACK getrf) compute it (on float64 the pivot is chosen by the float32 magnitudes,
which generated ArgMax reads: a near tie may pick the other row, an equally valid pivot). A zero pivot (a singular matrix) eliminates nothing and
makes the product 0, where dividing by it would give NaN.

M must be static and at most :data:`MAX_SIZE` (the body has about 16 M operators); a 0 x 0
matrix has determinant 1."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import DTypeError, ShapeError
from dnnfusion.frontends.onnx_body import Body, function_proto, node_label, np_dtype

MAX_SIZE = 64
FLOATS = ("f16", "bf16", "f32", "f64")


def det(imp: Any, node: Any) -> Any:
    x = imp.env[node.input[0]]
    label = node_label(node)
    if x.dtype not in FLOATS:
        raise DTypeError(f"{label}: Det takes floating-point matrices, got {x.dtype}")
    shape = list(x.shape)
    if len(shape) < 2:
        raise ShapeError(f"{label}: the input must have rank >= 2 (matrices on the last two axes), got {shape}")
    m, m2 = shape[-2], shape[-1]
    if not isinstance(m, int) or not isinstance(m2, int):
        raise ShapeError(f"{label}: the matrix size must be static (give input_shapes or example_inputs), got {shape}")
    if m != m2:
        raise ShapeError(f"{label}: the matrices must be square, got {m} x {m2} (shape {shape})")
    if m > MAX_SIZE:
        raise ShapeError(f"{label}: {m} x {m} matrices are larger than dnnfusion unrolls Det for ({MAX_SIZE})")
    dt = np_dtype(x.dtype)
    b = Body(imp.onnx, dt)
    i64 = np.int64
    axes_mm = b.const(np.array([-2, -1], i64), i64)
    if m == 0:  # the empty product
        ones = b.op("ConstantOfShape", [b.op("Slice", [b.op("Shape", ["in0"]), b.const([0], i64), b.const([-2], i64)])],
                    value=imp.onnx.numpy_helper.from_array(np.ones(1, dt)))
        b.nodes.append(imp.onnx.helper.make_node("Identity", [ones], ["out0"]))
        return function_proto(imp, "Det", 1, b.nodes)
    a = "in0"
    rows = b.const(np.arange(m, dtype=i64).reshape(m, 1), i64)
    full = b.op("Shape", ["in0"])
    one, zero, minus = b.const(1), b.const(0), b.const(-1)
    sign, prod = one, one
    ax_r, ax_c = b.const([-2], i64), b.const([-1], i64)

    def sl(t: str, start: int, stop: int, axis: str) -> str:
        return b.op("Slice", [t, b.const([start], i64), b.const([stop], i64), axis])

    for k in range(m):
        kk = b.const(k, i64)
        if k < m - 1:
            col = sl(sl(a, k, m, ax_r), k, k + 1, ax_c)  # [..., M - k, 1]
            mag = b.op("Abs", [col])
            if x.dtype == "f64":  # (generated ArgMax reads float32; the pivot only has to be a large one)
                mag = b.op("Cast", [mag], to=1)
            piv = b.op("Add", [b.op("ArgMax", [mag], axis=-2, keepdims=1), kk])  # [..., 1, 1]
            is_k = b.const(np.arange(m).reshape(m, 1) == k, np.bool_)
            perm = b.op("Where", [is_k, piv, b.op("Where", [b.op("Equal", [rows, piv]), kk, rows])])  # [..., M, 1]
            a = b.op("GatherElements", [a, b.op("Expand", [perm, full])], axis=-2)
            moved = b.op("Not", [b.op("Equal", [piv, kk])])
            sign = b.op("Where", [moved, b.op("Mul", [sign, minus]), sign])
        pivot = sl(sl(a, k, k + 1, ax_r), k, k + 1, ax_c)  # [..., 1, 1]
        prod = b.op("Mul", [prod, pivot])
        if k < m - 1:
            safe = b.op("Where", [b.op("Equal", [pivot, zero]), one, pivot])
            below = b.const((np.arange(m) > k).reshape(m, 1), dt)
            f = b.op("Mul", [b.op("Div", [sl(a, k, k + 1, ax_c), safe]), below])  # [..., M, 1], 0 at rows <= k
            a = b.op("Sub", [a, b.op("Mul", [f, sl(a, k, k + 1, ax_r)])])
    d = b.op("Mul", [prod, sign])
    b.nodes.append(imp.onnx.helper.make_node("Squeeze", [d, axes_mm], ["out0"]))
    return function_proto(imp, "Det", 1, b.nodes)
