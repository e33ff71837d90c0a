"""A transformer's FFN GEMMs without the transformer: a chain of MatMul + Add layers with
constant weights (768 -> 3072 -> 768, repeated), so every GEMM reads its weights from memory
as in a model at batch 1, compiled by dnnfusion and run by ONNX Runtime in one process,
interleaved round by round (the ratio taken within each round), then dnnfusion's kernels.

    python benchmarks/gemm_chain.py --rows 128 --pairs 3 --threads 2

Issue 14's item 4: the models' packed-B GEMMs against MLAS's, with nothing else in the way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness.frameworks import ort_options  # noqa: E402
from side_by_side import Side, time_rounds  # noqa: E402


def build(rows: int, pairs: int, path: str) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, cur = [], [], "x"
    for p in range(pairs):
        for j, (k, n) in enumerate(((768, 3072), (3072, 768))):
            w, b, m, a = f"w{p}_{j}", f"b{p}_{j}", f"m{p}_{j}", f"a{p}_{j}"
            inits.append(numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), w))
            inits.append(numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), b))
            nodes += [helper.make_node("MatMul", [cur, w], [m]), helper.make_node("Add", [m, b], [a])]
            cur = a
    g = helper.make_graph(nodes, "gemm_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 768])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [rows, 768])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=128, help="M: tokens")
    ap.add_argument("--pairs", type=int, default=3, help="768->3072->768 pairs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)
    import onnxruntime as ort

    import dnnfusion as df

    path = os.path.join(tempfile.gettempdir(), f"dnnf-gemm-chain-{args.rows}-{args.pairs}.onnx")
    build(args.rows, args.pairs, path)
    x = np.random.default_rng(1).standard_normal((args.rows, 768)).astype(np.float32)
    m = df.compile(path, threads=args.threads)
    s = ort.InferenceSession(path, ort_options(ort, args.threads), providers=["CPUExecutionProvider"])
    ref = s.run(None, {"x": x})[0]
    err = float(np.abs(np.asarray(m(x=x)) - ref).max() / np.abs(ref).max())
    flops = 2.0 * args.rows * 768 * 3072 * 2 * args.pairs
    sides = [Side("dnnfusion", lambda: m(x=x), None), Side("ort", lambda: s.run(None, {"x": x}), None)]
    t = time_rounds(sides, budget=0.0, min_rounds=args.rounds, block=3)
    ratios = [a / b for a, b in zip(t["dnnfusion"], t["ort"])]
    print(f"# {args.rows} rows, {args.pairs} pairs of 768x3072 / 3072x768 MatMul + Add, {args.threads} thread(s), "
          f"ISA {m.stats.get('isa', '?')}, load {os.getloadavg()}; max rel err vs ORT {err:.1e}")
    for key, v in t.items():
        print(f"{key:10s} {flops / statistics.median(v) / 1e6:6.1f} GFLOP/s (best round {flops / min(v) / 1e6:.1f})")
    print(f"dnnfusion / ort: {statistics.median(ratios):.3f} (median of {args.rounds} per-round ratios)")
    for r in m.profile(x=x, repeat=5).rows[:4]:
        print(f"  {r['ms']:7.3f} ms  {' | '.join(r['stages'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
