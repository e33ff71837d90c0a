"""Charts over the benchmark harness's results (benchmarks/results/*.json) and over a compiled
model's profile: layer counts (paper §6.2's fused-layer table), speed-ups (Figure 6's style),
per-kernel time and roofline position. Each returns an SvgFigure drawn with matplotlib."""
from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Any, Sequence

from dnnfusion.viz.figure import SvgFigure

# One colour per framework, the same in every chart (harness names, benchmarks/README.md).
FRAMEWORK_COLORS = {"onnx ops": "#9e9e9e", "eager": "#8c6d31", "ort": "#1f77b4",
                    "inductor": "#ff7f0e", "tvm": "#9467bd", "openvino": "#17becf",
                    "dnnfusion": "#2ca02c"}
# The baseline planners (dnnfusion.plan.PLANNERS), alone or beside the frameworks.
for _p, _c in {"none": "#d62728", "patterns": "#e377c2", "dp": "#7f7f7f"}.items():
    FRAMEWORK_COLORS[_p] = FRAMEWORK_COLORS[f"planner {_p}"] = _c
FRAMEWORK_COLORS["planner tvm"] = "#bcbd22"


def load_results(path: str | os.PathLike) -> dict:
    """A harness result file (the JSON benchmarks/run.py writes)."""
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    for key in ("models", "frameworks", "threads", "cells", "references"):
        if key not in result:
            raise ValueError(f"{path}: not a harness result (no {key!r})")
    return result


def latest_results(directory: str | os.PathLike, framework: str = "dnnfusion",
                   threads: int | None = None) -> Path:
    """The newest full-size (not --reduced) batch-1 result file under `directory` in which
    `framework` produced a right answer (at `threads`, if given); file names start with their
    time stamp. Runs at another batch (``--batch``) answer another question and are skipped."""
    for path in sorted(Path(directory).glob("2*.json"), reverse=True):
        try:
            r = load_results(path)
        except (ValueError, json.JSONDecodeError):
            continue
        if r.get("args", {}).get("reduced") or int(r.get("args", {}).get("batch") or 1) != 1:
            continue
        if any(c["framework"] == framework and c["status"] == "ok"
               and (threads is None or c["threads"] == threads) for c in r["cells"]):
            return path
    raise FileNotFoundError(f"no full-size result with a right {framework} cell in {directory}")


def result_origin(result: dict) -> str:
    """Which machine and when a result was measured, for a chart's or notebook's caption."""
    meta = result.get("meta", {})
    cpu = meta.get("cpu", {})
    runs = meta.get("merged_from") or [meta]
    dates = sorted({str(r.get("started", "?"))[:10] for r in runs})
    return (f"{cpu.get('model_name', 'unknown CPU')}, {cpu.get('logical_cpus', '?')} logical CPUs, "
            f"measured {', '.join(dates)}")


def _cell(result: dict, model: str, fw: str, threads: int) -> dict | None:
    for c in result["cells"]:
        if c["model"] == model and c["framework"] == fw and c["threads"] == threads:
            return c
    return None


def kernel_counts(result: dict) -> dict[str, dict[str, int | None]]:
    """model -> {"onnx ops": operators before fusion, framework: kernels after} (None where the
    cell counted nothing); a framework's count comes from its lowest thread count that has one."""
    out: dict[str, dict[str, int | None]] = {}
    for m in result["models"]:
        row: dict[str, int | None] = {"onnx ops": result["references"].get(m, {}).get("onnx_ops")}
        for fw in result["frameworks"]:
            ks = [c.get("kernels") for t in sorted(result["threads"])
                  if (c := _cell(result, m, fw, t)) is not None]
            row[fw] = next((k for k in ks if k is not None), None)
        out[m] = row
    return out


def median_ms(result: dict, model: str, fw: str, threads: int) -> float | None:
    """The median latency of a cell whose output was right, else None."""
    c = _cell(result, model, fw, threads)
    if c is None or c.get("status") != "ok" or not c.get("latency_ms"):
        return None
    return float(c["latency_ms"]["median"])


def speedups(result: dict, threads: int, over: str = "dnnfusion") -> dict[str, dict[str, float]]:
    """framework -> {model: its latency / `over`'s latency} for the cells both measured. Other
    builds of dnnfusion in the run (``dnnfusion_avx2``: the AVX2 code on an AVX-512 machine)
    are not peers and are left out."""
    out: dict[str, dict[str, float]] = {}
    for fw in result["frameworks"]:
        if fw == over or (over.startswith("dnnfusion") and fw.startswith("dnnfusion")):
            continue
        for m in result["models"]:
            a, b = median_ms(result, m, fw, threads), median_ms(result, m, over, threads)
            if a and b:
                out.setdefault(fw, {})[m] = a / b
    return out


def geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _svg(fig: Any) -> SvgFigure:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    # No date and a fixed id salt, so a redrawn chart of the same data is byte-identical.
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return SvgFigure(buf.getvalue())


def _plain(fmt: str) -> Any:
    """Tick labels as plain numbers (2x, 100), not powers (2^1, 10^2)."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: fmt.format(v))


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display here; Jupyter shows the SVG through _repr_svg_
    matplotlib.rcParams["svg.hashsalt"] = "dnnfusion"
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    import matplotlib.pyplot as plt

    return plt


def _grouped_barh(table: dict[str, dict[str, float | None]], series: Sequence[str] | None, title: str,
                  xlabel: str, unit: str) -> SvgFigure:
    """Grouped horizontal bars per row of `table` (log scale), one per series; a series without
    a value for a row has no bar."""
    plt = _pyplot()
    models = list(table)
    series = list(series or dict.fromkeys(k for row in table.values() for k in row))
    fig, ax = plt.subplots(figsize=(8, 0.1 * len(models) * len(series) + 1.5))
    h = 0.8 / len(series)
    for i, s in enumerate(series):
        ys = [j + i * h for j in range(len(models))]
        ax.barh(ys, [table[m].get(s) or 0 for m in models], height=h, label=s,
                color=FRAMEWORK_COLORS.get(s))
    ax.set_yticks([j + 0.4 - h / 2 for j in range(len(models))], models)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_plain("{:g}" + unit))
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return _svg(fig)


def plot_layer_counts(counts: dict[str, dict[str, int | None]], title: str = "Layer counts",
                      series: Sequence[str] | None = None) -> SvgFigure:
    """Grouped horizontal bars per model, one per series (e.g. "onnx ops" before fusion, then
    each framework's or planner's kernels after; fewer is better), as kernel_counts() returns
    them; a series without a count for a model has no bar."""
    return _grouped_barh(counts, series, title,
                         "operators before / kernels after fusion (log scale; no bar = no count)", "")


def plot_latencies(latencies: dict[str, dict[str, float | None]], title: str = "Latency",
                   series: Sequence[str] | None = None) -> SvgFigure:
    """Grouped horizontal bars of milliseconds per model, one per series (a framework, a target
    or a device; shorter is better), log scale; a series without a time for a model has no bar."""
    return _grouped_barh(latencies, series, title, "milliseconds per inference (log scale; no bar = not run)",
                         " ms")


def plot_speedups(result: dict, threads: int, over: str = "dnnfusion",
                  title: str | None = None) -> SvgFigure:
    """dnnfusion's speed-up over each framework per model (log scale; >1 = dnnfusion faster),
    with each framework's geometric mean drawn as a dashed line and given in the legend."""
    plt = _pyplot()
    sp = speedups(result, threads, over)
    if not sp:
        raise ValueError(f"no model has both an {over} and a peer latency at {threads} threads")
    models = [m for m in result["models"] if any(m in v for v in sp.values())]
    fws = list(sp)
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(models) + 2), 4))
    w = 0.8 / len(fws)
    for i, fw in enumerate(fws):
        xs = [j + i * w for j, m in enumerate(models) if m in sp[fw]]
        vals = [sp[fw][m] for m in models if m in sp[fw]]
        g = geomean(vals)
        color = FRAMEWORK_COLORS.get(fw)
        ax.bar(xs, vals, width=w, color=color, label=f"vs {fw} (geomean {g:.2f}x, {len(vals)} models)")
        ax.axhline(g, color=color, linestyle="--", linewidth=1)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(_plain("{:g}x"))
    ax.yaxis.set_minor_formatter(_plain(""))
    ax.set_xticks([j + 0.4 - w / 2 for j in range(len(models))], models, rotation=60, ha="right")
    ax.set_ylabel(f"speed-up of {over} (latency ratio, log scale)")
    ax.set_title(title or f"{threads} thread{'s' if threads > 1 else ''}: {result_origin(result)}",
                 fontsize=9)
    ax.legend(fontsize=8)
    return _svg(fig)


def plot_kernel_profile(profile: Any, n: int = 20, title: str | None = None) -> SvgFigure:
    """The n slowest kernels of a CompiledModel.profile() run, slowest on top, each labelled
    with its function and the operators it fuses."""
    plt = _pyplot()
    rows = profile.top(n)
    if not rows:
        raise ValueError("the profile has no kernels")
    labels = []
    for r in rows:
        stages = "; ".join(r["stages"])
        labels.append(f"{r['function']}: {stages[:50] + '...' if len(stages) > 53 else stages}")
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1.2))
    ax.barh(range(len(rows)), [r["ms"] for r in rows], color=FRAMEWORK_COLORS["dnnfusion"])
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"median ms per kernel ({profile.repeat} runs, {profile.threads} threads; "
                  f"all kernels: {profile.total_ms:.3f} ms)")
    ax.set_title(title or f"The {len(rows)} slowest of {len(profile.rows)} kernels", fontsize=9)
    return _svg(fig)


def roofline_inputs(result: dict, threads: int | None = None) -> tuple[float, float] | None:
    """(peak GFLOP/s, memory bandwidth GB/s) that the harness measured on the result's machine
    for ``threads`` threads (default: the most it ran), or None when the run did not measure them."""
    per = ((result.get("meta") or {}).get("roofline") or {}).get("per_threads") or {}
    if per:
        t = str(threads if threads is not None else max(int(k) for k in per))
        roof = per.get(t) or {}
        peak, bw = roof.get("peak_gflops"), roof.get("bandwidth_gbs")
    else:
        cpu = (result.get("meta") or {}).get("cpu", {})
        peak, bw = cpu.get("peak_gflops"), cpu.get("bandwidth_gbs")
    return (float(peak), float(bw)) if peak and bw else None


def roofline_points(result: dict, framework: str = "dnnfusion", threads: int | None = None) -> list[dict]:
    """plot_roofline's points for one framework: each model's FLOPs and compulsory bytes (the
    harness's reference cell) with the framework's median latency at ``threads`` (default: the
    most the run used). Models without the work or an ok cell are left out."""
    t = threads if threads is not None else max(result.get("threads") or [1])
    pts = []
    for m in result.get("models", []):
        work = (result.get("references", {}).get(m) or {}).get("work")
        c = next((c for c in result.get("cells", []) if c["model"] == m and c["framework"] == framework
                  and c["threads"] == t and c.get("status") == "ok" and c.get("latency_ms")), None)
        if work and c:
            pts.append({"model": m, "flops": work["flops"], "bytes": work["compulsory_bytes"],
                        "ms": c["latency_ms"]["median"], "framework": framework})
    return pts


def plot_roofline(points: Sequence[dict], peak_gflops: float | None,
                  bandwidth_gbs: float | None, title: str | None = None) -> SvgFigure:
    """Each model's achieved GFLOP/s against its arithmetic intensity (FLOPs per byte moved),
    under the machine's compute roof and memory slope. points: dicts with model, flops, bytes,
    ms and optionally framework (colour; default dnnfusion). Without a peak and a bandwidth the chart says so instead of guessing them."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    if not (peak_gflops and bandwidth_gbs):
        ax.axis("off")
        ax.text(0.5, 0.5, "No roofline: these results carry no peak GFLOP/s\n"
                "and memory bandwidth for their machine.", ha="center", va="center")
        return _svg(fig)
    pts = [p for p in points if p["flops"] > 0 and p["bytes"] > 0 and p["ms"] > 0]
    xs = [p["flops"] / p["bytes"] for p in pts] or [1.0]
    lo, hi = min(xs + [peak_gflops / bandwidth_gbs]) / 4, max(xs + [peak_gflops / bandwidth_gbs]) * 4
    grid = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    ax.plot(grid, [min(peak_gflops, bandwidth_gbs * x) for x in grid], color="black",
            label=f"roof: {peak_gflops:.0f} GFLOP/s, {bandwidth_gbs:.0f} GB/s")
    named, labelled = set(), set()
    for p, x in zip(pts, xs):
        y = p["flops"] / (p["ms"] * 1e6)
        fw = p.get("framework", "dnnfusion")
        ax.scatter([x], [y], color=FRAMEWORK_COLORS.get(fw, "gray"), s=18,
                   label=None if fw in labelled else fw)
        labelled.add(fw)
        if p["model"] not in named:  # each model named once, at its first framework's point
            named.add(p["model"])
            ax.annotate(p["model"], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs / byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(title or "Roofline", fontsize=9)
    ax.legend(fontsize=8)
    return _svg(fig)
