"""Measures the yellow cells of the fusion table on this machine (paper §4.3).

A yellow cell (e.g. a Shuffle producer feeding a Many-to-Many consumer) is a pair whose
fusion may or may not pay off; the planner settles it from a profiling database when that
has a row for this machine and the pair's key (target, the two operators, their mapping
types, the intermediate's shape bucket, the thread count the code runs on), else by an
analytic estimate. A row measured at another thread count settles nothing (which kernel wins
depends on it: a thread's share of the caches and of the memory bandwidth); a row that records
no thread count (written by hand, or before rows had one) applies at any.

This module measures such keys. A pair is timed as the code it will become: the candidate
is the producer's block and the consumer's block of the plan (one block if the estimate
fused them), cut out of the model with its weights, planned twice by the DNNFusion planner
with the key's decision forced each way, generated and compiled as usual, and run
interleaved (the order alternates every round) until both have enough runs. The medians and
the measurement's noise go into a database; a difference within the noise is a tie, which
the planner decides for fusion (fewer passes over memory).

Two ways in:

* ``compile(..., profile="auto")`` (the default on the CPU): keys of the model being
  compiled that no database settles are measured within a time budget, the keys
  that decide the most data first (size times how many pairs share the key), and
  cached per CPU and ISA next to the kernel cache (:func:`machine_db`), so later compiles use them. What the budget left unmeasured is
  recorded too (:func:`spent_path`): compiling the same model again with no larger budget
  measures nothing more, so its plan and kernels come from the caches (a warm compile).
* ``python -m dnnfusion profile`` (:func:`profile`): every yellow key of the given models,
  merged into a database file (the shipped one by default).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from . import _core
from . import plan as _plan
from .ecg import ECG, copy_nodes, numpy_dtype
from .errors import Error

from ._paths import DEFAULT_DB, default_db, prelude_dir  # noqa: E402,F401 - re-exported

PROFILE_MODES = ("auto", "off")
DEFAULT_SECONDS = 5.0
_WARM_S = 0.05  # s per side and warm-up round (time_pair)
_SETTLE_S = 0.006  # s; longer than a pool's spin after a job (parallel.h kSpin)
# About how many runs of the candidate one measurement makes (time_pair's warm-up and blocks,
# twice when the fused and unfused code differ): with the time of one run, whether it fits
# the rest of compile's budget.
_RUNS_PER_MEASURE = 60


class OverBudget(Exception):
    """Measuring a candidate would pass the profiling deadline: one run takes ``run_ms``, or
    building it would take about ``build_s`` (as long as the last candidate's build)."""

    def __init__(self, run_ms: float, runs: int, build_s: float | None = None):
        super().__init__(f"building its candidate (about {build_s:.3g} s, as the last one took)"
                         if build_s is not None else f"measuring it (about {runs} runs of {run_ms:.3g} ms)")
        self.run_ms = run_ms
        self.runs = runs
        self.build_s = build_s


def machine_db(isa: str) -> Path:
    """This machine's cache of compile-time measurements for code of ``isa``: a file in the
    kernel cache directory (``$DNNF_CACHE_DIR``, ``$XDG_CACHE_HOME/dnnfusion`` or
    ``~/.cache/dnnfusion``), named by the CPU and ISA, since a measurement says nothing about
    other CPUs or code for another ISA."""
    target = _plan.profile_target("cpu")
    tag = hashlib.sha256(f"{target}\n{isa}".encode()).hexdigest()[:16]
    return Path(_core.kernel_cache_dir()) / f"profile-{isa}-{tag}.jsonl"


def subgraph(ecg: ECG, nodes: Sequence[Any], name: str = "candidate") -> ECG:
    """The operators ``nodes`` of ``ecg`` as a graph of their own: operands from elsewhere
    become inputs, constants stay constants, and every value the rest of the model (or its
    caller) reads is an output."""
    g = ecg.graph
    nodes = sorted(nodes, key=lambda n: n.id)
    inside = {n.id for n in nodes}
    graph_outputs = {v.id for v in g.outputs}
    sub = _core.Graph(name)
    env = copy_nodes(sub, nodes, {})
    sub.set_outputs([env[v.id] for n in nodes for v in n.outputs
                     if v.id in graph_outputs or any(c.id not in inside for c in g.consumers(v))])
    return ECG(sub)


def candidate(ecg: ECG, fusion: Any, p: Any, c: Any) -> ECG:
    """The code a yellow pair decides about: producer ``p``'s block and consumer ``c``'s
    block of plan ``fusion`` (one block when the plan fused them), cut out of ``ecg``."""
    bp, bc = fusion.block_of(p), fusion.block_of(c)
    nodes = {n.id: n for n in bp.nodes}
    nodes.update({n.id: n for n in bc.nodes})
    return subgraph(ecg, list(nodes.values()))


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


def _blocks(fp: Any) -> list[tuple[str, ...]]:
    return [tuple(n.name for n in b.nodes) for b in fp.blocks]


@dataclass
class Timing:
    """Medians of two executables' runs and the noise of their difference."""

    a_ms: float
    b_ms: float
    noise_ms: float
    runs: int


def _mad(xs: Sequence[float]) -> float:
    m = statistics.median(xs)
    return statistics.median(abs(x - m) for x in xs)


def time_pair(exes: Sequence[Any], feeds: list[np.ndarray], min_seconds: float = 0.2,
              min_blocks: int = 6, block_ms: float = 2.0, max_seconds: float = 10.0) -> Timing:
    """Times two executables on the same inputs in alternating blocks of consecutive runs
    (A B, then B A, ...). Each executable has its own thread pool, whose workers spin for a
    few milliseconds after a run: run-by-run interleaving on a small machine made one side
    compete with the other's spinning workers and measured it up to twice as slow. So before
    each block the process sleeps until the other pool is asleep, runs once untimed, then
    times about ``block_ms`` of runs. Each side's time is the median of its runs; the noise
    is the larger of two standard errors of the difference (from the spread of the per-block
    medians, so that drifts between blocks count) and how much the difference changes between
    the first and the second half of the blocks, and at least 0.5% of the faster side."""
    # Warm up: page faults, and above all the pool's new worker threads, which start on the
    # core of the thread that made them and share it until the scheduler moves them (a fresh
    # module ran its first ~100 ms at half speed on 2 threads, which once measured a fused
    # convolution 2x slower than it is). Each side runs for _WARM_S, twice, alternating.
    for _ in range(2):
        for e in exes:
            t_warm = time.perf_counter() + _WARM_S
            n = 0
            while n < 3 or time.perf_counter() < t_warm:
                e.run(feeds)
                n += 1
                if n >= 500:
                    break
    t = time.perf_counter()
    for e in exes:
        e.run(feeds)
    per_run_ms = (time.perf_counter() - t) * 1e3 / 2
    k = max(1, min(50, int(block_ms / max(per_run_ms, 1e-3))))
    runs: list[list[float]] = [[], []]
    blocks: list[list[float]] = [[], []]
    t0 = time.perf_counter()
    r = 0
    while True:
        elapsed = time.perf_counter() - t0
        if (r >= min_blocks and elapsed >= min_seconds) or (r >= 2 and elapsed >= max_seconds):
            break
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            time.sleep(_SETTLE_S)  # the other pool's workers stop spinning and sleep
            exes[i].run(feeds)
            ts = []
            for _ in range(k):
                t = time.perf_counter()
                exes[i].run(feeds)
                ts.append((time.perf_counter() - t) * 1e3)
            runs[i] += ts
            blocks[i].append(statistics.median(ts))
        r += 1
    med = [statistics.median(x) for x in runs]
    se = [1.2533 * 1.4826 * _mad(b) / np.sqrt(len(b)) for b in blocks]
    h = len(blocks[0]) // 2
    halves = [statistics.median(blocks[0][a:b]) - statistics.median(blocks[1][a:b])
              for a, b in ((0, h), (h, len(blocks[0])))]
    noise = max(2.0 * float(np.hypot(*se)), abs(halves[0] - halves[1]), 0.005 * min(med))
    return Timing(med[0], med[1], noise, len(runs[0]))


def late_measure_pays(runs_s: float, build_s: float, min_seconds: float) -> bool:
    """Whether a measurement that would end after compile's profiling deadline is still worth
    making: when the candidate's build, already paid for, took at least twice as long as the
    measurement will (``runs_s`` of runs plus time_pair's warm-up and its noise check). The
    first candidate is built whatever the budget; on a fresh kernel cache that took 16 s of a
    5 s budget (MobileNetV2, 2 vCPUs), most of it the precompiled header and prelude units the
    model's own compile needs anyway, which ``build_s`` leaves out (measure_candidate): a
    half-second measurement after a 2 s build still pays, U-Net's 4.6 s one did not (its cold
    compile took 30 s with it, 16 s without profiling)."""
    return runs_s + 4 * _WARM_S + 1.5 * min_seconds <= 0.5 * build_s


def measure_candidate(ecg: ECG, fusion: Any, p: Any, c: Any, key: dict, *,
                      dbs: Sequence[str], isa: str, threads: int,
                      min_seconds: float = 0.2, deadline: float | Callable[[], float] | None = None,
                      build_s: float | None = None, built: list[float] | None = None) -> dict:
    """Measures one yellow pair as generated code (see the module's docstring) and returns
    its database entry. Raises Error if the candidate cannot be compiled, and OverBudget
    when measuring it would end after ``deadline`` (a ``time.perf_counter()`` value, or a
    function giving it, read before the build and after it: auto_profile's moves): one
    run of a batch's candidate can take a second, and a measurement runs it dozens of times
    (unless :func:`late_measure_pays`); with ``build_s`` (the last candidate's build time),
    before building it when that build would. Appends this candidate's build time to
    ``built``."""
    due = deadline() if callable(deadline) else deadline
    if due is not None and build_s is not None and time.perf_counter() + build_s > due:
        raise OverBudget(0.0, 0, build_s)
    t_build = time.perf_counter()
    prelude_s = _core.prelude_build_seconds()
    sub = candidate(ecg, fusion, p, c)
    target = _plan.profile_target("cpu")
    base = {"target": target, "producer": p.op, "consumer": c.op,
            "producer_type": key["producer_type"], "consumer_type": key["consumer_type"],
            "bucket": key["bucket"], "threads": threads}
    plans = []
    with tempfile.TemporaryDirectory(prefix="dnnf-profile-") as tmp:
        for fuse in (True, False):
            forced = os.path.join(tmp, f"forced-{int(fuse)}.jsonl")
            _plan.write_profile_db(forced, [dict(base, fused_ms=1.0 if fuse else 2.0,
                                                 unfused_ms=2.0 if fuse else 1.0)], merge=False)
            plans.append(_plan.plan(sub, planner="dnnfusion", profile_db=[*dbs, forced], threads=threads))
    same = _blocks(plans[0]) == _blocks(plans[1])
    prelude = prelude_dir()
    gens = [_core.generate_cpu(sub.graph, fp, isa) for fp in (plans[:1] if same else plans)]
    # The fused and unfused candidates compile at once (the compiler releases the GIL, and a
    # prelude unit both need is built once, the other compile waiting for it): on 2 CPUs one
    # candidate's build took 2.5 s one after the other.
    with ThreadPoolExecutor(max_workers=len(gens)) as pool:
        exes = list(pool.map(lambda gen: _core.CpuExecutable(sub.graph, gen, isa, threads, prelude), gens))
    # The candidate's own build: the precompiled header and prelude units a fresh cache builds
    # on the way are the model's too (its own compile would build them), not profiling's cost.
    build_time = time.perf_counter() - t_build - (_core.prelude_build_seconds() - prelude_s)
    if built is not None:
        built.append(build_time)
    feeds = _feeds(sub, np.random.default_rng(0))
    due = deadline() if callable(deadline) else deadline
    if due is not None:
        t0 = time.perf_counter()
        exes[0].run(feeds)
        one = time.perf_counter() - t0
        runs = _RUNS_PER_MEASURE // (2 if same else 1)
        if time.perf_counter() + one * runs > due and \
                not late_measure_pays(one * runs, build_time, min_seconds):
            raise OverBudget(one * 1e3, runs)
    t = time_pair(exes if not same else [exes[0], exes[0]], feeds, min_seconds=min_seconds)
    noise = t.noise_ms
    if not same:
        # The machine's noise for this code, measured: the fused kernel against itself.
        aa = time_pair([exes[0], exes[0]], feeds, min_seconds=min_seconds / 2)
        noise = max(noise, abs(aa.a_ms - aa.b_ms) + aa.noise_ms)
    def short(s: str) -> str:
        return s if len(s) <= 40 else s[:37] + "..."
    how = (f"measured on {short(p.name)} -> {short(c.name)}: {len(sub.nodes)} operators, "
           f"{len(plans[0].blocks)} vs {len(plans[1].blocks)} kernels, {isa}, {threads} threads, "
           f"median of {t.runs} runs in alternating blocks")
    if same:
        how = (f"measured on {short(p.name)} -> {short(c.name)}: the same generated code either "
               f"way, {isa}, {threads} threads")
    return dict(base, fused_ms=round(t.a_ms, 6), unfused_ms=round(t.b_ms, 6),
                noise_ms=round(noise, 6), how=how)


def yellow_pairs(ecg: ECG, fusion: Any | None = None) -> list[tuple[Any, Any, dict]]:
    """(producer, consumer, key) for every pair ``fusion`` (default: the DNNFusion plan
    without a database) settled with the analytic estimate."""
    fp = fusion if fusion is not None else _plan.plan(ecg, planner="dnnfusion", profile_db="")
    return [(r.producer, r.consumer, r.profile_key) for r in fp.reasons
            if r.profile_key is not None and "analytic estimate" in r.why]


def _key(p: Any, c: Any, k: dict) -> tuple:
    return (p.op, c.op, k["producer_type"], k["consumer_type"], k["bucket"])


def _by_size(pairs: list[tuple[Any, Any, dict]]) -> list[tuple[Any, Any, dict]]:
    """One pair per key, the keys that decide the most data first (where fusion matters most):
    the intermediate's size bucket times how many pairs of the model share the key, so four
    blocks of one shape outweigh a single one of twice the size."""
    first: dict[tuple, tuple] = {}
    weight: dict[tuple, int] = {}
    for p, c, k in pairs:
        key = _key(p, c, k)
        first.setdefault(key, (p, c, k))
        b = k["bucket"]  # "2^k", or "2^k w.. k.. c.. s.." for an expansion; "?" symbolic
        weight[key] = weight.get(key, 0) + (1 << int(b[2:].split()[0]) if b.startswith("2^") else 0)
    return sorted(first.values(), key=lambda t: weight[_key(*t)], reverse=True)


@dataclass
class AutoProfile:
    """What ``compile(..., profile="auto")`` did: the keys it measured (database entries),
    the keys it left to the estimate because the budget was spent, the seconds it took and
    the machine database it read and wrote."""

    db: str
    measured: list[dict] = field(default_factory=list)
    unmeasured: list[tuple] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    failed_keys: set = field(default_factory=set)
    over_budget: dict = field(default_factory=dict)  # key -> OverBudget: too long to measure
    seconds: float = 0.0
    spent_earlier: float | None = None  # the budget an earlier compile spent on these keys
    prelude_seconds: float = 0.0  # of `seconds`: building the header and units (the model's)


def spent_path(isa: str) -> Path:
    """Beside :func:`machine_db`: the sets of keys earlier compiles left to the estimate when
    their budget ran out, each with that budget, so that compiling the same model again does
    not measure on (a warm compile is a cache hit, and the plan does not change under it)."""
    db = machine_db(isa)
    return db.with_name(db.stem + ".spent.json")


def _unsettled(ecg: ECG, fusion: Any) -> list[tuple]:
    """The keys ``fusion`` settled by the estimate that a measurement could settle."""
    return sorted({_key(*t) for t in yellow_pairs(ecg, fusion) if t[2]["bucket"] != "?"})


def _spent_tag(keys: list[tuple], threads: int) -> str:
    return hashlib.sha256(json.dumps([threads, keys]).encode()).hexdigest()[:32]


def _read_spent(path: Path) -> dict[str, float]:
    """The record, or nothing when it is missing, unreadable or not what this module writes
    (a truncated file from a crash only costs a new measurement)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, (int, float))
            and not isinstance(v, bool) and v >= 0}


def _record_spent(path: Path, tag: str, seconds: float) -> None:
    """Adds one entry, replacing the file atomically; a cache directory that cannot be written
    only means the next compile measures again."""
    try:
        data = _read_spent(path)
        data[tag] = max(seconds, data.get(tag, 0.0))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            os.replace(tmp, path)
        except OSError:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def auto_profile(ecg: ECG, fusion: Any, replan: Callable[[list[str]], Any], *,
                 dbs: Sequence[str], isa: str, threads: int, seconds: float,
                 min_seconds: float = 0.2) -> tuple[AutoProfile, Any]:
    """Measures the yellow keys ``fusion`` settled by the estimate, most data first, until
    ``seconds`` are spent (a candidate is built only when the last candidate's build time says
    it ends within the budget, and measured only when one run of it says the measurement
    does), merges them
    into :func:`machine_db`, re-plans with ``replan(databases)`` and repeats for the yellow
    pairs the new plan meets, until none is left unmeasured. Returns what it did and the
    final plan. A candidate that cannot be compiled keeps the estimate.

    Where an earlier compile on this machine (same ISA and threads) ended with exactly the keys
    ``fusion`` leaves to the estimate, with a budget no smaller than ``seconds``, nothing is
    measured (:func:`spent_path`)."""
    out = AutoProfile(db=str(machine_db(isa)))
    record = spent_path(isa)
    keys = _unsettled(ecg, fusion)
    if keys:
        earlier = _read_spent(record).get(_spent_tag(keys, threads))
        if earlier is not None and earlier >= seconds:
            out.unmeasured = keys
            out.spent_earlier = earlier
            return out, fusion
    dbs = list(dbs)
    t0 = time.perf_counter()
    p0 = _core.prelude_build_seconds()

    def deadline() -> float:
        """The budget runs on profiling's own time: the precompiled header and prelude units
        a fresh cache builds while a candidate compiles are the model's (its own compile needs
        them; 12 s of U-Net's first compile on 2 vCPUs), so they move the deadline."""
        return t0 + seconds + (_core.prelude_build_seconds() - p0)

    tried: set[tuple] = set()
    built: list[float] = []  # each candidate's build time; the last one predicts the next
    while True:
        # A symbolic intermediate ("?" bucket) cannot be timed: it keeps the estimate.
        pending = [t for t in _by_size(yellow_pairs(ecg, fusion))
                   if _key(*t) not in tried and t[2]["bucket"] != "?"]
        if not pending:
            break
        new = []
        for p, c, k in pending:
            tried.add(_key(p, c, k))
            if time.perf_counter() >= deadline():
                out.unmeasured.append(_key(p, c, k))
                continue
            try:
                new.append(measure_candidate(ecg, fusion, p, c, k, dbs=dbs, isa=isa,
                                             threads=threads, min_seconds=min_seconds,
                                             deadline=deadline, build_s=built[-1] if built else None,
                                             built=built))
            except OverBudget as ob:
                out.unmeasured.append(_key(p, c, k))
                out.over_budget[_key(p, c, k)] = ob
            except Exception as ex:  # noqa: BLE001 - measuring is an optimisation: a
                # candidate that fails keeps the estimate, and stats["profile"]["failed"] says why
                out.failed.append(f"{p.op} -> {c.op} [{k['bucket']}]: {type(ex).__name__}: "
                                  f"{(str(ex).splitlines() or [''])[0]}")
                out.failed_keys.add(_key(p, c, k))
        if not new:
            break
        _plan.write_profile_db(out.db, new, merge=True)
        out.measured += new
        if out.db not in dbs:
            dbs.append(out.db)
        fusion = replan(dbs)
    out.seconds = time.perf_counter() - t0
    out.prelude_seconds = _core.prelude_build_seconds() - p0
    left = _unsettled(ecg, fusion)
    if left:
        _record_spent(record, _spent_tag(left, threads), seconds)
    return out, fusion


def stats(result: AutoProfile | None, mode: str, yellow: dict[str, int]) -> dict:
    """compile's ``stats["profile"]``: ``yellow`` (:func:`annotate`'s counts of the final
    plan's yellow pairs: measured, cached, database, estimated), the database entries this
    compile measured (``measured_keys``), its seconds, the candidates that failed, how many
    keys kept the estimate because measuring them would pass the budget, the seconds of
    ``seconds`` spent building the precompiled header and prelude units (``prelude_seconds``:
    the model's, not charged to the budget), the budget an earlier
    compile of the same model spent (``budget_spent_earlier``: nothing was measured now, see
    :func:`spent_path`), and the database."""
    r = result
    return {"mode": mode, **yellow,
            "measured_keys": len(r.measured) if r else 0,
            "seconds": r.seconds if r else 0.0,
            "prelude_seconds": r.prelude_seconds if r else 0.0,
            "failed": r.failed if r else [],
            "over_budget": len(r.over_budget) if r else 0,
            "budget_spent_earlier": r.spent_earlier if r else None,
            "db": r.db if r else None}


def annotate(fusion: Any, result: AutoProfile | None, seconds: float) -> dict[str, int]:
    """Says in each yellow reason where its decision came from: measured while compiling,
    measured by an earlier compile (this machine's cache), the database it was read from,
    or the estimate (and why it was not measured). Returns how many yellow pairs had each."""
    counts = {"measured": 0, "cached": 0, "database": 0, "estimated": 0}
    if result is None:
        return counts
    now = {(e["producer"], e["consumer"], e["producer_type"], e["consumer_type"], e["bucket"])
           for e in result.measured}
    tag = f" [{result.db}]"
    for i, r in enumerate(fusion.reasons):
        if r.profile_key is None:
            continue
        why = r.why
        if why.endswith(tag):
            if _key(r.producer, r.consumer, r.profile_key) in now:
                why = why[: -len(tag)] + " [measured while compiling; cached in " + result.db + "]"
                counts["measured"] += 1
            else:
                why = why[: -len(tag)] + " [measured by an earlier compile on this machine; " \
                      "cached in " + result.db + "]"
                counts["cached"] += 1
        elif "analytic estimate" in why:
            key = _key(r.producer, r.consumer, r.profile_key)
            if key in result.failed_keys:
                why += " (not measured: its candidate failed to build or run, see stats['profile']['failed'])"
            elif r.profile_key["bucket"] == "?":
                why += " (not measured: the intermediate's size is symbolic)"
            elif result.spent_earlier is not None:
                why += (f" (not measured: an earlier compile of this model on this machine spent its "
                        f"profiling budget of {result.spent_earlier:g} s; a larger profile_seconds "
                        "measures more, `python -m dnnfusion profile` measures all)")
            elif key in result.over_budget:
                why += (f" (not measured: {result.over_budget[key]} would pass "
                        f"compile's profiling budget of {seconds:g} s; `python -m dnnfusion profile` "
                        "measures it)")
            else:
                why += (f" (not measured: compile's profiling budget of {seconds:g} s was spent; "
                        "a larger profile_seconds measures more, `python -m dnnfusion profile` measures all)")
            counts["estimated"] += 1
        elif why.startswith("profile:"):
            counts["database"] += 1
        fusion.reasons[i] = type(r)(r.producer, r.consumer, r.fused, why, r.profile_key)
    return counts


def profile(models: Iterable[tuple[str, ECG]], db: str | os.PathLike, *, threads: int = 2,
            isa: str | None = None, min_seconds: float = 0.3,
            log: Callable[[str], None] = print) -> list[dict]:
    """Measures every distinct yellow key of the models (ECGs as compile plans them:
    rewritten, layout chosen) and merges the entries into ``db``. Returns the new entries.
    A candidate code generation cannot compile is reported and skipped (the planner keeps
    the estimate for it)."""
    isa = isa or _core.cpu_features()["isa"]
    done: dict[tuple, dict] = {}
    written = 0
    for model, ecg in models:
        fusion = _plan.plan(ecg, planner="dnnfusion", profile_db="", threads=threads)
        for p, c, k in yellow_pairs(ecg, fusion):
            key = _key(p, c, k)
            if key in done:
                continue
            try:
                e = measure_candidate(ecg, fusion, p, c, k, dbs=[], isa=isa, threads=threads,
                                      min_seconds=min_seconds)
            except Error as ex:
                log(f"  skip {p.op} -> {c.op} [{k['bucket']}] in {model}: {str(ex).splitlines()[0]}")
                done[key] = {}
                continue
            e = dict(e, model=model, pair=f"{p.name} -> {c.name}", threads=threads, isa=isa)
            done[key] = e
            verdict = ("fuse" if e["fused_ms"] < e["unfused_ms"] else
                       "tie: fuse" if e["fused_ms"] - e["unfused_ms"] <= e["noise_ms"] else "keep apart")
            log(f"  {p.op:>18} -> {c.op:<18} {k['bucket']:>5}  fused {e['fused_ms']:8.4f} ms  "
                f"apart {e['unfused_ms']:8.4f} ms  noise {e['noise_ms']:.4f}  {verdict:<10} ({model})")
        # Saved after every model, so an interrupted run keeps what it measured.
        entries = [e for e in done.values() if e]
        if len(entries) > written:
            _plan.write_profile_db(db, entries, merge=True)
            written = len(entries)
    return [e for e in done.values() if e]
