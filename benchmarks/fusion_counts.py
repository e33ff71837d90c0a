"""Fusion counts of the 18 zoo models, measured from the generated code (no C++ compile):
operators before and after rewriting, the dnnfusion plan's blocks, then what the generated CPU
code does per inference: kernels run, passes over memory (loop nests, blocked transposes,
anchor calls, output copies) and intermediate bytes written (stores to the arena and block
scratch). Yellow cells by the analytic estimate unless --profile-db is given.

    python benchmarks/fusion_counts.py                  # full-size models
    python benchmarks/fusion_counts.py --reduced --planner none
"""

from __future__ import annotations

import argparse
import json
import sys

import dnnfusion as df
from dnnfusion import _core, rewrite
from dnnfusion.zoo import registry


def counts(name: str, reduced: bool, planner: str, profile_db: str) -> dict:
    ecg = df.load(str(registry.export_onnx(name, reduced=reduced)))
    before = len(ecg)
    ecg, _ = rewrite.rewrite(ecg)
    ecg, _ = rewrite.select_layout(ecg, "auto")
    plan = df.plan.plan(ecg, planner=planner, profile_db=profile_db)
    c = _core.generate_cpu(ecg.graph, plan, "scalar").counts
    return {"model": name, "operators": before, "after_rewrite": len(ecg), "plan_blocks": len(plan.blocks),
            **c}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reduced", action="store_true")
    ap.add_argument("--planner", default="dnnfusion")
    ap.add_argument("--profile-db", default="", help="a profiling database (default: none)")
    ap.add_argument("--models", default=",".join(registry.list()))
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'model':<16} {'ops':>5} {'rewritten':>9} {'blocks':>6} {'kernels':>7} {'passes':>6} "
          f"{'intermediate MB':>15}")
    for name in args.models.split(","):
        r = counts(name, args.reduced, args.planner, args.profile_db)
        rows.append(r)
        print(f"{name:<16} {r['operators']:>5} {r['after_rewrite']:>9} {r['plan_blocks']:>6} {r['kernels']:>7} "
              f"{r['passes']:>6} {r['intermediate_bytes_written'] / 1e6:>15.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
