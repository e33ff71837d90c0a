"""GridSample side by side: dnnfusion's generated kernel (irregular.h grid_sample_f32), ONNX
Runtime and PyTorch eager (``torch.nn.functional.grid_sample``) on the same inputs, in one run.

    python benchmarks/grid_sample_bench.py                 # 2 threads
    python benchmarks/grid_sample_bench.py --threads 1,2 --reps 40

Shapes: a flow warp of a 64-channel 128x128 map (random grid: every point anywhere, the
worst case for the caches), a batch of 4 with 256 channels at 32x32 sampled at 64x64 (random),
an image (3 channels, 512x512) under a smooth affine grid; each in the three modes, zeros
padding, align_corners 0. Every cell is the median of ``--reps`` timed calls, in 3 rounds of
blocks (a 0.3 s pause, two warm-up calls each: ONNX Runtime's and torch's threads spin for a while
after a call, which slowed whatever ran next by up to 3x), each framework first in one round; the machine, ISA, thread count and the
environment variables that move timings are printed first. Results are checked against each
other before timing (max abs difference printed)."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np


def _model(xs, gs, mode):
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph([h.make_node("GridSample", ["x", "g"], ["y"], mode=mode)], "grid_sample",
                     [h.make_tensor_value_info("x", T.FLOAT, xs), h.make_tensor_value_info("g", T.FLOAT, gs)],
                     [h.make_tensor_value_info("y", T.FLOAT, xs[:2] + gs[1:3])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 20)]).SerializeToString()


def _grid(kind, gs, rng):
    if kind == "random":
        return rng.uniform(-1.1, 1.1, gs).astype(np.float32)
    n, ho, wo, _ = gs  # a rotation by 10 degrees, scaled 1.05: neighbours stay neighbours
    ys, xs = np.meshgrid(np.linspace(-1, 1, ho), np.linspace(-1, 1, wo), indexing="ij")
    a = np.deg2rad(10.0)
    gx = 1.05 * (np.cos(a) * xs - np.sin(a) * ys)
    gy = 1.05 * (np.sin(a) * xs + np.cos(a) * ys)
    return np.broadcast_to(np.stack([gx, gy], -1), gs).astype(np.float32).copy()


CASES = [((1, 64, 128, 128), (1, 128, 128, 2), "random"), ((4, 256, 32, 32), (4, 64, 64, 2), "random"),
         ((1, 3, 512, 512), (1, 512, 512, 2), "affine")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="2")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    import onnxruntime as ort
    import torch

    import dnnfusion as df
    from dnnfusion import _core

    feats = _core.cpu_features()
    env = {k: v for k, v in os.environ.items() if k.startswith(("DNNF_", "OMP_", "OPENBLAS_", "MKL_"))}
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, ISA {feats['isa']}, env {env}, "
          f"load {os.getloadavg()}")
    print(f"# onnxruntime {ort.__version__}, torch {torch.__version__}; median of {args.reps} calls in 3 rounds of blocks (ms)")
    rng = np.random.default_rng(0)
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        print(f"## {threads} thread(s)")
        print(f"{'x':18s} {'grid':18s} {'points':7s} {'mode':8s} {'dnnfusion':>10s} {'ort':>9s} {'torch':>9s} "
              f"{'/ort':>6s} {'/torch':>7s}  max |diff|")
        for xs, gs, kind in CASES:
            x = rng.standard_normal(xs).astype(np.float32)
            g = _grid(kind, gs, rng)
            for mode in ("linear", "nearest", "cubic"):
                m = _model(xs, gs, mode)
                c = df.compile(m, threads=threads)
                so = ort.SessionOptions()
                so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
                s = ort.InferenceSession(m, so, providers=["CPUExecutionProvider"])
                tx, tg = torch.from_numpy(x), torch.from_numpy(g)
                tmode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
                calls = {"dnnfusion": lambda: c(x=x, g=g), "ort": lambda: s.run(None, {"x": x, "g": g})[0],
                         "torch": lambda: torch.nn.functional.grid_sample(tx, tg, mode=tmode, align_corners=False)}
                outs = {k: np.asarray(f()) for k, f in calls.items()}
                diff = max(float(np.abs(outs["dnnfusion"] - outs[k]).max()) for k in ("ort", "torch"))
                times = {k: [] for k in calls}
                names = list(calls)
                for r in range(3):  # rounds of blocks, each framework first in one
                    for k in names[r:] + names[:r]:
                        time.sleep(0.3)  # the previous framework's spinning threads go to sleep
                        calls[k]()
                        calls[k]()
                        for _ in range(max(1, args.reps // 3)):
                            t0 = time.perf_counter()
                            calls[k]()
                            times[k].append((time.perf_counter() - t0) * 1e3)
                med = {k: statistics.median(v) for k, v in times.items()}
                print(f"{str(xs):18s} {str(gs):18s} {kind:7s} {mode:8s} {med['dnnfusion']:10.3f} {med['ort']:9.3f} "
                      f"{med['torch']:9.3f} {med['dnnfusion'] / med['ort']:6.2f} {med['dnnfusion'] / med['torch']:7.2f}"
                      f"  {diff:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
