"""Build every zoo model, export it to ONNX and compare ONNX Runtime with PyTorch.

Usage::

    python -m dnnfusion.zoo.check [names...] [--reduced] [--opset 17]
                                  [--exporter torchscript|dynamo] [--cache-dir DIR]

Prints one row per model: input shape, parameters (M), ONNX node count, max
abs diff and relative error (max abs diff / max |PyTorch output|, over all
outputs) and whether ORT agrees (rel err <= 1e-3 and integer outputs equal).
Exit status is 1 if any model fails.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
import traceback

import numpy as np
import torch

from . import registry

REL_TOL = 1e-3


def _flat(out) -> list[torch.Tensor]:
    return [out] if isinstance(out, torch.Tensor) else [t for t in out]


def compare_outputs(got: list, want: list) -> tuple[float, float, bool]:
    """(max abs diff, relative error = max abs diff / max |want|, over all outputs; and
    whether the outputs agree in count, shapes, integer values and finiteness)."""
    max_abs, max_ref, ok = 0.0, 0.0, len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            ok = False
            continue
        if not np.issubdtype(w.dtype, np.floating):
            ok &= bool(np.array_equal(g, w))
        ok &= bool(np.isfinite(g.astype(np.float64)).all())
        if w.size:
            max_abs = max(max_abs, float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))))
            max_ref = max(max_ref, float(np.max(np.abs(w.astype(np.float64)))))
    return max_abs, max_abs / max(max_ref, 1e-12), ok


def check_one(name: str, *, reduced: bool = False, opset: int = 17, cache_dir=None,
              exporter: str = "torchscript") -> dict:
    """Run the PyTorch / ONNX Runtime comparison for one model; returns a row dict."""
    import onnx
    import onnxruntime as ort

    row: dict = {"model": name}
    zm = registry.get(name, reduced=reduced)
    row["input"] = "x".join(str(d) for d in zm.example_inputs[0].shape)
    row["params_m"] = sum(p.numel() for p in zm.module.parameters()) / 1e6
    t = time.perf_counter()
    with torch.no_grad():
        ref = _flat(zm.module(*zm.example_inputs))
    row["torch_s"] = time.perf_counter() - t
    t = time.perf_counter()
    path = registry.export_onnx(name, reduced=reduced, opset=opset, cache_dir=cache_dir,
                                exporter=exporter)
    row["export_s"] = time.perf_counter() - t
    model = onnx.load(str(path), load_external_data=False)
    row["nodes"] = len(model.graph.node)
    del model
    opts = ort.SessionOptions()
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: x.numpy() for i, x in zip(sess.get_inputs(), zm.example_inputs)}
    t = time.perf_counter()
    outs = sess.run(None, feeds)
    row["ort_s"] = time.perf_counter() - t
    row["max_abs"], row["rel"], same = compare_outputs(outs, [r.numpy() for r in ref])
    row["ok"] = same and row["rel"] <= REL_TOL
    return row


HEADER = (f"{'model':<16} {'input shape':<16} {'params(M)':>9} {'nodes':>6} {'max abs diff':>12} "
          f"{'rel err':>9} {'ORT ok':>6} {'torch s':>7} {'export s':>8} {'ort s':>6}")


def fmt(row: dict) -> str:
    if "error" in row:
        return f"{row['model']:<16} ERROR: {row['error']}"
    return (f"{row['model']:<16} {row['input']:<16} {row['params_m']:>9.2f} {row['nodes']:>6} "
            f"{row['max_abs']:>12.3e} {row['rel']:>9.2e} {str(row['ok']):>6} "
            f"{row['torch_s']:>7.2f} {row['export_s']:>8.1f} {row['ort_s']:>6.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("names", nargs="*", help="models to check (default: all)")
    ap.add_argument("--reduced", action="store_true", help="check the reduced variants")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--exporter", default="torchscript", choices=["torchscript", "dynamo"])
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args(argv)
    names = args.names or registry.list()
    for n in names:
        registry._spec(n)  # fail fast on unknown names
    print(f"torch {torch.__version__}, opset {args.opset}, exporter {args.exporter}, "
          f"reduced={args.reduced}, cache {args.cache_dir or registry.cache_dir_default()}")
    print(HEADER)
    print("-" * len(HEADER), flush=True)
    failed = 0
    for n in names:
        try:
            row = check_one(n, reduced=args.reduced, opset=args.opset,
                            cache_dir=args.cache_dir, exporter=args.exporter)
        except Exception as e:  # report and continue with the next model
            traceback.print_exc(file=sys.stderr)
            row = {"model": n, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"}
        failed += not row.get("ok", False)
        print(fmt(row), flush=True)
        gc.collect()
    print(f"{len(names) - failed}/{len(names)} models OK (rel err <= {REL_TOL:g})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
