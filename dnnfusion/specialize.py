"""Shape specialization (issue 17): a model with dynamic dimensions (ONNX ``dim_param``
inputs, or a PyTorch module called with inputs of new shapes) is compiled again for each new
shape it is called with, as ``torch.compile`` recompiles; the compiled models are kept, a
bounded number per model."""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from typing import Any, Callable, Sequence

from dnnfusion.errors import ShapeError


def _proto(model: Any) -> Any:
    """The ModelProto of a path, bytes or proto (external data not loaded: only the graph's
    inputs are read)."""
    import onnx

    if isinstance(model, (str, os.PathLike)):
        return onnx.load_model(os.fspath(model), load_external_data=False)
    if isinstance(model, bytes):
        return onnx.load_model_from_string(model)
    return model


def _inputs(model: Any) -> tuple[list[Any], set[str]]:
    """The graph's inputs (ValueInfoProto) and its initializers' names: a file's from its wire
    format without parsing the weights (frontends.onnx_wire), else from the whole proto."""
    if isinstance(model, (str, os.PathLike)):
        from dnnfusion.frontends.onnx_wire import graph_inputs

        got = graph_inputs(model)
        if got is not None:
            return got
    proto = _proto(model)
    return list(proto.graph.input), {t.name for t in proto.graph.initializer}


def onnx_inputs(model: Any) -> tuple[list[str], dict[str, list[tuple[int, str]]]]:
    """An ONNX model's graph inputs (initializers excluded) in order, and those with symbolic
    dimensions: input name -> [(axis, dim name)]; a dimension with neither a value nor a name
    gets a name of its own."""
    try:
        inputs, inits = _inputs(model)
    except Exception:  # noqa: BLE001 - load() reports a bad file clearly
        return [], {}
    names: list[str] = []
    out: dict[str, list[tuple[int, str]]] = {}
    for vi in inputs:
        if vi.name in inits:
            continue
        names.append(vi.name)
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if not d.HasField("dim_value"):
                out.setdefault(vi.name, []).append((axis, d.dim_param or f"{vi.name}:{axis}"))
    return names, out


def static_dims(model: Any) -> dict[str, list[int]]:
    """The graph inputs' dimensions as the file gives them (symbolic ones as 1), by name."""
    inputs, inits = _inputs(model)
    return {vi.name: [int(d.dim_value) if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim]
            for vi in inputs if vi.name not in inits}


def shapes_of_examples(names: list[str], symbolic: dict[str, list[tuple[int, str]]],
                        example_inputs: Any) -> dict[str, list[int]]:
    """The shapes of the example inputs (graph input order) of the symbolic inputs, by name."""
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    if len(example_inputs) != len(names):
        raise TypeError(f"{len(example_inputs)} example inputs for a model with {len(names)} inputs "
                        f"({', '.join(names)})")
    return {n: [int(d) for d in x.shape] for n, x in zip(names, example_inputs) if n in symbolic}


class Specializer:
    """Compiles a model again for the input shapes it is called with (`again(shapes, arrays)`),
    keeping at most `limit` (least recently used dropped). `symbolic`: input name ->
    [(axis, dimension name)] of the axes that may change; axes named alike must agree."""

    def __init__(self, again: Callable[[dict, list], Any], symbolic: dict[str, list[tuple[int, str]]],
                 limit: int, first: Any):
        if limit < 1:
            raise ValueError(f"max_specializations must be at least 1, got {limit}")
        self.again, self.symbolic, self.limit = again, symbolic, limit
        self.compiled: OrderedDict[tuple, Any] = OrderedDict()
        self.compiled[self._key({v.name: v.shape for v in first.graph.inputs})] = first

    def _key(self, shapes: dict[str, Sequence[int]]) -> tuple:
        return tuple((n, tuple(int(d) for d in shapes[n])) for n in self.symbolic)

    def check(self, shapes: dict[str, Sequence[int]]) -> None:
        """Symbolic dimensions named alike must agree across the inputs."""
        seen: dict[str, tuple[str, int]] = {}
        for name, dims in self.symbolic.items():
            for axis, param in dims:
                size = int(shapes[name][axis])
                if param in seen and seen[param][1] != size:
                    other, was = seen[param]
                    raise ShapeError(f"dimension '{param}' is {was} in input '{other}' but {size} in input "
                                     f"'{name}' (axis {axis}); inputs sharing it must agree")
                seen.setdefault(param, (name, size))

    def get(self, owner: Any, shapes: dict[str, Sequence[int]], arrays: list) -> Any:
        key = self._key(shapes)
        if key in self.compiled:
            self.compiled.move_to_end(key)
            return self.compiled[key]
        self.check(shapes)
        m = self.again(shapes, arrays)
        self.compiled[key] = m
        while len(self.compiled) > self.limit:
            self.compiled.popitem(last=False)
        owner.stats["specializations"].append({n: list(map(int, shapes[n])) for n in self.symbolic})
        return m


def reexportable(model: Any, example_inputs: Any, n_inputs: int) -> bool:
    """A PyTorch module (not a torch.compile graph, whose examples hold lifted parameters) whose
    examples are exactly its graph's inputs, all tensors: it can be exported again with
    inputs of other shapes."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(model, torch.nn.Module) or isinstance(model, torch.fx.GraphModule):
        return False
    xs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else example_inputs
    return isinstance(xs, (tuple, list)) and len(xs) == n_inputs and all(isinstance(x, torch.Tensor) for x in xs)


def every_axis(inputs: Sequence[Any]) -> dict[str, list[tuple[int, str]]]:
    """Every axis of every input may change, each its own dimension (a re-export checks them)."""
    return {v.name: [(axis, f"{v.name}:{axis}") for axis in range(len(v.shape))] for v in inputs}
