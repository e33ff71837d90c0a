"""Python modules import each other one way (issue 15 step 1): no circle among dnnfusion's
modules, counting imports inside functions too (the package's __init__, which re-exports
the public API, is left out: every module imports `dnnfusion._core` through it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "dnnfusion"


def _modules() -> dict[str, Path]:
    mods = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _imports(mod: str, path: Path, mods: dict[str, Path]) -> set[str]:
    out = set()
    is_pkg = path.name == "__init__.py"
    for n in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(n, ast.ImportFrom):
            if n.level:
                base = mod if is_pkg else mod.rsplit(".", 1)[0]
                for _ in range(n.level - 1):
                    base = base.rsplit(".", 1)[0]
                name = base + ("." + n.module if n.module else "")
            else:
                name = n.module or ""
            names = [name] + [f"{name}.{a.name}" for a in n.names]
        elif isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        out |= {x for x in names if x in mods and x not in (mod, "dnnfusion")}
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    mods = _modules()
    graph = {m: _imports(m, p, mods) for m, p in mods.items() if m != "dnnfusion"}
    graph = {m: {w for w in deps if w in graph} for m, deps in graph.items()}
    assert "dnnfusion.frontends.aten_common" in graph and graph["dnnfusion.frontends.fx"]
    assert _cycles(graph) == []


def test_the_checker_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
