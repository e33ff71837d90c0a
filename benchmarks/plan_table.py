"""Layer counts of the paper's Table 4 kind, planner against planner, on the zoo.

For each model: operators and FLOPs before and after rewriting (paper §4.2), then kernels
after fusion and intermediate bytes removed for each planner (paper §4.3), and whether
executing each plan block by block in the NumPy reference gives the unfused graph's
outputs. Counts are taken at the paper's input sizes; the block-by-block check runs at
the zoo's reduced sizes (the reference interpreter is NumPy, so full-size R-CNNs would take
minutes each) unless --check-full is given.

    python benchmarks/plan_table.py [--models a,b] [--no-check] [--check-full]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import dnnfusion as df
from dnnfusion import zoo

PLANNERS = ("none", "patterns", "tvm", "dp", "dnnfusion")


def import_model(name: str, reduced: bool) -> tuple[df.ECG, str, list[np.ndarray]]:
    """The ECG of a zoo model: through torch.export where it works (ATen keeps
    BatchNormalization, as the paper's counts do), else through its ONNX export."""
    z = zoo.get(name, reduced=reduced)
    feeds = [t.numpy() for t in z.example_inputs]
    try:
        return df.load(z.module, z.example_inputs), "torch.export", feeds
    except df.Error:
        return df.load(zoo.export_onnx(name, reduced=reduced)), "onnx", feeds


def check_plans(g: df.ECG, feeds: list[np.ndarray]) -> dict[str, str]:
    want = g.run_reference(*feeds)
    out = {}
    for planner in PLANNERS:
        got = df.plan.plan(g, planner=planner).run_reference(*feeds)
        ok = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want))
        out[planner] = "ok" if ok and len(got) == len(want) else "MISMATCH"
    return out


def measure(name: str, check: bool, check_full: bool) -> dict:
    t0 = time.perf_counter()
    g, frontend, _ = import_model(name, reduced=False)
    g2, report = df.rewrite.rewrite(g)
    row = {"model": name, "frontend": frontend,
           "ops_before": report.operators_before, "ops_after_rewrite": report.operators_after,
           "flops_before": report.flops_before, "flops_after_rewrite": report.flops_after,
           "kernels": {}, "bytes_removed": {}}
    for planner in PLANNERS:
        p = df.plan.plan(g2, planner=planner)
        row["kernels"][planner] = p.stats["kernels_after"]
        row["bytes_removed"][planner] = p.stats["intermediate_bytes_removed"]
    if check:
        if check_full:
            gc, feeds = g2, [t.numpy() for t in zoo.get(name).example_inputs]
        else:
            small, _, feeds = import_model(name, reduced=True)
            gc, _ = df.rewrite.rewrite(small)
        row["block_by_block"] = check_plans(gc, feeds)
        # The rewritten graph itself must agree with the original (within rounding).
        if not check_full:
            base = small.run_reference(*feeds)
            new = gc.run_reference(*feeds)
            row["rewrite_max_rel_err"] = max(
                float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-30))
                for a, b in zip(new, base) if a.dtype.kind == "f")
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def print_table(rows: list[dict]) -> None:
    head = (f"{'model':<16}{'ops':>6}{'->rw':>6}{'GFLOP':>9}{'->rw':>9}  "
            + "".join(f"{p:>10}" for p in PLANNERS) + f"{'MB removed (dnnf)':>19}  check")
    print(head)
    print("-" * len(head))
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<16} error: {r['error']}")
            continue
        checks = r.get("block_by_block", {})
        bad = [p for p, v in checks.items() if v != "ok"]
        check = ("all ok" if checks and not bad else ("MISMATCH: " + ",".join(bad)) if bad else "-")
        print(f"{r['model']:<16}{r['ops_before']:>6}{r['ops_after_rewrite']:>6}"
              f"{r['flops_before'] / 1e9:>9.2f}{r['flops_after_rewrite'] / 1e9:>9.2f}  "
              + "".join(f"{r['kernels'][p]:>10}" for p in PLANNERS)
              + f"{r['bytes_removed']['dnnfusion'] / 1e6:>19.1f}  {check}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(zoo.list()))
    ap.add_argument("--no-check", action="store_true", help="skip block-by-block execution")
    ap.add_argument("--check-full", action="store_true", help="check at full size (slow)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    rows = []
    for name in args.models.split(","):
        print(f"[{time.strftime('%H:%M:%S')}] {name} ...", file=sys.stderr, flush=True)
        try:
            rows.append(measure(name, not args.no_check, args.check_full))
        except Exception as e:  # noqa: BLE001 - one model failing must not stop the table
            rows.append({"model": name, "error": f"{type(e).__name__}: {str(e)[:200]}"})
    print_table(rows)
    os.makedirs(args.out, exist_ok=True)
    path = Path(args.out) / f"plan_table_{time.strftime('%Y%m%d_%H%M%S')}.json"
    path.write_text(json.dumps(rows, indent=1))
    print(f"\nwritten {path}")
    worse = [r["model"] for r in rows if "kernels" in r and
             r["kernels"]["dnnfusion"] > min(r["kernels"]["tvm"], r["kernels"]["patterns"])]
    if worse:
        print(f"dnnfusion gives more kernels than tvm or patterns on: {', '.join(worse)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
