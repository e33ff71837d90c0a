"""Random ONNX graphs for differential fuzzing (issue 17 part 5): `build(draw)` makes a
small valid model from the op table, with what trips compilers up: broadcasts of every
kind, diamonds and fan-out, shared inputs, layout operators between anchors (Transpose,
Reshape, Slice, Concat, Expand, Gather, GatherND, Pad), reductions and row operators on any axis,
MatMul/Gemm/Conv/ConvTranspose/DepthToSpace/pools, integer arithmetic, fake quantization
(QuantizeLinear -> DequantizeLinear), and graph outputs that other nodes also read.
`draw` is any function that takes a hypothesis strategy and returns a value (hypothesis's
own `draw`, or a seeded stand-in), so the same builder serves pytest and long runs.

Shapes are tracked here, so every generated node is valid by construction; values are kept
in ranges where float32 results are well conditioned (Div and Sqrt get positive operands,
Exp a bounded one), so a mismatch with ONNX Runtime is a bug, not rounding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

OPSET = 18

UNARY = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Erf", "Softplus", "LeakyRelu", "Elu",
         "HardSigmoid", "Clip", "Sin", "Atan", "Asinh"]
BINARY = ["Add", "Sub", "Mul", "Max", "Min", "Div"]


@dataclass
class _Val:
    name: str
    shape: tuple
    dtype: str = "f32"  # f32 or i64


@dataclass
class Model:
    proto: Any                      # onnx.ModelProto
    feeds: dict[str, np.ndarray]
    ops: list[str] = field(default_factory=list)

    def describe(self) -> str:
        import onnx

        return onnx.printer.to_text(self.proto.graph)


def build(draw: Callable, max_nodes: int = 12) -> Model:
    from hypothesis import strategies as st
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    nodes, inits, ops = [], [], []
    names = iter(f"v{i}" for i in range(10_000))

    def const(arr: np.ndarray) -> str:
        n = f"c{len(inits)}"
        inits.append(nh.from_array(arr, n))
        return n

    def fconst(shape) -> str:
        return const(rng.uniform(-1.5, 1.5, shape).astype(np.float32))

    def emit(op: str, inputs: list[str], shape: tuple, dtype: str = "f32", **attrs) -> _Val:
        out = next(names)
        nodes.append(h.make_node(op, inputs, [out], **attrs))
        ops.append(op)
        return _Val(out, tuple(int(d) for d in shape), dtype)

    # Graph inputs: one or two float tensors of rank 1-4 (the second may share the first's shape).
    rank = draw(st.integers(1, 4))
    shape0 = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    inputs = [_Val("x", shape0)]
    if draw(st.booleans()):
        inputs.append(_Val("y", shape0 if draw(st.booleans()) else
                           tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))))
    feeds = {v.name: rng.uniform(-2, 2, v.shape).astype(np.float32) for v in inputs}
    pool: list[_Val] = list(inputs)

    def pick(pred=lambda v: True) -> _Val | None:
        cands = [v for v in pool if pred(v)]
        return cands[draw(st.integers(0, len(cands) - 1))] if cands else None

    def bshape(shape: tuple) -> tuple:
        """A shape that broadcasts against `shape`: some axes 1, maybe fewer leading axes."""
        drop = draw(st.integers(0, len(shape) - 1)) if shape else 0
        tail = shape[drop:]
        return tuple(1 if draw(st.booleans()) else d for d in tail)

    for _ in range(draw(st.integers(1, max_nodes))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "layout", "layout", "reduce",
                                     "row", "matmul", "conv", "int", "where", "qdq"]))
        a = pick(lambda v: v.dtype == "f32")
        if kind in ("int", "where", "qdq"):
            # Discontinuous ops (a truncating Cast, a comparison) read graph inputs only: on a
            # computed value, a last-bit rounding difference could flip them legitimately.
            a = pick(lambda v: v in inputs)
        r = len(a.shape)
        v = None
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            attrs = {}
            ins = [a.name]
            if op == "Clip":
                ins += [const(np.array(-0.5, np.float32)), const(np.array(0.8, np.float32))]
            if op == "LeakyRelu":
                attrs["alpha"] = 0.1
            v = emit(op, ins, a.shape, **attrs)
        elif kind == "binary":
            op = draw(st.sampled_from(BINARY))
            other = pick(lambda u: u.dtype == "f32" and u is not a and _broadcasts(u.shape, a.shape))
            if other is None or draw(st.booleans()):
                b = fconst(bshape(a.shape))
                bs = np.broadcast_shapes(a.shape, tuple(inits[-1].dims))
            else:
                b, bs = other.name, np.broadcast_shapes(a.shape, other.shape)
            if op == "Div":  # a positive, well-conditioned denominator: |b| + 0.5
                ab = emit("Abs", [b], _shape_of(b, pool, inits))
                b = emit("Add", [ab.name, const(np.array(0.5, np.float32))], ab.shape).name
            swap = draw(st.booleans()) and op != "Div"
            v = emit(op, [b, a.name] if swap else [a.name, b], bs)
        elif kind == "layout":
            op = draw(st.sampled_from(["Transpose", "Reshape", "Slice", "Concat", "Expand",
                                       "Unsqueeze", "Gather", "GatherND", "Pad", "Flatten"]))
            if op == "Transpose":
                perm = list(draw(st.permutations(range(r))))
                v = emit(op, [a.name], tuple(a.shape[p] for p in perm), perm=perm)
            elif op == "Reshape":
                k = draw(st.integers(0, r))
                new = (int(np.prod(a.shape[:k])), int(np.prod(a.shape[k:])))
                if draw(st.booleans()):
                    new = (-1,) + new[1:]
                out = (int(np.prod(a.shape)) // int(np.prod(new[1:])),) + new[1:] if new[0] == -1 else new
                v = emit(op, [a.name, const(np.array(new, np.int64))], out)
            elif op == "Slice":
                ax = draw(st.integers(0, r - 1))
                d = a.shape[ax]
                step = draw(st.sampled_from([1, 1, 2, -1]))
                s0 = draw(st.integers(0, d - 1))
                if step > 0:
                    e0 = draw(st.integers(s0 + 1, d))
                    n = len(range(s0, e0, step))
                else:  # ONNX: a negative end counts from the back; -d-1 runs through index 0
                    e0 = draw(st.integers(-d - 1, s0 - 1))
                    n = len(range(s0, max(e0 + d if e0 < 0 else e0, -1), step))
                out = list(a.shape)
                out[ax] = n
                v = emit(op, [a.name, const(np.array([s0], np.int64)), const(np.array([e0], np.int64)),
                              const(np.array([ax], np.int64)), const(np.array([step], np.int64))], out)
            elif op == "Concat":
                ax = draw(st.integers(0, r - 1))
                other = pick(lambda u: u.dtype == "f32" and len(u.shape) == r and all(
                    x == y for i, (x, y) in enumerate(zip(u.shape, a.shape)) if i != ax))
                out = list(a.shape)
                out[ax] += other.shape[ax]
                v = emit(op, [a.name, other.name], out, axis=ax)
            elif op == "Expand":
                big = tuple(d if d != 1 else draw(st.integers(1, 4)) for d in a.shape)
                if draw(st.booleans()):
                    big = (2,) + big
                v = emit(op, [a.name, const(np.array(big, np.int64))], big)
            elif op == "Unsqueeze":
                ax = draw(st.integers(0, r))
                out = list(a.shape)
                out.insert(ax, 1)
                v = emit(op, [a.name, const(np.array([ax], np.int64))], out)
            elif op == "Gather":
                ax = draw(st.integers(0, r - 1))
                idx = rng.integers(-a.shape[ax], a.shape[ax], draw(st.integers(1, 4))).astype(np.int64)
                out = list(a.shape)
                out[ax:ax + 1] = [len(idx)]
                v = emit(op, [a.name, const(idx)], out, axis=ax)
            elif op == "GatherND":  # m coordinates of k axes after b batch axes
                b = draw(st.integers(0, r - 1))
                k = draw(st.integers(1, r - b))
                m = draw(st.integers(1, 3))
                sh = tuple(a.shape)
                sizes = np.array(sh[b:b + k], np.int64)
                idx = (rng.integers(0, 1 << 20, sh[:b] + (m, k)) % sizes
                       - sizes * rng.integers(0, 2, sh[:b] + (m, k))).astype(np.int64)
                v = emit(op, [a.name, const(idx)], sh[:b] + (m,) + sh[b + k:], batch_dims=b)
            elif op == "Pad":
                pads = [draw(st.integers(0, 2)) for _ in range(2 * r)]
                mode = draw(st.sampled_from(["constant", "reflect", "edge"]))
                if mode == "reflect":  # reflect needs pads smaller than the axis
                    pads = [min(p, a.shape[i % r] - 1) for i, p in enumerate(pads)]
                out = [d + pads[i] + pads[i + r] for i, d in enumerate(a.shape)]
                v = emit(op, [a.name, const(np.array(pads, np.int64))], out, mode=mode)
            else:  # Flatten
                ax = draw(st.integers(0, r))
                v = emit(op, [a.name], (int(np.prod(a.shape[:ax])), int(np.prod(a.shape[ax:]))), axis=ax)
        elif kind == "reduce":
            op = draw(st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2"]))
            axes = sorted(set(draw(st.lists(st.integers(0, r - 1), min_size=1, max_size=r))))
            keep = draw(st.integers(0, 1))
            out = [1 if i in axes else d for i, d in enumerate(a.shape) if keep or i not in axes]
            v = emit(op, [a.name, const(np.array(axes, np.int64))], out, keepdims=keep)
        elif kind == "row":
            op = draw(st.sampled_from(["Softmax", "LogSoftmax", "LayerNormalization", "ArgMax", "CumSum"]))
            ax = draw(st.integers(-r, r - 1))
            if op == "LayerNormalization":
                norm = a.shape[ax:] if ax >= 0 else a.shape[r + ax:]
                v = emit(op, [a.name, fconst(norm), fconst(norm)], a.shape, axis=ax)
            elif op == "ArgMax":  # on an input: a computed near-tie could flip legitimately
                a = pick(lambda v: v in inputs)
                r = len(a.shape)
                ax = ax % r
                out = [d for i, d in enumerate(a.shape) if i != ax]
                iv = emit(op, [a.name], out, "i64", axis=ax, keepdims=0)
                v = emit("Cast", [iv.name], out, to=T.FLOAT)
            elif op == "CumSum":
                v = emit(op, [a.name, const(np.array(ax, np.int64))], a.shape)
            else:
                v = emit(op, [a.name], a.shape, axis=ax)
        elif kind == "matmul":
            if r >= 2 and draw(st.booleans()):
                n = draw(st.integers(1, 9))
                v = emit("MatMul", [a.name, fconst((a.shape[-1], n))], a.shape[:-1] + (n,))
            elif r == 2:
                n = draw(st.integers(1, 9))
                tb = draw(st.integers(0, 1))
                w = fconst((n, a.shape[1]) if tb else (a.shape[1], n))
                v = emit("Gemm", [a.name, w, fconst((n,))], (a.shape[0], n), transB=tb, alpha=0.7)
            else:
                other = pick(lambda u: u.dtype == "f32" and len(u.shape) == r and r >= 2 and u.shape[:-2] == a.shape[:-2])
                if other is not None and r >= 2:  # a @ other^T over the last two axes
                    perm = list(range(r - 2)) + [r - 1, r - 2]
                    t = emit("Transpose", [other.name], tuple(other.shape[p] for p in perm), perm=perm)
                    if t.shape[-2] == a.shape[-1]:
                        v = emit("MatMul", [a.name, t.name], a.shape[:-1] + (t.shape[-1],))
        elif kind == "conv" and r == 4:
            op = draw(st.sampled_from(["Conv", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
                                       "ConvTranspose", "DepthToSpace", "GridSample"]))
            c = a.shape[1]
            k = draw(st.sampled_from([1, 3])) if min(a.shape[2:]) >= 3 else 1
            p = draw(st.integers(0, k // 2))
            s = draw(st.integers(1, 2))
            hw = tuple((d + 2 * p - k) // s + 1 for d in a.shape[2:])
            if op == "Conv":
                m = draw(st.integers(1, 6))
                g = c if (c == m and draw(st.booleans())) else 1
                v = emit(op, [a.name, fconst((m, c // g, k, k)), fconst((m,))], (a.shape[0], m) + hw,
                         kernel_shape=[k, k], pads=[p] * 4, strides=[s, s], group=g)
            elif op == "ConvTranspose":  # kernel == stride (the layout's 1x1 + DepthToSpace) or overlapping
                m = draw(st.integers(1, 6))
                k = draw(st.sampled_from([2, 3]))
                s = 2
                hw = tuple((d - 1) * s + k for d in a.shape[2:])
                v = emit(op, [a.name, fconst((c, m, k, k)), fconst((m,))], (a.shape[0], m) + hw,
                         kernel_shape=[k, k], strides=[s, s])
            elif op == "DepthToSpace":
                if c % 4 == 0:
                    v = emit(op, [a.name], (a.shape[0], c // 4, 2 * a.shape[2], 2 * a.shape[3]), blocksize=2,
                             mode=draw(st.sampled_from(["DCR", "CRD"])))
            elif op == "GlobalAveragePool":
                v = emit(op, [a.name], a.shape[:2] + (1, 1))
            elif op == "GridSample":  # a constant grid in [-1.5, 1.5): every padding mode is used
                out = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
                v = emit(op, [a.name, fconst((a.shape[0],) + out + (2,))], a.shape[:2] + out,
                         mode=draw(st.sampled_from(["bilinear", "nearest", "bicubic"])),  # opset 18: GridSample-16
                         padding_mode=draw(st.sampled_from(["zeros", "border", "reflection"])),
                         align_corners=draw(st.integers(0, 1)))
            else:
                v = emit(op, [a.name], a.shape[:2] + hw, kernel_shape=[k, k], pads=[p] * 4, strides=[s, s])
        elif kind == "int":  # integer arithmetic and a reduction, back to float
            i = emit("Cast", [a.name], a.shape, "i64", to=T.INT64)
            op = draw(st.sampled_from(["Add", "Mul", "Max", "ReduceSum", "MatMul"]))
            if op == "ReduceSum":
                j = emit(op, [i.name, const(np.array([r - 1], np.int64))], a.shape[:-1] + (1,), "i64", keepdims=1)
            elif op == "MatMul":
                n = draw(st.integers(1, 5))
                j = emit(op, [i.name, const(rng.integers(-3, 4, (a.shape[-1], n)).astype(np.int64))],
                         a.shape[:-1] + (n,), "i64")
            else:
                j = emit(op, [i.name, const(rng.integers(-3, 4, bshape(a.shape)).astype(np.int64))],
                         a.shape, "i64")
            v = emit("Cast", [j.name], j.shape, to=T.FLOAT)
        elif kind == "where":
            b = fconst(bshape(a.shape))
            cond = emit("Greater", [a.name, b], np.broadcast_shapes(a.shape, tuple(inits[-1].dims)), "bool")
            v = emit("Where", [cond.name, a.name, fconst(bshape(a.shape))],
                     np.broadcast_shapes(cond.shape, a.shape))
        elif kind == "qdq":  # fake quantization, per tensor or per axis (a negative axis too)
            ax = draw(st.integers(-r, r - 1))
            n = a.shape[ax] if draw(st.booleans()) else 0
            qt = draw(st.sampled_from([np.uint8, np.int8]))
            scale = const(rng.uniform(0.01, 0.1, n or ()).astype(np.float32))
            zp = const(rng.integers(np.iinfo(qt).min // 2, np.iinfo(qt).max // 2, n or ()).astype(qt))
            q = emit("QuantizeLinear", [a.name, scale, zp], a.shape, "i8", axis=ax)
            v = emit("DequantizeLinear", [q.name, scale, zp], a.shape, axis=ax)
        if v is not None and 0 < int(np.prod(v.shape)) <= 4096 and 1 <= len(v.shape) <= 5:
            pool.append(v)
    # Outputs: the last value, plus values others also read (outputs that are intermediates).
    made = [v for v in pool if v not in inputs]
    if not made:
        made = [emit("Relu", ["x"], inputs[0].shape)]
    outs = [made[-1]] + [v for v in made[:-1] if draw(st.booleans()) and draw(st.booleans())]
    g = h.make_graph(nodes, "fuzz", [h.make_tensor_value_info(v.name, T.FLOAT, v.shape) for v in inputs],
                     [h.make_tensor_value_info(v.name, {"f32": T.FLOAT, "i64": T.INT64}[v.dtype], v.shape)
                      for v in outs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)])
    onnx.checker.check_model(m, full_check=True)
    return Model(m, feeds, ops)


def _broadcasts(small: tuple, big: tuple) -> bool:
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(small[::-1], big[::-1]))


def _shape_of(name: str, pool: list[_Val], inits: list) -> tuple:
    for v in pool:
        if v.name == name:
            return v.shape
    for t in inits:
        if t.name == name:
            return tuple(t.dims)
    raise KeyError(name)
