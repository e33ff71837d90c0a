"""Inter-block layout (paper §4.4, ``cpp/rewrite/layout.cc``): each model compiled with
``layout="nchw"`` (every conv channels first), ``"auto"`` (the cost model's choice, the
default) and ``"nhwc"`` (every region with a conv channels last), timed side by side in one
process. Median of interleaved runs; outputs compared with the nchw build.

    python benchmarks/layout_bench.py [models...] [--threads 2] [--repeat 15] [--reduced]
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

CNNS = ["mobilenetv2", "resnet50", "efficientnet_b0", "vgg16", "unet", "mobilenetv1_ssd", "yolov4",
        "c3d", "s3d"]
MODES = ("nchw", "auto", "nhwc")


def _first(y):
    return y[0] if isinstance(y, (list, tuple)) else y


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="*", default=CNNS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=15, help="timed runs per layout (interleaved)")
    ap.add_argument("--reduced", action="store_true")
    args = ap.parse_args()
    isa = _core.cpu_features()["isa"]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, isa {isa}, "
          f"{args.threads} threads; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}; "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'model':<16} {'nchw ms':>8} {'auto ms':>8} {'nhwc ms':>8} {'auto/nchw':>9} "
          f"{'nhwc/nchw':>9} {'auto convs':>10} {'transposes':>10} {'kernels':>11} {'max rel':>8}")
    for name in args.models:
        z = zoo.get(name, reduced=args.reduced)
        path = str(zoo.export_onnx(name, reduced=args.reduced))
        feeds = [x.numpy() for x in z.example_inputs]
        ms = {m: df.compile(path, threads=args.threads, layout=m) for m in MODES}
        ref = _first(ms["nchw"](*feeds))
        rel = max(float(np.max(np.abs(_first(ms[m](*feeds)) - ref)) / (np.max(np.abs(ref)) + 1e-30))
                  for m in MODES)
        t = {m: [] for m in MODES}
        for _ in range(2):
            for m in MODES:
                ms[m](*feeds)
        for _ in range(args.repeat):
            for m in MODES:
                s = time.perf_counter()
                ms[m](*feeds)
                t[m].append((time.perf_counter() - s) * 1e3)
        med = {m: statistics.median(t[m]) for m in MODES}
        lay = ms["auto"].stats["layout"]
        kernels = "/".join(str(ms[m].stats["kernels_after"]) for m in MODES)
        print(f"{name:<16} {med['nchw']:>8.2f} {med['auto']:>8.2f} {med['nhwc']:>8.2f} "
              f"{med['auto'] / med['nchw']:>9.3f} {med['nhwc'] / med['nchw']:>9.3f} "
              f"{lay['convs_nhwc']:>10} {lay['transposes_in'] + lay['transposes_out']:>10} "
              f"{kernels:>11} {rel:>8.1e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
