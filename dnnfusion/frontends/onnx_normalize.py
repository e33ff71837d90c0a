"""Older ONNX forms normalized to the ECG's (the newest) and unsupported attributes refused, per
operator: each function takes the importer and the node being built (frontends/onnx.py's
_Importer and _Node) and edits the node in place, or raises a dnnfusion.Error naming it."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import UnsupportedOperatorError


def _axes_to_input(imp: Any, n: Any) -> None:
    """ReduceMean/Max/Min/Prod/L2 before opset 18: `axes` attribute -> second input."""
    if n.version < 18 and "axes" in n.attrs:
        axes = np.asarray(n.attrs.pop("axes"), dtype=np.int64).reshape(-1)
        n.inputs = [n.inputs[0], imp.b.constant(imp._fresh(f"{n.name}:axes"), axes)]


def _axes_1d(imp: Any, n: Any) -> None:
    """Unsqueeze's axes given as a constant scalar (ONNX Runtime accepts one for Unsqueeze, not
    for Squeeze; the spec asks for 1-D)."""
    ax = n.inputs[1] if len(n.inputs) > 1 else None
    if ax is not None and ax.is_constant and len(ax.shape) == 0:
        n.inputs[1] = imp.b.constant(imp._fresh(f"{n.name}:axes"), np.asarray(ax.numpy(), np.int64).reshape(1))


def _split(imp: Any, n: Any) -> None:
    if len(n.inputs) < 2 and "num_outputs" not in n.attrs:
        n.attrs["num_outputs"] = len(n.outputs)  # equal parts, the pre-18 default


def _roi_align(imp: Any, n: Any) -> None:
    if n.version < 16:
        n.attrs["coordinate_transformation_mode"] = "output_half_pixel"


def _grid_sample(imp: Any, n: Any) -> None:
    # GridSample-16 names two modes as PyTorch does; 20 renamed them.
    mode = n.attrs.get("mode", "bilinear" if n.version < 20 else "linear")
    n.attrs["mode"] = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)


def _batch_norm(imp: Any, n: Any) -> None:
    if n.attrs.get("training_mode", 0):
        raise UnsupportedOperatorError(
            f"node '{n.name}' (BatchNormalization): attribute training_mode=1 is not "
            "supported; dnnfusion compiles inference graphs")
    if len(n.outputs) > 1:
        raise UnsupportedOperatorError(
            f"node '{n.name}' (BatchNormalization): {len(n.outputs)} outputs request training "
            "mode (running statistics), which is not supported; dnnfusion compiles inference "
            "graphs")


def _dropout(imp: Any, n: Any) -> None:
    """A Dropout here is the identity: a training_mode that may be true with a ratio that may
    be nonzero was imported as its random mask (onnx_random.import_dropout) before this."""
    training = n.inputs[2] if len(n.inputs) > 2 else None
    ratio = n.inputs[1] if len(n.inputs) > 1 else None
    const = (lambda v: v is not None and v.is_constant)
    if training is not None and not (const(training) and not np.asarray(training.numpy()).any()) and not (
            const(ratio) and not np.asarray(ratio.numpy()).any()):
        raise UnsupportedOperatorError(f"node '{n.name}' (Dropout): a training_mode that may be true reached the "
                                       "identity form (onnx_random.training_dropout should have taken it)")


NORMALIZE = {
    **{op: _axes_to_input for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                     "ReduceL2")},
    "Split": _split, "Unsqueeze": _axes_1d,
    "RoiAlign": _roi_align,
    "GridSample": _grid_sample,
    "BatchNormalization": _batch_norm,
    "Dropout": _dropout,
}
