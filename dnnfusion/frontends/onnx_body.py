"""Function bodies written in code (onnx_functions' hand forms, onnx_einsum, onnx_recurrent):
a builder of body nodes with names local to the body, and the FunctionProto that wraps them
(inputs in0.., outputs out0..), which onnx_functions.inline imports like a schema's body."""

from __future__ import annotations

from typing import Any

import numpy as np

# The opset a written body's operators are read at (at least: the model's if newer).
BODY_OPSET = 18


class Body:
    """Nodes of a body under construction; `dtype` is the default of its constants."""

    def __init__(self, onnx: Any, dtype: Any = np.float32):
        self.onnx, self.dtype, self.nodes, self.k = onnx, dtype, [], 0

    def op(self, op: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> Any:
        outs = []
        for _ in range(n_out):
            self.k += 1
            outs.append(f"t{self.k}")
        self.nodes.append(self.onnx.helper.make_node(op, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, array: Any, dtype: Any = None) -> str:
        self.k += 1
        name = f"c{self.k}"
        t = self.onnx.numpy_helper.from_array(np.asarray(array, dtype or self.dtype), name)
        self.nodes.append(self.onnx.helper.make_node("Constant", [], [name], value=t))
        return name


def function_proto(imp: Any, op: str, n_in: int, nodes: list, n_out: int = 1) -> Any:
    """The FunctionProto of a written body: inputs in0.., outputs out0.. (nodes must define them)."""
    fn = imp.onnx.FunctionProto()
    fn.name = op
    fn.input.extend([f"in{k}" for k in range(n_in)])
    fn.output.extend([f"out{k}" for k in range(n_out)])
    fn.node.extend(nodes)
    fn.opset_import.extend([imp.onnx.helper.make_opsetid("", max(imp.opset, BODY_OPSET))])
    return fn
