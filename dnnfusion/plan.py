"""Fusion plans (paper §4.3) as users see them.

:func:`plan` runs one of the core's planners (``cpp/plan/``) on an ECG and returns a
:class:`FusionPlan`: blocks of operators that become one kernel each, the reason behind
every producer/consumer decision, statistics, JSON and Graphviz output, and
:meth:`FusionPlan.run_reference`, which executes the plan block by block with the NumPy
reference. Until code generation exists, that is how plans are checked for correctness.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from dnnfusion import _core, reference
from dnnfusion._paths import default_db
from dnnfusion._threads import default_threads
from dnnfusion.ecg import ECG
from dnnfusion.errors import InternalError

PLANNERS = ("dnnfusion", "none", "patterns", "tvm", "dp")
TARGETS = ("cpu", "opencl")


@dataclass(frozen=True)
class Block:
    """One fused kernel: its operators in topological order, the seed it grew from (None
    for planners without seeds), its fused mapping type, and the values it reads from
    outside (weights included) and writes for later blocks or as graph outputs."""

    id: int
    nodes: list
    seed: Any
    fused_type: str
    inputs: list
    outputs: list

    def __repr__(self) -> str:
        ops = " + ".join(n.name for n in self.nodes)
        return f"<Block {self.id} [{self.fused_type}]: {ops}>"


@dataclass(frozen=True)
class Reason:
    """Why a producer/consumer pair ended up in one block or not. For horizontal fusion
    the pair is two siblings rather than a producer and its consumer."""

    producer: Any
    consumer: Any
    fused: bool
    why: str
    # For a yellow pair: the profiling-database key it looked up (producer_type,
    # consumer_type, bucket; the ops are the producer's and consumer's), else None.
    profile_key: dict | None = None

    def __str__(self) -> str:
        return f"{self.producer.name} -> {self.consumer.name}: {self.why}"


class FusionPlan:
    """A partition of an ECG's operators into kernels, with the reasons behind it.
    Wraps the C++ plan (``self.core``)."""

    def __init__(self, graph: Any, core_plan: Any):
        self.graph = graph
        self.core = core_plan
        nodes = graph.nodes
        values = graph.values
        self.blocks: list[Block] = [
            Block(id=b["id"], nodes=[nodes[i] for i in b["nodes"]],
                  seed=None if b["seed"] is None else nodes[b["seed"]],
                  fused_type=b["fused_type"], inputs=[values[i] for i in b["inputs"]],
                  outputs=[values[i] for i in b["outputs"]])
            for b in core_plan.blocks
        ]
        self.reasons: list[Reason] = [
            Reason(nodes[r["producer"]], nodes[r["consumer"]], r["fused"], r["why"],
                   r.get("profile_key"))
            for r in core_plan.reasons
        ]
        self._block_of: list[int] = core_plan.block_of

    @property
    def planner(self) -> str:
        return self.core.planner

    @property
    def stats(self) -> dict[str, int]:
        """What the plan intends: operators_before, kernels_after (its blocks),
        intermediates_removed, intermediate_bytes_removed (an estimate: an anchor's input made in
        its block still goes through block scratch). What the generated code does is in
        ``CompiledModel.stats`` (kernels, passes, intermediate_bytes_written)."""
        return self.core.stats

    def block_of(self, node: Any) -> Block:
        """The block holding a node (a Node or its name)."""
        if isinstance(node, str):
            matches = [n for n in self.graph.nodes if n.name == node]
            if not matches:
                raise KeyError(f"no node named {node!r}")
            node = matches[0]
        return self.blocks[self._block_of[node.id]]

    def __len__(self) -> int:
        return len(self.blocks)

    def __repr__(self) -> str:
        s = self.stats
        return (f"<FusionPlan {self.planner!r}: {s['operators_before']} operators -> "
                f"{s['kernels_after']} blocks>")

    # Output --------------------------------------------------------------------------
    def explain(self) -> str:
        """One paragraph per block (its ops and the reason each pair in it was fused), then
        every pair that was not fused, with its reason."""
        s = self.stats
        lines = [f"{self.planner} plan of graph {self.graph.name!r}: {s['operators_before']} "
                 f"operators -> {s['kernels_after']} fused blocks; {s['intermediates_removed']} "
                 f"intermediate tensors ({_size(s['intermediate_bytes_removed'])}) no longer "
                 "cross blocks (estimate; the generated code's passes and bytes written are in "
                 "CompiledModel.stats)."]
        inside: dict[int, list[Reason]] = {}
        rejected: list[Reason] = []
        for r in self.reasons:
            b_p, b_c = self._block_of[r.producer.id], self._block_of[r.consumer.id]
            if r.fused and b_p == b_c:
                inside.setdefault(b_p, []).append(r)
            else:
                rejected.append(r)
        for b in self.blocks:
            seed = f", seed {b.seed.name}" if b.seed is not None else ""
            ops = ", ".join(f"{n.name} ({n.op})" for n in b.nodes)
            lines.append("")
            lines.append(f"Block {b.id} ({b.fused_type}{seed}): {ops}. "
                         f"Reads {_values(b.inputs)}; writes {_values(b.outputs)}.")
            lines += [f"  fused {r}" for r in inside.get(b.id, [])]
        if rejected:
            lines += ["", "Not fused:"]
            lines += [f"  {r}" for r in rejected]
        return "\n".join(lines)

    def to_json(self) -> str:
        """Blocks (node names and ops, seed, fused type, inputs, outputs), reasons, stats."""
        return self.core.to_json()

    def to_dot(self) -> str:
        """Graphviz: one cluster per block, colored by fused type; dashed edges cross blocks."""
        return self.core.to_dot()

    # Execution -----------------------------------------------------------------------
    def run_reference(self, *args: Any, **feeds: Any) -> list[np.ndarray]:
        """Runs the plan block by block with the NumPy reference: each block's nodes in
        order, and between blocks only graph inputs and block outputs survive. A block that
        reads a value no earlier block wrote raises InternalError, so a wrong plan cannot
        pass by reading another block's internals."""
        if args and feeds:
            raise TypeError("pass inputs positionally or by name, not both")
        given: Mapping[str, Any] | Sequence[Any]
        if len(args) == 1 and isinstance(args[0], Mapping):
            given = args[0]
        else:
            given = feeds if feeds else list(args)
        g = self.graph
        env = reference._bind_feeds(g, given)
        keep = {v.id for v in g.inputs} | {v.id for v in g.outputs}
        keep |= {v.id for b in self.blocks for v in b.outputs}
        for b in self.blocks:
            missing = [v.name for v in b.inputs if not v.is_constant and v.id not in env]
            if missing:
                raise InternalError(f"plan {self.planner!r}: block {b.id} reads {missing}, which "
                                    "no earlier block wrote")
            reference.run_nodes(b.nodes, env, keep=keep)
            for vid in [k for k in env if k not in keep]:
                del env[vid]
        return [reference._read(v, env) for v in g.outputs]


def _size(nbytes: int) -> str:
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def _values(vs: list) -> str:
    shown = [f"%{v.name}" for v in vs if not v.is_constant]
    consts = sum(1 for v in vs if v.is_constant)
    if consts:
        shown.append(f"{consts} constant{'s' if consts > 1 else ''}")
    return ", ".join(shown) if shown else "nothing"


def plan(ecg: Any, planner: str = "dnnfusion", target: str = "cpu", horizontal: bool = False,
         profile_db: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
         max_kernel_args: int = 0, threads: int | None = None) -> FusionPlan:
    """Plans operator fusion for an ECG.

    ``planner``: ``dnnfusion`` (paper §4.3) or a baseline (``none``, ``patterns``, ``tvm``,
    ``dp``). ``target``: ``cpu`` or ``opencl`` (at most 128 kernel arguments unless
    ``max_kernel_args`` says otherwise; 0 means the target's limit). ``horizontal`` groups
    Many-to-Many siblings reading one input (Q/K/V projections). ``profile_db`` is a
    profiling database (JSON lines, see :func:`write_profile_db`); by default the one
    shipped with the package, measured by ``python -m dnnfusion profile`` (entries only
    apply on the machine they were measured on; ``$DNNF_PROFILE_DB`` names another, ``""``
    means none), or a list of databases read in order (a later file's entry replaces an
    earlier one with the same key; ``compile`` passes the shipped one and this machine's
    cache, see :mod:`dnnfusion.profiling`). Yellow cells without an entry are settled by the
    analytic estimate. ``threads``: the threads the code will run on (CPU; default as
    :func:`dnnfusion.compile`'s), part of every database key: a measurement taken at another
    thread count settles nothing (an entry that records none applies at any).
    """
    graph = ecg.graph if isinstance(ecg, ECG) else ecg
    if not isinstance(graph, _core.Graph):
        raise TypeError(f"plan() needs an ECG, got {type(ecg).__name__}")
    if profile_db is None:
        dbs = [_default_db()]
    elif isinstance(profile_db, (str, os.PathLike)):
        dbs = [os.fspath(profile_db)]
    else:
        dbs = [os.fspath(d) for d in profile_db]
    if target != "cpu":
        threads = 0  # the OpenCL target's entries are per device, not per host thread count
    elif threads is None:
        threads = default_threads()
    elif isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    core = _core.plan_fusion(graph, planner=planner, target=target, horizontal=bool(horizontal),
                             profile_dbs=[d for d in dbs if d], max_kernel_args=int(max_kernel_args),
                             threads=int(threads))
    return FusionPlan(graph, core)


def fusion_table() -> list[dict[str, str]]:
    """The 5x5 mapping-type table: per (first, second) cell the fused type, the decision
    (fuse / reject / profile), its color and the paper's rule."""
    return _core.fusion_table()


# Profiling database ---------------------------------------------------------------------
# Measuring one is dnnfusion.profiling's job (profiling.profile, `python -m dnnfusion profile`);
# it imports this module, never the other way round.
def _default_db() -> str:
    return default_db() or ""


def profile_target(target: str = "cpu") -> str:
    """This machine's key in a profiling database (CPU model and ISA flags)."""
    return _core.profile_target_key(target)


def shape_bucket(numel: int) -> str:
    """The shape bucket of a tensor with ``numel`` elements ("2^k")."""
    return _core.shape_bucket(int(numel))


def read_profile_db(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The entries of a profiling database; ModelFormatError names the line if it is corrupt."""
    return _core.read_profile_db(os.fspath(path))


def write_profile_db(path: str | os.PathLike, entries: Sequence[Mapping[str, Any]],
                     merge: bool = True) -> None:
    """Writes measurements (dicts with target, producer, consumer, producer_type,
    consumer_type, bucket, fused_ms, unfused_ms; optional noise_ms and how), replacing entries with the same key in
    the existing file when ``merge``; the file is replaced atomically."""
    _core.write_profile_db(os.fspath(path), [dict(e) for e in entries], merge)
