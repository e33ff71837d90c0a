"""GEMM micro-benchmark: the packed GEMM of the generated kernels (cpp/codegen/prelude/gemm.h)
against NumPy's matmul (OpenBLAS) and torch.matmul, in one run, with 1 and 2 threads.

    python benchmarks/gemm_bench.py                  # all shapes, 1 and 2 threads
    python benchmarks/gemm_bench.py --threads 2 --shapes 1024x1024x1024 --budget 3

Shapes are MxNxK (C[M,N] = A[M,K] B[K,N], row-major f32). Every cell is the median of
repeated timed calls after warm-up (two calls; with threads, a quarter second) (at least 5 runs, at most --reps, stopping after
--budget seconds); GFLOP/s = 2MNK / median. Percentages are of this machine's FMA peak as
measured by the driver's probe (independent FMA chains in registers) in the same run, built
for the same instruction set as the GEMM: `--isa` (default: the best this CPU runs, as
`dnnfusion.compile` picks it; its flags come from the one ISA table, _core.isa_flags). NumPy and torch run in child processes with
their thread knobs set (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS, torch.set_num_threads). The
load average is recorded before each block because the machine may be shared. Results go to
benchmarks/results/gemm-<stamp>.json and the table is printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRELUDE = ROOT / "cpp" / "codegen" / "prelude"
DRIVER = ROOT / "benchmarks" / "gemm" / "gemm_bench.cc"
CXX = os.environ.get("CXX", "g++")
BASE_FLAGS = ["-std=c++17", "-O3", "-ffp-contract=off", "-pthread"]


def isa_flags(isa: str | None) -> tuple[str, list[str]]:
    """The instruction set to build for (default: this CPU's best) and its compiler flags."""
    from dnnfusion import _core
    isa = isa or _core.cpu_features()["isa"]
    return isa, [*BASE_FLAGS, *_core.isa_flags(isa)]

SHAPES = [  # (label, M, N, K)
    ("square", 256, 256, 256),
    ("square", 512, 512, 512),
    ("square", 1024, 1024, 1024),
    ("square", 2048, 2048, 2048),
    ("bert attn proj", 128, 768, 768),
    ("bert ffn up", 128, 3072, 768),
    ("bert ffn down", 128, 768, 3072),
    ("conv3x3 56x56x64", 3136, 64, 576),
]
# Linear + bias + GELU: the epilogue fused in the kernel vs a separate pass vs PyTorch's ops.
FUSION_SHAPE = ("bert ffn up + bias + gelu", 128, 3072, 768)

CHILD = r"""
import json, os, sys, time, statistics
fw, threads, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
budget, shapes = float(sys.argv[4]), json.loads(sys.argv[5])
import numpy as np
info = {}
if fw == "numpy":
    import ctypes, glob
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "libscipy_openblas*.so"))
    if libs:
        lib = ctypes.CDLL(libs[0])
        for sym in ("scipy_openblas_get_corename64_", "openblas_get_corename"):
            if hasattr(lib, sym):
                f = getattr(lib, sym); f.restype = ctypes.c_char_p
                info["openblas_core"] = f().decode()
        for sym in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads"):
            if hasattr(lib, sym):
                info["openblas_threads"] = getattr(lib, sym)()
        for sym in ("scipy_openblas_get_config64_", "openblas_get_config"):
            if hasattr(lib, sym):
                f = getattr(lib, sym); f.restype = ctypes.c_char_p
                info["openblas_config"] = f().decode()
    info["numpy"] = np.__version__
else:
    import torch
    torch.set_num_threads(threads)
    info["torch"] = torch.__version__
    info["torch_threads"] = torch.get_num_threads()
    info["torch_parallel"] = torch.__config__.parallel_info()
print(json.dumps({"info": info}), flush=True)
rng = np.random.default_rng(42)
for M, N, K, variant in shapes:
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    if fw == "numpy":
        out = np.empty((M, N), np.float32)
        once = lambda: np.matmul(a, b, out=out)
    else:
        ta, tb, tbias = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(bias)
        tout = torch.empty(M, N)
        if variant == "fused":
            gelu = torch.nn.functional.gelu
            once = lambda: gelu(torch.addmm(tbias, ta, tb, out=tout))
        else:
            once = lambda: torch.matmul(ta, tb, out=tout)
    with (torch.inference_mode() if fw == "torch" else __import__("contextlib").nullcontext()):
        once(); once()
        times, start = [], time.perf_counter()
        while len(times) < reps and (len(times) < 5 or time.perf_counter() - start < budget):
            t0 = time.perf_counter(); once(); times.append(time.perf_counter() - t0)
    print(json.dumps({"M": M, "N": N, "K": K, "threads": threads, "variant": variant,
                      "times": times}), flush=True)
"""


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def compile_driver(workdir: Path, flags: list[str]) -> Path:
    exe = workdir / "gemm_bench"
    cmd = [CXX, *flags, f"-I{PRELUDE}", str(DRIVER), "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def parse_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def run_dnnf(exe: Path, threads: int, reps: int, budget: float, variant: str,
             shapes: list[tuple]) -> list[dict]:
    args = [str(exe), "run", str(threads), str(reps), str(budget), variant,
            *[f"{m},{n},{k}" for _, m, n, k in shapes]]
    return parse_lines(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def run_child(fw: str, threads: int, reps: int, budget: float,
              shapes: list[tuple[int, int, int, str]]) -> tuple[dict, list[dict]]:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    r = subprocess.run([sys.executable, "-c", CHILD, fw, str(threads), str(reps), str(budget),
                        json.dumps(shapes)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1:]}, []
    lines = parse_lines(r.stdout)
    return lines[0]["info"], lines[1:]


def gflops(rec: dict) -> dict:
    f = 2.0 * rec["M"] * rec["N"] * rec["K"]
    t = rec["times"]
    return {"median_gflops": f / statistics.median(t) / 1e9, "best_gflops": f / min(t) / 1e9,
            "median_ms": statistics.median(t) * 1e3, "runs": len(t)}


def machine() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version()}
    try:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from harness.machine import cpu_info  # the benchmark harness's description
        info["cpu"] = cpu_info()
    except Exception as e:  # noqa: BLE001 - description only
        info["cpu_error"] = repr(e)
    try:
        info["compiler"] = subprocess.run([CXX, "--version"], capture_output=True,
                                          text=True).stdout.splitlines()[0]
    except OSError:
        pass
    info["env"] = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS",
                                                  "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                  "DNNF_NUM_THREADS")}
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shapes", default="all", help="all, or MxNxK,MxNxK (N alone: NxNxN)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--budget", type=float, default=1.5, help="seconds of timed runs per cell")
    ap.add_argument("--frameworks", default="dnnf,numpy,torch")
    ap.add_argument("--isa", default=None, help="avx512, avx2, scalar (default: this CPU's best)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"),
                    help="a directory (the file is gemm-<stamp>.json in it) or a file ending in .json")
    args = ap.parse_args(argv)

    threads = [int(t) for t in args.threads.split(",")]
    shapes = SHAPES if args.shapes == "all" else []
    for s in [] if args.shapes == "all" else args.shapes.split(","):
        dims = s.split("x")
        if len(dims) == 1:
            dims *= 3
        if len(dims) != 3 or not all(d.isdigit() and int(d) > 0 for d in dims):
            ap.error(f"--shapes: {s!r} is not MxNxK or N (positive integers)")
        shapes.append(("custom", *map(int, dims)))
    fws = args.frameworks.split(",")
    isa, flags = isa_flags(args.isa)
    result: dict = {"when": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine(),
                    "isa": isa, "flags": flags, "args": vars(args), "cells": [], "probe": {},
                    "framework_info": {}}
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_driver(Path(tmp), flags)
        for t in threads:
            result["probe"][t] = json.loads(subprocess.run(
                [str(exe), "peak", str(t), "1.0"], capture_output=True, text=True,
                check=True).stdout)["peak_gflops"]
            blocks = []
            if "dnnf" in fws:
                def dnnf(variant, todo, t=t):
                    return lambda: run_dnnf(exe, t, args.reps, args.budget, variant, todo)
                blocks.append(("dnnf", dnnf("plain", shapes)))
                blocks.append(("dnnf-packed", dnnf("packed", shapes)))
                blocks.append(("dnnf-cold", dnnf("cold", shapes)))
                if args.shapes == "all":
                    blocks.append(("dnnf-fused", dnnf("fused", [FUSION_SHAPE])))
                    blocks.append(("dnnf-unfused", dnnf("unfused", [FUSION_SHAPE])))
            for fw in ("numpy", "torch"):
                if fw in fws:
                    def child(fw=fw):
                        todo = [(m, n, k, "plain") for _, m, n, k in shapes]
                        if fw == "torch" and args.shapes == "all":
                            todo.append((*FUSION_SHAPE[1:], "fused"))
                        info, recs = run_child(fw, t, args.reps, args.budget, todo)
                        result["framework_info"][f"{fw}/{t}"] = info
                        return recs
                    blocks.append((fw, child))
            for name, fn in blocks:
                load = loadavg()
                for rec in fn():
                    cell = {"framework": name if rec.get("variant") != "fused" or name != "torch"
                            else "torch-fused", "threads": t, "M": rec["M"], "N": rec["N"],
                            "K": rec["K"], "load_before": load, "times": rec["times"],
                            **gflops(rec)}
                    cell["pct_probe_peak"] = 100 * cell["median_gflops"] / result["probe"][t]
                    result["cells"].append(cell)
                    print(f"{name:12s} t={t} {rec['M']}x{rec['N']}x{rec['K']:<5d} "
                          f"{cell['median_gflops']:7.1f} GFLOP/s (best {cell['best_gflops']:.1f})"
                          f"  load {load[0] if load else '?'}", flush=True)

    path = Path(args.out)
    if path.suffix != ".json":  # a directory
        path = path / f"gemm-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print()
    print(table(result))
    print(f"\nwrote {path}")
    return 0


def table(result: dict) -> str:
    cells = result["cells"]
    fws = list(dict.fromkeys(c["framework"] for c in cells))
    labels = {(m, n, k): lab for lab, m, n, k in SHAPES + [FUSION_SHAPE]}
    lines = []
    for t in sorted({c["threads"] for c in cells}):
        lines.append(f"threads={t}  {result.get('isa', '?')}: probe peak {result['probe'][t]:.1f} "
                     f"GFLOP/s; median GFLOP/s (best), % of the probe peak")
        head = f"{'shape (MxNxK)':<30s}" + "".join(f"{fw:>22s}" for fw in fws) + f"{'load':>7s}"
        lines.append(head)
        shapes = list(dict.fromkeys((c["M"], c["N"], c["K"]) for c in cells if c["threads"] == t))
        for s in shapes:
            row = f"{labels.get(s, '')[:14]:<14s} {'x'.join(map(str, s)):<15s}"
            load = ""
            for fw in fws:
                c = next((c for c in cells if c["threads"] == t and c["framework"] == fw
                          and (c["M"], c["N"], c["K"]) == s), None)
                if c is None:
                    row += f"{'':>22s}"
                else:
                    row += (f"{c['median_gflops']:8.1f} ({c['best_gflops']:5.0f})"
                            f" {c['pct_probe_peak']:3.0f}%")
                    load = load or f"{c['load_before'][0]:.2f}" if c["load_before"] else load
            lines.append(row + f"{load:>7s}")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
