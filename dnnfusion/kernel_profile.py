"""The per-kernel timing table of :meth:`dnnfusion.compiler.CompiledModel.profile`."""

from __future__ import annotations


class KernelProfile:
    """Per-kernel median times of a :meth:`CompiledModel.profile` run: ``rows`` (one dict per
    kernel in execution order: function, block, stages, ms), ``total_ms``, and ``top(n)``."""

    def __init__(self, rows: list[dict], repeat: int, threads: int):
        self.rows = rows
        self.repeat = repeat
        self.threads = threads

    @property
    def total_ms(self) -> float:
        return sum(r["ms"] for r in self.rows)

    def top(self, n: int = 10) -> list[dict]:
        return sorted(self.rows, key=lambda r: -r["ms"])[:n]

    def table(self, n: int | None = 20) -> str:
        total = self.total_ms or 1.0
        rows = self.top(n) if n else self.rows
        lines = [f"{len(self.rows) - 1} kernels, {self.total_ms:.3f} ms in all (median of "
                 f"{self.repeat} runs, {self.threads} threads)"
                 + (f"; the {len(rows)} slowest:" if n else ":"),
                 f"{'kernel':<16} {'block':>5} {'ms':>9} {'share':>6}  stages"]
        for r in rows:
            stages = "; ".join(r["stages"])
            if len(stages) > 90:
                stages = stages[:87] + "..."
            lines.append(f"{r['function']:<16} {r['block']:>5} {r['ms']:>9.3f} "
                         f"{100 * r['ms'] / total:>5.1f}%  {stages}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


__all__ = ["KernelProfile"]
