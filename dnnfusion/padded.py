"""The padded program of ``compile(..., dynamic=True)``'s runtime sequence length, once
:mod:`dnnfusion.sequence` has proven the padding: the graph rebuilt with every mixing operand
read through its mask (:func:`masked_graph`), and the calls of any shorter length run through
it, padded and cut back (:class:`Padder`)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from dnnfusion.batching import _axes
from dnnfusion.errors import ShapeError
from dnnfusion.sequence import _FLOAT_CODES, LENGTH_INPUT, _Tracker


def _neutral(value: float, dtype: np.dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.floating):
        return np.array(value, dtype)
    if dtype == np.bool_:
        return np.array(bool(value > 0), dtype)
    info = np.iinfo(dtype)
    return np.array(info.min if value == -np.inf else info.max if value == np.inf else value, dtype)


def _fresh(name: str, taken: set[str]) -> str:
    out, i = name, 1
    while out in taken:
        out, i = f"{name}_{i}", i + 1
    return out


def masked_graph(ga: Any, tracker: _Tracker) -> tuple[Any, str]:
    """`ga` rebuilt with the runtime length as one more input (a float32 scalar, last: exact to
    2^24, and a float so that a mask's comparison runs on vectors in generated code) and every
    mixing operand read through its mask; returns the ECG and the length input's name."""
    from dnnfusion import _core
    from dnnfusion.dtypes import numpy_dtype
    from dnnfusion.ecg import ECG

    g = ga.graph
    out = _core.Graph(g.name)
    taken = {v.name for v in g.values}
    new: dict[int, Any] = {}
    for v in g.inputs:
        new[v.id] = out.add_input(v.name, v.dtype, [int(d) for d in v.shape])
    length_name = _fresh(LENGTH_INPUT, taken)
    length = out.add_input(length_name, "f32", [])
    for v in g.constants:
        new[v.id] = out.add_constant(v.name, v.numpy())
    counter = [0]

    def name(base: str) -> str:
        counter[0] += 1
        return _fresh(f"dnnf_seq_{base}{counter[0]}", taken)

    uses = [0]

    def valid(dim: int, offset: int, trailing: int) -> Any:
        """bool [dim, 1 x trailing]: position i < S + offset, as (i - offset + u) < (S + u) with
        u this mask's own number: every mask is its own value (the rewrites' CSE cannot make
        one mask shared by operators in different kernels, which would store it as bools that
        the others read lane by lane), computed inside the kernel that reads it, on vectors."""
        uses[0] += 1
        u = float(uses[0])
        positions = (np.arange(dim, dtype=np.float32) - offset + u).reshape([dim] + [1] * trailing)
        pos = out.add_constant(name("pos"), positions)
        shifted = out.add_node("Add", [length, out.add_constant(name("u"), np.array(u, np.float32))], {}, 1,
                               name("len"), [name("len")])[0]
        return out.add_node("Less", [pos, shifted], {}, 1, name("valid"), [name("valid")])[0]

    def condition(v: Any, axes: dict[int, int]) -> Any:
        r = len(v.shape)
        m = None
        for a, c in sorted(axes.items()):
            x = valid(int(v.shape[a]), c, r - 1 - a)
            m = x if m is None else out.add_node("And", [m, x], {}, 1, name("and"), [name("and")])[0]
        return m

    # Every mask's condition first, ahead of the model's operators: a condition made of
    # constants and the length exists before any kernel runs, so the Where after an anchor
    # (the weights after a Softmax) can join the anchor's epilogue (lower.cc choose_epilogue).
    conds = {key: condition(g.nodes[key[0]].inputs[key[1]], axes) for key, (axes, _) in sorted(tracker.masks.items())}
    conds.update({(k, -1): condition(g.nodes[k].inputs[0], axes) for k, axes in sorted(tracker.means.items())})

    def masked(v: Any, key: tuple[int, int], neutral: float) -> Any:
        fill = out.add_constant(name("fill"), _neutral(neutral, numpy_dtype(v.dtype)))
        return out.add_node("Where", [conds[key], new[v.id], fill], {}, 1, name("where"), [name("where")])[0]

    for k, n in enumerate(g.nodes):
        ins = []
        for i, v in enumerate(n.inputs):
            if v is None:
                ins.append(None)
            elif (k, i) in tracker.masks:
                ins.append(masked(v, (k, i), tracker.masks[(k, i)][1]))
            else:
                ins.append(new[v.id])
        if k in tracker.means:  # ReduceMean over sequence axes: masked ReduceSum / valid count
            x = n.inputs[0]
            ins[0] = masked(x, (k, -1), 0.0)
            s = out.add_node("ReduceSum", ins, dict(n.attrs), 1, name("sum"), [name("sum")])[0]
            # the count: the valid positions of each reduced sequence axis times the size of
            # each other reduced axis
            rank = len(x.shape)
            others = [int(x.shape[a]) for a in (_axes(n, rank) or []) if a not in tracker.means[k]]
            count = out.add_constant(name("size"), np.array(float(np.prod(others, dtype=np.int64)), np.float32))
            for a, c in tracker.means[k].items():
                t = out.add_node("Sub", [length, out.add_constant(name("off"), np.array(-c, np.float32))], {}, 1,
                                 name("count"), [name("count")])[0]
                count = out.add_node("Mul", [count, t], {}, 1, name("count"), [name("count")])[0]
            countf = count if x.dtype == "f32" else out.add_node(
                "Cast", [count], {"to": _FLOAT_CODES[x.dtype]}, 1, name("countf"), [name("countf")])[0]
            made = out.add_node("Div", [s, countf], {}, 1, n.name, [n.outputs[0].name])
        else:
            made = out.add_node(n.op, ins, dict(n.attrs), len(n.outputs), n.name, [o.name for o in n.outputs])
        for o, m in zip(n.outputs, made):
            new[o.id] = m
    out.set_outputs([new[v.id] for v in g.outputs])
    return ECG(out), length_name


class Padder:
    """Runs a call of sequence length S <= maximum through the masked program: inputs padded
    to the maximum along their sequence axes, S appended, outputs cut back to S + offset."""

    def __init__(self, model: Any, in_axes: list[dict[int, int]], out_axes: list[dict[int, int]], maximum: int,
                 min_length: int, names: Sequence[str], grow: Callable[[int], Any], stats: dict,
                 buckets: bool = False):
        self.model, self.in_axes, self.out_axes = model, in_axes, out_axes
        self.maximum, self.min_length, self.names = maximum, min_length, list(names)
        self.grow, self.stats = grow, stats
        # buckets: programs for maximum, ceil(maximum / 2), ceil(maximum / 4), ... down to 2,
        # each compiled on its first call (sequence_buckets=True); a call runs in the
        # shortest that holds it
        self.buckets = buckets
        self.programs: dict[int, Any] = {maximum: model}
        self.first = maximum  # the program compiled first is the model the caller holds

    def bucket(self, s: int) -> int:
        """The compiled length a call of length s runs at (maximum without buckets)."""
        b = self.maximum
        while self.buckets and (b + 1) // 2 >= max(s, 2, self.min_length):
            b = (b + 1) // 2
        return b

    def _takes(self, i: int, any_batch: bool = False) -> str:
        """Input i's type with its sequence axes as 'S' and, with `any_batch`, axis 0 as 'B'."""
        v = self.model.graph.inputs[i]
        dims = ["S" if a in self.in_axes[i] else "B" if any_batch and a == 0 else str(int(d))
                for a, d in enumerate(v.shape)]
        return f"{v.dtype}[{','.join(dims)}]"

    def check(self, arrays: list[np.ndarray], any_batch: bool = False) -> None:
        """ShapeError / DTypeError naming the input and what the model takes (its sequence axes
        any length; with `any_batch`, axis 0 too: the call before dynamic=True's batching cuts
        it) for a call that differs elsewhere."""
        from dnnfusion.dtypes import numpy_dtype
        from dnnfusion.errors import DTypeError

        for i, (a, name) in enumerate(zip(arrays, self.names)):
            v = self.model.graph.inputs[i]
            takes = self._takes(i, any_batch) + (" (S: any sequence length" + (", B: any batch)" if any_batch else ")"))
            if a.dtype != numpy_dtype(v.dtype):
                raise DTypeError(f"input '{name}': expected {takes}, got {a.dtype} {list(a.shape)}")
            if a.ndim != len(v.shape) or any(int(d) != int(w) for k, (d, w) in enumerate(zip(a.shape, v.shape))
                                             if k not in self.in_axes[i] and not (any_batch and k == 0)):
                raise ShapeError(f"input '{name}': expected {takes}, got {list(a.shape)}")

    def length(self, arrays: list[np.ndarray]) -> int:
        """The call's sequence length (check() first)."""
        self.check(arrays)
        got = {int(a.shape[ax]) for a, axes in zip(arrays, self.in_axes) for ax in axes}
        if len(got) != 1:
            raise ShapeError("dynamic=True: the inputs' sequence axes must agree; got "
                             + ", ".join(f"'{n}' {tuple(a.shape)}" for n, a in zip(self.names, arrays)))
        s = got.pop()
        if s < self.min_length:
            raise ShapeError(f"dynamic=True: this model reads sequence position {self.min_length - 1}, so a call "
                             f"needs a sequence of at least {self.min_length}; got {s}")
        return s

    def pad(self, arrays: list[np.ndarray], s: int, to: int | None = None) -> list[np.ndarray]:
        to = self.maximum if to is None else to
        out = []
        for a, axes in zip(arrays, self.in_axes):
            if axes and s != to:
                shape = list(a.shape)
                for ax in axes:
                    shape[ax] = to
                p = np.zeros(shape, a.dtype)
                p[tuple(slice(0, d) for d in a.shape)] = a
                a = p
            out.append(a)
        return out + [np.array(s, np.float32)]

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        s = self.length(arrays)
        if s > self.maximum:
            self.model, self.maximum = self.grow(s), s
            self.programs[s] = self.model
            self.stats["compiles"] += 1
            self.stats["maximum"] = s
        b = self.bucket(s)
        if b not in self.programs:
            self.programs[b] = self.grow(b)
            self.stats["compiles"] += 1
        if self.buckets:
            self.stats["buckets"] = sorted(self.programs)
        padded = self.pad(arrays, s, b)
        m = self.programs[b]
        threads = self.programs[self.first].stats["threads"]  # the caller's model: set_num_threads
        if m.stats["threads"] != threads:
            m.set_num_threads(threads)
        outs = m._exe.run(padded)
        if m._tail is not None:
            outs = m._tail.run(padded, outs)
        self.stats["calls"] += 1
        if s == b:
            return outs
        return [o[tuple(slice(0, s + axes[d]) if d in axes else slice(None) for d in range(o.ndim))]
                if axes else o for o, axes in zip(outs, self.out_axes)]


__all__ = ["Padder", "masked_graph"]
