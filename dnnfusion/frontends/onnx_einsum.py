"""Einsum, imported as the operators it is made of (ONNX gives it no function body; ONNX
Runtime runs it): per operand, a repeated index becomes its diagonal (Reshape and a strided
Slice) and an index no later operand or the output needs is summed (ReduceSum); operands are
then contracted pairwise, left to right, each pair as one batched MatMul between Transposes and
Reshapes (shared indices the result keeps are the batch, broadcast as MatMul broadcasts;
shared ones it drops are the contraction); the last Transpose puts the output's order.

The shapes must be static at import (input_shapes or example_inputs fix symbolic ones), as
the Reshapes are constants. Equations as ONNX's: letters, "," between operands, an optional
"->" output (implicit: the letters that appear once, in alphabetical order), "..." for
broadcast leading dimensions, spaces ignored."""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from dnnfusion.errors import ShapeError, UnsupportedOperatorError
from dnnfusion.frontends.onnx_body import Body, function_proto


def _parse(equation: str, ranks: list[int], name: str) -> tuple[list[str], str]:
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"node '{name}' (Einsum): equation '{equation}' has {len(terms)} operands, the node "
                         f"{len(ranks)} inputs")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    ell = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0)
    dots = "".join(spare[:ell])  # the broadcast dims, aligned from the right
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            n = r - len(t.replace("...", ""))
            t = t.replace("...", dots[ell - n:] if n else "")
        bad = [c for c in t if not c.isalpha()]
        if bad or len(t) != r:
            raise ShapeError(f"node '{name}' (Einsum): operand '{t}' of '{equation}' does not match an input "
                             f"of rank {r}")
        out_terms.append(t)
    if arrow:
        out = out.replace("...", dots)
    else:
        counts = {c: sum(t.count(c) for t in out_terms) for c in set("".join(out_terms))}
        out = dots + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in dots))
    if any(c not in "".join(out_terms) for c in out) or len(set(out)) != len(out):
        raise ShapeError(f"node '{name}' (Einsum): output '{out}' of '{equation}' names an index no operand has, "
                         "or one twice")
    return out_terms, out


def einsum(imp: Any, node: Any) -> Any:
    """The FunctionProto an Einsum node is imported as (inputs in0.., output out0)."""
    onnx = imp.onnx
    name = node.name or "Einsum"
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    equation = attrs.get("equation", b"")
    equation = equation.decode("utf-8", "replace") if isinstance(equation, bytes) else str(equation)
    shapes = [list(imp.env[i].shape) for i in node.input]
    if any(not isinstance(d, int) for s in shapes for d in s):
        raise ShapeError(f"node '{name}' (Einsum) needs static input shapes at import (give input_shapes or "
                         f"example_inputs); got {shapes}")
    terms, out = _parse(equation, [len(s) for s in shapes], name)
    b = Body(onnx)
    ops = []  # (value, letters, dims by letter)
    for k, (t, s) in enumerate(zip(terms, shapes)):
        v, letters, dims = f"in{k}", t, dict()
        for c, d in zip(t, s):
            if dims.setdefault(c, d) != d:
                raise ShapeError(f"node '{name}' (Einsum): index '{c}' of operand {k} has sizes {dims[c]} and {d}")
        v, letters = _diagonals(b, v, letters, dims, name)
        ops.append((v, letters, dims))
    later = [set("".join(o[1] for o in ops[k + 1:])) | set(out) for k in range(len(ops))]
    v, letters, dims = _sum_out(b, *ops[0], later[0])
    for k in range(1, len(ops)):
        w, wl, wd = _sum_out(b, *ops[k], later[k] | set(letters))
        v, letters, dims = _contract(b, (v, letters, dims), (w, wl, wd), later[k], name)
    v, letters, dims = _sum_out(b, v, letters, dims, set(out))
    if letters != out:
        v = b.op("Transpose", [v], perm=[letters.index(c) for c in out]) if len(out) > 1 else v
    b.nodes.append(onnx.helper.make_node("Identity", [v], ["out0"]))
    return function_proto(imp, "Einsum", len(terms), b.nodes)


def _diagonals(b: Body, v: str, letters: str, dims: dict, name: str) -> tuple[str, str]:
    """A letter twice in one operand: its diagonal (the two axes moved last, flattened, every
    (n+1)-th element)."""
    while any(letters.count(c) > 1 for c in letters):
        c = next(c for c in letters if letters.count(c) > 1)
        if letters.count(c) > 2:
            raise UnsupportedOperatorError(f"node '{name}' (Einsum): index '{c}' three times in one operand")
        i, j = letters.index(c), letters.rindex(c)
        rest = [p for p in range(len(letters)) if p not in (i, j)]
        v = b.op("Transpose", [v], perm=rest + [i, j])
        n = dims[c]
        v = b.op("Reshape", [v, b.const([dims[letters[p]] for p in rest] + [n * n], np.int64)])
        v = b.op("Slice", [v, b.const([0], np.int64), b.const([n * n], np.int64), b.const([-1], np.int64),
                           b.const([n + 1], np.int64)])
        letters = "".join(letters[p] for p in rest) + c
    return v, letters


def _sum_out(b: Body, v: str, letters: str, dims: dict, keep: set) -> tuple[str, str, dict]:
    drop = [p for p, c in enumerate(letters) if c not in keep]
    if not drop:
        return v, letters, dims
    v = b.op("ReduceSum", [v, b.const(drop, np.int64)], keepdims=0)
    return v, "".join(c for c in letters if c in keep), dims


def _contract(b: Body, x: tuple, y: tuple, keep: set, name: str) -> tuple[str, str, dict]:
    (v, xl, xd), (w, yl, yd) = x, y
    shared = [c for c in xl if c in yl]
    batch = [c for c in shared if c in keep]
    inner = [c for c in shared if c not in keep]
    left = [c for c in xl if c not in yl]
    right = [c for c in yl if c not in xl]
    for c in inner:
        if xd[c] != yd[c]:
            raise ShapeError(f"node '{name}' (Einsum): summed index '{c}' has sizes {xd[c]} and {yd[c]}")
    dims = {**yd, **xd}
    for c in batch:  # broadcast: a size-1 side takes the other's size
        dims[c] = max(xd[c], yd[c])
        if 1 not in (xd[c], yd[c]) and xd[c] != yd[c]:
            raise ShapeError(f"node '{name}' (Einsum): index '{c}' has sizes {xd[c]} and {yd[c]}")
    prod = lambda cs, d: int(np.prod([d[c] for c in cs], dtype=np.int64))  # noqa: E731
    xo, yo = batch + left + inner, batch + inner + right
    if list(xl) != xo:
        v = b.op("Transpose", [v], perm=[xl.index(c) for c in xo])
    if list(yl) != yo:
        w = b.op("Transpose", [w], perm=[yl.index(c) for c in yo])
    v = b.op("Reshape", [v, b.const([xd[c] for c in batch] + [prod(left, xd), prod(inner, xd)], np.int64)])
    w = b.op("Reshape", [w, b.const([yd[c] for c in batch] + [prod(inner, yd), prod(right, yd)], np.int64)])
    p = b.op("MatMul", [v, w])
    p = b.op("Reshape", [p, b.const([dims[c] for c in batch + left + right], np.int64)])
    return p, "".join(batch + left + right), dims
