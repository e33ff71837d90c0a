"""Dynamic batch (``compile(..., dynamic=True)``, issue 17): one compiled program serves every
batch size, without compiling again.

A model is *batch-separable* when sample ``i`` of every output depends only on sample ``i`` of
the inputs, through the same function for every batch size: then a batch of ``n`` is the
program compiled for a representative batch ``r`` run over ``ceil(n / r)`` chunks (the last one
padded; padding rows are computed and dropped), outputs joined along their batch axis.
Convolutional networks and transformers in inference mode are separable; a model that mixes
samples (BatchNorm in training mode, a reduction or Softmax over the batch, a Concat along it)
or uses the batch size as a value (``x * x.shape[0]``) is not, and ``dynamic=True`` refuses it
with the reason instead of returning numbers that depend on how the batch was cut.

The proof is structural, over the graph as imported (shape arithmetic folded) at two batch
sizes, ``a`` and ``b``:

* the two graphs have the same operators, attributes and constants, except the operands that
  only give an output's shape (Reshape's target, Expand's shape, Tile's repeats) and constants
  that are one value repeated for every sample (a broadcast to ``[B, ...]`` that import folded);
  every value's shape differs between the two on the batch axis alone;
* in each graph, the position of the batch is followed from the inputs (axis 0) through every
  operator by its mapping type and its own rule: One-to-One operators keep it where broadcasting
  aligns it (a batch-free operand must not vary along it), Many-to-Many anchors must not reduce,
  normalise or convolve over it, Reorganize and Shuffle operators move it (a Reshape may merge
  it into a larger axis as that axis's outer factor, e.g. ``[B, S, 768] -> [B*S, 768]``), and
  every output must carry it whole;
* the positions agree between the two graphs.

An operator without a rule here ends the proof with its name: it is the list of what this
module has been taught, not a guess."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dnnfusion.errors import Error

# Analysis batch sizes: two, both above 1 (a batch of 1 hides which axes it is), distinct from
# each other so a constant that follows the batch size shows it.
ANALYSIS_BATCHES = (2, 3)

# Operator inputs that only give the output's shape: their folded values may follow the batch
# (every value's shape is then checked to differ between the two imports on the batch axis
# alone). Every other constant operand (Slice bounds, pads, axes, Range's limits...) must be
# the same at both batch sizes, since it can change values without changing shapes.
SHAPE_OPERANDS = {"Reshape": {1}, "Expand": {1}, "Tile": {1}, "ConstantOfShape": {0}}


_MAPPING: dict[str, str] = {}


def _op_mapping() -> dict[str, str]:
    if not _MAPPING:
        from dnnfusion.ecg import op_table

        _MAPPING.update({r["name"]: r["mapping"] for r in op_table()})
    return _MAPPING


class NotSeparable(Error):
    """The model's samples are not provably independent; the message says where."""


def _shape(v: Any) -> list[int]:
    return [int(d) for d in v.shape]


def _const(v: Any) -> np.ndarray | None:
    return v.numpy() if v is not None and v.is_constant else None


def _axes(node: Any, rank: int) -> list[int] | None:
    """A reduction's axes (attribute, or a constant second input), normalised; None if computed."""
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        c = _const(node.inputs[1])
        if c is None:
            return None
        axes = [int(a) for a in c.reshape(-1)]
    if not axes:  # absent or empty: every axis, unless noop_with_empty_axes
        return [] if axes is not None and node.attrs.get("noop_with_empty_axes", 0) else list(range(rank))
    return [a % rank for a in axes]


class _Tracker:
    """Follows the batch through `ecg` (imported at batch `batch`); `twin` is the same model
    imported at batch `twin_batch`, whose shapes tell a value that follows the batch size."""

    def __init__(self, ecg: Any, batch: int, twin: Any, twin_batch: int):
        self.ecg, self.p = ecg, batch
        self.twin, self.q = list(twin.nodes), twin_batch
        self.pos: dict[int, Any] = {}
        self.relative: set[str] | frozenset = frozenset()

    def fail(self, node: Any, why: str) -> None:
        raise NotSeparable(f"node '{node.name}' ({node.op}) {why}")

    def run(self) -> dict[int, Any]:
        for v in self.ecg.inputs:
            s = _shape(v)
            if not s or s[0] != self.p:
                raise NotSeparable(f"input '{v.name}' has no batch axis 0 (shape {s})")
            self.pos[v.id] = (0, 1)
        for node, twin in zip(self.ecg.nodes, self.twin):
            ins = [self.pos.get(v.id) if v is not None else None for v in node.inputs]
            if all(p is None for p in ins):
                outs = [self.broadcast(node, o, t) for o, t in zip(node.outputs, twin.outputs)]
            else:
                outs = self.rule(node, ins)
            for o, p in zip(node.outputs, outs):
                if p is not None:
                    a, inner = p
                    s = _shape(o)
                    if not (0 <= a < len(s)) or s[a] != self.p * inner:
                        self.fail(node, f"output '{o.name}' (shape {s}) lost the batch axis")
                self.pos[o.id] = p
        for v in self.ecg.outputs:
            p = self.pos.get(v.id)
            if p is None or p[1] != 1:
                raise NotSeparable(f"output '{v.name}' (shape {_shape(v)}) does not carry the batch as a whole "
                                   "axis of its own")
        return self.pos

    def broadcast(self, node: Any, out: Any, twin: Any) -> Any:
        """A value computed from batch-free operands only: batch-free, unless its shape follows
        the batch size, which only a broadcast of one value to every sample may do (Expand,
        Tile or ConstantOfShape to [B, ...], e.g. ViT's class token)."""
        sa, sb = _shape(out), _shape(twin)
        if sa == sb:
            return None
        k = _batch_axis(sa, sb, self.p, self.q)
        ok = k is not None and node.op in ("Expand", "Tile", "ConstantOfShape")
        if ok and node.op != "ConstantOfShape":
            si = _shape(node.inputs[0])
            j = k - (len(sa) - len(si))
            ok = 0 <= j < len(si) and si[j] == 1
        if not ok:
            self.fail(node, f"computes a value whose shape follows the batch size ({sa} at batch {self.p}, "
                            f"{sb} at batch {self.q}) from no batched input")
        return (k, sa[k] // self.p)

    # ---- the rules --------------------------------------------------------------------------
    def rule(self, node: Any, ins: list) -> list:
        op, mt = node.op, _op_mapping().get(node.op)  # the operator's class (a node's own says
        # One-to-Many where it broadcasts)
        if op == "BatchNormalization":
            return self.channel_op(node, ins)
        if op == "Trilu":
            return self.keep_unless(node, ins, lambda rank: {rank - 2, rank - 1}, "masks rows and columns")
        if mt == "One-to-One":
            return self.elementwise(node, ins)
        if op in ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                  "InstanceNormalization", "NhwcConv", "NhwcMaxPool", "NhwcAveragePool", "DepthToSpace",
                  "SpaceToDepth"):
            return self.sample_op(node, ins)
        if op in ("Softmax", "LogSoftmax"):
            rank = len(_shape(node.inputs[0]))
            ax = int(node.attrs.get("axis", -1)) % rank
            return self.keep_unless(node, ins, lambda r: {ax}, "normalises along it")
        if op == "LayerNormalization":
            rank = len(_shape(node.inputs[0]))
            ax = int(node.attrs.get("axis", -1)) % rank
            return self.keep_unless(node, ins, lambda r: set(range(ax, r)), "normalises along it")
        if op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ArgMax", "ArgMin"):
            return self.reduction(node, ins)
        if op in ("CumSum", "CumProd", "TopK"):
            rank = len(_shape(node.inputs[0]))
            ax = int(node.attrs.get("axis", -1)) % rank
            if op != "TopK":
                c = _const(node.inputs[1])
                if c is None:
                    self.fail(node, "has a computed axis")
                ax = int(c.reshape(-1)[0]) % rank
            return self.keep_unless(node, ins, lambda r: {ax}, "runs along it")
        if op == "MatMul":
            return self.matmul(node, ins)
        if op == "Gemm":
            return self.gemm(node, ins)
        if op == "Transpose":
            (a, inner) = self.data(node, ins)
            perm = node.attrs.get("perm") or list(range(len(_shape(node.inputs[0])) - 1, -1, -1))
            return [(list(perm).index(a), inner)]
        if op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
            return [self.reshape(node, ins)]
        if op in ("Concat",):
            return self.concat(node, ins)
        if op == "Split":
            (a, inner) = self.data(node, ins)
            ax = int(node.attrs.get("axis", 0)) % len(_shape(node.inputs[0]))
            if ax == a:
                self.fail(node, "splits along the batch axis")
            return [(a, inner)] * len(node.outputs)
        if op == "Slice":
            return [self.slice(node, ins)]
        if op == "Pad":
            return [self.pad(node, ins)]
        if op == "Gather":
            return [self.gather(node, ins)]
        if op == "GatherND":
            return [self.gather_nd(node, ins)]
        if op == "Expand":
            return [self.expand(node, ins)]
        if op == "Tile":
            (a, inner) = self.data(node, ins)
            reps = _const(node.inputs[1])
            if reps is None or int(reps.reshape(-1)[a]) != 1:
                self.fail(node, "repeats along the batch axis")
            return [(a, inner)]
        if op == "GridSample":  # sample n of Y reads sample n of X at sample n's grid points
            if ins[0] != (0, 1) or ins[1] != (0, 1):
                self.fail(node, "needs the batch as the first axis (N) of both X and the grid")
            return [(0, 1)]
        if op == "Resize":
            (a, inner) = self.data(node, ins)
            if _shape(node.outputs[0])[a] != _shape(node.inputs[0])[a]:
                self.fail(node, "resizes the batch axis")
            if inner != 1 or any(_shape(node.outputs[0])[i] != _shape(node.inputs[0])[i] for i in range(a + 1)):
                self.fail(node, "resizes an axis at or before the batch")
            return [(a, inner)]
        self.fail(node, "has no batch rule in dnnfusion.batching (dynamic=True proves separability operator by "
                        "operator); compile without dynamic=True to specialize per shape instead")
        return []

    def data(self, node: Any, ins: list) -> tuple[int, int]:
        """The batch position of input 0, the only input allowed to carry it."""
        if ins[0] is None or any(p is not None for p in ins[1:]):
            self.fail(node, "reads the batch through an operand other than its data input")
        return ins[0]

    def elementwise(self, node: Any, ins: list) -> list:
        out_rank = max(len(_shape(o)) for o in node.outputs)
        aligned = None
        for v, p in zip(node.inputs, ins):
            if p is None:
                continue
            a = p[0] + out_rank - len(_shape(v))
            if aligned is not None and aligned != (a, p[1]):
                self.fail(node, "combines operands whose batch axes do not line up")
            aligned = (a, p[1])
        for v, p in zip(node.inputs, ins):
            if p is not None or v is None:
                continue
            s = _shape(v)
            i = aligned[0] - (out_rank - len(s))
            if 0 <= i < len(s) and s[i] != 1:
                self.fail(node, f"broadcasts operand '{v.name}' (shape {s}) along the batch axis")
        return [aligned] * len(node.outputs)

    def channel_op(self, node: Any, ins: list) -> list:
        (a, inner) = self.data(node, ins)
        if a == 1:
            self.fail(node, "has the batch on its channel axis")
        return [(a, inner)] + [None] * (len(node.outputs) - 1)

    def sample_op(self, node: Any, ins: list) -> list:
        (a, inner) = self.data(node, ins)
        if (a, inner) != (0, 1):
            self.fail(node, "needs the batch as its first axis (N)")
        return [(0, 1)] * len(node.outputs)

    def keep_unless(self, node: Any, ins: list, axes, why: str) -> list:
        (a, inner) = self.data(node, ins)
        if a in axes(len(_shape(node.inputs[0]))):
            self.fail(node, f"{why}: the batch axis")
        return [(a, inner)] * len(node.outputs)

    def reduction(self, node: Any, ins: list) -> list:
        (a, inner) = self.data(node, ins)
        rank = len(_shape(node.inputs[0]))
        if node.op in ("ArgMax", "ArgMin"):
            axes = [int(node.attrs.get("axis", 0)) % rank]
        else:
            axes = _axes(node, rank)
            if axes is None:
                self.fail(node, "has computed axes")
        if a in axes:
            self.fail(node, "reduces the batch axis")
        keep = int(node.attrs.get("keepdims", 1))
        return [(a if keep else a - sum(1 for x in axes if x < a), inner)]

    def matmul(self, node: Any, ins: list) -> list:
        A, B = node.inputs[0], node.inputs[1]
        ra, rb = len(_shape(A)), len(_shape(B))
        out_rank = len(_shape(node.outputs[0]))
        pa, pb = ins
        res = None
        if pa is not None:
            a, inner = pa
            if a == ra - 1:
                self.fail(node, "contracts over the batch axis")
            if ra >= 2 and a == ra - 2:  # the rows of A
                if pb is not None:
                    self.fail(node, "multiplies rows of one sample by another's")
                res = (out_rank - 2, inner)
            else:  # a broadcast (stacked) axis
                res = (a + out_rank - ra, inner)
        if pb is not None:
            b, inner = pb
            if rb == 1 or b == rb - 2:
                self.fail(node, "contracts over the batch axis")
            if b == rb - 1:
                if pa is not None:
                    self.fail(node, "multiplies columns of one sample by another's")
                res = (out_rank - 1, inner)
            else:
                r = (b + out_rank - rb, inner)
                if res is not None and res != r:
                    self.fail(node, "multiplies operands whose batch axes do not line up")
                res = r
        if res[0] < out_rank - 2:  # stacked: a batch-free operand must not vary along it
            for v, p in ((A, pa), (B, pb)):
                s = _shape(v)
                i = res[0] - (out_rank - len(s))
                if p is None and len(s) >= 3 and 0 <= i < len(s) - 2 and s[i] != 1:
                    self.fail(node, f"broadcasts operand '{v.name}' along the batch axis")
        return [res]

    def gemm(self, node: Any, ins: list) -> list:
        (a, inner) = self.data(node, ins)
        trans_a = int(node.attrs.get("transA", 0))
        if a != (1 if trans_a else 0):
            self.fail(node, "contracts over the batch axis")
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            c = _shape(node.inputs[2])
            if len(c) == 2 and c[0] != 1:
                self.fail(node, "adds a C that varies along the batch axis")
        return [(0, inner)]

    def reshape(self, node: Any, ins: list) -> tuple[int, int]:
        (a, inner) = self.data(node, ins)
        si, so = _shape(node.inputs[0]), _shape(node.outputs[0])
        if int(np.prod(si[:a], dtype=np.int64)) != 1:
            self.fail(node, "reshapes a tensor whose batch axis is not outermost")
        per_sample = int(np.prod(si, dtype=np.int64)) // self.p
        k = 0
        while k < len(so) and so[k] == 1:
            k += 1
        if k == len(so) or so[k] % self.p:
            self.fail(node, f"reshapes {si} to {so}, which does not keep the batch outermost")
        inner_out = so[k] // self.p
        if inner_out * int(np.prod(so[k + 1:], dtype=np.int64)) != per_sample:
            self.fail(node, f"reshapes {si} to {so}, which mixes the batch with other axes")
        return (k, inner_out)

    def concat(self, node: Any, ins: list) -> list:
        rank = len(_shape(node.outputs[0]))
        ax = int(node.attrs.get("axis", 0)) % rank
        pos = {p for p in ins if p is not None}
        if len(pos) != 1:
            self.fail(node, "joins operands whose batch axes do not line up")
        (a, inner) = pos.pop()
        if a == ax:
            self.fail(node, "joins along the batch axis")
        if any(p is None for p in ins):
            self.fail(node, "joins a batch-free operand with batched ones (its extent cannot follow the batch)")
        return [(a, inner)]

    def slice(self, node: Any, ins: list) -> tuple[int, int]:
        (a, inner) = self.data(node, ins)
        si, so = _shape(node.inputs[0]), _shape(node.outputs[0])
        if so[a] != si[a]:
            self.fail(node, "slices the batch axis")
        if inner != 1:
            self.fail(node, "slices a tensor whose batch is merged into a larger axis")
        return (a, inner)

    def pad(self, node: Any, ins: list) -> tuple[int, int]:
        (a, inner) = self.data(node, ins)
        if _shape(node.outputs[0])[a] != _shape(node.inputs[0])[a] or inner != 1:
            self.fail(node, "pads the batch axis")
        return (a, inner)

    def gather(self, node: Any, ins: list) -> tuple[int, int]:
        data, idx = node.inputs[0], node.inputs[1]
        pd, pi = ins[0], ins[1]
        rank = len(_shape(data))
        ax = int(node.attrs.get("axis", 0)) % rank
        if pd is not None and pi is not None:
            if node.name in self.relative and pd[0] == ax == 0 and pi[0] == 0:
                return (0, pi[1])  # sample i's indices pick sample i's rows (proven in prove())
            self.fail(node, "gathers batched data with batched indices")
        if pi is not None:  # an embedding lookup: the indices' axes replace data's axis `ax`
            return (ax + pi[0], pi[1])
        a, inner = pd
        if a == ax:
            self.fail(node, "gathers along the batch axis")
        return (a if a < ax else a + len(_shape(idx)) - 1, inner)

    def gather_nd(self, node: Any, ins: list) -> tuple[int, int]:
        """The output is indices.shape[:-1] + data.shape[b + k:]: an axis of the indices before
        their last keeps its place. Separable when the batch is such an axis and the data is
        every sample's (no batch), or one of the batch_dims both share (sample i's
        coordinates address sample i's data)."""
        pd, pi = ins[0], ins[1]
        b = int(node.attrs.get("batch_dims", 0))
        if pi is None or pi[0] >= len(_shape(node.inputs[1])) - 1:
            self.fail(node, "addresses the data's batch axis with coordinates every sample shares"
                      if pi is None else "has the batch on the indices' coordinate axis")
        if pd is not None and not (pd == pi and pd[0] < b):
            self.fail(node, "gathers batched data with indices whose batch is not one of its batch_dims")
        return pi

    def expand(self, node: Any, ins: list) -> tuple[int, int]:
        (a, inner) = self.data(node, ins)
        si, so = _shape(node.inputs[0]), _shape(node.outputs[0])
        a_out = a + len(so) - len(si)
        if so[a_out] != si[a]:
            self.fail(node, "expands the batch axis")
        return (a_out, inner)


def batch_positions(ecg: Any, batch: int, twin: Any, twin_batch: int, seeds: dict | None = None,
                    relative: set[str] | frozenset = frozenset()) -> dict[int, Any]:
    """Value id -> (axis, inner) of the batch in every batch-carrying value of `ecg` (imported
    at batch size `batch`; `twin` the same model at `twin_batch`; `seeds` the positions of
    constants that follow the batch), None for batch-free values; NotSeparable says why not."""
    t = _Tracker(ecg, batch, twin, twin_batch)
    t.pos.update(seeds or {})
    t.relative = relative
    return t.run()


def _broadcast_constant(u: Any, w: Any, batches: Sequence[int]) -> int | None:
    """The axis of constants `u` (at batch a) and `w` (at batch b) that follows the batch, where
    they are one value repeated for every sample (a broadcast to [B, ...] that import folded,
    e.g. BERT's token type embeddings of all-zero ids, GPT-2's position ids, ViT's class token
    expanded), the batch outermost; None otherwise."""
    a, b = batches
    k = _batch_axis(_shape(u), _shape(w), a, b)
    if k is None:
        return None
    xa, xb = u.numpy().reshape((a, -1)), w.numpy().reshape((b, -1))
    same = lambda x: np.array_equal(x, np.broadcast_to(xa[:1], x.shape), equal_nan=True)  # noqa: E731
    return k if same(xa) and same(xb) else None


def _batch_axis(sa: list[int], sb: list[int], a: int, b: int) -> int | None:
    """The one axis on which shape `sa` (at batch a) and `sb` (at batch b) differ, where it is
    the batch times the same inner size and outermost (only 1s before it); None otherwise."""
    diff = [k for k in range(len(sa)) if len(sa) != len(sb) or sa[k] != sb[k]]
    if len(sa) != len(sb) or len(diff) != 1:
        return None
    k = diff[0]
    ok = sa[k] % a == 0 and sb[k] % b == 0 and sa[k] // a == sb[k] // b > 0
    return k if ok and int(np.prod(sa[:k], dtype=np.int64)) == 1 else None


def _sample_relative_indices(x: Any, y: Any, batches: Sequence[int]) -> bool:
    """Gather `x` (at batch a; `y` the same node at batch b) along axis 0 of data whose axis 0
    is the batch times `inner` (a flattened [B, S] mask), with constant indices [B, ...] whose
    sample i holds i * inner + r for the same r in [0, inner) at every i and both batch sizes:
    each sample reads only its own rows."""
    if int(x.attrs.get("axis", 0)) != 0:
        return False
    a, b = batches
    da, db = int(x.inputs[0].shape[0]), int(y.inputs[0].shape[0])
    if not da or da % a or db % b or da // a != db // b:
        return False
    inner = da // a
    rel = []
    for node, n in ((x, a), (y, b)):
        idx = node.inputs[1].numpy().astype(np.int64)
        if idx.ndim == 0 or idx.shape[0] != n:
            return False
        r = idx.reshape(n, -1) - (np.arange(n, dtype=np.int64) * inner)[:, None]
        if not np.all(r == r[:1]) or r.min() < 0 or r.max() >= inner:
            return False
        rel.append(r[0])
    return np.array_equal(rel[0], rel[1])


def _shape_operand(node: Any, i: int) -> bool:
    return i in SHAPE_OPERANDS.get(node.op, ())


def prove(graphs: Sequence[Any], batches: Sequence[int]) -> list[int]:
    """Proves the model batch-separable from its graphs imported at two batch sizes; returns
    the batch axis of each output. NotSeparable with the reason otherwise."""
    ga, gb = graphs
    na, nb = list(ga.nodes), list(gb.nodes)
    seeds: tuple[dict, dict] = ({}, {})  # batch positions of constants that follow the batch
    relative: set[str] = set()  # Gathers whose indices pick each sample's own rows
    if [n.op for n in na] != [n.op for n in nb] or len(ga.outputs) != len(gb.outputs):
        raise NotSeparable(f"the model's operators differ between batch {batches[0]} and batch {batches[1]}")
    for x, y in zip(na, nb):
        if x.attrs != y.attrs:
            raise NotSeparable(f"node '{x.name}' ({x.op}) has attributes that depend on the batch size")
        if len(x.inputs) != len(y.inputs):
            raise NotSeparable(f"node '{x.name}' ({x.op}) has inputs that depend on the batch size")
        for i, (u, w) in enumerate(zip(x.inputs, y.inputs)):
            if (u is None) != (w is None):
                raise NotSeparable(f"node '{x.name}' ({x.op}) has inputs that depend on the batch size")
            if u is None or not u.is_constant or _shape_operand(x, i):
                continue
            if w.is_constant and u.shape != w.shape:
                k = _broadcast_constant(u, w, batches)
                if k is None and x.op == "Gather" and i == 1 and _sample_relative_indices(x, y, batches):
                    k = 0  # each sample's own rows of data whose batch is merged (HF attention masks)
                    relative.add(x.name)
                if k is not None:  # a value broadcast to every sample, folded at import
                    seeds[0][u.id] = (k, int(u.shape[k]) // batches[0])
                    seeds[1][w.id] = (k, int(w.shape[k]) // batches[1])
                    continue
            if not w.is_constant or u.shape != w.shape or not np.array_equal(u.numpy(), w.numpy(), equal_nan=True):
                raise NotSeparable(f"node '{x.name}' ({x.op}) reads a value computed from the batch size "
                                   f"(input {i}, '{u.name}')")
    pa = batch_positions(ga, batches[0], gb, batches[1], seeds[0], relative)
    pb = batch_positions(gb, batches[1], ga, batches[0], seeds[1], relative)
    for x, y in zip(na, nb):
        for u, w in zip(x.outputs, y.outputs):
            if pa.get(u.id) != pb.get(w.id):
                raise NotSeparable(f"node '{x.name}' ({x.op}) places the batch differently at batch "
                                   f"{batches[0]} and {batches[1]}")
            # Each sample's part of every value has one shape whatever the batch size.
            sa, sb = _shape(u), _shape(w)
            k = pa[u.id][0] if pa.get(u.id) is not None else -1
            if len(sa) != len(sb) or any(sa[i] != sb[i] for i in range(len(sa)) if i != k):
                raise NotSeparable(f"node '{x.name}' ({x.op}) gives '{u.name}' shape {sa} at batch {batches[0]} "
                                   f"but {sb} at batch {batches[1]}: more than the batch changes")
    return [pa[v.id][0] for v in ga.outputs]


__all__ = ["NotSeparable", "batch_positions", "prove", "ANALYSIS_BATCHES"]
