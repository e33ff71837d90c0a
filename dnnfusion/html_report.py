"""One self-contained HTML page about a compiled model (`python -m dnnfusion report`, issue 16):
summary, the fusion plan drawn, explain(), the per-kernel profile and latency beside the
references. Pictures are data: URIs and there is no script or network access; every string
from the model goes through html.escape."""
from __future__ import annotations

import base64
import datetime
import html
import platform
from typing import Any

_STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}pre{background:#f6f6f6;padding:8px;overflow:auto;max-height:30em}
img{max-width:100%;border:1px solid #eee}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.5em}"""


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _img(svg: str, alt: str) -> str:
    # An <img> never runs scripts in the SVG it shows, whatever the model's names contain.
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img alt="{_esc(alt)}" src="data:image/svg+xml;base64,{data}">'


def _table(headers: list[str] | None, rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:
    head = "<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in headers) + "</tr>" if headers else ""
    body = "".join("<tr>" + "".join(f'<td{" class=n" if i in numeric else ""}>{_esc(v)}</td>'
                                    for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table>{head}{body}</table>"


def _plan_picture(m: Any) -> str:
    from dnnfusion.errors import Error
    from dnnfusion.viz import draw_plan

    try:
        # Past ~60 operators the operator-level drawing is taller than a page: one node a block.
        level = "ops" if sum(len(b.nodes) for b in m.plan.blocks) <= 60 else "blocks"
        return _img(draw_plan(m, level=level).svg, "the fusion plan")
    except Error as e:  # no Graphviz: the page says so instead of failing
        return f"<p>The plan picture needs Graphviz: {_esc(e)}</p>"


def render(m: Any, title: str, checks: list[str], latencies: dict[str, float], profile: Any,
           notes: list[str] = ()) -> str:
    """The page for compiled model `m`: `latencies` in seconds per framework, `profile` a
    KernelProfile, `checks` one line per reference it was compared with."""
    from dnnfusion.viz import plot_kernel_profile

    s = m.stats
    summary = [["operators before / after rewrites", f"{s['operators_before']} / {s['operators_after_rewrite']}"],
               ["plan blocks", s["plan_blocks"]], ["kernels run", s["kernels"]],
               ["passes over memory", s["passes"]],
               ["intermediate bytes written", f"{s['intermediate_bytes_written']:,}"],
               ["planner, ISA, threads", f"{s['planner']}, {s['isa']}, {s['threads']}"],
               ["compile", f"{s['compile_seconds']:.2f} s" + (" (kernel cache)" if s["cache_hit"] else "")]]
    base = latencies.get("dnnfusion")
    lat_rows = [[name, f"{sec * 1e3:.3f}", f"{sec / base:.2f}x" if base else "-"]
                for name, sec in latencies.items()]
    prof_rows = [[r["function"], r["block"], f"{r['ms']:.4f}", "; ".join(r["stages"])] for r in profile.top(30)]
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        # No network, no script: the page is a document, whatever it is opened with.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "img-src data:; style-src 'unsafe-inline'\">",
        f"<title>dnnfusion report: {_esc(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>dnnfusion report: {_esc(title)}</h1>",
        f"<p>{_esc(when)} on {_esc(platform.node())} ({_esc(platform.machine())}).</p>",
        "<h2>Summary</h2>", _table(None, summary),
        "<h2>Correctness</h2><ul>" + "".join(f"<li>{_esc(c)}</li>" for c in checks) + "</ul>",
        f"<h2>Latency</h2><p>Median of repeated runs, {s['threads']} thread"
        f"{'s' if s['threads'] != 1 else ''}.</p>",
        _table(["framework", "ms", "time / dnnfusion's"], lat_rows, {1, 2}),
        "<h2>Fusion plan</h2>", _plan_picture(m),
        "<h2>Per-kernel profile</h2>", _img(plot_kernel_profile(profile).svg, "per-kernel time"),
        _table(["kernel", "block", "ms", "operators"], prof_rows, {1, 2}),
        "<h2>Why pairs were fused or not (explain)</h2>", f"<pre>{_esc(m.explain())}</pre>",
    ]
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_esc(n)}</li>" for n in notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)
