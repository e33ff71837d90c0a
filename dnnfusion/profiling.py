"""Measures the yellow cells of the fusion table on this machine (paper §4.3).

For each model, the DNNFusion planner runs without a database; every producer/consumer
pair it settled by the analytic estimate is a question for the profiler. Each distinct
key (target, the two operators, their mapping types, the intermediate's shape bucket) is
answered once, on the first pair met with it: the pair is cut out of the model as a
two-operator graph (its other operands become inputs, its weights stay constants), compiled
twice (one fused kernel; two kernels with the intermediate in memory) and timed through the
executor, median of repeated runs, interleaved so that machine noise hits both alike. The
results go into a profiling database (JSON lines, see
:func:`dnnfusion.plan.write_profile_db`) which the planner uses instead of the estimate.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from types import SimpleNamespace
from typing import Any, Callable, Iterable

import numpy as np

from . import _core
from . import plan as _plan
from .ecg import ECG, numpy_dtype, parse
from .errors import Error

from ._paths import DEFAULT_DB, default_db, prelude_dir  # noqa: E402,F401 - re-exported


def _token(name: str) -> str:
    """A value's name as the text form writes it."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
        return "%" + name
    return '%"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pair_graph(ecg: ECG, p: Any, c: Any) -> ECG:
    """The graph of producer p followed by consumer c, cut out of ``ecg``: operands from
    elsewhere become graph inputs, constants stay constants, c's outputs are the outputs."""
    lines = ecg.to_text().splitlines()
    node_line = {}
    const_line = {}
    for line in lines:
        s = line.strip()
        for n in (p, c):
            quoted = '"' + n.name.replace("\\", "\\\\").replace('"', '\\"') + '"'
            if s.endswith("@" + quoted) or s.endswith("@" + n.name):
                node_line[n.id] = line
        if " = const " in s:
            const_line[s.split(": ", 1)[0]] = line
    if len(node_line) != 2:
        raise Error(f"profile: cannot find {p.name} and {c.name} in the text form")
    produced = {v.id for v in p.outputs}
    inputs, constants, seen = [], [], set()
    for n in (p, c):
        for v in n.inputs:
            if v is None or v.id in produced or v.id in seen:
                continue
            seen.add(v.id)
            tok = _token(v.name)
            if tok in const_line:
                constants.append(const_line[tok])
            else:
                inputs.append(f"{tok}: {v.type}")
    body = [*constants, node_line[p.id], node_line[c.id],
            "  return " + ", ".join(_token(v.name) for v in c.outputs)]
    return parse(f"graph pair({', '.join(inputs)}) {{\n" + "\n".join(body) + "\n}\n")


def _feeds(g: ECG, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for v in g.inputs:
        dt = np.dtype(numpy_dtype(v.dtype))
        shape = [int(d) for d in v.shape]
        if dt.kind == "f":
            out.append(rng.standard_normal(shape).astype(dt))
        else:
            out.append(np.zeros(shape, dtype=dt))  # indices: 0 is always in range
    return out


def _executable(g: ECG, fused: bool, isa: str, threads: int) -> Any:

    apart = _plan.plan(g, planner="none")
    if fused:
        blocks = apart.core.blocks
        produced = set(blocks[0]["outputs"])
        inputs = list(dict.fromkeys(blocks[0]["inputs"] +
                                    [v for v in blocks[1]["inputs"] if v not in produced]))
        core = SimpleNamespace(block_of=[0] * len(g.nodes),
                               blocks=[{"id": 0, "nodes": [n.id for n in g.nodes],
                                        "inputs": inputs, "outputs": blocks[1]["outputs"]}])
        plan = core
    else:
        plan = apart
    gen = _core.generate_cpu(g.graph, plan, isa)
    return _core.CpuExecutable(g.graph, gen, isa, threads, prelude_dir())


def measure_pair(g: ECG, *, isa: str, threads: int, min_seconds: float = 0.3,
                 min_runs: int = 15) -> tuple[float, float]:
    """(fused ms, unfused ms) of a two-operator graph: medians over interleaved runs."""
    feeds = _feeds(g, np.random.default_rng(0))
    exes = [_executable(g, True, isa, threads), _executable(g, False, isa, threads)]
    for e in exes:
        e.run(feeds)  # warm up (pool start, page faults)
    times: list[list[float]] = [[], []]
    t_end = time.perf_counter() + min_seconds
    while len(times[0]) < min_runs or time.perf_counter() < t_end:
        for k, e in enumerate(exes):
            t = time.perf_counter()
            e.run(feeds)
            times[k].append((time.perf_counter() - t) * 1e3)
        if len(times[0]) >= 2000:
            break
    return statistics.median(times[0]), statistics.median(times[1])


def yellow_pairs(ecg: ECG) -> list[tuple[Any, Any, dict]]:
    """(producer, consumer, key) for every pair the planner settled with the estimate."""
    fp = _plan.plan(ecg, planner="dnnfusion", profile_db="")
    return [(r.producer, r.consumer, r.profile_key) for r in fp.reasons
            if r.profile_key is not None and "analytic estimate" in r.why]


def profile(models: Iterable[tuple[str, ECG]], db: str | os.PathLike, *, threads: int = 2,
            isa: str | None = None, min_seconds: float = 0.3,
            log: Callable[[str], None] = print) -> list[dict]:
    """Measures every distinct yellow key of the models and merges the entries into ``db``.
    Returns the new entries. A pair code generation cannot compile is reported and
    skipped (the planner keeps the estimate for it)."""
    isa = isa or _core.cpu_features()["isa"]
    target = _plan.profile_target("cpu")
    done: dict[tuple, dict] = {}
    written = 0
    for model, ecg in models:
        for p, c, k in yellow_pairs(ecg):
            key = (p.op, c.op, k["producer_type"], k["consumer_type"], k["bucket"])
            if key in done:
                continue
            try:
                fused, apart = measure_pair(pair_graph(ecg, p, c), isa=isa, threads=threads,
                                            min_seconds=min_seconds)
            except Error as e:
                log(f"  skip {p.op} -> {c.op} [{k['bucket']}] in {model}: {str(e).splitlines()[0]}")
                done[key] = {}
                continue
            done[key] = {"target": target, "producer": p.op, "consumer": c.op,
                         "producer_type": k["producer_type"], "consumer_type": k["consumer_type"],
                         "bucket": k["bucket"], "fused_ms": round(fused, 5),
                         "unfused_ms": round(apart, 5), "model": model,
                         "pair": f"{p.name} -> {c.name}", "threads": threads, "isa": isa}
            log(f"  {p.op:>18} -> {c.op:<18} {k['bucket']:>5}  fused {fused:8.4f} ms  "
                f"apart {apart:8.4f} ms  {'fuse' if fused < apart else 'keep apart':<10} ({model})")
        # Saved after every model, so an interrupted run keeps what it measured.
        entries = [e for e in done.values() if e]
        if len(entries) > written:
            _plan.write_profile_db(db, entries, merge=True)
            written = len(entries)
    return [e for e in done.values() if e]
