"""Differential fuzzing of ``compile(..., dynamic=True)``'s runtime sequence length (issue 17,
:mod:`dnnfusion.sequence`): random ONNX graphs over an input ``x: float[batch, seq, D]`` built
from the operators whose padding the proof decides (Softmax and reductions along the sequence or
not, MatMul contracting it, shifts by Slice and Pad, CumSum both ways, Gather of a first or last
position, Reshape and Transpose around it, LayerNormalization, Concat), compiled once with
``dynamic=True`` at length ``MAX_S`` and called at several shorter batches and lengths, each
call against ONNX Runtime on the same file. A graph the proof refuses compiles a
specialization per length instead; either way every call must match. A mismatch is a wrong
proof: the padding leaked into a valid position.

    python -m dnnfusion.testing.sequence_fuzz --cases 200 [--seed 1]

prints a line per case and the counts (padded, specialized, calls both refused, mismatches,
errors); exit status 1
on any mismatch or error. tests/test_dynamic_sequence.py runs a few seeds."""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import warnings

import numpy as np

D = 6
MAX_S = 7
CALLS = [(1, MAX_S), (2, 4), (1, 1), (3, 2), (1, 5)]


def case_model(rng: random.Random) -> tuple[bytes, list[str]]:
    """A random graph (ONNX bytes, opset 18) and the operators it chose."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes, inits, chosen = [], [], []
    vals = [("x", "bsd")]  # (name, kind): bsd [B,S,D], bss [B,S,S], bd1 [B,1,D]
    count = [0]

    def fresh(base: str) -> str:
        count[0] += 1
        return f"{base}{count[0]}"

    def const(arr: np.ndarray) -> str:
        n = fresh("c")
        inits.append(nh.from_array(np.asarray(arr), n))
        return n

    def node(op: str, ins: list[str], kind: str, **attrs) -> None:
        out = fresh(op.lower())
        nodes.append(h.make_node(op, ins, [out], **attrs))
        vals.append((out, kind))
        chosen.append(op + ("" if not attrs else str(sorted(attrs.items()))))

    def pick(kind: str) -> str:
        return rng.choice([n for n, k in vals if k == kind])

    nrng = np.random.default_rng(rng.randrange(1 << 30))
    for _ in range(rng.randint(2, 6)):
        kinds = {k for _, k in vals}
        choice = rng.choice(["unary", "binary", "softmax", "reduce", "attend", "shift", "cumsum", "layernorm",
                             "reshape", "concat", "gather", "linear"])
        x = pick("bsd")
        if choice == "unary":
            node(rng.choice(["Tanh", "Sigmoid", "Relu", "Abs"]), [x], "bsd")
        elif choice == "binary":
            other = pick("bsd") if rng.random() < 0.6 else (pick("bd1") if "bd1" in kinds else const(
                nrng.standard_normal(D).astype(np.float32)))
            node(rng.choice(["Add", "Mul", "Sub"]), [x, other], "bsd")
        elif choice == "softmax":
            if "bss" in kinds and rng.random() < 0.4:
                node("Softmax", [pick("bss")], "bss", axis=rng.choice([1, 2, -1]))
            else:
                node(rng.choice(["Softmax", "LogSoftmax"]), [x], "bsd", axis=rng.choice([1, 2]))
        elif choice == "reduce":
            op = rng.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceLogSumExp"])
            if rng.random() < 0.3:  # over the sequence and D together: [B, 1, 1], broadcast back
                node(op, [x, const(np.array([1, 2], np.int64))], "b11", keepdims=1)
                node("Add", [pick("bsd"), vals[-1][0]], "bsd")
            else:
                node(op, [x, const(np.array([1], np.int64))], "bd1", keepdims=1)
        elif choice == "attend":
            t = fresh("t")
            nodes.append(h.make_node("Transpose", [x], [t], perm=[0, 2, 1]))
            node("MatMul", [x, t], "bss")  # [B,S,S], then contract over the keys
            s = vals[-1][0]
            node("MatMul", [s, pick("bsd")], "bsd")
            vals[-1] = (vals[-1][0], "bsd")
        elif choice == "shift":
            end = rng.random() < 0.5
            sl = fresh("sl")
            starts, ends = ([1], [2 ** 62]) if end else ([0], [-1])
            nodes.append(h.make_node("Slice", [x, const(np.array(starts, np.int64)), const(np.array(ends, np.int64)),
                                               const(np.array([1], np.int64))], [sl]))
            pads = [0, 0, 0, 0, 1, 0] if end else [0, 1, 0, 0, 0, 0]
            node("Pad", [sl, const(np.array(pads, np.int64)), const(np.array(rng.choice([0.0, 0.5]), np.float32))],
                 "bsd")
        elif choice == "cumsum":
            node("CumSum", [x, const(np.array(rng.choice([1, 2]), np.int64))], "bsd", reverse=rng.choice([0, 1]))
        elif choice == "layernorm":
            node("LayerNormalization", [x, const(np.ones(D, np.float32)), const(np.zeros(D, np.float32))], "bsd",
                 axis=-1)
        elif choice == "reshape":
            r, t = fresh("r"), fresh("t")
            nodes.append(h.make_node("Reshape", [x, const(np.array([0, 0, 2, D // 2], np.int64))], [r]))
            nodes.append(h.make_node("Transpose", [r], [t], perm=[0, 2, 1, 3]))
            u = fresh("u")
            nodes.append(h.make_node("Transpose", [t], [u], perm=[0, 2, 1, 3]))
            node("Reshape", [u, const(np.array([0, 0, D], np.int64))], "bsd")
        elif choice == "concat":  # joined along D, then projected back to D columns
            c = fresh("cat")
            nodes.append(h.make_node("Concat", [x, pick("bsd")], [c], axis=2))
            node("MatMul", [c, const(nrng.standard_normal((2 * D, D)).astype(np.float32) * 0.5)], "bsd")
        elif choice == "gather":
            node("Gather", [x, const(np.array(rng.choice([0, -1, 1]), np.int64))], "bd", axis=1)
            g = vals[-1][0]
            u = fresh("u")
            nodes.append(h.make_node("Unsqueeze", [g, const(np.array([1], np.int64))], [u]))
            vals[-1] = (u, "bd1")
        elif choice == "linear":
            node("MatMul", [x, const(nrng.standard_normal((D, D)).astype(np.float32) * 0.5)], "bsd")
    outs = [vals[-1]] + ([rng.choice(vals[1:-1])] if len(vals) > 2 and rng.random() < 0.5 else [])
    shapes = {"bsd": ["batch", "seq", D], "bss": ["batch", "seq", "seq"], "bd1": ["batch", 1, D],
              "b11": ["batch", 1, 1]}
    graph = h.make_graph(nodes, "seqfuzz", [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", D])],
                         [h.make_tensor_value_info(n, T.FLOAT, shapes[k]) for n, k in outs], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString(), chosen


def run_case(i: int, seed: int) -> dict:
    """Compiles case i once with dynamic=True and checks every call of CALLS against ONNX
    Runtime (a length ONNX Runtime refuses, dnnfusion must refuse with a dnnfusion.Error);
    returns {"padded": bool, "why": ..., "worst": max relative error, "ops": ..., "refused":
    calls both refused}."""
    import onnxruntime as ort

    import dnnfusion as df

    rng = random.Random(seed * 1_000_003 + i)
    data, ops = case_model(rng)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    xrng = np.random.default_rng(i)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = df.compile(data, [xrng.standard_normal((1, MAX_S, D)).astype(np.float32)], dynamic=True, threads=1)
    seq = m.stats["dynamic"].get("sequence", {})
    rows = seq.get("runtime_rows", {}).get("stages", 0)  # stages stopping at the call's length
    worst, refused = 0.0, 0
    for b, s in CALLS:
        x = xrng.standard_normal((b, s, D)).astype(np.float32)
        try:
            want = sess.run(None, {"x": x})
        except Exception:  # noqa: BLE001 -- ONNX Runtime refuses this length (x[:, 1] of one position):
            try:  # then dnnfusion must refuse it too, with its own error, not return numbers
                m.run(x)
            except df.Error:
                refused += 1
                continue
            return {"padded": seq.get("runtime"), "why": seq.get("why"), "ops": ops, "worst": float("inf"),
                    "at": (b, s), "refused": "ONNX Runtime only"}
        got = m.run(x)
        for g, w in zip(got, want):
            if g.shape != w.shape:
                return {"padded": seq.get("runtime"), "why": seq.get("why"), "ops": ops, "worst": float("inf"),
                        "at": (b, s), "shape": (g.shape, w.shape)}
            scale = max(1.0, float(np.abs(w).max()))
            worst = max(worst, float(np.abs(g - w).max()) / scale)
    return {"padded": seq.get("runtime"), "why": seq.get("why"), "ops": ops, "worst": worst, "refused": refused,
            "rows": rows}


TOL = 1e-4


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    # the programs' arenas and outputs start as NaN every run: an uncomputed padded row
    # (seq_extents) that reached a valid output would show
    os.environ.setdefault("DNNF_POISON_ARENA", "1")
    counts = {"padded": 0, "specialized": 0, "with runtime rows": 0, "calls refused by both": 0, "mismatches": 0,
              "errors": 0}
    t0 = time.time()
    for i in range(args.cases):
        try:
            r = run_case(i, args.seed)
        except Exception as e:  # noqa: BLE001 -- counted and printed: a valid graph must compile
            counts["errors"] += 1
            print(f"case {i}: ERROR {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        counts["padded" if r["padded"] else "specialized"] += 1
        counts["with runtime rows"] += bool(r.get("rows"))
        counts["calls refused by both"] += r.get("refused", 0) if isinstance(r.get("refused"), int) else 0
        bad = not r["worst"] <= TOL
        counts["mismatches"] += bad
        print(f"case {i}: {'padded' if r['padded'] else 'specialized'} rows {r.get('rows', 0)} worst {r['worst']:.1e}"
              f"{' MISMATCH' if bad else ''} {r['ops']}" + ("" if r["padded"] else f" ({r['why']})"), flush=True)
    print(f"{args.cases} cases, seed {args.seed}, {time.time() - t0:.0f} s: " +
          ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
    return 1 if counts["mismatches"] or counts["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
