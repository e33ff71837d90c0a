"""Horizontal fusion (paper §4.3 option): Many-to-Many siblings that read one input (the
Q/K/V projections) planned into one block, against the same plan without it, on generated
code. Median of interleaved runs, both compiled with the same flags.

    python benchmarks/horizontal_bench.py [models...] [--threads 2] [--seconds 3] [--reduced]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

import dnnfusion as df
from dnnfusion import _core, zoo
from dnnfusion import plan as _plan
from dnnfusion import rewrite as _rewrite
from dnnfusion.compiler import prelude_dir


def build(ecg, horizontal: bool, isa: str, threads: int):
    fp = _plan.plan(ecg, planner="dnnfusion", horizontal=horizontal)
    gen = _core.generate_cpu(ecg.graph, fp, isa)
    return fp, _core.CpuExecutable(ecg.graph, gen, isa, threads, prelude_dir())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="*", default=["tinybert", "distilbert", "bert_base", "gpt2", "vit_b16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3.0, help="timing per model (both variants)")
    ap.add_argument("--reduced", action="store_true")
    args = ap.parse_args()
    isa = _core.cpu_features()["isa"]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, isa {isa}, "
          f"{args.threads} threads; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}")
    print(f"{'model':<12} {'kernels off':>11} {'kernels on':>10} {'off ms':>9} {'on ms':>9} {'on/off':>7} {'max diff':>9}")
    for name in args.models:
        z = zoo.get(name, reduced=args.reduced)
        ecg, _ = _rewrite.rewrite(df.load(str(zoo.export_onnx(name, reduced=args.reduced))))
        feeds = [x.numpy() for x in z.example_inputs]
        (p0, e0), (p1, e1) = build(ecg, False, isa, args.threads), build(ecg, True, isa, args.threads)
        o0, o1 = e0.run(feeds), e1.run(feeds)
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(o0, o1))
        t = [[], []]
        end = time.perf_counter() + args.seconds
        while time.perf_counter() < end or len(t[0]) < 5:
            for k, e in enumerate((e0, e1)):
                s = time.perf_counter()
                e.run(feeds)
                t[k].append((time.perf_counter() - s) * 1e3)
        m0, m1 = statistics.median(t[0]), statistics.median(t[1])
        print(f"{name:<12} {len(p0.blocks):>11} {len(p1.blocks):>10} {m0:>9.3f} {m1:>9.3f} "
              f"{m1 / m0:>7.3f} {diff:>9.2e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
