"""Fusion plans drawn with Graphviz's `dot` (issue 16): operators in boxed clusters per fused
block, coloured by the block's mapping type, or, for large models, one node per block with its
operators in the tooltip and the bytes of every tensor that crosses blocks (memory traffic) on
the edges, drawn heavier the more bytes they carry. Model-supplied names are escaped."""
from __future__ import annotations

import math
import shutil
import subprocess
from typing import Any

import numpy as np

from dnnfusion.errors import Error
from dnnfusion.viz.figure import SvgFigure

# One fixed palette for the five mapping types (fill colours of the clusters / block nodes).
PALETTE = {"One-to-One": "#c7e9c0", "One-to-Many": "#fee6ce", "Many-to-Many": "#fcbba1",
           "Reorganize": "#c6dbef", "Shuffle": "#dadaeb"}


def _dot(source: str) -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise Error("drawing a plan needs Graphviz's `dot` (Debian/Ubuntu: apt-get install graphviz)")
    r = subprocess.run([exe, "-Tsvg"], input=source, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise Error(f"Graphviz failed: {r.stderr.strip()[:500]}")
    return r.stdout


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _nbytes(v: Any) -> int:
    if any(isinstance(d, str) for d in v.shape):
        return 0
    return int(np.prod(v.shape, dtype=np.int64)) * np.dtype(_np_dtype(v.dtype)).itemsize


def _np_dtype(d: str) -> str:
    return {"f32": "float32", "f64": "float64", "f16": "float16", "i64": "int64", "i32": "int32",
            "i16": "int16", "i8": "int8", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
            "bool": "bool"}.get(d, "float32")


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} KB"


def blocks_dot(plan: Any) -> str:
    """One node per block (its operators in the tooltip); edges labelled with the bytes that
    go through memory between blocks."""
    lines = ['digraph plan {', '  rankdir=TB;', '  node [shape=box, style="rounded,filled", fontname="Helvetica"];']
    producer = {v.id: b.id for b in plan.blocks for v in b.outputs}
    for b in plan.blocks:
        ops = [n.op for n in b.nodes]
        head = ops[0] if len(ops) == 1 else f"{ops[0]} .. {ops[-1]}"
        tip = _esc(", ".join(f"{n.name} ({n.op})" for n in b.nodes))[:4000]
        lines.append(f'  b{b.id} [label="block {b.id}: {len(ops)} ops\\n{_esc(head)}", tooltip="{tip}", '
                     f'fillcolor="{PALETTE.get(b.fused_type, "#ffffff")}"];')
    for b in plan.blocks:
        into: dict[int, int] = {}
        for v in b.inputs:
            if v.id in producer and producer[v.id] != b.id:
                into[producer[v.id]] = into.get(producer[v.id], 0) + _nbytes(v)
        for src, n in into.items():
            width = 1 + math.log10(max(n, 1)) / 2
            lines.append(f'  b{src} -> b{b.id} [label="{_size(n)}", penwidth={width:.1f}];')
    lines.append("}")
    return "\n".join(lines)


def draw_plan(obj: Any, level: str = "auto") -> SvgFigure:
    """A fusion plan (or a compiled model's) as SVG. ``level``: ``ops`` (every operator, boxed
    per block), ``blocks`` (one node per block), ``auto`` (ops up to 150 operators)."""
    plan = getattr(obj, "plan", obj)
    if level not in ("auto", "ops", "blocks"):
        raise ValueError(f"level must be 'auto', 'ops' or 'blocks', got {level!r}")
    n_ops = sum(len(b.nodes) for b in plan.blocks)
    if level == "auto":
        level = "ops" if n_ops <= 150 else "blocks"
    return SvgFigure(_dot(plan.to_dot() if level == "ops" else blocks_dot(plan)))
