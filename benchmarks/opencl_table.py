"""The OpenCL target beside the CPU target, per zoo model: kernels, passes (launches) and
latency on the default OpenCL device (PoCL's CPU device unless DNNF_OPENCL_DEVICE or a GPU
says otherwise) against the CPU target's, and the largest relative error against PyTorch.
Median of --repeat runs after a warm-up; reduced models by default (PoCL is slow).

    python benchmarks/opencl_table.py                  # reduced models
    python benchmarks/opencl_table.py --full --models resnet50,bert_base
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import dnnfusion as df
from dnnfusion.zoo import compiled_check as cc
from dnnfusion.zoo import registry


def median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="full-size models (default: reduced)")
    ap.add_argument("--models", default=",".join(registry.list()))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="CPU target threads")
    args = ap.parse_args(argv)
    dev = next(d for d in df._core.opencl_devices() if d["selected"])
    print(f"OpenCL device: {dev['name']} ({dev['platform']}, {dev['version']}); CPU target: "
          f"{df._core.cpu_features()['isa']}, {platform.processor() or platform.machine()}; "
          f"{'full' if args.full else 'reduced'} models, median of {args.repeat}")
    print(f"{'model':<16} {'cpu passes':>10} {'ocl launches':>12} {'cpu ms':>9} {'opencl ms':>10} {'rel err':>9}")
    for name in args.models.split(","):
        path, inputs, ref_torch, _ = cc.references(name, not args.full)
        cpu = df.compile(path, inputs, threads=args.threads)
        ocl = df.compile(path, inputs, target="opencl")
        err = cc._rel_err(ocl.run(*inputs), ref_torch)
        print(f"{name:<16} {cpu.stats['passes']:>10} {len(ocl.generated.launches):>12} "
              f"{median_ms(lambda: cpu.run(*inputs), args.repeat):>9.2f} "
              f"{median_ms(lambda: ocl.run(*inputs), args.repeat):>10.2f} {err:>9.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
