"""Whole models with two versions of the prelude (the anchor kernels generated code includes):
the current checkout's against a git revision's, everything else the same (the same build of
dnnfusion, plans, flags and ONNX files). For kernel work: what a change to gemm.h or
conv_direct.h does to the models, not only to the layer it was written for.

Each cell (model, threads, prelude) runs in its own process, so the two versions never share
a core with each other's idle thread pool; the cells alternate, round after round, and each
keeps its lowest median over the rounds (a shared VM's slow spells).

    python benchmarks/prelude_ab.py --old-rev HEAD~3 mobilenetv2 resnet50 --threads 1,2
    python benchmarks/prelude_ab.py --old-dir /path/to/prelude tinybert --rounds 5
    python benchmarks/prelude_ab.py --old-env DNNF_RESIDUAL_IN_PLACE=0 resnet50
    python benchmarks/prelude_ab.py --old-checkout /tmp/old all --threads 2   # a git worktree, core built

--old-checkout runs another checkout's package as the baseline (its Python, core and prelude; a
git worktree of an old revision with its _core built into its dnnfusion/): whole-version before /
after, on the ONNX files this checkout's zoo exports. The passes column reads each compiled
model's stats (blank where the old version did not count them).

--old-env runs the baseline with the current prelude and one environment variable set (a
switch such as DNNF_WINOGRAD=0 or DNNF_RESIDUAL_IN_PLACE=0), for changes outside the prelude.

--control REGEX adds a per-kernel comparison: each cell also profiles its model
(CompiledModel.profile), every kernel keeps its lowest time over the rounds, and the kernels
whose stages match REGEX are the control, code the change does not touch (e.g.
" g[0-9]{2,} ", the depthwise convolutions, when only the 1x1 convolutions' GEMM changed).
The changed kernels' new/old divided by the control's new/old is the change's effect with
the VM's state between the two processes factored out: on the 2-vCPU VMs the whole-model
ratio alone moved 0.9-1.3x between runs of the same code, while the controlled ratio held.

    python benchmarks/prelude_ab.py --old-rev HEAD~1 mobilenetv2 --threads 1 --rounds 4 --control " g[0-9]{2,} "

Compile time is not measured (the kernel cache makes later rounds warm); the first round of
each version also fills that cache.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRELUDE = ROOT / "cpp" / "codegen" / "prelude"

WORKER = r"""
import json, os, sys, time
checkout = os.environ.get("DNNF_AB_CHECKOUT")
if checkout:  # the baseline is another checkout's package (its own core and prelude), not this one
    sys.meta_path = [f for f in sys.meta_path if "editable" not in type(f).__module__]
    sys.path.insert(0, checkout)
import numpy as np
import onnx
import dnnfusion as df
from dnnfusion import zoo
name, threads, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
path = name if name.endswith(".onnx") else str(zoo.export_onnx(name))  # both sides: one file
m = onnx.load(path)
rng = np.random.default_rng(0)
feeds = {}
for i in m.graph.input:
    shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
    if i.type.tensor_type.elem_type == onnx.TensorProto.INT64:
        feeds[i.name] = rng.integers(0, 100, shape).astype(np.int64)
    else:
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
c = df.compile(path, threads=threads)
for _ in range(3):
    c(**feeds)
ts, t_end = [], time.perf_counter() + seconds
while len(ts) < 5 or time.perf_counter() < t_end:
    t = time.perf_counter()
    c(**feeds)
    ts.append(time.perf_counter() - t)
kernels = None
if os.environ.get("DNNF_AB_PROFILE"):  # --control: each kernel's time too, by the model's own profiler
    kernels = [[r["ms"], " | ".join(r["stages"])] for r in c.profile(**feeds, repeat=10).rows]
print(json.dumps({"median_ms": float(np.median(ts)) * 1e3, "runs": len(ts), "isa": c.stats.get("isa", "?"),
                  "passes": c.stats.get("passes"), "package": os.path.dirname(df.__file__), "kernels": kernels}))
"""


def _export_rev(rev: str, dest: Path) -> Path:
    """The prelude directory as of git revision `rev`, written under dest."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", f"{rev}:cpp/codegen/prelude"],
                           check=True, capture_output=True, text=True).stdout.split()
    out = dest / "prelude"
    out.mkdir(parents=True, exist_ok=True)
    for f in files:
        blob = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:cpp/codegen/prelude/{f}"],
                              check=True, capture_output=True).stdout
        (out / f).write_bytes(blob)
    return out


def _export(model: str) -> Path:
    from dnnfusion import zoo
    return zoo.export_onnx(model)


def _cell(prelude: str, model: str, threads: int, seconds: float, extra: dict | None = None) -> dict:
    env = dict(os.environ, DNNF_PRELUDE_DIR=prelude, **(extra or {}))
    r = subprocess.run([sys.executable, "-c", WORKER, model, str(threads), str(seconds)], env=env,
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip().splitlines()[-1:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _controlled(control: str, models: list[str], threads: list[int], kernels: dict) -> list[dict]:
    """Prints and returns, per model and thread count, the kernel sums of the control (stages
    matching `control`) and of the rest, old and new, and the rest's ratio over the control's."""
    pat = re.compile(control)
    print(f"# per kernel, lowest over the rounds; control = kernels whose stages match {control!r}")
    print(f"{'model':18s} {'threads':>7s} {'changed old/new ms':>20s} {'control old/new ms':>20s} {'controlled':>10s}")
    out = []
    for model in models:
        for t in threads:
            o, n = kernels.get((model, t, "old")), kernels.get((model, t, "new"))
            if not o or not n or len(o) != len(n) or any(a[1] != b[1] for a, b in zip(o, n)):
                print(f"{model:18s} {t:7d}  no per-kernel comparison: the two versions' kernels differ")
                continue
            ctl = [bool(pat.search(a[1])) for a in o]
            sums = {(k, c): sum(x[0] for x, is_c in zip(v, ctl) if is_c == c)
                    for k, v in (("old", o), ("new", n)) for c in (False, True)}
            if min(sums.values()) <= 0:
                print(f"{model:18s} {t:7d}  no per-kernel comparison: the control or the rest is empty")
                continue
            eff = (sums["new", False] / sums["old", False]) / (sums["new", True] / sums["old", True])
            out.append({"model": model, "threads": t, "changed_old_ms": sums["old", False],
                        "changed_new_ms": sums["new", False], "control_old_ms": sums["old", True],
                        "control_new_ms": sums["new", True], "controlled_ratio": eff})
            print(f"{model:18s} {t:7d} {sums['old', False]:9.3f}/{sums['new', False]:<10.3f} "
                  f"{sums['old', True]:9.3f}/{sums['new', True]:<10.3f} {eff:10.3f}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--old-rev", help="git revision whose cpp/codegen/prelude is the baseline")
    src.add_argument("--old-dir", help="a prelude directory to use as the baseline")
    src.add_argument("--old-env", help="NAME=VALUE: the baseline is this checkout with that variable set")
    src.add_argument("--old-checkout", help="the baseline is another checkout (e.g. a git worktree of an old "
                     "revision) with its core built into its dnnfusion/: everything of its own, the same ONNX files")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per cell and round")
    ap.add_argument("--control", help="REGEX: also compare kernel by kernel, with the kernels whose stages "
                    "match it as the control (code the change leaves alone)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    if args.models == ["all"]:
        from dnnfusion import zoo
        args.models = list(zoo.list())
    with tempfile.TemporaryDirectory() as tmp:
        extra: dict[str, dict] = {"old": {}, "new": {}}
        if args.old_env:
            name, sep, value = args.old_env.partition("=")
            if not sep or not name:
                ap.error("--old-env takes NAME=VALUE")
            extra["old"] = {name: value}
            old = str(PRELUDE)
        elif args.old_checkout:
            co = str(Path(args.old_checkout).resolve())
            old = str(Path(co) / "cpp" / "codegen" / "prelude")
            # its own core: not one this environment names, and not this checkout's package
            extra["old"] = {"DNNF_AB_CHECKOUT": co, "DNNF_CORE_LIBRARY": ""}
        else:
            old = args.old_dir or str(_export_rev(args.old_rev, Path(tmp)))
        variants = {"old": old, "new": str(PRELUDE)}
        if args.control:
            re.compile(args.control)  # a bad pattern fails here, not after the rounds
            for v in extra:
                extra[v] = dict(extra[v], DNNF_AB_PROFILE="1")
        kernels: dict[tuple, list] = {}  # (model, threads, version) -> [[lowest ms, stages], ...]
        best: dict[tuple, float] = {}
        errors: dict[tuple, str] = {}
        isa = "?"
        # With another checkout both sides read the ONNX file this checkout's zoo exports.
        sources = {m: str(_export(m)) if args.old_checkout else m for m in args.models}
        passes: dict[tuple, object] = {}
        for rnd in range(args.rounds):
            for model in args.models:
                for t in threads:
                    for v, d in variants.items():
                        res = _cell(d, sources[model], t, args.seconds, extra[v])
                        key = (model, t, v)
                        if "error" in res:
                            errors[key] = " ".join(res["error"])
                            continue
                        isa = res["isa"]
                        passes[(model, v)] = res.get("passes")
                        best[key] = min(best.get(key, float("inf")), res["median_ms"])
                        if res.get("kernels"):
                            prev = kernels.get(key)
                            kernels[key] = res["kernels"] if prev is None or len(prev) != len(res["kernels"]) else [
                                [min(a[0], b[0]), a[1]] for a, b in zip(prev, res["kernels"])]
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    old_name = args.old_rev or args.old_dir or args.old_env or args.old_checkout
    print(f"# prelude A/B: old = {old_name}, new = this checkout; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, ISA {isa}, "
          f"lowest of {args.rounds} round medians ({args.seconds:g} s each); load {load}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}")
    print(f"{'model':18s} {'threads':>7s} {'old ms':>9s} {'new ms':>9s} {'new/old':>8s} {'passes old/new':>15s}")
    rows = []
    for model in args.models:
        for t in threads:
            o, n = best.get((model, t, "old")), best.get((model, t, "new"))
            if o is None or n is None:
                why = errors.get((model, t, "old")) or errors.get((model, t, "new"))
                print(f"{model:18s} {t:7d}  error: {why}")
                continue
            po, pn = passes.get((model, "old")), passes.get((model, "new"))
            rows.append({"model": model, "threads": t, "old_ms": o, "new_ms": n, "passes_old": po, "passes_new": pn})
            print(f"{model:18s} {t:7d} {o:9.3f} {n:9.3f} {n / o:8.3f} {str(po) + ' / ' + str(pn):>15s}")
    if rows:
        geo = math.exp(sum(math.log(r["new_ms"] / r["old_ms"]) for r in rows) / len(rows))
        print(f"geomean new/old over {len(rows)} rows: {geo:.3f}")
    per_kernel = _controlled(args.control, args.models, threads, kernels) if args.control else []
    if args.json:
        Path(args.json).write_text(json.dumps({"old": old_name, "isa": isa, "rows": rows, "per_kernel": per_kernel},
                                              indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
