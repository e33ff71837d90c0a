"""Property test of the rewrite pipeline (paper §4.2): random small graphs of elementwise
ops, MatMuls, reductions and reshapes keep their values through ``dnnfusion.rewrite``.

Every generated value carries a bound on its magnitude and, when it is positive, a lower
bound, so that Log/Sqrt see positive inputs, divisors stay away from zero and Exp does not
overflow: the rewrites are value-preserving up to rounding, not across overflow."""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dnnfusion as df
from dnnfusion import _core

rw = importlib.import_module("dnnfusion.rewrite")  # the module, whatever the package re-exports


@dataclass
class V:
    ref: object            # the _core.Value
    shape: tuple
    mag: float             # |value| <= mag
    lo: float = 0.0        # > 0: value >= lo (strictly positive)


SPECIAL = [0.0, 1.0, -1.0, 2.0, 0.5]


class Builder:
    def __init__(self, data):
        self.data = data
        self.g = _core.Graph("prop")
        self.values: list[V] = []
        self.n = 0

    def draw(self, strategy):
        return self.data.draw(strategy)

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def node(self, op, inputs, attrs=None):
        (out,) = self.g.add_node(op, [v.ref if isinstance(v, V) else v for v in inputs],
                                 attrs or {}, 1, self.name(op.lower()))
        return out

    def const(self, shape, positive: bool) -> V:
        if self.draw(st.booleans()) and not shape:
            x = self.draw(st.sampled_from(SPECIAL if not positive else [1.0, 2.0, 0.5]))
        else:
            seed = self.draw(st.integers(0, 2**16))
            rng = np.random.default_rng(seed)
            x = rng.uniform(0.5, 2.0, shape)
            if not positive:
                x = x * rng.choice([-1.0, 1.0], shape)
        arr = np.asarray(x, np.float32).reshape(shape)
        ref = self.g.add_constant(self.name("c"), arr)
        lo = float(np.abs(arr).min()) if arr.size and (arr > 0).all() else 0.0
        return V(ref, tuple(shape), float(np.abs(arr).max()) if arr.size else 0.0, lo)

    def pick(self, pred=lambda v: True) -> V | None:
        cands = [v for v in self.values if pred(v)]
        if not cands:
            return None
        if self.draw(st.booleans()):  # favour chains: the newest value half of the time
            return cands[-1]
        return self.draw(st.sampled_from(cands))

    def partner(self, a: V, positive: bool = False, min_lo: float = 0.0) -> V:
        """A second operand for an elementwise op with `a`: a value of a's shape, or a
        constant that broadcasts against it (scalar, per-last-dim, or of a's shape)."""
        same = [v for v in self.values if v.shape == a.shape and (not positive or v.lo > min_lo)
                and v is not a]
        if same and self.draw(st.booleans()):
            return self.draw(st.sampled_from(same))
        shape = self.draw(st.sampled_from([(), (a.shape[-1],) if a.shape else (), a.shape]))
        return self.const(shape, positive)

    def unary_ops(self, a: V) -> list[str]:
        ops = ["Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Identity"]
        if a.mag <= 3:
            ops.append("Exp")
        if a.lo > 0:
            ops += ["Sqrt", "Log"]
        if a.lo >= 0.05:
            ops.append("Reciprocal")
        return ops

    def step(self) -> None:
        a = self.pick()
        kind = self.draw(st.sampled_from(
            ["unary", "binary", "binary", "div", "matmul", "reduce", "layout", "softmax", "pow",
             "dup", "pair", "factor"]))
        out: V | None = None
        if kind == "pair":  # f(a) op f(b): the shape of exp*exp, log+log, sum+sum, ...
            b = self.partner(a)
            fs = [f for f in self.unary_ops(a) if f in self.unary_ops(b)] + ["ReduceSum"]
            f = self.draw(st.sampled_from(fs))
            if f == "ReduceSum":
                if not a.shape or b.shape != a.shape:
                    return
                axes = self.g.add_constant(self.name("ax"), np.array([-1], np.int64))
                fa, fb = self.node(f, [a, axes]), self.node(f, [b, axes])
                shape, mag = a.shape[:-1] + (1,), (a.mag + b.mag) * a.shape[-1]
            else:
                fa, fb = self.node(f, [a]), self.node(f, [b])
                shape = tuple(np.broadcast_shapes(a.shape, b.shape))
                mag = 1e3
            op = self.draw(st.sampled_from(["Add", "Sub", "Mul"]))
            if f in ("Exp", "Sqrt", "Sigmoid") and self.draw(st.booleans()):
                op = "Div"  # positive, bounded away from 0
            out = V(self.node(op, [fa, fb]), shape, mag, 0.0)
        elif kind == "factor":  # a*b + a*c, a@b - a@c, b/a + c/a ...
            b, c = self.partner(a), self.partner(a)
            op = self.draw(st.sampled_from(["Mul", "Mul", "Div"]))
            if op == "Div" and a.lo < 0.1:
                op = "Mul"
            order = (lambda u: [u, a]) if op == "Div" else (lambda u: [a, u])
            p, q = self.node(op, order(b)), self.node(op, order(c))
            shape = tuple(np.broadcast_shapes(a.shape, b.shape, c.shape))
            mag = (b.mag + c.mag) * (a.mag if op == "Mul" else 1 / a.lo)
            out = V(self.node(self.draw(st.sampled_from(["Add", "Sub"])), [p, q]), shape, mag, 0.0)
        elif kind == "unary":
            op = self.draw(st.sampled_from(self.unary_ops(a)))
            mag, lo = a.mag, 0.0
            if op == "Exp":
                mag, lo = math.exp(a.mag), math.exp(-a.mag)
            elif op in ("Sigmoid", "Tanh"):
                mag, lo = 1.0, (1 / (1 + math.exp(min(a.mag, 50.0))) if op == "Sigmoid" else 0.0)
            elif op == "Sqrt":
                mag, lo = math.sqrt(a.mag), math.sqrt(a.lo)
            elif op == "Log":
                mag = max(abs(math.log(a.lo)), abs(math.log(a.mag)))
            elif op == "Reciprocal":
                mag, lo = 1 / a.lo, 1 / a.mag
            elif op == "Identity":
                lo = a.lo
            out = V(self.node(op, [a]), a.shape, mag, lo)
        elif kind in ("binary", "div"):
            op = "Div" if kind == "div" else self.draw(st.sampled_from(["Add", "Sub", "Mul"]))
            b = self.partner(a, positive=op == "Div", min_lo=0.1)
            if op == "Div" and b.lo < 0.1:
                return
            x, y = (a, b) if self.draw(st.booleans()) or op == "Div" else (b, a)
            shape = np.broadcast_shapes(x.shape, y.shape)
            if op == "Add":
                mag, lo = x.mag + y.mag, x.lo + y.lo if x.lo > 0 and y.lo > 0 else 0.0
            elif op == "Sub":
                mag, lo = x.mag + y.mag, 0.0
            elif op == "Mul":
                mag, lo = x.mag * y.mag, x.lo * y.lo
            else:
                mag, lo = x.mag / y.lo, (x.lo / y.mag if x.lo > 0 else 0.0)
            out = V(self.node(op, [x, y]), tuple(shape), mag, lo)
        elif kind == "pow":
            e = self.draw(st.sampled_from([1.0, 2.0, -1.0, 0.5] if a.lo >= 0.05 else [1.0, 2.0]))
            c = self.g.add_constant(self.name("e"), np.float32(e).reshape(()))
            mag = a.mag ** e if e > 0 else 1 / a.lo
            lo = (a.lo ** e if e > 0 else 1 / a.mag) if a.lo > 0 else 0.0
            out = V(self.node("Pow", [a, c]), a.shape, mag, lo)
        elif kind == "matmul" and len(a.shape) >= 1:
            k = a.shape[-1]
            n = self.draw(st.integers(1, 5))
            w = self.const((k, n), positive=False) if self.draw(st.booleans()) else None
            if w is None:
                w = self.pick(lambda v: len(v.shape) == 2 and v.shape[0] == k) or self.const((k, n), False)
            out = V(self.node("MatMul", [a, w]), a.shape[:-1] + (w.shape[1],),
                    a.mag * w.mag * k, 0.0)
        elif kind == "reduce" and len(a.shape) >= 1:
            op = self.draw(st.sampled_from(["ReduceSum", "ReduceMean"]))
            axis = self.draw(st.integers(-len(a.shape), len(a.shape) - 1))
            keep = self.draw(st.sampled_from([0, 1]))
            axes = self.g.add_constant(self.name("ax"), np.array([axis], np.int64))
            shape = list(a.shape)
            if keep:
                shape[axis] = 1
            else:
                del shape[axis]
            n = a.shape[axis] if op == "ReduceSum" else 1
            out = V(self.node(op, [a, axes], {"keepdims": keep}), tuple(shape), a.mag * n,
                    a.lo if op == "ReduceMean" else a.lo * a.shape[axis])
        elif kind == "layout" and len(a.shape) >= 2:
            if self.draw(st.booleans()):
                perm = list(self.draw(st.permutations(range(len(a.shape)))))
                out = V(self.node("Transpose", [a], {"perm": perm}),
                        tuple(a.shape[p] for p in perm), a.mag, a.lo)
            else:
                shape = (int(np.prod(a.shape[:-1])), a.shape[-1]) if self.draw(st.booleans()) \
                    else tuple(reversed(a.shape))
                s = self.g.add_constant(self.name("shape"), np.array(shape, np.int64))
                out = V(self.node("Reshape", [a, s]), shape, a.mag, a.lo)
        elif kind == "softmax" and len(a.shape) >= 1:
            out = V(self.node("Softmax", [a], {"axis": -1}), a.shape, 1.0, 0.0)
        elif kind == "dup":  # the same op twice: CSE merges them, rules see one value
            op = self.draw(st.sampled_from(["Neg", "Relu", "Abs"]))
            p, q = self.node(op, [a]), self.node(op, [a])
            out = V(self.node("Add", [p, q]), a.shape, 2 * a.mag, 0.0)
        if out is not None and out.mag <= 1e6:  # larger ones are left dead: no overflow
            self.values.append(out)


def build(data) -> tuple[df.ECG, list[np.ndarray]]:
    b = Builder(data)
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    feeds = []
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    for i in range(data.draw(st.integers(1, 3))):
        positive = data.draw(st.booleans())
        x = rng.uniform(0.5, 2.0, shape) if positive else rng.uniform(-2.0, 2.0, shape)
        feeds.append(x.astype(np.float32))
        b.values.append(V(b.g.add_input(f"x{i}", "f32", list(shape)), shape, 2.0,
                          0.5 if positive else 0.0))
    for _ in range(data.draw(st.integers(1, 10))):
        b.step()
    produced = b.values[len(feeds):] or b.values
    outs = [produced[-1]]
    if len(produced) > 2 and data.draw(st.booleans()):
        outs.append(data.draw(st.sampled_from(produced[:-1])))
    b.g.set_outputs([v.ref for v in outs])
    g = df.ECG(b.g)
    g.verify()
    return g, feeds


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_pipeline_keeps_values(data):
    g, feeds = build(data)
    before = g.run_reference(*feeds)
    out, report = rw.rewrite(g)
    assert report.flops_after <= report.flops_before
    after = out.run_reference(*feeds)
    assert len(after) == len(before)
    for want, got in zip(before, after):
        assert got.shape == want.shape and got.dtype == want.dtype
        scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_algebraic_rules_never_add_flops_or_operators(data):
    g, _ = build(data)
    g = rw.eliminate_dead_code(g)
    out = rw.apply_algebraic_rules(g)
    out.verify()
    assert rw.flops(out) <= rw.flops(g)
    if rw.flops(out) == rw.flops(g):
        assert len(out) <= len(g)
