"""Writes the notebooks from their cells here and executes them in place (nbclient), so the
committed .ipynb files carry the outputs of a run. `DNNF_NOTEBOOK_REDUCED=1` runs them on the
zoo's reduced models (what CI does, in tests/test_notebooks.py, without writing).

    python notebooks/build_notebooks.py                   # full-size models, outputs saved
    python notebooks/build_notebooks.py 03_speed.ipynb    # just one
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cells_opencl  # noqa: E402 - notebook 05, beside this file
import cells_results  # noqa: E402 - notebooks 02-04, beside this file

TOUR = [
    ("md", """# A tour of dnnfusion

dnnfusion re-implements DNNFusion (Niu et al., PLDI 2021): a model becomes an **Extended
Computational Graph** whose operators carry their mapping type, is rewritten with algebraic
properties, fused by a plan that follows the paper's mapping-type table, and compiled to C++
(SIMD) or OpenCL C. This notebook walks one model through every step. Set
`DNNF_NOTEBOOK_REDUCED=1` to run it on the reduced model (what CI does)."""),
    ("code", """import os, numpy as np
import dnnfusion as df
from dnnfusion import rewrite, viz
from dnnfusion.zoo import registry, compiled_check

REDUCED = os.environ.get("DNNF_NOTEBOOK_REDUCED") == "1"
NAME = "mobilenetv2"
path = registry.export_onnx(NAME, reduced=REDUCED)
ecg = df.load(str(path))
print(ecg.summary())"""),
    ("md", """## Rewriting (§4.2)
Constant folding, CSE, dead code, Conv/BN folding and the algebraic rules; the report counts
operators and FLOPs before and after."""),
    ("code", """rewritten, report = rewrite.rewrite(ecg)
print(report)"""),
    ("md", """## The mapping-type table (Table 3) and five planners
Green cells fuse, red cells do not, yellow cells are decided by profiling or an estimate."""),
    ("code", """viz.draw_fusion_table()"""),
    ("code", """for planner in df.plan.PLANNERS:
    p = df.plan.plan(rewritten, planner=planner)
    print(f"{planner:10s} {len(p.blocks):4d} blocks")"""),
    ("md", """## Why pairs were fused, or not (`explain`)"""),
    ("code", """plan = df.plan.plan(rewritten)
print("\\n".join(plan.explain().splitlines()[:12]))"""),
    ("md", """## The plan, drawn
One box per fused block, coloured by its mapping type; large models get one node per block with
the bytes that cross blocks (memory traffic) on the edges."""),
    ("code", """viz.draw_plan(plan)"""),
    ("md", """## Compile, check against PyTorch and ONNX Runtime, profile
`stats` counts what the generated code does: kernels, passes over memory, intermediate bytes."""),
    ("code", """_, inputs, ref_torch, ref_ort = compiled_check.references(NAME, REDUCED)
m = df.compile(str(path), inputs)
got = m.run(*inputs)
print(m)
print("max relative error vs PyTorch:", compiled_check._rel_err(got, ref_torch))
print("max relative error vs ONNX Runtime:", compiled_check._rel_err(got, ref_ort))
prof = m.profile(*inputs, repeat=5)
print(prof.top(5))"""),
]


def notebook(cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(t) if k == "md" else nbformat.v4.new_code_cell(t) for k, t in cells]
    return nb


NOTEBOOKS = {"01_tour.ipynb": TOUR, "02_layer_counts.ipynb": cells_results.LAYER_COUNTS,
             "03_speed.ipynb": cells_results.SPEED,
             "04_rewriting_and_planners.ipynb": cells_results.REWRITING,
             "05_opencl.ipynb": cells_opencl.OPENCL}


def run(nb: nbformat.NotebookNode, timeout: int = 900) -> nbformat.NotebookNode:
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    return nb


def main(names: list[str]) -> int:
    for name, cells in NOTEBOOKS.items():
        if names and name not in names:
            continue
        nb = run(notebook(cells))
        nbformat.write(nb, HERE / name)
        print("wrote", HERE / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
