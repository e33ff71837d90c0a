"""Kernels whose rows follow ``compile(..., dynamic=True)``'s runtime sequence length (issue 17).

:mod:`dnnfusion.sequence` proves that a call of length ``S`` may run padded to the compiled
maximum: no valid position reads a padded one except through a mask. Then the padded positions
need not be computed at all. This module finds, in the graph the kernels are generated from
(after the rewrites, the layout and the host tail), the values whose padded positions may be
left uncomputed, and along which axes: the code generator then runs those stages over the
first ``S + c`` positions of the axis only (a GEMM's rows, a loop's outer rows, a LayerNorm's
or Softmax's rows), reading ``S`` from the length input at run time.

The rewrites may have moved the masks, so the proof is made again on that graph, imported at
two lengths (the planned graph and its twin one position shorter), with the same rules; the
difference is that a mixing operand must now already be masked: produced by
``Where(i < S + c, x, neutral)`` (the condition a ``Less`` of a position constant and the
length input plus a constant, :func:`dnnfusion.padded.masked_graph`'s form), possibly through
copies (Transpose, Reshape, ...). Those masked values are computed in full along their masked
axes, and the copies between the mask and the mixing operator along every axis (a mixing
operator reads their neutral elements); every other floating-point value that carries the
sequence is left uncomputed past ``S + c``. Its padded positions then hold stale memory, which
only values computed from it read, at padded positions (the proof), and masks select away.

Only floating-point values are left uncomputed, and none that an integer or index computation
reads: stale bits there could be a divisor of zero or an index out of range. When any step
fails, nothing is left uncomputed (``stats["dynamic"]["sequence"]["runtime_rows"]`` says
why) and the program computes every padded position as before."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.sequence import _COPIES, NotPaddable, _Tracker

_FLOATS = {"f32", "f64"}
# The consumers a stale non-float value (a comparison of stale floats) may have: boolean logic
# and a Where's condition, which index nothing by it and compute no integer from it.
_BOOL_SAFE = {"Where", "And", "Or", "Not", "Xor"}


class _Checked(_Tracker):
    """The proof on the planned graph: a mask needed is a mask present (`clean`)."""

    def __init__(self, ga: Any, la: int, gb: Any, lb: int, length_name: str):
        super().__init__(ga, la, gb, lb)
        self.length_name = length_name
        self.valid: dict[int, dict[int, int]] = {}  # bool value id -> {axis: c}: (i < S + c)
        self.clean: dict[int, tuple[dict[int, int], float]] = {}  # value id -> (axes, neutral)
        self.clean_from: dict[int, int] = {}  # a clean copy's value id -> the clean value it copies
        # value id -> the axes it must be computed along in full (its masked axes; every
        # sequence axis for the copies between a mask and the operand)
        self.need_clean: dict[int, set[int]] = {}
        self.nodes = list(ga.nodes)
        self.values = {o.id: o for n in self.nodes for o in n.outputs}  # computed values by id
        self.length_id = next((v.id for v in ga.inputs if v.name == length_name), None)
        if self.length_id is None:
            raise NotPaddable(f"the planned graph lost its length input '{length_name}'")
        self.lengths: dict[int, float] = {self.length_id: 0.0}  # value id -> u: the value is L + u
        for n in self.nodes:  # L + u (padded.masked_graph's masks; no sequence axes, so no rule sees them)
            if n.op == "Add" and len(n.inputs) == 2:
                for x, k in (n.inputs, n.inputs[::-1]):
                    if (x is not None and x.id in self.lengths and k is not None and k.is_constant
                            and k.numpy().size == 1):
                        self.lengths[n.outputs[0].id] = self.lengths[x.id] + float(k.numpy().reshape(-1)[0])
                        break

    def mask(self, k: int, i: int, axes: dict[int, int], neutral: float) -> None:
        if not axes:
            return
        v = self.nodes[k].inputs[i]
        got = self.clean.get(v.id)
        if got is None or not _same(got[1], neutral) or any(got[0].get(a) != c for a, c in axes.items()):
            n = self.nodes[k]
            self.fail(n, f"reads '{v.name}' along the sequence unmasked in the planned graph")
        self.need_clean.setdefault(v.id, set()).update(axes)
        vid = self.clean_from.get(v.id)
        while vid is not None:  # the mask and the copies between it and this operand: computed in full
            self.need_clean.setdefault(vid, set()).update(self.pos.get(vid, {}))
            vid = self.clean_from.get(vid)

    def rule(self, k: int, node: Any, twin: Any, ins: list, outs: list) -> None:
        self._mark(node, ins, outs)
        super().rule(k, node, twin, ins, outs)

    def _mark(self, node: Any, ins: list, outs: list) -> None:
        op, out = node.op, node.outputs[0]
        ro = len(out.shape)
        if op in ("Less", "Greater") and len(node.inputs) == 2:
            pos, length = node.inputs if op == "Less" else node.inputs[::-1]
            if length is not None and length.id in self.lengths and pos is not None and pos.is_constant:
                p = self.pos.get(pos.id, {})
                if len(p) == 1:
                    (a, c), = p.items()
                    values = pos.numpy().astype(np.float64) - self.lengths[length.id]  # pos - u < L
                    want = (np.arange(values.shape[a], dtype=np.float64) - c).reshape(
                        [-1 if j == a else 1 for j in range(values.ndim)])
                    if values.shape == tuple(int(d) for d in pos.shape) and np.array_equal(
                            values, np.broadcast_to(want, values.shape)):
                        self.valid[out.id] = {a + ro - values.ndim: c}
        elif op == "And":
            got = [self.valid.get(v.id) if v is not None else None for v in node.inputs]
            if all(g is not None for g in got):
                merged: dict[int, int] = {}
                for g, v in zip(got, node.inputs):
                    for a, c in g.items():
                        merged[a + ro - len(v.shape)] = c
                self.valid[out.id] = merged
        elif op == "Where":
            cond, x, fill = node.inputs
            g = self.valid.get(cond.id)
            if g is not None and fill is not None and fill.is_constant:
                f = fill.numpy().reshape(-1)
                if f.size and (np.all(f == f[0]) or np.all(np.isnan(f))):
                    self.clean[out.id] = ({a + ro - len(cond.shape): c for a, c in g.items()}, float(f[0]))
        elif op in _COPIES and op != "Cast" and node.inputs[0] is not None:
            src = self.clean.get(node.inputs[0].id)
            if src is not None and set(src[0]) >= set(ins[0] or {}) and outs[0]:
                self.clean[out.id] = (dict(outs[0]), src[1])
                self.clean_from[out.id] = node.inputs[0].id


def _same(a: float, b: float) -> bool:
    return a == b or (np.isnan(a) and np.isnan(b))


def runtime_rows(fa: Any, la: int, fb: Any, lb: int, length_name: str,
                 inputs: dict[str, dict[int, int]]) -> tuple[dict[int, dict[int, int]], str | None]:
    """The planned graph `fa` (at sequence length `la`; `fb` the same at `lb`): {value id:
    {axis: offset}} of the values whose positions from S + offset on need not be computed, and
    None; or ({}, why) when none may be left."""
    t = _Checked(fa, la, fb, lb, length_name)
    try:
        t.run({**inputs, length_name: {}})
    except NotPaddable as e:
        return {}, str(e)
    if t.means:
        return {}, "a ReduceMean along the sequence is left in the planned graph"
    consumers: dict[int, list[Any]] = {}
    for n in t.nodes:
        for v in n.inputs:
            if v is not None:
                consumers.setdefault(v.id, []).append(n)
    # a masked operand may still stop along its other sequence axes (the queries of an
    # attention's masked weights: only their keys are contracted)
    cand = {}
    for vid, axes in t.pos.items():
        free = {a: c for a, c in axes.items() if a not in t.need_clean.get(vid, ())}
        if free and vid in t.values and t.values[vid].dtype in _FLOATS:
            cand[vid] = free
    # Stale bits spread to every value computed from an uncomputed one; a non-float such value
    # may only reach boolean logic, a Where's condition, or the graph's outputs.
    stale = set(cand)
    for n in t.nodes:
        if any(v is not None and v.id in stale for v in n.inputs):
            stale.update(o.id for o in n.outputs)
    for vid in stale:
        v = t.values[vid]
        if v.dtype in _FLOATS:
            continue
        for n in consumers.get(vid, []):
            if n.op not in _BOOL_SAFE or (n.op == "Where" and n.inputs[0].id != vid):
                return {}, (f"'{v.name}' ({v.dtype}) would be computed from uncomputed padded positions and "
                            f"feeds {n.op} '{n.name}'")
    return cand, None


__all__ = ["runtime_rows"]
