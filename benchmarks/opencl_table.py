"""The OpenCL target beside the CPU target, per zoo model: kernels, passes (launches) and
latency on the default OpenCL device (a GPU where there is one, else PoCL's CPU device, unless
DNNF_OPENCL_DEVICE says otherwise) against the CPU target's, and the largest relative error
against PyTorch eager on the CPU. Median of --repeat runs after a warm-up; reduced models by
default (PoCL is slow).

    python benchmarks/opencl_table.py                  # reduced models
    python benchmarks/opencl_table.py --full --models resnet50,bert_base
    python benchmarks/opencl_table.py --full --no-cpu --torch-device cuda --json out.json

"opencl ms" is a whole call (inputs written to the device, every kernel, outputs read back);
"kernel ms" is the sum of the kernels' OpenCL event times (CompiledModel.profile()).
--torch-device adds PyTorch eager on that device (e.g. cuda, synchronised) as a peer; on CUDA
twice: as it comes ("torch ms": cuDNN may run convolutions in TF32 on tensor cores, PyTorch's
default) and in strict fp32 ("fp32 ms": TF32 off for cuDNN and matmuls), which is what the
OpenCL kernels compute. --top N prints each model's N slowest kernels (OpenCL event times).
A model that fails to compile or run is reported on its row and the table goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback

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


def torch_ms(name: str, full: bool, device: str, repeat: int, tf32: bool = True) -> float:
    import torch

    if device.startswith("cuda"):
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32

    zm = registry.get(name, reduced=not full)
    mod = zm.module.to(device).eval()
    xs = [x.to(device) for x in zm.example_inputs]

    def call():
        with torch.no_grad():
            mod(*xs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    return median_ms(call, repeat)


def measure(name: str, *, full: bool = False, repeat: int = 5, cpu: bool = True, threads: int | None = None,
            torch_device: str | None = None, top: int = 0) -> dict:
    """One row of the table: the model compiled for the default OpenCL device (and the CPU
    target), its error against PyTorch eager and the times; a failure is the row's "error"."""
    row: dict = {"model": name}
    try:
        path, inputs, ref_torch, _ = cc.references(name, not full)
        t = time.perf_counter()
        ocl = df.compile(path, inputs, target="opencl")
        row["opencl_compile_s"] = time.perf_counter() - t
        row["rel_err"] = cc._rel_err(ocl.run(*inputs), ref_torch)
        row["launches"] = len(ocl.generated.launches)
        row["opencl_ms"] = median_ms(lambda: ocl.run(*inputs), repeat)
        prof = [r for r in ocl.profile(*inputs, repeat=repeat).rows if r["block"] >= 0]
        row["kernel_ms"] = sum(r["ms"] for r in prof)
        if top:
            row["top"] = [{"function": r["function"], "ms": r["ms"], "stages": " | ".join(r["stages"])}
                          for r in sorted(prof, key=lambda r: -r["ms"])[:top]]
        if cpu:
            m = df.compile(path, inputs, threads=threads)
            row["cpu_passes"] = m.stats["passes"]
            row["cpu_ms"] = median_ms(lambda: m.run(*inputs), repeat)
        if torch_device:
            row["torch_ms"] = torch_ms(name, full, torch_device, repeat)
            if torch_device.startswith("cuda"):
                row["torch_fp32_ms"] = torch_ms(name, full, torch_device, repeat, tf32=False)
    except Exception as e:  # report and go on
        traceback.print_exc(file=sys.stderr)
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="full-size models (default: reduced)")
    ap.add_argument("--models", default=",".join(registry.list()))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="CPU target threads")
    ap.add_argument("--no-cpu", action="store_true", help="leave out the CPU target's columns")
    ap.add_argument("--torch-device", default=None, help="also time PyTorch eager on this device (e.g. cuda)")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--top", type=int, default=0, help="print each model's N slowest OpenCL kernels")
    args = ap.parse_args(argv)
    dev = next(d for d in df._core.opencl_devices() if d["selected"])
    head = (f"OpenCL device: {dev['name']} ({dev['platform']}, {dev['version']}); CPU target: "
            f"{df._core.cpu_features()['isa']}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores; {'full' if args.full else 'reduced'} models, median of {args.repeat}")
    print(head)
    print(f"{'model':<16} {'cpu passes':>10} {'ocl launches':>12} {'cpu ms':>9} {'opencl ms':>10} "
          f"{'kernel ms':>10} {'torch ms':>9} {'fp32 ms':>9} {'rel err':>9}", flush=True)
    rows = []
    bad = 0
    for name in args.models.split(","):
        row = measure(name, full=args.full, repeat=args.repeat, cpu=not args.no_cpu, threads=args.threads,
                      torch_device=args.torch_device, top=args.top)
        rows.append(row)
        if "error" in row or row.get("rel_err", 0) > cc.REL_TOL:
            bad += 1

        def f(key, fmt, width):
            return format(row[key], fmt).rjust(width) if key in row else "-".rjust(width)

        print(f"{name:<16} {f('cpu_passes', 'd', 10)} {f('launches', 'd', 12)} {f('cpu_ms', '.2f', 9)} "
              f"{f('opencl_ms', '.2f', 10)} {f('kernel_ms', '.2f', 10)} {f('torch_ms', '.2f', 9)} {f('torch_fp32_ms', '.2f', 9)} "
              f"{f('rel_err', '.1e', 9)}" + (f"  ERROR {row['error']}" if "error" in row else ""), flush=True)
        for r in row.get("top", []):
            print(f"    {r['ms']:8.3f} ms  {r['function']}: {r['stages'][:110]}", flush=True)
        if args.json:  # after every row, so a run cut short keeps what it measured
            with open(args.json, "w") as fh:
                json.dump({"header": head, "device": dev, "full": args.full, "repeat": args.repeat,
                           "rows": rows}, fh, indent=1, default=str)
    print(f"{len(rows) - bad} of {len(rows)} models within {cc.REL_TOL:g} of PyTorch")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
