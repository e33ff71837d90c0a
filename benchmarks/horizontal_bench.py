"""Horizontal fusion, three ways, on generated code from one process (interleaved rounds,
medians, the same flags):

- ``apart``: the rewrites without ``combine_sibling_matmuls`` and ``fold_matmul_scale``: each
  Q/K/V projection is its own GEMM over the shared input;
- ``grouped``: the same graph, the planner's ``horizontal=True`` grouping the siblings into one
  kernel (one call, each sibling still its own pass over the input);
- ``combined``: the default rewrites: one wider GEMM over [Wq | Wk | Wv], its parts read in place.

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

NEW_PASSES = (_rewrite.combine_sibling_matmuls, _rewrite.fold_matmul_scale)


def build(ecg, horizontal: bool, isa: str, threads: int):
    fp = _plan.plan(ecg, planner="dnnfusion", horizontal=horizontal, profile_db="")
    gen = _core.generate_cpu(ecg.graph, fp, isa)
    return gen.counts, _core.CpuExecutable(ecg.graph, gen, isa, threads, prelude_dir())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="*", default=["tinybert", "distilbert", "bert_base", "mobilebert", "albert",
                                                  "vit_b16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3.0, help="timing per model (all variants)")
    ap.add_argument("--reduced", action="store_true")
    args = ap.parse_args()
    isa = _core.cpu_features()["isa"]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, isa {isa}, "
          f"{args.threads} threads; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}")
    names = ("apart", "grouped", "combined")
    print(f"{'model':<11}" + "".join(f" {n + ' k/p/MB':>21}" for n in names) +
          "".join(f" {n + ' ms':>12}" for n in names) + f" {'comb/apart':>10} {'max diff':>9}")
    apart_passes = [p for p in _rewrite.DEFAULT_PASSES if p not in NEW_PASSES]
    for name in args.models:
        z = zoo.get(name, reduced=args.reduced)
        loaded = df.load(str(zoo.export_onnx(name, reduced=args.reduced)))
        plain, _ = _rewrite.rewrite(loaded, apart_passes)
        combined, _ = _rewrite.rewrite(loaded, _rewrite.DEFAULT_PASSES)
        feeds = [x.numpy() for x in z.example_inputs]
        built = [build(plain, False, isa, args.threads), build(plain, True, isa, args.threads),
                 build(combined, False, isa, args.threads)]
        outs = [e.run(feeds) for _, e in built]
        diff = max(float(np.max(np.abs(a - b))) for o in outs[1:] for a, b in zip(outs[0], o))
        t: list[list[float]] = [[] for _ in built]
        end = time.perf_counter() + args.seconds
        while time.perf_counter() < end or len(t[0]) < 5:
            for k, (_, e) in enumerate(built):
                s = time.perf_counter()
                e.run(feeds)
                t[k].append((time.perf_counter() - s) * 1e3)
        ms = [statistics.median(x) for x in t]
        counts = "".join(f" {c['kernels']:>6}/{c['passes']:>4}/{c['intermediate_bytes_written'] / 1e6:>7.2f}"
                         .rjust(22) for c, _ in built)
        print(f"{name:<11}{counts}" + "".join(f" {m:>12.3f}" for m in ms) +
              f" {ms[2] / ms[0]:>10.3f} {diff:>9.2e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
