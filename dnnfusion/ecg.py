"""The Extended Computational Graph as users see it, and ``load``, the entry point of the
front-ends (paper §3). The graph itself lives in the C++ core (``cpp/ir/``)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from dnnfusion import _core
from dnnfusion.dtypes import _NUMPY_DTYPES, numpy_dtype  # noqa: F401 - numpy_dtype is public here
from dnnfusion.errors import ModelFormatError

MAPPING_TYPES = ("One-to-One", "Reorganize", "Shuffle", "One-to-Many", "Many-to-Many")


def op_table() -> list[dict]:
    """The operator table (``cpp/ir/ops.def``): one dict per operator."""
    return _core.op_table()


@dataclass
class Summary:
    """Operator counts of a graph, by mapping type and by operator."""

    name: str
    operators: int
    by_mapping: dict[str, int]
    by_op: dict[str, int]
    inputs: list[str]
    outputs: list[str]
    parameters: int
    parameter_bytes: int
    removable_tensors: int
    removable_bytes: int | None
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"graph {self.name}: {self.operators} operators, "
                 f"{self.parameters:,} parameters ({self.parameter_bytes / 1e6:.1f} MB)"]
        lines += [f"  input  {s}" for s in self.inputs]
        lines += [f"  output {s}" for s in self.outputs]
        removable = (f"{self.removable_bytes / 1e6:.2f} MB" if self.removable_bytes is not None
                     else "symbolic size")
        lines.append(f"  intermediate tensors fusion may remove: {self.removable_tensors} ({removable})")
        lines.append("  by mapping type:")
        for t in MAPPING_TYPES:
            lines.append(f"    {t:<13} {self.by_mapping.get(t, 0):>6}")
        lines.append("  by operator:")
        for op, n in sorted(self.by_op.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"    {op:<22} {n:>6}")
        return "\n".join(lines)


def _nbytes(v: Any) -> int | None:
    if any(isinstance(d, str) for d in v.shape):
        return None
    return int(np.prod(v.shape, dtype=np.int64)) * numpy_dtype(v.dtype).itemsize




class ECG:
    """An Extended Computational Graph: operators with mapping types, typed tensors,
    constants held without copying. Wraps the C++ graph (``self.graph``)."""

    def __init__(self, graph: Any):
        self.graph = graph

    # Reading -------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def nodes(self) -> list:
        return self.graph.nodes

    @property
    def inputs(self) -> list:
        return self.graph.inputs

    @property
    def outputs(self) -> list:
        return self.graph.outputs

    @property
    def constants(self) -> list:
        return self.graph.constants

    def __len__(self) -> int:
        return len(self.graph)

    def summary(self) -> Summary:
        nodes = self.graph.nodes
        by_map = Counter(n.mapping_type for n in nodes)
        by_op = Counter(n.op for n in nodes)
        consts = self.graph.constants
        removable = [v for v in self.graph.values if v.removable]
        sizes = [_nbytes(v) for v in removable]
        return Summary(
            name=self.name,
            operators=len(nodes),
            by_mapping={t: by_map.get(t, 0) for t in MAPPING_TYPES},
            by_op=dict(by_op),
            inputs=[f"%{v.name}: {v.type}" for v in self.graph.inputs],
            outputs=[f"%{v.name}: {v.type}" for v in self.graph.outputs],
            parameters=sum(int(np.prod(c.shape, dtype=np.int64)) for c in consts),
            parameter_bytes=sum(_nbytes(c) or 0 for c in consts),
            removable_tensors=len(removable),
            removable_bytes=None if any(s is None for s in sizes) else sum(sizes),
        )

    def to_text(self, elide_constants: bool = False) -> str:
        """The canonical text form; ``parse`` reads it back (unless constants are elided)."""
        return self.graph.to_text(elide_constants)

    def verify(self) -> None:
        """Checks the graph's invariants; raises ModelFormatError listing every problem."""
        self.graph.verify()

    def run_reference(self, *args: Any, **feeds: Any) -> list[np.ndarray]:
        """Runs the graph with the NumPy reference interpreter (the oracle)."""
        from dnnfusion import reference

        from dnnfusion.frontends.onnx_random import Draws

        if args and feeds:
            raise TypeError("pass inputs positionally or by name, not both")
        if len(args) == 1 and isinstance(args[0], dict):
            feeds, args = dict(args[0]), ()
        draws = Draws(self.graph.inputs)
        if draws:  # random operators' hidden inputs, drawn here unless given
            names = [v.name for v in self.graph.inputs]
            hidden = [names[i] for i in sorted(draws.positions)]
            if feeds and not all(n in feeds for n in hidden):
                own = [feeds.get(n) for i, n in enumerate(names) if i not in draws.positions]
                if all(a is not None for a in own):
                    feeds = dict(zip(names, draws.fill(own)))
            elif args and len(args) == len(names) - len(hidden):
                args = tuple(draws.fill(list(args)))
        return reference.run(self.graph, feeds if feeds else list(args))

    def __repr__(self) -> str:
        return f"<ECG {self.name!r}: {len(self)} operators>"

    def __str__(self) -> str:
        return self.to_text(elide_constants=True)


def copy_nodes(sub: Any, nodes: Sequence[Any], env: dict[int, Any]) -> dict[int, Any]:
    """Adds ``nodes`` (of another graph, in topological order) to ``_core.Graph`` ``sub``.
    ``env`` maps the other graph's value ids to ``sub``'s values and grows with every output;
    an operand it lacks becomes a constant of ``sub``, or else one of its inputs. Returns
    ``env``. (profiling.subgraph's candidates, host_tail's prefix and tail.)"""
    for n in nodes:
        for v in n.inputs:
            if v is not None and v.id not in env:
                env[v.id] = (sub.add_constant(v.name, v.numpy()) if v.is_constant
                             else sub.add_input(v.name, v.dtype, [int(d) for d in v.shape]))
        made = sub.add_node(n.op, [None if v is None else env[v.id] for v in n.inputs], dict(n.attrs),
                            len(n.outputs), n.name, [v.name for v in n.outputs])
        env.update((v.id, r) for v, r in zip(n.outputs, made))
    return env


def parse(text: str) -> ECG:
    """Parses the canonical text form and verifies the result."""
    g = ECG(_core.parse_text(text))
    g.verify()
    return g


def load(model: Any, example_inputs: Sequence[Any] | None = None, *,
         input_shapes: dict[str, Sequence[int]] | None = None) -> ECG:
    """Imports a model into an ECG.

    ``model`` is an ``onnx.ModelProto``, a path to an ``.onnx`` file (external data next to
    it is loaded), serialized ONNX bytes, a ``torch.nn.Module`` (with ``example_inputs``,
    exported through ``torch.export``) or a ``torch.fx.GraphModule`` (as ``torch.compile``
    hands it to a backend; ``example_inputs`` give the shapes). ``input_shapes``
    specializes symbolic ONNX input dimensions, e.g. ``{"input_ids": [1, 128]}``.
    Front-ends only translate; shape arithmetic on static shapes is folded on the way.
    """
    if isinstance(model, ECG):
        return model
    if isinstance(model, (str, os.PathLike, bytes)) or type(model).__name__ == "ModelProto":
        from dnnfusion.frontends.onnx import import_onnx

        return ECG(import_onnx(model, input_shapes=input_shapes))
    torch_types = _torch_types()
    if torch_types and isinstance(model, torch_types):
        from dnnfusion.frontends.fx import import_torch

        if example_inputs is None:
            raise TypeError("loading a torch module needs example_inputs (a tuple of tensors)")
        if not isinstance(example_inputs, (tuple, list)):
            example_inputs = (example_inputs,)  # a single tensor, not a sequence to unpack
        return ECG(import_torch(model, tuple(example_inputs)))
    raise ModelFormatError(
        f"cannot load a {type(model).__module__}.{type(model).__name__}: expected an "
        "onnx.ModelProto, a path to an .onnx file, ONNX bytes, a torch.nn.Module or a "
        "torch.fx.GraphModule")


def _torch_types() -> tuple:
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return ()
    return (torch.nn.Module,)
