"""What a cell's framework back-end receives and returns (``prepare_<fw>(ctx) -> Prepared``), and
the helpers every back-end shares. The back-ends: ``frameworks.py`` (PyTorch, ONNX Runtime,
TVM, OpenVINO, dnnfusion) and ``frameworks_mobile.py`` (MNN, LiteRT, ExecuTorch)."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Callable

import numpy as np


class NotAvailable(Exception):
    """The framework cannot run here (not installed, not implemented); the cell is 'n/a'."""


@dataclasses.dataclass
class Context:
    model: str
    reduced: bool
    threads: int
    workdir: pathlib.Path       # per-model artifact directory
    celldir: pathlib.Path       # per-cell scratch directory
    onnx_path: pathlib.Path | None
    inputs: list[np.ndarray]    # the fixed inputs (saved by the reference cell)
    onnx_input_names: list[str]
    n_outputs: int
    batch: int = 1              # the inputs' batch (models.batched)
    stage: str = "load"
    info: dict = dataclasses.field(default_factory=dict)

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name == "stage":  # visible to the parent if this cell times out
            try:
                (self.celldir / "stage").write_text(str(value))
            except OSError:
                pass

    def torch_model(self):
        from .models import load

        return load(self.model, self.reduced, self.batch)

    def torch_inputs(self):
        import torch

        return tuple(torch.from_numpy(np.ascontiguousarray(x)) for x in self.inputs)

    def need_onnx(self) -> pathlib.Path:
        if self.onnx_path is None or not pathlib.Path(self.onnx_path).exists():
            raise RuntimeError("no ONNX file (the ONNX export failed in the reference cell)")
        return pathlib.Path(self.onnx_path)


@dataclasses.dataclass
class Prepared:
    run: Callable[[], list[np.ndarray]]
    kernels: int | None
    compile_s: float | None
    details: dict = dataclasses.field(default_factory=dict)


def flatten_torch(out: Any) -> list[np.ndarray]:
    import torch
    import torch.utils._pytree as pytree

    leaves, _ = pytree.tree_flatten(out)
    return [x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
            for x in leaves]


def need_module(mod: str, pip_name: str):
    """The module, or NotAvailable naming the pip package to install."""
    import importlib

    try:
        return importlib.import_module(mod)
    except ImportError as e:
        raise NotAvailable(f"{pip_name} not installed ({e.__class__.__name__}: {e})") from e
