"""Tables (text) and CSV files from the harness's results."""
from __future__ import annotations

import csv
import io
import math
from typing import Any

from . import roofline

SHORT = {"error": "ERR", "timeout": "TIMEOUT", "n/a": "n/a", "skipped": "skip"}


def _cell_map(cells: list[dict]) -> dict[tuple, dict]:
    return {(c["model"], c["framework"], c["threads"]): c for c in cells}


def _fmt_ms(x: float) -> str:
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _status_text(c: dict | None) -> str:
    if c is None:
        return "-"
    return SHORT.get(c["status"], c["status"])


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    def line(r):
        return "  ".join(str(v).rjust(w) if i else str(v).ljust(w) for i, (v, w) in enumerate(zip(r, widths)))
    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def kernels_of(cmap: dict, model: str, fw: str, threads: list[int]) -> str:
    """Kernel count (from the lowest thread count that produced one), else the status."""
    cells = [cmap.get((model, fw, t)) for t in threads]
    for c in cells:
        if c is not None and c.get("kernels") is not None:
            mark = "" if c["status"] == "ok" else ("!" if c["status"] == "wrong" else "*")
            return f"{c['kernels']}{mark}"
    return _status_text(next((c for c in cells if c is not None), None))


def counts_rows(models: list[str], refs: dict, cmap: dict, fws: list[str], threads: list[int]):
    rows = []
    for m in models:
        r = refs.get(m, {})
        row = [m, str(r.get("paper_layers") or "-"), str(r.get("onnx_ops", "ERR" if r else "-")),
               str(r.get("aten_ops", "ERR" if r else "-"))]
        row += [kernels_of(cmap, m, fw, threads) for fw in fws]
        rows.append(row)
    return rows


def latency_cell(c: dict | None) -> str:
    if c is None:
        return "-"
    lat = c.get("latency_ms")
    if not lat:
        return _status_text(c)
    s = f"{_fmt_ms(lat['median'])} [{_fmt_ms(lat['p25'])}-{_fmt_ms(lat['p75'])}]"
    return s + (" WRONG" if c["status"] == "wrong" else "")


def roofline_table(result: dict, t: int, cmap: dict | None = None) -> str:
    """Per model: its work, this machine's bound at t threads, and each framework's achieved
    GFLOP/s with its % of the bound (bound ms / median ms); '' when the run has no roofline."""
    roof = roofline.roof_for(result, t)
    if not roof:
        return ""
    cmap = cmap if cmap is not None else _cell_map(result["cells"])
    fws = result["frameworks"]
    rows = []
    for m in result["models"]:
        work = (result["references"].get(m) or {}).get("work")
        b = roofline.bound_ms(work, roof)
        if b is None:
            rows.append([m, "-", "-", "-"] + ["-"] * len(fws))
            continue
        compute = work["flops"] / (roof["peak_gflops"] * 1e6) >= b
        row = [m, f"{work['flops'] / 1e9:.3g}", f"{work['compulsory_bytes'] / 2**20:.0f}",
               f"{_fmt_ms(b)} {'C' if compute else 'M'}"]
        for fw in fws:
            c = cmap.get((m, fw, t))
            lat = (c or {}).get("latency_ms")
            if not lat or c["status"] != "ok":
                row.append(_status_text(c) if c is not None and not lat else "-")
                continue
            ms = lat["median"]
            row.append(f"{work['flops'] / (ms * 1e6):.0f} ({100 * b / ms:.0f}%)")
        rows.append(row)
    head = (f"\nRoofline, {t} thread{'s' if t > 1 else ''}: this machine's {roof['peak_gflops']:.0f} GFLOP/s "
            f"FMA peak and {roof['bandwidth_gbs']:.1f} GB/s triad bandwidth (measured in this run); "
            "bound = max(FLOPs/peak, compulsory bytes/bandwidth), C compute- or M memory-bound; "
            "per framework: achieved GFLOP/s (% of the bound = bound ms / median ms)\n\n")
    return head + table(["model", "GFLOP", "MB", "bound ms"] + fws, rows) + "\n"


def ratio_table(result: dict, t: int, cmap: dict | None = None) -> str:
    """dnnfusion's median latency over each other framework's, per model at t threads, and
    their geometric mean over the models where both cells are correct (n says how many):
    below 1, dnnfusion is faster. '' when the run has no dnnfusion column or nothing to
    compare it with."""
    cmap = cmap if cmap is not None else _cell_map(result["cells"])
    fws = result["frameworks"]
    ours = [fw for fw in fws if fw.startswith("dnnfusion")]
    others = [fw for fw in fws if not fw.startswith("dnnfusion") and fw != "selftest_raise"]
    pairs = [(d, o) for d in ours for o in others]
    if not pairs:
        return ""

    def ms(m: str, fw: str) -> float | None:
        c = cmap.get((m, fw, t))
        lat = (c or {}).get("latency_ms")
        return lat["median"] if lat and c["status"] == "ok" else None

    rows, logs = [], {p: [] for p in pairs}
    for m in result["models"]:
        row = [m]
        for d, o in pairs:
            a, b = ms(m, d), ms(m, o)
            if a is None or b is None:
                row.append("-")
                continue
            row.append(f"{a / b:.2f}")
            logs[(d, o)].append(math.log(a / b))
        rows.append(row)
    rows.append(["geomean (n)"] + [f"{math.exp(sum(v) / len(v)):.2f} ({len(v)})" if v else "-"
                                   for v in logs.values()])
    short = {"dnnfusion": "dnnf", "dnnfusion_avx2": "dnnf-avx2"}
    head = (f"\nRelative time, {t} thread{'s' if t > 1 else ''}: dnnfusion's median / the other "
            "framework's (below 1: dnnfusion faster); geomean over the models where both are correct\n\n")
    return head + table(["model"] + [f"{short.get(d, d)}/{o}" for d, o in pairs], rows) + "\n"


def render(result: dict) -> str:
    models = result["models"]
    fws = result["frameworks"]
    threads = result["threads"]
    refs = result["references"]
    cmap = _cell_map(result["cells"])
    out = io.StringIO()
    w = out.write
    w("Operators before fusion (ONNX ops, core-ATen ops) and kernels after fusion per framework\n")
    w("(! = output wrong, * = counted but the cell failed later; see README for definitions)\n\n")
    paper = "paper(full size)" if result["args"].get("reduced") else "paper"
    w(table(["model", paper, "ONNX", "ATen"] + fws, counts_rows(models, refs, cmap, fws, threads)))
    w("\n")
    batch = int(result["args"].get("batch") or 1)
    for t in threads:
        w(f"\nLatency, {t} thread{'s' if t > 1 else ''}{f', batch {batch}' if batch != 1 else ''}: "
          f"median [p25-p75] ms\n\n")
        rows = [[m] + [latency_cell(cmap.get((m, fw, t))) for fw in fws] for m in models]
        w(table(["model"] + fws, rows))
        w("\n")
    for t in threads:
        w(ratio_table(result, t, cmap))
    for t in threads:
        w(roofline_table(result, t, cmap))
    t0 = threads[0]
    shared = (result.get("args") or {}).get("kernel_cache")
    w(f"\nCompile/session-creation time s / peak RSS MB ({t0} thread{'s' if t0 > 1 else ''})"
      + (f"; dnnfusion's from the shared kernel cache {shared} (warm, not cold)" if shared else "") + "\n\n")
    rows = []
    for m in models:
        row = [m]
        for fw in fws:
            c = cmap.get((m, fw, t0))
            if c is None or c.get("compile_s") is None:
                row.append(_status_text(c))
            else:
                cs = c["compile_s"]
                row.append(f"{cs:.2g} / {c.get('peak_rss_mb') or 0:.0f}" if cs < 10
                           else f"{cs:.0f} / {c.get('peak_rss_mb') or 0:.0f}")
        rows.append(row)
    w(table(["model"] + fws, rows))
    w("\n")
    warm_fws = [fw for fw in fws if any(((cmap.get((m, fw, t0)) or {}).get("details") or {}).get("compile_warm_s")
                                        is not None for m in models)]
    if warm_fws:
        w(f"\nWarm compile s (the same model compiled again in the cell, from the caches its cold "
          f"compile above filled; '(N profiling)': seconds spent measuring yellow pairs the cold "
          f"compile's budget left; {t0} thread{'s' if t0 > 1 else ''})\n\n")
        rows = []
        for m in models:
            row = [m]
            for fw in warm_fws:
                d = ((cmap.get((m, fw, t0)) or {}).get("details") or {})
                ws = d.get("compile_warm_s")
                ps = d.get("compile_warm_profile_s") or 0.0
                row.append("-" if ws is None else f"{ws:.2g}" + ("" if d.get("compile_warm_cache_hit") else " (miss)")
                           + (f" ({ps:.2g} profiling)" if ps >= 0.01 else ""))
            rows.append(row)
        w(table(["model"] + warm_fws, rows))
        w("\n")
    w(f"\nCorrectness vs PyTorch eager: max relative error ({t0} thread{'s' if t0 > 1 else ''}; "
      f"tolerance rtol={result['args']['rtol']})\n\n")
    rows = []
    for m in models:
        row = [m]
        for fw in fws:
            c = cmap.get((m, fw, t0))
            if c is None or c.get("max_rel_err") is None:
                row.append("WRONG" if c is not None and c["status"] == "wrong" else _status_text(c))
            else:
                row.append(f"{c['max_rel_err']:.1e}" + ("" if c.get("correct") else " WRONG")
                           + (" (ties reordered)" if c.get("reordered") else ""))
        rows.append(row)
    w(table(["model"] + fws, rows))
    w("\n")
    fails = {}
    for c in result["cells"]:
        if c["status"] in ("error", "timeout", "n/a", "wrong", "skipped"):
            reason = c.get("reason") or c.get("mismatch") or (
                f"max rel err {c.get('max_rel_err'):.2e}" if c.get("max_rel_err") is not None else "")
            key = (c["framework"], c["status"], f"[{c.get('stage', '')}] {reason}")
            fails.setdefault(key, []).append(f"{c['model']}/t{c['threads']}")
    for m, r in refs.items():
        for what, err in (r.get("errors") or {}).items():
            fails.setdefault(("reference", f"{what} count failed", err), []).append(m)
        if r.get("status") not in (None, "ok"):
            fails.setdefault(("reference", r["status"], r.get("reason", "")), []).append(m)
    if fails:
        w("\nCells without a result (framework, status, reason: cells)\n")
        for (fw, st, reason), where in sorted(fails.items()):
            where_s = ", ".join(where[:6]) + (f" (+{len(where) - 6})" if len(where) > 6 else "")
            w(f"  {fw:11s} {st:8s} {reason}: {where_s}\n")
    return out.getvalue()


CELL_COLUMNS = ["model", "framework", "threads", "status", "stage", "reason", "kernels", "onnx_ops",
                "aten_ops", "compile_s", "median_ms", "p25_ms", "p75_ms", "min_ms", "max_ms", "n_runs",
                "peak_rss_mb", "base_rss_mb", "max_abs_err", "max_rel_err", "correct", "cell_s",
                "loadavg"]


def write_cells_csv(path, result: dict) -> None:
    refs = result["references"]
    with open(path, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(CELL_COLUMNS)
        for c in result["cells"]:
            lat = c.get("latency_ms") or {}
            r = refs.get(c["model"], {})
            row: dict[str, Any] = dict(c, onnx_ops=r.get("onnx_ops"), aten_ops=r.get("aten_ops"),
                                       median_ms=lat.get("median"), p25_ms=lat.get("p25"),
                                       p75_ms=lat.get("p75"), min_ms=lat.get("min"),
                                       max_ms=lat.get("max"), n_runs=lat.get("n"),
                                       loadavg=" ".join(map(str, c.get("loadavg") or [])))
            wr.writerow(["" if row.get(k) is None else row.get(k) for k in CELL_COLUMNS])


def write_counts_csv(path, result: dict) -> None:
    fws = result["frameworks"]
    cmap = _cell_map(result["cells"])
    with open(path, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["model", "paper_layers", "onnx_ops", "onnx_nodes_total", "aten_ops",
                     "aten_ops_all"] + [f"kernels_{fw}" for fw in fws])
        for m in result["models"]:
            r = result["references"].get(m, {})
            row = [m, r.get("paper_layers"), r.get("onnx_ops"), r.get("onnx_nodes_total"),
                   r.get("aten_ops"), r.get("aten_ops_all")]
            for fw in fws:
                k = next((cmap[(m, fw, t)].get("kernels") for t in result["threads"]
                          if (m, fw, t) in cmap and cmap[(m, fw, t)].get("kernels") is not None), None)
                row.append(k)
            wr.writerow(["" if v is None else v for v in row])
