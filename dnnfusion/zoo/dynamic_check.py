"""Zoo models exported with dynamic axes, compiled once and called at other sizes.

Usage::

    python -m dnnfusion.zoo.dynamic_check [names...] [--full] [--threads N] [--dynamic-batch]

Each model is exported with its batch (and, for token inputs, sequence) axes symbolic
(:func:`registry.dynamic_axes`), compiled from its example inputs, then called at several
sizes: the example, batch 2, and for token inputs a shorter and a longer sequence. Every call
is compared with ONNX Runtime running the same dynamic file; "call s" is the first call at a
size (a specialization's compile included), "run ms" and "ORT ms" the median of 5 calls after
3 untimed ones, "progs" the programs compiled so far. A call at new sizes compiles a
specialization for them (``compile``'s dynamic shapes: ``stats["specializations"]``); with
``--dynamic-batch`` (``dynamic=True``) every batch and every sequence up to the example's runs
through one program, and a longer sequence compiles it again for that length. One row
per (model, sizes); a row is OK when the relative error is <= 1e-3 and integer outputs are
equal, n/a when ONNX Runtime refuses the size too (a model that only takes one batch, such
as the R-CNNs' detection heads). Exit status 1 if any row fails. Reduced models unless
``--full``.
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


def _resize(x: np.ndarray, batch: int, seq: int | None) -> np.ndarray:
    """x with `batch` rows (the example repeated) and, for a token input, `seq` columns
    (cut, or extended with the example's tokens; a mask extends with ones)."""
    out = np.concatenate([x] * batch, axis=0)
    if seq is not None and x.ndim == 2:
        reps = -(-seq // x.shape[1])
        out = np.concatenate([out] * reps, axis=1)[:, :seq]
    return np.ascontiguousarray(out)


def sizes_for(name: str, reduced: bool = True, dynamic_batch: bool = False) -> list[tuple[int, int | None]]:
    """(batch, sequence) sizes to call the model at; sequence None for models without tokens.
    With `dynamic_batch` (compile(..., dynamic=True)) also a batch of 3 at the example's length."""
    zm = registry.get(name, reduced=reduced)
    tokens = any(x.dim() == 2 and not x.is_floating_point() for x in zm.example_inputs)
    if not tokens:
        return [(1, None), (2, None)] + ([(3, None)] if dynamic_batch else [])
    s = int(zm.example_inputs[0].shape[1])
    return [(1, s), (2, s)] + ([(3, s)] if dynamic_batch else []) + [(1, s // 2), (2, s + s // 2)]


def _median_ms(fn, repeat: int = 5, warmup: int = 3) -> float:
    for _ in range(warmup):  # the first calls after a compile or at a new size run cold
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def check(name: str, *, reduced: bool = True, threads: int | None = None, dynamic_batch: bool = False) -> list[dict]:
    """One row per size (see the module docstring). `dynamic_batch`: compile with
    ``dynamic=True`` (every batch size through one program; only a new sequence length
    compiles again)."""
    import onnxruntime as ort

    from .. import compiler

    rows: list[dict] = []
    base = {"model": name}
    try:
        zm = registry.get(name, reduced=reduced)
        examples = [x.numpy() for x in zm.example_inputs]
        path = str(registry.export_onnx(name, reduced=reduced, dynamic=True))
        so = ort.SessionOptions()
        if threads:
            so.intra_op_num_threads = threads  # the same threads as dnnfusion's, for "ORT ms"
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        t = time.perf_counter()
        cm = compiler.compile(path, examples, threads=threads, dynamic=dynamic_batch)
        base["compile_s"] = time.perf_counter() - t
        base["axes"] = ", ".join(sorted({a for d in registry.dynamic_axes(name).values() for a in d.values()}))
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        return [dict(base, sizes="-", ok=False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:150]}")]
    for batch, seq in sizes_for(name, reduced, dynamic_batch):
        row = dict(base, sizes=f"batch {batch}" + (f", seq {seq}" if seq is not None else ""))
        feeds = [_resize(x, batch, seq if x.ndim == 2 else None) for x in examples]
        try:
            want = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), feeds)})
        except Exception as e:  # the model itself does not take this size
            row.update(ok=None, error=f"ONNX Runtime refuses it too: {str(e).splitlines()[0][:110]}")
            try:
                cm.run(*feeds)
                row["error"] += "; dnnfusion ran it"
            except Exception as ours:
                row["error"] += f"; dnnfusion: {type(ours).__name__}"
            rows.append(row)
            continue
        try:
            t = time.perf_counter()
            got = cm.run(*feeds)
            row["call_s"] = time.perf_counter() - t
            row["run_ms"] = _median_ms(lambda: cm.run(*feeds))
            row["ort_ms"] = _median_ms(lambda: sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), feeds)}))
            _, rel, same = compare_outputs(got, want)
            row.update(rel_ort=rel if same else float("inf"),
                       shapes=" ".join("x".join(map(str, np.shape(g))) for g in got),
                       specializations=len(cm.stats.get("specializations", [])),
                       compiled=_compiled(cm))
            row["ok"] = row["rel_ort"] <= REL_TOL
        except Exception as e:  # report and go on with the next size
            traceback.print_exc(file=sys.stderr)
            row.update(ok=False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:150]}")
        rows.append(row)
    return rows


def _compiled(cm) -> int:
    """Programs compiled so far: the first, each specialization, and each time dynamic=True's
    runtime sequence length grew past the longest compiled."""
    seq = cm.stats.get("dynamic", {}).get("sequence", {})
    return 1 + len(cm.stats.get("specializations", [])) + max(seq.get("compiles", 1) - 1, 0)


HEADER = (f"{'model':<16} {'dynamic axes':<16} {'sizes':<18} {'output shapes':<28} {'progs':>5} "
          f"{'call s':>7} {'run ms':>8} {'ORT ms':>8} {'rel vs ORT':>10} {'ok':>3}")


def fmt(row: dict) -> str:
    head = f"{row['model']:<16} {row.get('axes', '-'):<16} {row['sizes']:<18}"
    if "error" in row:
        return f"{head} {'n/a' if row['ok'] is None else 'ERROR'} {row['error']}"
    return (f"{head} {row['shapes'][:28]:<28} {row['compiled']:>5} {row['call_s']:>7.2f} "
            f"{row['run_ms']:>8.2f} {row['ort_ms']:>8.2f} {row['rel_ort']:>10.1e} {'yes' if row['ok'] else 'NO':>3}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="zoo models (default: all)")
    ap.add_argument("--full", action="store_true", help="full-size models (default: reduced)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="compile(..., dynamic=True): one program for every batch size")
    args = ap.parse_args(argv)
    names = args.names or registry.list()
    print(HEADER, flush=True)
    ok = True
    for name in names:
        for row in check(name, reduced=not args.full, threads=args.threads, dynamic_batch=args.dynamic_batch):
            print(fmt(row), flush=True)
            ok &= row["ok"] is not False  # None: the reference refuses the size too
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
