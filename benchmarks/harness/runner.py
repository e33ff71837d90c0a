"""Orchestrates a harness run: one subprocess per cell, with a timeout; results to JSON/CSV."""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import machine, models, report, roofline
from .frameworks import DEFAULT_FRAMEWORKS, FRAMEWORKS

HERE = pathlib.Path(__file__).resolve().parent
BENCH = HERE.parent
REPO = BENCH.parent
CELL = HERE / "cell.py"
DEFAULT_VENV = pathlib.Path.home() / ".cache" / "dnnfusion" / "bench-venv"
# failures at these stages do not depend on the thread count: later thread counts reuse them
THREAD_INDEPENDENT_STAGES = ("load", "convert", "count", "compile")


def venv_python() -> str | None:
    v = pathlib.Path(os.environ.get("DNNF_BENCH_VENV", DEFAULT_VENV))
    py = v / "bin" / "python"
    return str(py) if py.exists() else None


def python_for(fw: str) -> tuple[str | None, str | None]:
    """The interpreter that runs framework ``fw``'s cells, or (None, reason)."""
    f = FRAMEWORKS[fw]
    if not f.venv or (f.module and importlib.util.find_spec(f.module) is not None):
        return sys.executable, None
    vp = venv_python()
    if vp is None:
        return None, (f"{f.dist} is not installed here and there is no bench venv "
                      f"({os.environ.get('DNNF_BENCH_VENV', DEFAULT_VENV)}); run benchmarks/setup_venv.sh")
    return vp, None


def cell_env(threads: int, celldir: pathlib.Path, kernel_cache: str | None = None) -> dict:
    env = dict(os.environ)
    pp = [str(REPO), str(BENCH)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(pp)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS",
              "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
        env[k] = str(threads)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(celldir / "inductor_cache")  # fresh: honest compile time
    # The same for dnnfusion's kernels, unless --kernel-cache shares one (compile_s then warm).
    env["DNNF_CACHE_DIR"] = kernel_cache or str(celldir / "dnnfusion_cache")
    if not kernel_cache:  # cold means the precompiled prelude too, wherever the caller keeps it
        env.pop("DNNF_PRELUDE_CACHE_DIR", None)
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_cell(spec: dict, python: str, timeout: float) -> dict:
    """Run one cell in a fresh process group; never raises."""
    celldir = pathlib.Path(spec["celldir"])
    celldir.mkdir(parents=True, exist_ok=True)
    spec = dict(spec, result_path=str(celldir / "result.json"))
    (celldir / "spec.json").write_text(json.dumps(spec))
    base = {"model": spec["model"], "framework": spec.get("framework"), "threads": spec.get("threads"),
            "kind": spec["kind"]}
    t0 = time.perf_counter()
    with open(celldir / "stdout.log", "wb") as so, open(celldir / "stderr.log", "wb") as se:
        proc = subprocess.Popen([python, str(CELL), str(celldir / "spec.json")], stdout=so, stderr=se,
                                stdin=subprocess.DEVNULL, env=cell_env(int(spec.get("threads") or 1), celldir, spec.get("kernel_cache")),
                                cwd=str(REPO), start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the cell's own process group
            except ProcessLookupError:
                pass
            proc.wait()
            return dict(base, status="timeout", reason=f"timeout after {timeout:.0f} s",
                        stage=_last_stage(celldir), cell_s=round(time.perf_counter() - t0, 2))
    res_path = celldir / "result.json"
    if res_path.exists():
        try:
            res = json.loads(res_path.read_text())
            res["cell_s"] = round(time.perf_counter() - t0, 2)
            return res
        except json.JSONDecodeError:
            pass
    err = (celldir / "stderr.log").read_text(errors="replace").strip().splitlines()
    tail = " | ".join(err[-2:])[-300:] if err else "no output"
    sig = f" (signal {-rc})" if rc < 0 else ""
    return dict(base, status="error", stage="crash", reason=f"process exited with {rc}{sig}: {tail}",
                cell_s=round(time.perf_counter() - t0, 2))


def _last_stage(celldir: pathlib.Path) -> str:
    """The stage a cell had reached (it writes ``stage`` as it goes)."""
    try:
        return (celldir / "stage").read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--models", default="all",
                   help="comma-separated model names ('all' = the zoo's 18; tiny_cnn and "
                        "tiny_transformer are built-in test models)")
    p.add_argument("--frameworks", default=",".join(DEFAULT_FRAMEWORKS),
                   help=f"comma-separated, from: {', '.join(FRAMEWORKS)}")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--repeat", type=int, default=20, help="timed runs per cell")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs before timing")
    p.add_argument("--rounds", type=int, default=1,
                   help="run each model's framework cells this many times, interleaved, and keep "
                        "each cell's round with the lowest median (a shared VM's slow spells)")
    p.add_argument("--budget", type=float, default=30.0,
                   help="stop timing a cell after this many seconds (at least 3 runs)")
    p.add_argument("--timeout", type=float, default=900.0, help="per-cell wall-clock limit, s")
    p.add_argument("--reduced", action="store_true", help="use the zoo's reduced models")
    p.add_argument("--batch", type=int, default=1,
                   help="batch size of the inputs (> 1: the examples grown along axis 0 and a static "
                        "ONNX export of that batch; for models whose inputs have a batch axis)")
    p.add_argument("--rtol", type=float, default=1e-3,
                   help="a cell is wrong if max|y-ref|/max|ref| exceeds this (and atol)")
    p.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (either passes)")
    p.add_argument("--out", default=str(BENCH / "results"), help="directory for JSON/CSV/tables")
    p.add_argument("--workdir", default=None, help="artifact directory (default: a temp dir)")
    p.add_argument("--keep-artifacts", action="store_true",
                   help="keep per-cell logs and converted models (in --workdir)")
    p.add_argument("--quiet", action="store_true", help="no tables on stdout")
    p.add_argument("--kernel-cache", default=None,
                   help="dnnfusion's cells share this kernel cache instead of a fresh one each, so "
                        "their compile times are warm, not cold (tests; repeated runs)")
    p.add_argument("--no-roofline", action="store_true",
                   help="do not measure this machine's FMA peak and memory bandwidth (about 4 s "
                        "per thread count), so no roofline table")
    return p.parse_args(argv)


def _split(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _progress(i: int, n: int, t_start: float, text: str, end: str = "\n") -> None:
    el = int(time.perf_counter() - t_start)
    print(f"[{i:3d}/{n:3d} {el // 3600:02d}:{el // 60 % 60:02d}:{el % 60:02d}] {text}", end=end, flush=True)


def _summary(c: dict) -> str:
    st = c["status"]
    if st in ("ok", "wrong"):
        lat = c.get("latency_ms") or {}
        s = f"{st:5s} kernels={c.get('kernels')} compile={c.get('compile_s') or 0:.1f}s"
        if lat:
            s += f" median={lat['median']:.3g}ms"
        if c.get("max_rel_err") is not None:
            s += f" rel_err={c['max_rel_err']:.1e}"
        return s
    return f"{st}: {c.get('reason', '')}"[:200]


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    model_names = models.zoo_names() if args.models == "all" else _split(args.models)
    known = set(models.known_models())
    unknown = [m for m in model_names if m not in known]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; known: {sorted(known)}")
    if not model_names:
        raise SystemExit("no models (is dnnfusion.zoo importable?)")
    fws = _split(args.frameworks)
    bad = [f for f in fws if f not in FRAMEWORKS]
    if bad:
        raise SystemExit(f"unknown framework(s) {bad}; known: {list(FRAMEWORKS)}")
    threads = [int(t) for t in _split(args.threads)]
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.batch < 1:
        raise SystemExit(f"--batch must be >= 1, not {args.batch}")
    stamp = (_dt.datetime.now().strftime("%Y%m%d-%H%M%S") + ("-reduced" if args.reduced else "")
             + (f"-b{args.batch}" if args.batch != 1 else ""))
    tmp_root = pathlib.Path(args.workdir) if args.workdir else pathlib.Path(tempfile.mkdtemp(prefix="dnnf-bench-"))
    tmp_root.mkdir(parents=True, exist_ok=True)

    meta = machine.describe(str(REPO), venv_python())
    meta["started"] = _dt.datetime.now().isoformat(timespec="seconds")
    result = {"meta": meta, "args": vars(args), "models": model_names, "frameworks": fws,
              "threads": threads, "references": {}, "cells": []}
    json_path = out_dir / f"{stamp}.json"
    cpu = meta["cpu"]
    print(f"dnnfusion benchmark harness: {len(model_names)} model(s) x {len(fws)} framework(s) x "
          f"threads {threads}{' (reduced)' if args.reduced else ''}, batch {args.batch}")
    print(f"machine: {cpu.get('model_name')}, {cpu.get('logical_cpus')} CPUs, "
          f"{' '.join(f for f in cpu.get('flags', []) if f.startswith(('avx512f', 'amx_tile', 'avx2')))}, "
          f"load {meta.get('loadavg_start')}; OPENBLAS_CORETYPE={meta['env'].get('OPENBLAS_CORETYPE')}")
    if not args.no_roofline:
        meta["roofline"] = roofline.measure(threads)
        per = meta["roofline"].get("per_threads")
        print("roofline: " + ("; ".join(f"{t} thread(s) {r['peak_gflops']:.0f} GFLOP/s, {r['bandwidth_gbs']:.1f} GB/s"
                                        for t, r in per.items()) if per else meta["roofline"]["error"]))
    print(f"results: {json_path}", flush=True)

    rounds = max(1, args.rounds)
    n_total = len(model_names) * (1 + rounds * len(fws) * len(threads))
    i = 0
    t_start = time.perf_counter()
    for model in model_names:
        mdir = tmp_root / model
        mdir.mkdir(parents=True, exist_ok=True)
        i += 1
        _progress(i, n_total, t_start, f"{model:18s} reference (eager outputs, ONNX export, op counts) ... ", end="")
        ref = run_cell({"kind": "reference", "model": model, "reduced": args.reduced, "batch": args.batch,
                        "threads": os.cpu_count() or 1, "workdir": str(mdir), "celldir": str(mdir / "reference")},
                       sys.executable, args.timeout)
        result["references"][model] = ref
        if ref["status"] == "ok":
            errs = ref.get("errors") or {}
            print(f"ok onnx_ops={ref.get('onnx_ops', 'ERR')} aten_ops={ref.get('aten_ops', 'ERR')}"
                  + (f" ({'; '.join(f'{k}: {v[:80]}' for k, v in errs.items())})" if errs else "")
                  + f" ({ref.get('cell_s', 0):.1f} s)", flush=True)
        else:
            print(f"{ref['status']}: {ref.get('reason', '')[:200]}", flush=True)
        ref_small = {k: ref.get(k) for k in ("onnx_path", "onnx_input_names", "n_outputs", "output_names")}
        # Rounds: the framework cells run in order, then again; each (framework, threads)
        # keeps its ok round with the lowest median, the other rounds' medians beside it.
        kept: dict[tuple[str, int], list[dict]] = {}
        failed: dict[str, dict] = {}  # framework -> first failure that other cells repeat
        for rnd in range(rounds):
            for fw in fws:
                for t in threads:
                    i += 1
                    base = {"kind": "framework", "model": model, "framework": fw, "threads": t}
                    tag = f" r{rnd + 1}" if rounds > 1 else ""
                    _progress(i, n_total, t_start, f"{model:18s} {fw:10s} t={t}{tag} ... ", end="")
                    python, why = python_for(fw)
                    prev = kept.get((fw, t), [])
                    if ref["status"] != "ok":
                        c = dict(base, status="skipped", stage="reference",
                                 reason=f"reference cell failed: {ref.get('reason', '')[:150]}")
                    elif python is None:
                        c = dict(base, status="n/a", stage="import", reason=why)
                    elif fw in failed:
                        first_fail = failed[fw]
                        c = dict(first_fail, threads=t, cell_s=0.0,
                                 reason=f"(as at t={first_fail['threads']}) {first_fail.get('reason', '')}")
                    elif prev and prev[0]["status"] != "ok":
                        c = dict(prev[0], cell_s=0.0)  # a failed cell is not run again
                    else:
                        c = run_cell(dict(base, reduced=args.reduced, batch=args.batch, workdir=str(mdir),
                                          celldir=str(mdir / f"{fw}-t{t}"), reference=ref_small,
                                          warmup=args.warmup, repeat=args.repeat, budget_s=args.budget,
                                          rtol=args.rtol, atol=args.atol, kernel_cache=args.kernel_cache),
                                     python, args.timeout)
                        if c["status"] in ("n/a", "timeout") or (
                                c["status"] == "error" and c.get("stage") in THREAD_INDEPENDENT_STAGES):
                            failed[fw] = c
                    c["loadavg"] = machine.loadavg()
                    if c["status"] in ("ok", "wrong", "n/a"):
                        c.pop("traceback", None)
                    kept.setdefault((fw, t), []).append(c)
                    print(f"{_summary(c)} ({c.get('cell_s', 0):.1f} s)", flush=True)
                    if not args.keep_artifacts:
                        shutil.rmtree(mdir / f"{fw}-t{t}", ignore_errors=True)
        for fw in fws:
            for t in threads:
                result["cells"].append(_best_round(kept[(fw, t)]))
        _write(result, json_path)
        if not args.keep_artifacts:
            shutil.rmtree(mdir, ignore_errors=True)
    result["meta"]["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    result["meta"]["loadavg_end"] = machine.loadavg()
    result["meta"]["wall_s"] = round(time.perf_counter() - t_start, 1)
    _write(result, json_path)
    report.write_cells_csv(out_dir / f"{stamp}-cells.csv", result)
    report.write_counts_csv(out_dir / f"{stamp}-counts.csv", result)
    text = report.render(result)
    (out_dir / f"{stamp}-tables.txt").write_text(text)
    if not args.quiet:
        print()
        print(text)
    print(f"wrote {json_path}, {stamp}-cells.csv, {stamp}-counts.csv, {stamp}-tables.txt in {out_dir}")
    if not args.workdir and not args.keep_artifacts:
        shutil.rmtree(tmp_root, ignore_errors=True)
    result["paths"] = {"json": str(json_path), "cells_csv": str(out_dir / f"{stamp}-cells.csv"),
                       "counts_csv": str(out_dir / f"{stamp}-counts.csv"),
                       "tables": str(out_dir / f"{stamp}-tables.txt")}
    return result


def _best_round(cells: list[dict]) -> dict:
    """The round with the lowest median latency among the ok ones (else the first), with
    every round's median in ``round_medians_ms``."""
    ok = [c for c in cells if c.get("status") == "ok" and c.get("latency_ms")]
    if not ok:
        return cells[0]
    best = dict(min(ok, key=lambda c: c["latency_ms"]["median"]))
    if len(cells) > 1:
        best["round_medians_ms"] = [c["latency_ms"]["median"] if c in ok else None for c in cells]
    return best


def _write(result: dict, path: pathlib.Path) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str))
    os.replace(tmp, path)
