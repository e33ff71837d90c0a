"""A runtime sequence length for ``compile(..., dynamic=True)`` (issue 17): one program,
compiled for the longest sequence, serves every shorter one.

A call with sequence length ``S`` runs the program compiled for ``S_max``: its inputs padded
with zeros to ``S_max`` along their sequence axes, and ``S`` given as one more input. The
padded positions compute garbage that no valid position reads, because the graph is proven,
operator by operator, to keep positions apart along the sequence except where an operator
mixes them, and there the garbage is masked out first:

* every value carries the sequence on a set of axes, each holding ``S + c`` valid positions of
  ``S_max + c`` (``c``: an offset, e.g. -1 after ``x[:, 1:]``); the axes and offsets come from
  importing the model at two sequence lengths and comparing each value's shape;
* One-to-One operators, Transpose, Reshape (the sequence kept as an axis of its own, the same
  elements before and after it), Expand, Gather from a table, Concat and Split along other axes
  and Slices from an absolute start keep valid positions reading valid positions;
* operators that mix positions along a sequence axis read it masked (``Where(i < S + c, x,
  neutral)``): Softmax and LogSoftmax by -inf, the contraction of MatMul and Gemm by 0 (both
  operands), ReduceSum / Max / Min / Prod / L1 / L2 / SumSquare / LogSumExp and ArgMax / ArgMin
  by their neutral element, ReduceMean as a masked sum over the runtime count, and a Pad at
  the end of the axis by its pad value (so the positions it shifts in are the ones the
  original model pads with: MobileBERT's trigram embedding);
* a constant that follows the sequence length (folded position ids, a causal mask) must agree
  with its twin on the positions both have, and every other constant must be the same at both
  lengths: a model that uses the length as a value (``x[:, -1]``, ``x / x.shape[1]``) is not
  padded, and ``dynamic=True`` compiles a specialization per length for it instead, saying why
  in ``stats["dynamic"]["sequence"]``.

An operator without a rule here ends the proof with its name, as in :mod:`dnnfusion.batching`.
The padded positions need not even be computed: :mod:`dnnfusion.seq_extents` proves the same
on the graph the kernels are generated from and marks the values no valid output reads past
``S + c``, whose stages then stop at the call's length (GEMM rows, loop rows, row kernels), so
a short call costs about what its own length does. Where that second proof fails every padded
position is computed and a call costs what ``S_max`` does; ``sequence_buckets=True`` then still
bounds it: programs for ``S_max / 2``, ``S_max / 4``, ... are compiled on first use and a call
runs padded to the shortest that holds it (at most ``log2(S_max)`` compiles for every length)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from dnnfusion.batching import SHAPE_OPERANDS, _axes, _const, _op_mapping, _shape
from dnnfusion.errors import Error

LENGTH_INPUT = "dnnf_sequence_length"  # the runtime length's input (a fresh name if the model has it)


class NotPaddable(Error):
    """The model's sequence positions are not provably kept apart; the message says where."""


_SUMS = {"ReduceSum": 0.0, "ReduceL1": 0.0, "ReduceL2": 0.0, "ReduceSumSquare": 0.0, "ReduceMean": 0.0,
         "ReduceMax": -np.inf, "ReduceLogSumExp": -np.inf, "ArgMax": -np.inf, "ReduceMin": np.inf,
         "ArgMin": np.inf, "ReduceProd": 1.0}
# Operands a folded import may give different values at the two lengths without the values
# changing meaning: shapes (batching's list) and Slice's ends (an end at the axis's size).
_MAY_DIFFER = {**SHAPE_OPERANDS, "Slice": {2}}
_FLOAT_CODES = {"f32": 1, "f64": 11}  # ONNX's codes of the types a ReduceMean's count is cast to
# Operators whose output at a padded position copies (or casts) an input's: zero padding stays zero.
_COPIES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Cast", "Expand"}
_CHANNEL_ONES = {"BatchNormalization", "QuantizeLinear", "DequantizeLinear"}


def _prefix(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    return x[tuple(slice(0, int(d)) for d in shape)]


class _Tracker:
    """Follows the sequence through `ga` (imported at length `la`); `gb` is the same model at
    length `lb`. pos[value id] = {axis: offset}; masks[(node index, input index)] = ({axis:
    offset}, neutral value)."""

    def __init__(self, ga: Any, la: int, gb: Any, lb: int):
        self.ga, self.la, self.gb, self.lb = ga, la, gb, lb
        self.pos: dict[int, dict[int, int]] = {}
        self.masks: dict[tuple[int, int], tuple[dict[int, int], float]] = {}
        self.means: dict[int, dict[int, int]] = {}  # ReduceMean node index -> its reduced sequence axes
        self.min_length = 1
        self.zeros: set[int] = set()  # values whose padded positions hold the inputs' zero padding

    def fail(self, node: Any, why: str) -> None:
        raise NotPaddable(f"node '{node.name}' ({node.op}) {why}")

    def axes_of(self, va: Any, vb: Any, where: Any) -> dict[int, int]:
        sa, sb = _shape(va), _shape(vb)
        if len(sa) != len(sb):
            self.fail(where, f"gives '{va.name}' a rank that follows the sequence length ({sa} vs {sb})")
        out = {}
        for i, (x, y) in enumerate(zip(sa, sb)):
            if x != y:
                if x - self.la != y - self.lb:
                    self.fail(where, f"gives '{va.name}' an axis that is not the sequence on its own "
                                     f"({sa} at length {self.la}, {sb} at length {self.lb})")
                out[i] = x - self.la
        return out

    def run(self, inputs: dict[str, dict[int, int]]) -> None:
        for va, vb in zip(self.ga.inputs, self.gb.inputs):
            got = self.axes_of(va, vb, va)
            if got != inputs.get(va.name, {}):
                raise NotPaddable(f"input '{va.name}' carries the sequence on axes {sorted(got)}, its symbolic "
                                  f"dimension on {sorted(inputs.get(va.name, {}))}")
            self.pos[va.id] = got
            self.zeros.add(va.id)
        nb = list(self.gb.nodes)
        if len(nb) != len(self.ga.nodes):
            raise NotPaddable(f"the model imports as {len(self.ga.nodes)} operators at sequence length {self.la} "
                              f"and {len(nb)} at {self.lb}")
        for k, (node, twin) in enumerate(zip(self.ga.nodes, nb)):
            if node.op != twin.op:
                raise NotPaddable(f"node '{node.name}' ({node.op}) is a {twin.op} at sequence length {self.lb}")
            ins = []
            for i, (u, w) in enumerate(zip(node.inputs, twin.inputs)):
                if u is None:
                    ins.append(None)
                    continue
                if u.is_constant and u.id not in self.pos:
                    self.constant(node, i, u, w)
                ins.append(self.pos[u.id])
            outs = [self.axes_of(o, t, node) for o, t in zip(node.outputs, twin.outputs)]
            if any(ins) or any(outs):
                self.rule(k, node, twin, ins, outs)
            for o, p in zip(node.outputs, outs):
                self.pos[o.id] = p
            if node.op in _COPIES and node.inputs[0] is not None and node.inputs[0].id in self.zeros:
                self.zeros.add(node.outputs[0].id)

    def constant(self, node: Any, i: int, u: Any, w: Any) -> None:
        a, b = u.numpy(), w.numpy()
        if a.shape == b.shape:
            same = a.tobytes() == b.tobytes()
            if not same and i not in _MAY_DIFFER.get(node.op, ()):
                self.fail(node, f"reads constant '{u.name}' whose value follows the sequence length (the model "
                                "uses the length as a value)")
            self.pos[u.id] = {}
            return
        axes = self.axes_of(u, w, node)
        if _prefix(a, b.shape).tobytes() != b.tobytes():
            self.fail(node, f"reads constant '{u.name}' (shape {list(a.shape)}) whose values at a position "
                            "change with the sequence length")
        self.pos[u.id] = axes

    # -- rules ---------------------------------------------------------------------------
    def aligned(self, node: Any, p: dict[int, int] | None, rank_in: int, out: dict[int, int], rank_out: int,
                what: str = "") -> None:
        """Input axes (right-aligned, as broadcasting aligns them) land on output axes with the
        same offsets."""
        for a, c in (p or {}).items():
            if out.get(a + rank_out - rank_in) != c:
                self.fail(node, f"moves the sequence axis {a} of its {what or 'input'} (this module has no "
                                "rule for that)")

    def mask(self, k: int, i: int, axes: dict[int, int], neutral: float) -> None:
        if axes:
            prev = self.masks.get((k, i))
            merged = dict(prev[0]) if prev else {}
            merged.update(axes)
            self.masks[(k, i)] = (merged, neutral)

    def rule(self, k: int, node: Any, twin: Any, ins: list, outs: list) -> None:
        op, mt = node.op, _op_mapping().get(node.op)
        ranks = [len(_shape(v)) if v is not None else 0 for v in node.inputs]
        ro = [len(_shape(v)) for v in node.outputs]
        if op in _CHANNEL_ONES and any(ins[1:]):
            self.fail(node, "has per-channel operands along the sequence")
        if mt == "One-to-One":
            for p, r in zip(ins, ranks):
                self.aligned(node, p, r, outs[0], ro[0])
            return
        if op in ("Softmax", "LogSoftmax"):
            ax = int(node.attrs.get("axis", -1)) % ranks[0]
            if ax in ins[0]:
                self.mask(k, 0, {ax: ins[0][ax]}, -np.inf)
            self.aligned(node, ins[0], ranks[0], outs[0], ro[0])
            return
        if op == "LayerNormalization":
            ax = int(node.attrs.get("axis", -1)) % ranks[0]
            if any(a >= ax for a in ins[0]) or any(ins[1:]):
                self.fail(node, "normalises along the sequence")
            self.aligned(node, ins[0], ranks[0], outs[0], ro[0])
            return
        if op in _SUMS:
            self.reduction(k, node, ins, outs, ranks)
            return
        if op == "MatMul":
            self.matmul(k, node, ins, outs, ranks, ro)
            return
        if op == "Gemm":
            self.gemm(k, node, ins, outs)
            return
        if op == "Transpose":
            perm = node.attrs.get("perm") or list(range(ranks[0] - 1, -1, -1))
            want = {j: ins[0][a] for j, a in enumerate(perm) if a in ins[0]}
            if want != outs[0]:
                self.fail(node, "loses the sequence axis")
            return
        if op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
            self.reshape(node, twin, ins, outs)
            return
        if op == "Concat":
            ax = int(node.attrs.get("axis", 0)) % ro[0]
            if any(ax in (p or {}) for p in ins):
                self.fail(node, "concatenates along the sequence")
            if any((p or {}) != outs[0] for p in ins):
                self.fail(node, "joins values that carry the sequence differently")
            return
        if op == "Split":
            ax = int(node.attrs.get("axis", 0)) % ranks[0]
            if ax in ins[0] or any(o != ins[0] for o in outs) or any(ins[1:]):
                self.fail(node, "splits along the sequence")
            return
        if op == "Slice":
            self.slice(node, twin, ins, outs, ranks)
            return
        if op == "Pad":
            self.pad(k, node, ins, outs, ranks)
            return
        if op == "Gather":
            self.gather(node, ins, outs, ranks)
            return
        if op == "Expand":
            self.aligned(node, ins[0], ranks[0], outs[0], ro[0])
            return
        if op == "Tile":
            reps = _const(node.inputs[1])
            if reps is None or any(int(reps.reshape(-1)[a]) != 1 for a in ins[0]):
                self.fail(node, "repeats along the sequence")
            self.aligned(node, ins[0], ranks[0], outs[0], ro[0])
            return
        if op in ("CumSum", "CumProd"):
            c = _const(node.inputs[1])
            if c is None:
                self.fail(node, "has a computed axis")
            ax = int(c.reshape(-1)[0]) % ranks[0]
            if ax in ins[0] and node.attrs.get("reverse", 0):
                self.fail(node, "runs backwards along the sequence")
            self.aligned(node, ins[0], ranks[0], outs[0], ro[0])
            return
        self.fail(node, "has no sequence rule in dnnfusion.sequence (dynamic=True proves the padding operator "
                        "by operator)")

    def reduction(self, k: int, node: Any, ins: list, outs: list, ranks: list) -> None:
        r = ranks[0]
        if node.op in ("ArgMax", "ArgMin"):
            axes = [int(node.attrs.get("axis", 0)) % r]
            keep = int(node.attrs.get("keepdims", 1))
        else:
            axes = _axes(node, r)
            if axes is None:
                self.fail(node, "has computed axes")
            keep = int(node.attrs.get("keepdims", 1))
            if any(ins[1:]):
                self.fail(node, "has axes that follow the sequence")
        red = {a: c for a, c in ins[0].items() if a in axes}
        if node.op == "ReduceMean" and red:
            if node.inputs[0].dtype not in _FLOAT_CODES:
                self.fail(node, f"averages {node.inputs[0].dtype} along the sequence")
            self.means[k] = red
        elif red:
            self.mask(k, 0, red, _SUMS[node.op])
        kept = [a for a in range(r) if keep or a not in axes]
        want = {kept.index(a): c for a, c in ins[0].items() if a not in axes}
        if want != outs[0]:
            self.fail(node, "loses the sequence axis")

    def matmul(self, k: int, node: Any, ins: list, outs: list, ranks: list, ro: list) -> None:
        ra, rb = ranks
        pa, pb = ins[0] or {}, ins[1] or {}
        ka, kb = ra - 1, (rb - 2 if rb >= 2 else 0)
        if ka in pa or kb in pb:
            if pa.get(ka) != pb.get(kb):
                self.fail(node, "contracts a sequence axis with an axis that is not")
            self.mask(k, 0, {ka: pa[ka]}, 0.0)
            self.mask(k, 1, {kb: pb[kb]}, 0.0)
        want: dict[int, int] = {}
        o = ro[0]
        if ra >= 2 and ra - 2 in pa:
            want[o - 2 if rb >= 2 else o - 1] = pa[ra - 2]
        if rb >= 2 and rb - 1 in pb:
            want[o - 1] = pb[rb - 1]
        for p, r in ((pa, ra), (pb, rb)):  # the stacked (batch) axes, broadcast from the right
            for a, c in p.items():
                if a < r - 2:
                    j = a + (o - 2 if rb >= 2 and ra >= 2 else o - 1) - (r - 2)
                    if want.get(j, c) != c:
                        self.fail(node, "broadcasts sequence axes of different lengths")
                    want[j] = c
        if want != outs[0]:
            self.fail(node, "loses the sequence axis")

    def gemm(self, k: int, node: Any, ins: list, outs: list) -> None:
        ta, tb = int(node.attrs.get("transA", 0)), int(node.attrs.get("transB", 0))
        pa, pb = ins[0] or {}, ins[1] or {}
        ka, kb = (0 if ta else 1), (1 if tb else 0)
        if ka in pa or kb in pb:
            if pa.get(ka) != pb.get(kb):
                self.fail(node, "contracts a sequence axis with an axis that is not")
            self.mask(k, 0, {ka: pa[ka]}, 0.0)
            self.mask(k, 1, {kb: pb[kb]}, 0.0)
        want = {}
        if 1 - ka in pa:
            want[0] = pa[1 - ka]
        if 1 - kb in pb:
            want[1] = pb[1 - kb]
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            self.aligned(node, ins[2], len(_shape(node.inputs[2])), want, 2, "bias")
        if want != outs[0]:
            self.fail(node, "loses the sequence axis")

    def reshape(self, node: Any, twin: Any, ins: list, outs: list) -> None:
        p, q = ins[0], outs[0]
        if len(p) != len(q):
            self.fail(node, "merges the sequence with another axis or splits it")
        for (a, c), j in zip(sorted(p.items()), sorted(q)):
            if q[j] != c:
                self.fail(node, "reorders sequence axes")
            for x, y in ((node.inputs[0], node.outputs[0]), (twin.inputs[0], twin.outputs[0])):
                if int(np.prod(_shape(x)[:a], dtype=np.int64)) != int(np.prod(_shape(y)[:j], dtype=np.int64)):
                    self.fail(node, "moves elements across the sequence axis (not the same elements before it)")

    def slice(self, node: Any, twin: Any, ins: list, outs: list, ranks: list) -> None:
        if any(ins[1:]):
            self.fail(node, "has bounds that carry the sequence")
        r = ranks[0]

        def spec(n: Any) -> dict[int, tuple[int, int]]:
            starts = _const(n.inputs[1])
            axes = _const(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] is not None else None
            steps = _const(n.inputs[4]) if len(n.inputs) > 4 and n.inputs[4] is not None else None
            if starts is None or (len(n.inputs) > 3 and n.inputs[3] is not None and axes is None) or (
                    len(n.inputs) > 4 and n.inputs[4] is not None and steps is None):
                self.fail(node, "has computed bounds")
            starts = [int(s) for s in starts.reshape(-1)]
            axes = [int(a) % r for a in axes.reshape(-1)] if axes is not None else list(range(len(starts)))
            steps = [int(s) for s in steps.reshape(-1)] if steps is not None else [1] * len(starts)
            dims = _shape(n.inputs[0])
            out = {}
            for a, s, st in zip(axes, starts, steps):
                s = s + dims[a] if s < 0 else s
                out[a] = (min(max(s, 0), dims[a]), st)
            return out

        sa, sb = spec(node), spec(twin)
        for a, c in ins[0].items():
            if a not in sa:
                if outs[0].get(a) != c:
                    self.fail(node, "loses the sequence axis")
                continue
            (start, step), (start_b, _) = sa[a], sb[a]
            if step != 1 or start != start_b:
                self.fail(node, "slices the sequence from a position relative to its end or with a step")
            if a in outs[0]:
                if outs[0][a] + start > c:
                    self.fail(node, "reads past the valid positions")
            else:
                self.min_length = max(self.min_length, start + _shape(node.outputs[0])[a] - c)
        for a, c in outs[0].items():
            if a not in ins[0]:
                self.fail(node, "makes a sequence axis")

    def pad(self, k: int, node: Any, ins: list, outs: list, ranks: list) -> None:
        if node.attrs.get("mode", "constant") not in ("constant", b"constant"):
            self.fail(node, f"pads in mode {node.attrs.get('mode')!r} (reflect and edge read the sequence's end)")
        if any(ins[1:]):
            self.fail(node, "has pads that carry the sequence")
        pads = _const(node.inputs[1])
        axes = _const(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] is not None else None
        if pads is None or (len(node.inputs) > 3 and node.inputs[3] is not None and axes is None):
            self.fail(node, "has computed pads")
        r = ranks[0]
        axes = [int(a) % r for a in axes.reshape(-1)] if axes is not None else list(range(r))
        pads = [int(p) for p in pads.reshape(-1)]
        value = 0.0
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            v = _const(node.inputs[2])
            if v is None:
                self.fail(node, "has a computed pad value")
            value = float(v.reshape(-1)[0])
        for a, c in ins[0].items():
            begin, end = (pads[axes.index(a)], pads[len(axes) + axes.index(a)]) if a in axes else (0, 0)
            if begin < 0 or end < 0:
                self.fail(node, "crops the sequence")
            if outs[0].get(a) != c + begin + end:
                self.fail(node, "loses the sequence axis")
            if end:
                self.mask(k, 0, {a: c}, value)

    def gather(self, node: Any, ins: list, outs: list, ranks: list) -> None:
        r, ri = ranks
        ax = int(node.attrs.get("axis", 0)) % r
        pd, pi = ins[0] or {}, ins[1] or {}
        want = {}
        if ax in pd:
            idx = _const(node.inputs[1])
            if idx is None:
                self.fail(node, "reads the sequence at computed positions")
            if idx.size and int(idx.min()) < 0:
                self.fail(node, "reads the sequence at positions counted from its end")
            if len(pi) > 1:
                self.fail(node, "reads the sequence at positions that follow two sequence axes")
            if pi:  # a constant index per position (e.g. arange): position j of the valid S + ci
                # reads position idx[j] of the valid S + cd, for every S, iff idx[j] <= j + cd - ci
                (a, ci), = pi.items()
                j = np.arange(idx.shape[a]).reshape([-1] + [1] * (idx.ndim - 1 - a))
                if (idx > j + pd[ax] - ci).any():
                    self.fail(node, "reads sequence positions ahead of the one it writes")
            elif idx.size:
                self.min_length = max(self.min_length, int(idx.max()) + 1 - pd[ax])
        elif pi and not (node.inputs[1].is_constant or node.inputs[1].id in self.zeros):
            self.fail(node, "reads a table at computed indices along the sequence (padding could put them out "
                            "of range)")
        for a, c in pd.items():
            if a < ax:
                want[a] = c
            elif a > ax:
                want[a + ri - 1] = c
        for a, c in pi.items():
            want[ax + a] = c
        if want != outs[0]:
            self.fail(node, "loses the sequence axis")


def analyse(load_at: Callable[[int], Any], maximum: int, inputs: dict[str, dict[int, int]]) -> tuple[Any, _Tracker]:
    """The model imported at `maximum` and its proof (NotPaddable if none); `load_at(n)` imports
    it at sequence length n, `inputs` the sequence axes of each input (offset 0)."""
    if maximum < 2:
        raise NotPaddable(f"the representative sequence length is {maximum}; padding needs one of at least 2 "
                          "(give the longest sequence in example_inputs or input_shapes)")
    twin = maximum - 1
    ga, gb = load_at(maximum), load_at(twin)
    t = _Tracker(ga, maximum, gb, twin)
    t.run(inputs)
    return ga, t


__all__ = ["LENGTH_INPUT", "NotPaddable", "analyse"]
