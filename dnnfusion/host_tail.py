"""Operators after a data-dependent output length run on the host (issue 17).

NonMaxSuppression's output has as many rows as boxes survive, NonZero's as many columns as
elements are nonzero, Unique's as many entries as the data has distinct values: the data
decides; the
memory plan and the generated kernels need static shapes, so code generation cannot take it or
anything computed from it. A detection model exported with its post-processing ends that way
(scores and boxes from a network, then NonMaxSuppression, then Gathers that pick the kept boxes).

:func:`split` cuts such a graph in two: the *prefix*, every operator whose outputs have static
shapes and whose inputs come from the model's inputs, constants or other prefix operators,
compiled as usual; and the *tail*, each operator with a data-dependent output and everything
computed from one, which :class:`HostTail` runs after the compiled prefix with the NumPy
reference (:mod:`dnnfusion.reference`, the oracle every kernel is checked against), except
NonMaxSuppression itself on float32, which the prelude's C++ kernel runs (``_core.nms_f32``: the
oracle's loop took 88 ms on SSD's 1917 boxes x 21 classes, ONNX Runtime 1.6). The tail is
post-processing: small tensors, a few operators. ``stats["host_tail"]`` and ``explain()`` say
which operators run there and why.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from . import _core
from .ecg import ECG, copy_nodes
from .errors import ShapeError, UnsupportedOperatorError
from .reference import _read, run_node, run_nodes


def _static(v: Any) -> bool:
    return all(isinstance(d, (int, np.integer)) and int(d) >= 0 for d in v.shape)


class HostTail:
    """The tail of a split graph, as a graph of its own (so the compiled model keeps no second
    copy of the prefix's weights): run after the compiled prefix on the model's input arrays
    and the prefix's outputs; returns the model's outputs in its order."""

    def __init__(self, graph: ECG, sources: list[tuple[int, str, int]], outputs: list[tuple[str, Any]],
                 output_names: list[str], first_ops: list[str]):
        self.graph = graph
        self._sources = sources  # (tail input id, "in" | "pre", index into the inputs | prefix outputs)
        self._outputs = outputs  # ("tail", value) | ("in" | "pre", index) | ("const", array)
        self.output_names = output_names
        self.stats = {
            "operators": len(graph.nodes),
            "ops": dict(sorted(Counter(n.op for n in graph.nodes).items())),
            "why": (f"the length of {', '.join(first_ops)}'s output depends on the data; "
                    "these operators and everything computed from them run after the compiled "
                    "kernels, on the host, with the NumPy reference"
                    + (" (NonMaxSuppression on float32 with the prelude's C++ kernel)"
                       if any(n.op == "NonMaxSuppression" for n in graph.nodes) else "")),
        }

    def run(self, arrays: list[np.ndarray], prefix_outs: list[np.ndarray]) -> list[np.ndarray]:
        given = {"in": arrays, "pre": prefix_outs}
        env: dict[int, np.ndarray] = {vid: given[k][i] for vid, k, i in self._sources}
        run_nodes(self.graph.nodes, env, kernels=_KERNELS)
        outs = [np.asarray(_read(x, env) if k == "tail" else x if k == "const" else given[k][x])
                for k, x in self._outputs]
        return [o if o.flags.c_contiguous else o.copy(order="C") for o in outs]  # 0-d stays 0-d


def _scalar(args: list, i: int) -> np.ndarray | None:
    a = args[i] if i < len(args) else None
    return None if a is None or a.size == 0 else a.reshape(-1)[0]


def _nms(args: list, attrs: dict) -> list[np.ndarray]:
    """NonMaxSuppression on float32 in C++ (the prelude's kernel, bound in _core; the same
    arithmetic as the oracle, tests/test_host_tail.py compares them); other types the oracle's."""
    boxes, scores = args[0], args[1]
    if boxes.dtype != np.float32 or scores.dtype != np.float32:
        return run_node("NonMaxSuppression", args, attrs)
    mx, iou, st = _scalar(args, 2), _scalar(args, 3), _scalar(args, 4)
    return [_core.nms_f32(boxes, scores, 0 if mx is None else int(mx), 0.0 if iou is None else float(iou),
                          None if st is None else float(st), int(attrs.get("center_point_box", 0)))]


# Operators the tail runs in C++ where the oracle's NumPy loops would dominate a call (NMS over
# SSD's 1917 boxes x 21 classes: 88 ms in NumPy, ONNX Runtime's 1.6).
_KERNELS = {"NonMaxSuppression": _nms}


def split(ecg: ECG) -> tuple[ECG, HostTail | None]:
    """(the prefix to compile, its HostTail), or (ecg, None) when every shape is static."""
    tail, tail_values = [], set()
    for n in ecg.nodes:  # topological order
        if any(v is not None and v.id in tail_values for v in n.inputs) or not all(_static(v) for v in n.outputs):
            tail.append(n)
            tail_values.update(v.id for v in n.outputs)
    if not tail:
        return ecg, None
    symbolic = [v.name for v in ecg.inputs if not _static(v)]
    if symbolic:  # (the tail is for data-dependent lengths; a symbolic input makes every length unknown)
        raise ShapeError(f"inputs {symbolic} have symbolic dimensions here; give input_shapes or example_inputs "
                         "to compile(), or call the compiled model, which specializes on the shapes it is given")
    in_tail = {n.id for n in tail}
    head = [n for n in ecg.nodes if n.id not in in_tail]
    made = {v.id for n in head for v in n.outputs}
    # What the prefix must return: values of its operators the tail reads, and model outputs.
    wanted: list = []
    for v in [u for n in tail for u in n.inputs if u is not None] + list(ecg.outputs):
        if v.id in made and v.id not in {w.id for w in wanted}:
            wanted.append(v)
    if not wanted:
        names = ", ".join(sorted({n.op for n in tail}))
        raise UnsupportedOperatorError(
            f"the model is only {names} on its inputs (output lengths that depend on the data): "
            "there is nothing before them to compile; run it with dnnfusion.reference.run")
    name = ecg.graph.name
    inputs = {v.id: i for i, v in enumerate(ecg.inputs)}
    pre = {v.id: j for j, v in enumerate(wanted)}
    head_graph = _core.Graph(name)
    # every model input, in order, even one only the tail reads: the compiled prefix takes the call's inputs
    env = {v.id: head_graph.add_input(v.name, v.dtype, [int(d) for d in v.shape]) for v in ecg.inputs}
    copy_nodes(head_graph, head, env)
    head_graph.set_outputs([env[v.id] for v in wanted])

    tail_graph = _core.Graph(name + ".tail")
    tenv = copy_nodes(tail_graph, tail, {})
    tail_graph.set_outputs([tenv[v.id] for v in ecg.outputs if v.id in tail_values])
    # the tail's inputs: values from outside it, the model's inputs and the prefix's outputs
    sources = [(tenv[v.id].id, "in" if v.id in inputs else "pre", inputs[v.id] if v.id in inputs else pre[v.id])
               for v in {u.id: u for n in tail for u in n.inputs
                         if u is not None and not u.is_constant and u.id not in tail_values}.values()]
    outputs: list[tuple[str, Any]] = []
    for v in ecg.outputs:
        if v.id in tail_values:
            outputs.append(("tail", tenv[v.id]))
        elif v.id in pre:
            outputs.append(("pre", pre[v.id]))
        elif v.id in inputs:
            outputs.append(("in", inputs[v.id]))
        else:
            outputs.append(("const", np.asarray(v.numpy())))
    first = sorted({n.op for n in tail if not all(_static(v) for v in n.outputs)
                    and all(_static(v) for v in n.inputs if v is not None)})
    return ECG(head_graph), HostTail(ECG(tail_graph), sources, outputs, [v.name for v in ecg.outputs], first)
