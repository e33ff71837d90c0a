"""Fused GEMM prologues (issue 13, paper §4.3-4.4), measured: each model generated twice from
the same plan, with prologues (a GEMM's A computed while it is packed) and without (every
operand made in its block written to scratch first, then packed), both built at the same
optimisation level and timed in one process, rounds interleaved (which build runs first
alternates from round to round), median per build. Outputs
are compared between the two builds; the passes and intermediate bytes are what each
generated module does (codegen/counts.h).

    python benchmarks/prologue_bench.py [models...] [--threads 2] [--rounds 15] [--reduced]

A measurement, not a test: the machine may be shared, so the load average is printed too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dnnfusion as df  # noqa: E402
from dnnfusion import _core, rewrite  # noqa: E402
from dnnfusion.compiler import prelude_dir  # noqa: E402
from dnnfusion.zoo import registry  # noqa: E402
from harness.machine import cpu_info, loadavg  # noqa: E402

TRANSFORMERS = ["tinybert", "distilbert", "albert", "bert_base", "mobilebert", "gpt2", "vit_b16"]


def build(name: str, reduced: bool, isa: str, threads: int):
    ecg = df.load(str(registry.export_onnx(name, reduced=reduced)))
    ecg, _ = rewrite.rewrite(ecg)
    ecg, _ = rewrite.select_layout(ecg, "auto")
    plan = df.plan.plan(ecg, planner="dnnfusion")
    out = {}
    for on in (False, True):
        gen = _core.generate_cpu(ecg.graph, plan, isa, prologues=on)
        exe = _core.CpuExecutable(ecg.graph, gen, isa, threads, prelude_dir())
        out[on] = (gen, exe)
    rng = np.random.default_rng(0)
    feeds = []
    for v in ecg.inputs:
        dt = df.ecg.numpy_dtype(v.dtype)
        if np.issubdtype(dt, np.integer):
            feeds.append(rng.integers(0, 2, size=v.shape).astype(dt))
        else:
            feeds.append(rng.standard_normal(v.shape).astype(dt))
    return out, feeds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=TRANSFORMERS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15, help="timed runs per build (interleaved)")
    ap.add_argument("--reduced", action="store_true")
    args = ap.parse_args(argv)
    isa = _core.cpu_features()["isa"]
    cpu = cpu_info()
    print(f"machine: {cpu['model_name']}, {cpu['logical_cpus']} CPUs, isa {isa}, {args.threads} threads, "
          f"median of {args.rounds} interleaved rounds; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}; "
          f"load {loadavg()}")
    print(f"{'model':<12} {'passes':>11} {'intermediate MB':>16} {'ms without':>11} {'ms with':>8} "
          f"{'speed-up':>8} {'max |diff|':>10}")
    for name in args.models:
        builds, feeds = build(name, args.reduced, isa, args.threads)
        outs = {on: exe.run(feeds) for on, (_, exe) in builds.items()}
        diff = max(float(np.max(np.abs(a - b))) if a.size else 0.0 for a, b in zip(outs[False], outs[True]))
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(2):  # warm-up
            for _, exe in builds.values():
                exe.run(feeds)
        for r in range(args.rounds):
            # Alternate which build runs first (ABBA...), so that an order effect (the first
            # run of a round warming or evicting something) cannot favour one build.
            order = [False, True] if r % 2 == 0 else [True, False]
            for on, exe in ((on, builds[on][1]) for on in order):
                t0 = time.perf_counter()
                exe.run(feeds)
                times[on].append(time.perf_counter() - t0)
        ms = {on: statistics.median(t) * 1e3 for on, t in times.items()}
        c = {on: gen.counts for on, (gen, _) in builds.items()}
        print(f"{name:<12} {c[False]['passes']:>5}->{c[True]['passes']:<5} "
              f"{c[False]['intermediate_bytes_written'] / 1e6:>7.1f}->{c[True]['intermediate_bytes_written'] / 1e6:<7.1f} "
              f"{ms[False]:>11.2f} {ms[True]:>8.2f} {ms[False] / ms[True]:>7.3f}x {diff:>10.2e}", flush=True)
    print(f"load at the end {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
