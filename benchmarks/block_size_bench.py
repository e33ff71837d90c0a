"""Does a CPU block need a size limit? (issue 13 part 6.) A synthetic "wide" block: x times W
constants, W Tanh, then a balanced tree of W-1 Adds, so W values are live at once in the
fused loop (register pressure) and the loop body grows with W (code size). Each W is
compiled fused (the dnnfusion planner: one loop nest) and unfused (the `none` planner: one
kernel per operator), both with the same flags, and timed in interleaved rounds (median).
Reported: C++ compile seconds (cold kernel cache), milliseconds per run, and nanoseconds per
operator per element. A fused block that spilled badly enough to need a limit would show
its per-operator cost rising above the unfused one.

    python benchmarks/block_size_bench.py [--widths 2 8 32 128 512] [--threads 1] [--rounds 9]

A measurement, not a test: the load average is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dnnfusion as df  # noqa: E402
from dnnfusion import _core  # noqa: E402
from harness.machine import cpu_info, loadavg  # noqa: E402

SHAPE = (256, 1024)


def wide(w: int):
    """The wide block as an ONNX model: 3W - 1 operators."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes, inits = [], []
    for i in range(w):
        inits.append(nh.from_array(np.array(0.5 + i / w, np.float32), f"c{i}"))
        nodes.append(h.make_node("Mul", ["x", f"c{i}"], [f"m{i}"]))
        nodes.append(h.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
    cur, k = [f"t{i}" for i in range(w)], 0
    while len(cur) > 1:
        nxt = []
        for a, b in zip(cur[0::2], cur[1::2]):
            nodes.append(h.make_node("Add", [a, b], [f"s{k}"]))
            nxt.append(f"s{k}")
            k += 1
        if len(cur) % 2:
            nxt.append(cur[-1])
        cur = nxt
    g = h.make_graph(nodes, "wide", [h.make_tensor_value_info("x", T.FLOAT, SHAPE)],
                     [h.make_tensor_value_info(cur[0], T.FLOAT, SHAPE)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[2, 8, 32, 128, 512])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args(argv)
    os.environ["DNNF_CACHE_DIR"] = tempfile.mkdtemp(prefix="dnnf-block-bench-")  # cold compiles
    os.environ.pop("DNNF_PRELUDE_CACHE_DIR", None)
    isa = _core.cpu_features()["isa"]
    cpu = cpu_info()
    print(f"machine: {cpu['model_name']}, {cpu['logical_cpus']} CPUs, isa {isa}, {args.threads} thread(s), "
          f"median of {args.rounds} interleaved rounds, x {SHAPE}; load {loadavg()}")
    print(f"{'W':>5} {'ops':>5} {'kernels f/u':>12} {'cc s f/u':>12} {'ms fused':>9} {'ms unfused':>10} "
          f"{'ns/op/elem f/u':>16} {'max |diff|':>10}")
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    for w in args.widths:
        model = wide(w)
        ms = {p: df.compile(model, threads=args.threads, optimize=False, planner=p)
              for p in ("dnnfusion", "none")}
        outs = {p: m(x) for p, m in ms.items()}
        diff = float(np.max(np.abs(outs["dnnfusion"] - outs["none"])))
        times: dict[str, list[float]] = {p: [] for p in ms}
        for _ in range(args.rounds):
            for p, m in ms.items():
                t0 = time.perf_counter()
                m(x)
                times[p].append(time.perf_counter() - t0)
        med = {p: float(np.median(t)) for p, t in times.items()}
        ops = 3 * w - 1
        per = {p: med[p] * 1e9 / ops / x.size for p in med}
        f, u = ms["dnnfusion"].stats, ms["none"].stats
        print(f"{w:>5} {ops:>5} {f['kernels']:>5}/{u['kernels']:<6} {f['cc_seconds']:>5.2f}/{u['cc_seconds']:<6.2f} "
              f"{med['dnnfusion'] * 1e3:>9.2f} {med['none'] * 1e3:>10.2f} "
              f"{per['dnnfusion']:>7.3f}/{per['none']:<8.3f} {diff:>10.2e}", flush=True)
    print(f"load after: {loadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
