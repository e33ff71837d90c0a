"""Elementwise math throughput (issue 14 part 5): a chain of transcendental operators over a
few thousand floats, dnnfusion's one fused loop against ONNX Runtime's and OpenVINO's
kernels, on the same ONNX file in one process, timed in interleaved rounds (median of each
round's calls, the rounds in every order of the frameworks: benchmarks/side_by_side.py).
Reported: microseconds per call (Python call included) and nanoseconds per element per
operator.

    python benchmarks/elementwise_bench.py                       # Tanh,Sigmoid,Exp,Erf x2 over 8192
    python benchmarks/elementwise_bench.py --ops Exp --repeat 8 --n 8192 --threads 1,2
    python benchmarks/elementwise_bench.py --isolate             # a process per framework

A measurement, not a test: the machine and the load average are printed beside it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import side_by_side as sbs  # noqa: E402
from harness.machine import cpu_info, loadavg  # noqa: E402


def chain_model(ops: list[str], repeat: int, n: int, path: str) -> int:
    """x [1, n] through `ops` `repeat` times, one operator feeding the next; returns the
    number of operators."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes, x = [], "x"
    for _ in range(repeat):
        for op in ops:
            nodes.append(h.make_node(op, [x], [f"t{len(nodes)}"]))
            x = nodes[-1].output[0]
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [1, n])],
                     [h.make_tensor_value_info(x, T.FLOAT, [1, n])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return len(nodes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default="Tanh,Sigmoid,Exp,Erf")
    ap.add_argument("--repeat", type=int, default=2, help="times the op list repeats along the chain")
    ap.add_argument("--n", type=int, default=8192, help="floats per tensor")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--frameworks", default="dnnfusion,ort,openvino")
    ap.add_argument("--budget", type=float, default=8.0, help="seconds of interleaved rounds per thread count")
    ap.add_argument("--block", type=int, default=20, help="timed calls per framework per round")
    ap.add_argument("--isolate", action="store_true",
                    help="a worker process per framework (side_by_side.py's --isolate): in one process a "
                         "runtime's worker threads, spinning after its calls, take the second core from the "
                         "next framework's threads, so 2-thread cells there measure the neighbours too")
    args = ap.parse_args(argv)
    ops = [o for o in args.ops.split(",") if o]
    cpu = cpu_info()
    print(f"# {cpu.get('model_name')}, {cpu.get('logical_cpus')} CPUs, load {loadavg()}")
    with tempfile.TemporaryDirectory(prefix="dnnf-ew-") as tmp:
        path = str(Path(tmp) / "chain.onnx")
        n_ops = chain_model(ops, args.repeat, args.n, path)
        x = ((np.random.default_rng(0).random((1, args.n)) - 0.5) * 2).astype(np.float32)
        print(f"# {n_ops} operators ({','.join(ops)} x{args.repeat}) over {args.n} floats"
              + (", a process per framework" if args.isolate else ", one process"))
        for t in (int(s) for s in args.threads.split(",")):
            fws = args.frameworks.split(",")
            if args.isolate:
                sides = [sbs.RemoteSide(f, path, ["x"], [x], t) for f in fws]
                sides = [s.ready() for s in sides]
            else:
                sides = [sbs.build(f, path, ["x"], [x], t) for f in fws]
            try:
                rounds = sbs.time_rounds(sides, args.budget, 30, args.block)
            finally:
                for s in sides:
                    s.close()
            for s in sides:
                us = statistics.median(rounds[s.name]) * 1e3
                print(f"threads={t} {s.name:10s} {us:9.1f} us/call  {us * 1e3 / (args.n * n_ops):6.3f} ns/element/op"
                      f"  ({len(rounds[s.name])} rounds)")
    print(f"# load after: {loadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
