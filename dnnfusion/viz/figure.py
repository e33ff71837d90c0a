"""An SVG picture that shows inline in Jupyter and saves to a file."""
from __future__ import annotations

import os


class SvgFigure:
    """Holds finished SVG text; Jupyter renders it through _repr_svg_."""

    def __init__(self, svg: str):
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path: str | os.PathLike) -> None:
        # Only SVG for now: PNG would need a rasterizer this package does not depend on yet.
        if not str(path).lower().endswith(".svg"):
            raise ValueError(f"SvgFigure.save writes SVG only; got {str(path)!r}")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg)
