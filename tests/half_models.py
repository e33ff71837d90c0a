"""Test helper for float16 and bfloat16 models: the same ONNX model in float32, the computation
dnnfusion runs for them (compile's float16="f32"), as an ONNX Runtime oracle."""

from __future__ import annotations

import numpy as np


def as_float32(model, elem_type: int):
    """A copy of `model` with every tensor of ONNX element type `elem_type` (TensorProto.FLOAT16
    or BFLOAT16) made float32: graph values, initializers, Cast targets, tensor attributes."""
    import onnx
    from onnx import TensorProto as T
    from onnx import numpy_helper as nh

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for vi in (*g.input, *g.output, *g.value_info):
        if vi.type.tensor_type.elem_type == elem_type:
            vi.type.tensor_type.elem_type = T.FLOAT
    for t in g.initializer:
        if t.data_type == elem_type:
            t.CopyFrom(nh.from_array(nh.to_array(t).astype(np.float32), t.name))
    for n in g.node:
        for a in n.attribute:
            if a.name == "to" and a.i == elem_type:
                a.i = T.FLOAT
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == elem_type:
                a.t.CopyFrom(nh.from_array(nh.to_array(a.t).astype(np.float32), a.t.name))
    return m


def transformer_block(d: int = 32):
    """A small Linear -> GELU -> Linear -> residual -> LayerNorm block (float32 weights from the
    current torch seed), for the torch front-end's half-precision checks."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.norm = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d), torch.nn.LayerNorm(d)

        def forward(self, x):
            return self.norm(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))

    return Block()
