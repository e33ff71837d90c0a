"""dnnfusion, ONNX Runtime and OpenVINO side by side, on the same ONNX file: timed in
interleaved rounds, then each framework's own per-kernel profile, grouped by kind.

    python benchmarks/side_by_side.py mobilenetv2,bert_base --threads 2 --budget 20
    python benchmarks/side_by_side.py all --threads 1,2 --json results/side-by-side.json
    python benchmarks/side_by_side.py mobilenetv2,resnet50 --threads 1,2 --batch 8
    python benchmarks/side_by_side.py all --threads 2,1 --isolate

By default the frameworks share one process; ``--isolate`` gives each a worker process of its
own (spawned, so nothing of the others is imported there), which times its own blocks of calls
when the parent asks, so the rounds interleave as before while no two runtimes' thread pools,
allocators or libraries share a process.

Why one process and rounds: on a shared VM the speed of the machine changes for seconds at a
time (the 2-vCPU VMs here run the same cell 1.3-1.8x slower in their slow spells), so two
cells timed minutes apart, as the harness's subprocess cells are, compare the spells as much
as the code. Here each round runs a block of calls of every framework back to back (the first
call of each block untimed, so that one framework's spinning worker threads do not bill the
next), and the ratio dnnfusion / peer is taken within each round; the table gives the median
of the per-round ratios with their quartiles, and each framework's median over rounds of its
round medians. Rounds run until ``--budget`` seconds have passed (at least ``--min-rounds``).

The profiles are each framework's own: ``CompiledModel.profile`` (per-kernel times),
ONNX Runtime's session profiler (``enable_profiling``: per-node kernel times) and OpenVINO's
performance counters (``PERF_COUNT``: per-node real time), each from a separate instance so
that the timed ones run uninstrumented, also in interleaved rounds: each kernel keeps its
lowest round median, so the three profiles describe the same (fast) state of the machine.
The kernels are grouped by kind (dnnfusion: the first stage of each kernel without shapes,
group counts and fused-op counts; ORT: the op type; OpenVINO: the node type and the
implementation it ran). The profiles' sums leave out what runs between kernels (dispatch,
thread wake-ups, output copies): compare them with each other, the timed medians with each
other.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import itertools
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import machine, models  # noqa: E402
from harness.frameworks import openvino_config, openvino_feeds, ort_options  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
FRAMEWORKS = ("dnnfusion", "ort", "openvino")


def dnnf_kind(stages: list[str]) -> str:
    """A dnnfusion kernel's group: its first stage with shapes and fused-op counts dropped."""
    s = stages[0] if stages else "(output copies)"
    s = re.sub(r"\s*\+(epilogue|prologue)\(\d+ ops\)", "", s)
    s = re.sub(r"\b\d+x\[", "[", s)
    s = re.sub(r"f32\[\d+\]|\[[\dx]+\]", "", s)
    s = re.sub(r"\bg(\d+)\b", lambda g: "g1" if g.group(1) == "1" else "grouped", s)
    return " ".join(s.split()) or "(output copies)"


def ort_kind(args: dict) -> str:
    """An ORT node's group: its op type; convolutions also by their window (1x1, depthwise, kxk),
    read off the weights' shape [M, C/group, k...] in the profiler's event."""
    op = args.get("op_name", "?")
    if op in ("Conv", "FusedConv", "NchwcConv"):
        shapes = [next(iter(t.values()), []) for t in args.get("input_type_shape", [])]
        if len(shapes) > 1 and len(shapes[1]) >= 3:
            w = shapes[1]
            if w[1] == 1 and w[0] > 1:
                return f"{op} depthwise"
            return f"{op} " + "x".join(str(k) for k in w[2:])
    return op


class Side:
    """One framework on one model: ``call`` runs the timed instance; ``block(n)`` runs it once
    untimed, then n timed calls (ms each); ``profile_round(n)`` runs the instrumented instance n
    times and keeps each kernel's median; ``profile()`` gives each kernel's lowest round median
    (the rounds interleave with the other frameworks')."""

    def __init__(self, name: str, call, profile_round, finish=None, kernels=None):
        self.name, self.call, self._round, self._finish, self.kernels = name, call, profile_round, finish, kernels
        self._rounds: list[dict] = []

    def block(self, n: int) -> list[float]:
        self.call()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            self.call()
            ts.append((time.perf_counter() - t0) * 1e3)
        return ts

    def close(self) -> None:
        pass

    def profile_round(self, n: int) -> None:
        self._rounds.append(self._round(n))

    def profile(self) -> list[dict]:
        if self._finish is not None:
            self._rounds = self._finish()
        keys = set().union(*self._rounds) if self._rounds else set()
        return [{"kind": k[1], "ms": min(r[k] for r in self._rounds if k in r)} for k in keys]


def build(name: str, path: str, names: list[str], arrays: list[np.ndarray], threads: int) -> Side:
    if name == "dnnfusion":
        import dnnfusion as df

        m = df.compile(path, threads=threads)
        feeds = dict(zip(names, arrays))

        def prof(n: int) -> dict:
            rows = m.profile(**feeds, repeat=n, warmup=1).rows
            return {(i, dnnf_kind(r["stages"])): r["ms"] for i, r in enumerate(rows)}

        return Side(name, lambda: m(**feeds), prof, kernels=m.stats.get("passes"))
    if name == "ort":
        import onnxruntime as ort

        sess = ort.InferenceSession(path, ort_options(ort, threads), providers=["CPUExecutionProvider"])
        feeds = dict(zip(names, arrays))
        tmp = tempfile.mkdtemp(prefix="dnnf-sbs-ort-")
        popts = ort_options(ort, threads)
        popts.enable_profiling, popts.profile_file_prefix = True, os.path.join(tmp, "p")
        ps = ort.InferenceSession(path, popts, providers=["CPUExecutionProvider"])
        sizes: list[int] = []

        def prof(n: int) -> dict:  # the events are read at the end (the profiler writes one file)
            for _ in range(n + 1):
                ps.run(None, feeds)
            sizes.append(n + 1)
            return {}

        def finish() -> list[dict]:
            events = json.load(open(ps.end_profiling()))
            per = collections.defaultdict(list)  # a node's events in run order
            for e in events:
                if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                    per[(e["name"], ort_kind(e.get("args", {})))].append(e["dur"] / 1e3)
            shutil.rmtree(tmp, ignore_errors=True)
            rounds, at = [], 0
            for sz in sizes:  # each round: one warm-up run, then its timed runs
                rounds.append({k: float(np.median(v[at + 1:at + sz])) for k, v in per.items() if len(v) >= at + sz})
                at += sz
            return rounds

        return Side(name, lambda: sess.run(None, feeds), prof, finish)
    if name == "openvino":
        import openvino as ov

        core = ov.Core()
        model = core.read_model(path)
        req = core.compile_model(model, "CPU", openvino_config(threads)).create_infer_request()
        feeds = openvino_feeds(model, names, arrays)
        preq = core.compile_model(model, "CPU", {**openvino_config(threads), "PERF_COUNT": True}).create_infer_request()

        def prof(n: int) -> dict:
            per = collections.defaultdict(list)
            for i in range(n + 1):
                preq.infer(feeds)
                if i == 0:
                    continue
                for p in preq.profiling_info:
                    if str(p.status).split(".")[-1] == "EXECUTED":
                        per[(p.node_name, f"{p.node_type} ({p.exec_type})")].append(p.real_time.total_seconds() * 1e3)
            return {k: float(np.median(v)) for k, v in per.items()}

        return Side(name, lambda: req.infer(feeds), prof)
    raise ValueError(f"unknown framework {name!r}; choose from {', '.join(FRAMEWORKS)}")


def _worker(conn, name: str, path: str, names: list[str], arrays: list[np.ndarray], threads: int) -> None:
    """One framework in its own process (``--isolate``): builds its Side, then answers the
    parent's requests until told to stop. Nothing of the other frameworks is imported here."""
    try:
        side = build(name, path, names, arrays, threads)
        conn.send(("ok", side.kernels))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    while True:
        op, arg = conn.recv()
        if op == "stop":
            return
        try:
            if op == "block":
                conn.send(("ok", side.block(arg)))
            elif op == "profile_round":
                side.profile_round(arg)
                conn.send(("ok", None))
            elif op == "profile":
                conn.send(("ok", side.profile()))
            else:
                conn.send(("error", f"unknown request {op!r}"))
        except BaseException as e:  # noqa: BLE001
            conn.send(("error", f"{type(e).__name__}: {e}"))


class RemoteSide(Side):
    """A Side whose framework runs in a worker process of its own (``--isolate``): the parent
    keeps the interleaving, the worker times its own calls, so no two runtimes' thread pools,
    allocators or imported libraries share a process, and what is timed excludes the pipe."""

    def __init__(self, name: str, path: str, names: list[str], arrays: list[np.ndarray], threads: int):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker, args=(child, name, path, names, arrays, threads), daemon=True)
        self._proc.start()
        child.close()
        super().__init__(name, None, None)
        self._ready = False

    def ready(self) -> "RemoteSide":
        """Waits for the worker's build (the workers of one model build at the same time)."""
        if not self._ready:
            self.kernels, self._ready = self._ask(None), True
        return self

    def _ask(self, request):
        if request is not None:
            self._conn.send(request)
        try:
            status, value = self._conn.recv()
        except EOFError:
            raise RuntimeError(f"{self.name}'s worker process died (exit code {self._proc.exitcode})") from None
        if status != "ok":
            raise RuntimeError(f"{self.name}'s worker: {value}")
        return value

    def block(self, n: int) -> list[float]:
        return self._ask(("block", n))

    def profile_round(self, n: int) -> None:
        self._ask(("profile_round", n))

    def profile(self) -> list[dict]:
        return self._ask(("profile", None))

    def close(self) -> None:
        try:
            self._conn.send(("stop", None))
        except OSError:
            pass
        self._proc.join(30)
        if self._proc.is_alive():
            self._proc.kill()


def time_rounds(sides: list[Side], budget: float, min_rounds: int, block: int) -> dict:
    """Interleaved rounds: per round, every framework runs 1 untimed + ``block`` timed calls.
    Round n runs them in the n-th of their orders (permutations, in turn), so that over each
    len(sides)! rounds every framework runs right after every other one equally often: a
    runtime whose worker threads keep spinning after its calls (or whose weights fill the
    caches) then costs each peer alike, not always the one after it. (A rotation would not
    do: it keeps the cyclic order, so each framework would mostly follow the same one.)"""
    orders = list(itertools.permutations(sides))
    rounds: dict[str, list[float]] = {s.name: [] for s in sides}
    t_end = time.perf_counter() + budget
    n = 0
    while n < min_rounds or time.perf_counter() < t_end:
        for s in orders[n % len(orders)]:
            rounds[s.name].append(statistics.median(s.block(block)))
        n += 1
        if n >= 200:
            break
    return rounds


def _quartiles(v: list[float]) -> tuple[float, float, float]:
    if len(v) < 2:
        return v[0], v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], statistics.median(v), q[2]


def run_model(name: str, threads: int, fws: list[str], budget: float, min_rounds: int, block: int,
              profile_repeat: int, profile_rounds: int, workdir: str, batch: int = 1, isolate: bool = False) -> dict:
    path = str(models.export_onnx(name, False, workdir, batch=batch))
    m = models.load(name, False, batch)
    arrays = [t.numpy() for t in m.example_inputs]
    names = list(m.input_names)
    t0 = time.perf_counter()
    sides = [RemoteSide(f, path, names, arrays, threads) if isolate else build(f, path, names, arrays, threads)
             for f in fws]
    try:
        for s in sides:
            if isinstance(s, RemoteSide):
                s.ready()
        return _measure(name, threads, batch, sides, fws, budget, min_rounds, block, profile_repeat, profile_rounds,
                        time.perf_counter() - t0, isolate)
    finally:
        for s in sides:
            s.close()


def _measure(name: str, threads: int, batch: int, sides: list[Side], fws: list[str], budget: float,
             min_rounds: int, block: int, profile_repeat: int, profile_rounds: int, setup_s: float,
             isolate: bool) -> dict:
    # a run with too few calls per block for the slow models: one block's calls stay under ~1/8
    # of the budget
    probe = []
    for s in sides:
        probe.append(s.block(1)[0] / 1e3)
    blk = max(1, min(block, int(budget / 8 / max(1e-6, sum(probe)))))
    rounds = time_rounds(sides, budget, min_rounds, blk)
    out = {"model": name, "threads": threads, "batch": batch, "block": blk, "rounds": len(rounds[fws[0]]),
           "setup_s": round(setup_s, 1), "isolated": isolate, "frameworks": {}, "ratios": {}}
    for s in sides:
        q = _quartiles(rounds[s.name])
        out["frameworks"][s.name] = {"median_ms": q[1], "p25": q[0], "p75": q[2],
                                     "min_round_ms": min(rounds[s.name]), "kernels": s.kernels}
    if "dnnfusion" in rounds:
        for peer in fws:
            if peer != "dnnfusion":
                r = [a / b for a, b in zip(rounds["dnnfusion"], rounds[peer])]
                q = _quartiles(r)
                out["ratios"][peer] = {"median": q[1], "p25": q[0], "p75": q[2]}
    # profiling takes at most about the timing budget: fewer runs per round, then fewer rounds
    per_round = sum(probe)
    while profile_repeat > 1 and profile_rounds * (profile_repeat + 1) * per_round > budget:
        profile_repeat -= 1
    while profile_rounds > 2 and profile_rounds * (profile_repeat + 1) * per_round > budget:
        profile_rounds -= 1
    out["profile_rounds"], out["profile_repeat"] = profile_rounds, profile_repeat
    for _ in range(profile_rounds):
        for s in sides:
            s.profile_round(profile_repeat)
    for s in sides:
        rows = s.profile()
        groups: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
        for r in rows:
            groups[r["kind"]][0] += 1
            groups[r["kind"]][1] += r["ms"]
        total = sum(r["ms"] for r in rows)
        f = out["frameworks"][s.name]
        f["profiled_kernels"] = len(rows)
        f["kernel_sum_ms"] = total
        f["groups"] = sorted(([k, n, ms] for k, (n, ms) in groups.items()), key=lambda g: -g[2])
    return out


def report(res: dict, top: int) -> str:
    fws = list(res["frameworks"])
    lines = [f"## {res['model']}{'' if res.get('batch', 1) == 1 else ', batch ' + str(res['batch'])}, "
             f"{res['threads']} thread(s): {res['rounds']} interleaved rounds of "
             f"{res['block']} timed calls each" + (", a process per framework" if res.get("isolated") else "")]
    for f in fws:
        v = res["frameworks"][f]
        lines.append(f"  {f:10s} {v['median_ms']:9.3f} ms [{v['p25']:.3f}-{v['p75']:.3f}]  lowest round "
                     f"{v['min_round_ms']:.3f}; profile: {v.get('profiled_kernels', '-')} kernels, "
                     f"{v.get('kernel_sum_ms', 0):.3f} ms in all")
    for peer, r in res["ratios"].items():
        lines.append(f"  dnnfusion / {peer}: {r['median']:.3f} [{r['p25']:.3f}-{r['p75']:.3f}] (per-round ratios)")
    for f in fws:
        g = res["frameworks"][f].get("groups", [])
        lines.append(f"  {f} by kind (ms, kernels):")
        for k, n, ms in g[:top]:
            lines.append(f"    {ms:9.3f} {n:5d}  {k[:90]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", help="comma-separated zoo models, or 'all'")
    ap.add_argument("--threads", default="2", help="comma-separated thread counts")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of interleaved rounds per model")
    ap.add_argument("--min-rounds", type=int, default=5)
    ap.add_argument("--block", type=int, default=5, help="timed calls per framework per round (at most)")
    ap.add_argument("--profile-repeat", type=int, default=3, help="instrumented runs per profile round")
    ap.add_argument("--profile-rounds", type=int, default=5,
                    help="interleaved profile rounds; each kernel keeps its lowest round median")
    ap.add_argument("--top", type=int, default=8, help="kinds shown per framework")
    ap.add_argument("--batch", type=int, default=1,
                    help="inputs of this batch (a static export at it, as benchmarks/run.py --batch)")
    ap.add_argument("--isolate", action="store_true",
                    help="each framework in a worker process of its own, the rounds still interleaved")
    ap.add_argument("--json", help="write the results here (default: results/side-by-side-<stamp>.json)")
    args = ap.parse_args(argv)
    names = models.zoo_names() if args.models == "all" else [m for m in args.models.split(",") if m]
    fws = [f for f in args.frameworks.split(",") if f]
    for f in fws:
        if f not in FRAMEWORKS:
            ap.error(f"unknown framework {f!r}; choose from {', '.join(FRAMEWORKS)}")
    threads = [int(t) for t in args.threads.split(",")]
    work = os.environ.get("DNNF_BENCH_DIR", os.path.join(tempfile.gettempdir(), "dnnf-side-by-side"))
    os.makedirs(work, exist_ok=True)
    from dnnfusion import _core

    head = {"command": "python benchmarks/side_by_side.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": platform.machine(), "cpu": machine.cpu_info(), "isa": _core.cpu_features()["isa"],
            "env": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "DNNF_ISA", "OMP_NUM_THREADS") if k in os.environ},
            "load_start": machine.loadavg(), "results": []}
    from dnnfusion import tuning

    head["tuning"] = machine.tuning()  # what the kernels derive from this machine (info --machine)
    tuned = ("# tuning unknown: " + head["tuning"]["error"] if "error" in head["tuning"]
             else "\n".join("# " + line for line in tuning.describe(head["tuning"])))
    print(f"# {head['command']}\n# {head['cpu'].get('model_name')}, {os.cpu_count()} CPUs, ISA {head['isa']}, "
          f"env {head['env']}, load {head['load_start']}\n{tuned}", flush=True)
    for t in threads:
        for name in names:
            res = run_model(name, t, fws, args.budget, args.min_rounds, args.block, args.profile_repeat,
                            args.profile_rounds, work, args.batch, args.isolate)
            head["results"].append(res)
            print(report(res, args.top), flush=True)
    head["load_end"] = machine.loadavg()
    rows = [r for r in head["results"] if "dnnfusion" in r["frameworks"]]
    for t in threads:
        for peer in fws:
            rs = [r["ratios"][peer]["median"] for r in rows if r["threads"] == t and peer in r["ratios"]]
            if rs:
                g = float(np.exp(np.mean(np.log(rs))))
                head.setdefault("geomean", {})[f"{t}:{peer}"] = g
                print(f"# {t} thread(s): geomean dnnfusion / {peer} over {len(rs)} models: {g:.3f}; slower than "
                      f"{peer} (median ratio > 1): "
                      + (", ".join(r["model"] for r in rows if r["threads"] == t and r["ratios"][peer]["median"] > 1)
                         or "none"))
    out = Path(args.json) if args.json else RESULTS / f"side-by-side-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(head, indent=1))
    print(f"# wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
