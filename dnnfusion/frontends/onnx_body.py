"""Function bodies written in code (onnx_functions' hand forms, onnx_einsum, onnx_recurrent):
a builder of body nodes with names local to the body, and the FunctionProto that wraps them
(inputs in0.., outputs out0..), which onnx_functions.inline imports like a schema's body."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.dtypes import ONNX_CODES  # noqa: F401 - re-exported (onnx_functions, onnx_signal)
from dnnfusion.errors import ShapeError

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


# ONNX_CODES (imported above): an ECG element type -> its ONNX TensorProto code, for
# context-dependent bodies, which are built from the node's input types.


def const_node(imp: Any, name: str, array: np.ndarray) -> Any:
    """A Constant node holding `array`, for a written body."""
    return imp.onnx.helper.make_node("Constant", [], [name], value=imp.onnx.numpy_helper.from_array(array, name))


# The largest constant (elements) a written body makes from a model's sizes (OneHot's and
# Hardmax's ranges, EyeLike's matrix, a DFT's matrix, an im2col index): a size no model needs
# is an error, not an allocation.
MAX_CONSTANT = 1 << 24


def bounded(n: int, what: str, node: Any) -> int:
    """n, or a ShapeError naming the node when a constant of n elements is over MAX_CONSTANT."""
    if n > MAX_CONSTANT:
        raise ShapeError(f"node '{node.name}' ({node.op_type}): {what} of {n} elements is larger than dnnfusion "
                         f"builds at import ({MAX_CONSTANT})")
    return n


def np_dtype(ecg_dtype: str) -> Any:
    """The NumPy dtype of an ECG element type name."""
    from dnnfusion.dtypes import numpy_dtype

    return numpy_dtype(ecg_dtype)


def node_label(node: Any) -> str:
    """The "node 'x' (Op)" a written body's messages start with, so the user finds the node."""
    return f"node '{node.name or node.op_type}' ({node.op_type})"


def node_attrs(imp: Any, node: Any) -> dict[str, Any]:
    """The node's attributes as Python values (absent ones take their defaults at the caller)."""
    return {a.name: imp.onnx.helper.get_attribute_value(a) for a in node.attribute}
