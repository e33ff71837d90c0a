"""Compile every zoo model with every planner and compare with PyTorch and ONNX Runtime.

Usage::

    python -m dnnfusion.zoo.compiled_check [names...] [--planners dnnfusion,none,...]
                                           [--reduced] [--threads N]

One row per (model, planner): operators before, passes over memory of the generated code, compile seconds (cold or
from the cache), and the relative error (max abs diff / max |reference|, over all outputs)
against PyTorch eager and against ONNX Runtime. A row is OK when both are <= 1e-3 and
integer outputs are equal. Exit status 1 if any row fails.
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback

import numpy as np

from . import registry
from .check import compare_outputs

REL_TOL = 1e-3


def _rel_err(got: list, want: list) -> float:
    """Relative error over all outputs; inf when they disagree in count, shape, integer
    values or finiteness (see check.compare_outputs)."""
    _, rel, same = compare_outputs(got, want)
    return rel if same else float("inf")


def references(name: str, reduced: bool) -> tuple[str, list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """(ONNX path, example inputs, PyTorch outputs, ONNX Runtime outputs) of a zoo model."""
    import onnxruntime as ort
    import torch

    zm = registry.get(name, reduced=reduced)
    inputs = [x.numpy() for x in zm.example_inputs]
    with torch.no_grad():
        out = zm.module(*zm.example_inputs)
    ref_torch = [out.numpy()] if isinstance(out, torch.Tensor) else [t.numpy() for t in out]
    path = str(registry.export_onnx(name, reduced=reduced))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ref_ort = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})
    return path, inputs, ref_torch, ref_ort


def check(name: str, planners: list[str], *, reduced: bool = True, threads: int | None = None) -> list[dict]:
    """One row per planner (see the module docstring)."""
    from .. import compiler

    path, inputs, ref_torch, ref_ort = references(name, reduced)
    rows = []
    for planner in planners:
        row: dict = {"model": name, "planner": planner}
        try:
            t = time.perf_counter()
            cm = compiler.compile(path, inputs, planner=planner, threads=threads)
            row["compile_s"] = time.perf_counter() - t
            got = cm.run(*inputs)
            row.update(ops=cm.stats["operators_before"], kernels=cm.stats["passes"],
                       cached=cm.stats["cache_hit"], rel_torch=_rel_err(got, ref_torch),
                       rel_ort=_rel_err(got, ref_ort))
            row["ok"] = row["rel_torch"] <= REL_TOL and row["rel_ort"] <= REL_TOL
        except Exception as e:  # report and go on with the next planner
            traceback.print_exc(file=sys.stderr)
            row.update(ok=False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:150]}")
        rows.append(row)
    return rows


HEADER = (f"{'model':<16} {'planner':<10} {'ops':>5} {'passes':>7} {'compile s':>10} "
          f"{'rel vs torch':>12} {'rel vs ORT':>10} {'ok':>3}")


def fmt(row: dict) -> str:
    if "error" in row:
        return f"{row['model']:<16} {row['planner']:<10} ERROR: {row['error']}"
    cs = f"{row['compile_s']:.1f}" + (" (c)" if row["cached"] else "")
    return (f"{row['model']:<16} {row['planner']:<10} {row['ops']:>5} {row['kernels']:>7} {cs:>10} "
            f"{row['rel_torch']:>12.2e} {row['rel_ort']:>10.2e} {'OK' if row['ok'] else 'BAD':>3}")


def main(argv: list[str] | None = None) -> int:
    from .. import plan as _plan

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("names", nargs="*", help="models (default: all)")
    ap.add_argument("--planners", default=",".join(_plan.PLANNERS),
                    help="comma-separated planners (default: all)")
    ap.add_argument("--full", action="store_true", help="full-size models (default: reduced)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    names = args.names or registry.list()
    planners = [p for p in args.planners.split(",") if p]
    for n in names:
        registry._spec(n)  # fail fast on unknown names
    for p in planners:
        if p not in _plan.PLANNERS:
            ap.error(f"unknown planner {p!r}; choose from {', '.join(_plan.PLANNERS)}")
    print(f"reduced={not args.full}, planners {', '.join(planners)}; (c) = compiled object from the cache")
    print(HEADER)
    print("-" * len(HEADER), flush=True)
    rows = []
    for n in names:
        try:
            got = check(n, planners, reduced=not args.full, threads=args.threads)
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            got = [{"model": n, "planner": "-", "ok": False,
                    "error": f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"}]
        for r in got:
            print(fmt(r), flush=True)
        rows += got
    bad = sum(not r["ok"] for r in rows)
    print(f"{len(rows) - bad}/{len(rows)} OK (rel err <= {REL_TOL:g} against PyTorch and ONNX Runtime)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
