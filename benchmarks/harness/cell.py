"""One cell of the harness, run in a fresh subprocess:  python cell.py SPEC.json

``kind == "reference"``: build the model, run PyTorch eager on its example inputs, save
inputs and outputs (``inputs.npz``, ``reference.npz``), export ONNX, count ONNX and ATen
operators.  ``kind == "framework"``: prepare one framework at one thread count, check its
outputs against the reference, time it.  The result is written as JSON to
``spec["result_path"]`` and printed as the last stdout line, prefixed with ``@@CELL@@``.
Thread counts are set by the parent through the environment (OMP_NUM_THREADS and friends)
before this process starts, and by each framework's own knob in ``frameworks.py``.
"""
from __future__ import annotations

import json
import os
import pathlib
import sys
import time
import traceback

MARKER = "@@CELL@@"
_HERE = pathlib.Path(__file__).resolve().parent
_REPO = _HERE.parent.parent
for p in (str(_REPO), str(_REPO / "benchmarks")):
    if p not in sys.path:
        sys.path.insert(0, p)


def _status_mb() -> dict[str, float]:
    out = {}
    try:
        for line in open("/proc/self/status"):
            if line.startswith(("VmHWM:", "VmRSS:")):
                k, v = line.split(":", 1)
                out[k] = round(int(v.split()[0]) / 1024.0, 1)
    except OSError:
        pass
    return out


def _short(e: BaseException, limit: int = 300) -> str:
    msg = " ".join(str(e).split())
    s = f"{type(e).__name__}: {msg}" if msg else type(e).__name__
    return s if len(s) <= limit else s[: limit - 3] + "..."


# Detections whose reference scores differ by at most this much may come out in either
# order: such a gap is within the rounding differences of two correct fp32 implementations
# (OpenVINO's Mask R-CNN lists two detections 6e-7 apart the other way round).
TIE_TOL = 1e-5


def _tie_permutation(outs, refs, names, rtol: float, atol: float):
    """For detection outputs (one named "scores" or "*_scores", ranked): a permutation p with outs[.][p[i]]
    matching refs[.][i] for every row i, moving only rows whose reference scores are within
    TIE_TOL of each other; None if there is none."""
    import numpy as np

    named = [k for k, nm in enumerate(names) if nm == "scores" or str(nm).endswith("_scores")]
    if len(named) != 1 or len(names) != len(refs):
        return None
    scores = np.asarray(refs[named[0]], np.float64).reshape(-1)
    n = scores.size
    rows = [k for k, r in enumerate(refs) if np.ndim(r) >= 1 and np.shape(r)[0] == n
            and np.shape(outs[k]) == np.shape(r)]
    if not rows or any(np.shape(outs[k])[0] != n for k in rows):
        return None
    o64 = [np.asarray(outs[k], np.float64).reshape(n, -1) for k in rows]
    r64 = [np.asarray(refs[k], np.float64).reshape(n, -1) for k in rows]
    tol = [max(rtol * float(np.max(np.abs(r))) if r.size else 0.0, atol) for r in r64]

    def same(i: int, j: int) -> bool:
        return all(float(np.max(np.abs(o[j] - r[i]), initial=0.0)) <= t
                   for o, r, t in zip(o64, r64, tol))

    perm = list(range(n))
    for i in range(n):
        if same(i, i):
            continue
        near = [j for j in range(n) if j != i and abs(scores[j] - scores[i]) <= TIE_TOL and same(i, j)]
        if not near:
            return None
        perm[i] = near[0]
    return perm if sorted(perm) == list(range(n)) else None


def compare(outs, refs, rtol: float, atol: float, names=None) -> dict:
    """Max abs diff and max relative error (abs diff / max|ref| of that output). With output
    names, detections listed in another order only among near-equal scores (TIE_TOL) are
    compared after putting them back in the reference's order; `reordered` says which."""
    import numpy as np

    res = _compare(outs, refs, rtol, atol)
    if res.get("correct") or not names or len(outs) != len(refs):
        return res
    perm = _tie_permutation(outs, refs, list(names), rtol, atol)
    if perm is None:
        return res
    n = len(perm)
    fixed = [np.asarray(o)[perm] if np.ndim(o) >= 1 and np.shape(o)[0] == n else o for o in outs]
    again = _compare(fixed, refs, rtol, atol)
    if not again.get("correct"):
        return res
    moved = [i for i, j in enumerate(perm) if i != j]
    again["reordered"] = (f"{len(moved)} detections with reference scores within {TIE_TOL:g} of "
                          f"each other are listed in another order (rows {moved[:8]})")
    again["error_before_reorder"] = res.get("max_rel_err")
    return again


def _compare(outs, refs, rtol: float, atol: float) -> dict:
    import numpy as np

    res = {"n_outputs": len(outs), "n_ref_outputs": len(refs)}
    if len(outs) != len(refs):
        res.update(correct=False, mismatch=f"{len(outs)} outputs, reference has {len(refs)}")
        return res
    max_abs, max_rel, per = 0.0, 0.0, []
    for i, (o, r) in enumerate(zip(outs, refs)):
        o = np.asarray(o)
        r = np.asarray(r)
        if o.shape != r.shape:
            if o.size == r.size:
                o = o.reshape(r.shape)
            else:
                res.update(correct=False, mismatch=f"output {i}: shape {o.shape} vs reference {r.shape}")
                return res
        o64 = o.astype(np.float64)
        r64 = r.astype(np.float64)
        if not np.all(np.isfinite(o64[np.isfinite(r64)])):
            res.update(correct=False, mismatch=f"output {i}: non-finite values")
            return res
        diff = float(np.max(np.abs(o64 - r64))) if o64.size else 0.0
        scale = float(np.max(np.abs(r64))) if r64.size else 0.0
        rel = diff / scale if scale > 0 else diff
        per.append({"max_abs": diff, "rel": rel, "scale": scale})
        max_abs, max_rel = max(max_abs, diff), max(max_rel, rel)
    res.update(max_abs_err=max_abs, max_rel_err=max_rel,
               correct=bool(max_rel <= rtol or max_abs <= atol), per_output=per)
    return res


def time_runs(run, warmup: int, repeat: int, budget_s: float) -> dict:
    """Median and spread of ``repeat`` timed runs after ``warmup`` runs (ms).

    Stops early once ``budget_s`` seconds of timed runs have passed (at least 3 runs); warm-up
    stops after ``budget_s / 2`` seconds (at least 1 run).
    """
    import statistics

    w0 = time.perf_counter()
    done = 0
    for done in range(1, warmup + 1):  # fewer warm-up runs for very slow cells
        run()
        if time.perf_counter() - w0 > budget_s / 2:
            break
    warmup = done if warmup else 0
    times = []
    start = time.perf_counter()
    for i in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1e3)
        if i >= 2 and time.perf_counter() - start > budget_s:
            break
    times.sort()
    q = statistics.quantiles(times, n=4, method="inclusive") if len(times) >= 2 else [times[0]] * 3
    return {"median": statistics.median(times), "p25": q[0], "p75": q[2], "min": times[0],
            "max": times[-1], "mean": statistics.fmean(times), "n": len(times), "warmup": warmup}


def run_reference(spec: dict, result: dict) -> None:
    import numpy as np
    import torch

    from harness import counting, models
    from harness.frameworks import flatten_torch

    workdir = pathlib.Path(spec["workdir"])
    celldir = pathlib.Path(spec["celldir"])

    def stage(s):
        result["stage"] = s
        (celldir / "stage").write_text(s)

    stage("load")
    torch.set_num_threads(int(spec.get("threads", 1)))
    m = models.load(spec["model"], spec["reduced"], int(spec.get("batch", 1)))
    result.update(input_names=m.input_names, output_names=m.output_names,
                  paper_layers=m.paper_layers, family=m.family,
                  input_shapes=[list(x.shape) for x in m.example_inputs],
                  input_dtypes=[str(x.dtype).replace("torch.", "") for x in m.example_inputs],
                  params=int(sum(p.numel() for p in m.module.parameters())))
    stage("eager")
    with torch.inference_mode():
        outs = flatten_torch(m.module(*m.example_inputs))
    np.savez(workdir / "inputs.npz", *[x.numpy() for x in m.example_inputs])
    np.savez(workdir / "reference.npz", *outs)
    result["n_outputs"] = len(outs)
    result["output_shapes"] = [list(o.shape) for o in outs]
    # names of the saved inputs, in order; the exporter is given these names, so the ONNX
    # graph's inputs are matched by name (it may drop an unused input)
    result["onnx_input_names"] = list(m.input_names)
    errors = {}
    stage("onnx")
    try:
        t0 = time.perf_counter()
        path = models.export_onnx(spec["model"], spec["reduced"], workdir, batch=int(spec.get("batch", 1)))
        result["onnx_export_s"] = round(time.perf_counter() - t0, 3)
        result["onnx_path"] = str(path)
        import onnx

        om = onnx.load(str(path), load_external_data=False)
        inits = {i.name for i in om.graph.initializer}
        result["onnx_graph_inputs"] = [i.name for i in om.graph.input if i.name not in inits]
        result.update(counting.onnx_op_count(om))
        del om
    except Exception as e:  # noqa: BLE001
        errors["onnx"] = _short(e)
    stage("aten")
    try:
        t0 = time.perf_counter()
        result.update(counting.aten_op_count(m.module, m.example_inputs))
        result["aten_export_s"] = round(time.perf_counter() - t0, 3)
    except Exception as e:  # noqa: BLE001
        errors["aten"] = _short(e)
    stage("work")
    if result.get("onnx_path"):
        try:  # FLOPs and compulsory bytes, for the roofline table
            from harness import roofline

            result["work"] = roofline.model_work(result["onnx_path"], [x.numpy() for x in m.example_inputs], outs)
        except Exception as e:  # noqa: BLE001
            errors["work"] = _short(e)
    result["errors"] = errors
    try:
        result["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001
        pass


def run_framework(spec: dict, result: dict) -> None:
    import numpy as np

    from harness import frameworks as fw

    workdir = pathlib.Path(spec["workdir"])
    celldir = pathlib.Path(spec["celldir"])
    celldir.mkdir(parents=True, exist_ok=True)
    ref = spec["reference"]
    with np.load(workdir / "inputs.npz") as z:
        inputs = [z[f"arr_{i}"] for i in range(len(z.files))]
    with np.load(workdir / "reference.npz") as z:
        refs = [z[f"arr_{i}"] for i in range(len(z.files))]
    ctx = fw.Context(model=spec["model"], reduced=spec["reduced"], threads=int(spec["threads"]),
                     batch=int(spec.get("batch", 1)),
                     workdir=workdir, celldir=celldir,
                     onnx_path=pathlib.Path(ref["onnx_path"]) if ref.get("onnx_path") else None,
                     inputs=inputs, onnx_input_names=list(ref.get("onnx_input_names") or []),
                     n_outputs=len(refs))
    framework = fw.FRAMEWORKS[spec["framework"]]
    result["base_rss_mb"] = _status_mb().get("VmRSS")
    try:
        prep = framework.prepare(ctx)
    finally:
        result["stage"] = ctx.stage
        if ctx.info:
            result["info"] = ctx.info
    result.update(kernels=prep.kernels, compile_s=None if prep.compile_s is None else round(prep.compile_s, 4),
                  details=prep.details)
    result["stage"] = "run"
    outs = prep.run()
    result["stage"] = "compare"
    names = list(ref.get("output_names") or [])
    result.update(compare(outs, refs, float(spec["rtol"]), float(spec["atol"]), names))
    result["stage"] = "time"
    result["latency_ms"] = time_runs(prep.run, int(spec["warmup"]), int(spec["repeat"]),
                                     float(spec["budget_s"]))
    # check again after the timed runs: catches state that drifts between runs
    result["stage"] = "recheck"
    again = compare(prep.run(), refs, float(spec["rtol"]), float(spec["atol"]), names)
    result["max_rel_err_last_run"] = again.get("max_rel_err")
    if not again.get("correct"):
        result["correct"] = False
        result.setdefault("mismatch", "last run: " + str(again.get("mismatch") or
                                                        f"max rel err {again.get('max_rel_err'):.2e}"))
    result["stage"] = "done"


def main(argv: list[str]) -> int:
    spec = json.loads(pathlib.Path(argv[1]).read_text())
    result: dict = {"kind": spec["kind"], "model": spec["model"], "framework": spec.get("framework"),
                    "threads": spec.get("threads"), "status": "error", "pid": os.getpid()}
    t0 = time.perf_counter()
    try:
        if spec["kind"] == "reference":
            run_reference(spec, result)
        else:
            run_framework(spec, result)
        result["status"] = "ok" if result.get("correct", True) else "wrong"
    except BaseException as e:  # noqa: BLE001 - report every failure as the cell's reason
        from harness.frameworks import NotAvailable

        result["status"] = "n/a" if isinstance(e, NotAvailable) else "error"
        result["reason"] = str(e) if isinstance(e, NotAvailable) else _short(e)
        result["traceback"] = traceback.format_exc()[-4000:]
    result["cell_s"] = round(time.perf_counter() - t0, 3)
    result["peak_rss_mb"] = _status_mb().get("VmHWM")
    text = json.dumps(result, default=str)
    if spec.get("result_path"):
        pathlib.Path(spec["result_path"]).write_text(text)
    sys.stdout.flush()
    print(MARKER + text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
