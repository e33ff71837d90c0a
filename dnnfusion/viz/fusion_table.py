"""The 5x5 mapping-type fusion table (paper Section 4.2, Table 3) drawn from the C++ table, so the
picture cannot drift from what the planner decides."""
from __future__ import annotations

from html import escape

from dnnfusion.plan import fusion_table
from dnnfusion.viz.figure import SvgFigure

# Fill per decision colour the C++ table reports (green fuse, yellow profile, red no fusion).
_FILL = {"green": "#7fc97f", "yellow": "#fdd96a", "red": "#f0806f"}
_CELL_W, _CELL_H, _HEAD_W, _HEAD_H = 120, 44, 120, 44


def draw_fusion_table() -> SvgFigure:
    """Rows: the first operator's type; columns: the second's; each cell names the fused type
    (or the decision when nothing fuses) and carries the reason as its SVG <title> tooltip."""
    cells = fusion_table()
    types: list[str] = []
    for c in cells:
        if c["first"] not in types:
            types.append(c["first"])
    width = _HEAD_W + _CELL_W * len(types)
    height = _HEAD_H + _CELL_H * len(types) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">']
    for j, t in enumerate(types):
        x = _HEAD_W + j * _CELL_W + _CELL_W / 2
        out.append(f'<text x="{x}" y="{_HEAD_H - 14}" text-anchor="middle" '
                   f'font-weight="bold">{escape(t)}</text>')
        out.append(f'<text x="{_HEAD_W - 8}" y="{_HEAD_H + j * _CELL_H + _CELL_H / 2 + 4}" '
                   f'text-anchor="end" font-weight="bold">{escape(t)}</text>')
    for c in cells:
        i, j = types.index(c["first"]), types.index(c["second"])
        x, y = _HEAD_W + j * _CELL_W, _HEAD_H + i * _CELL_H
        fill = _FILL.get(c["color"], "#cccccc")
        label = c["fused"] if c["fused"] else c["decision"]
        out.append(f'<g><title>{escape(c["first"])} + {escape(c["second"])}: '
                   f'{escape(c["decision"])} ({escape(c["why"])})</title>'
                   f'<rect x="{x}" y="{y}" width="{_CELL_W}" height="{_CELL_H}" fill="{fill}" '
                   f'stroke="white"/><text x="{x + _CELL_W / 2}" y="{y + _CELL_H / 2 + 4}" '
                   f'text-anchor="middle">{escape(label)}</text></g>')
    out.append(f'<text x="4" y="{height - 10}">rows: first operator, columns: second; '
               'green fuse, yellow profile, red do not fuse</text></svg>')
    return SvgFigure("\n".join(out))
