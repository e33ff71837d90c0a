"""The notebooks run top to bottom (on the zoo's reduced models) without an error: each is
executed by nbclient in a fresh kernel, as CI does; the committed copies carry full-size
outputs (notebooks/build_notebooks.py writes them)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS] == ["01_tour.ipynb", "02_layer_counts.ipynb", "03_speed.ipynb",
                                           "04_rewriting_and_planners.ipynb", "05_opencl.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_is_its_cells_source(path):
    """Each committed notebook holds exactly the cells notebooks/build_notebooks.py writes it
    from (cells_results.py, cells_opencl.py): an edit made to the .ipynb alone would be lost at
    the next rebuild, and one made to the source alone would never be run."""
    sys.path.insert(0, str(path.parent))
    try:
        import build_notebooks
    finally:
        sys.path.remove(str(path.parent))
    nb = nbformat.read(str(path), as_version=4)
    got = [("md" if c.cell_type == "markdown" else "code", c.source) for c in nb.cells]
    assert got == list(build_notebooks.NOTEBOOKS[path.name])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("DNNF_NOTEBOOK_REDUCED", "1")  # the kernel inherits it
    nb = nbformat.read(str(path), as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = []
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if o.get("output_type") == "error"]
    assert any("image/svg+xml" in o.get("data", {}) for o in outs)  # the pictures rendered
    assert os.environ.get("DNNF_NOTEBOOK_REDUCED") == "1"
