"""Operators after a data-dependent output length run on the host (issue 17).

NonMaxSuppression's output has as many rows as boxes survive, which the data decides; the
memory plan and the generated kernels need static shapes, so code generation cannot take it or
anything computed from it. A detection model exported with its post-processing ends that way
(scores and boxes from a network, then NonMaxSuppression, then Gathers that pick the kept boxes).

:func:`split` cuts such a graph in two: the *prefix*, every operator whose outputs have static
shapes and whose inputs come from the model's inputs, constants or other prefix operators,
compiled as usual; and the *tail*, each operator with a data-dependent output and everything
computed from one, which :class:`HostTail` runs after the compiled prefix with the NumPy
reference (:mod:`dnnfusion.reference`, the oracle every kernel is checked against). The tail is
post-processing: small tensors, a few operators. ``stats["host_tail"]`` and ``explain()`` say
which operators run there and why.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from . import _core
from .ecg import ECG
from .errors import UnsupportedOperatorError
from .reference import _read, run_nodes


def _static(v: Any) -> bool:
    return all(isinstance(d, (int, np.integer)) and int(d) >= 0 for d in v.shape)


class HostTail:
    """The tail of a split graph: run after the compiled prefix on the model's input arrays
    and the prefix's outputs; returns the model's outputs in its order."""

    def __init__(self, ecg: ECG, nodes: list, prefix_outputs: list):
        self._ecg = ecg  # keeps the nodes and values below alive
        self.nodes = nodes
        self._inputs = [v.id for v in ecg.inputs]
        self._prefix = [v.id for v in prefix_outputs]
        self._outputs = list(ecg.outputs)
        self._keep = {v.id for v in ecg.outputs}
        self.output_names = [v.name for v in ecg.outputs]
        counts = Counter(n.op for n in nodes)
        # where it starts: operators with a data-dependent output computed from static inputs
        first = [n for n in nodes if not all(_static(v) for v in n.outputs)
                 and all(_static(v) for v in n.inputs if v is not None)]
        self.stats = {
            "operators": len(nodes),
            "ops": dict(sorted(counts.items())),
            "why": (f"the number of rows of {', '.join(sorted({n.op for n in first}))}'s output depends on "
                    "the data; these operators and everything computed from them run after the "
                    "compiled kernels, on the host, with the NumPy reference"),
        }

    def run(self, arrays: list[np.ndarray], prefix_outs: list[np.ndarray]) -> list[np.ndarray]:
        env: dict[int, np.ndarray] = dict(zip(self._inputs, arrays))
        env.update(zip(self._prefix, prefix_outs))
        run_nodes(self.nodes, env, keep=self._keep)
        outs = [np.asarray(_read(v, env)) for v in self._outputs]
        return [o if o.flags.c_contiguous else o.copy(order="C") for o in outs]  # 0-d stays 0-d


def split(ecg: ECG) -> tuple[ECG, HostTail | None]:
    """(the prefix to compile, its HostTail), or (ecg, None) when every shape is static."""
    tail, tail_values = [], set()
    for n in ecg.nodes:  # topological order
        if any(v is not None and v.id in tail_values for v in n.inputs) or not all(_static(v) for v in n.outputs):
            tail.append(n)
            tail_values.update(v.id for v in n.outputs)
    if not tail:
        return ecg, None
    in_tail = {n.id for n in tail}
    head = [n for n in ecg.nodes if n.id not in in_tail]
    made = {v.id for n in head for v in n.outputs}
    # What the prefix must return: values of its operators the tail reads, and model outputs.
    wanted: list = []
    seen: set[int] = set()
    for v in [u for n in tail for u in n.inputs if u is not None] + list(ecg.outputs):
        if v.id in made and v.id not in seen:
            seen.add(v.id)
            wanted.append(v)
    if not wanted:
        names = ", ".join(sorted({n.op for n in tail}))
        raise UnsupportedOperatorError(
            f"the model is only {names} on its inputs (output lengths that depend on the data): "
            "there is nothing before them to compile; run it with dnnfusion.reference.run")
    g = ecg.graph
    sub = _core.Graph(g.name)
    env: dict[int, Any] = {}
    for v in ecg.inputs:
        env[v.id] = sub.add_input(v.name, v.dtype, [int(d) for d in v.shape])
    for n in head:
        for v in n.inputs:
            if v is not None and v.id not in env:
                env[v.id] = sub.add_constant(v.name, v.numpy())
        outs = sub.add_node(n.op, [None if v is None else env[v.id] for v in n.inputs], dict(n.attrs),
                            len(n.outputs), n.name, [v.name for v in n.outputs])
        for v, r in zip(n.outputs, outs):
            env[v.id] = r
    sub.set_outputs([env[v.id] for v in wanted])
    return ECG(sub), HostTail(ecg, tail, wanted)
