"""What the shape-rule tests (tests/test_shape_rules*.py) share: infer() builds a one-node
graph and returns the (shape, dtype) dnnfusion infers per output; run() runs the same node as
an ONNX model in onnxruntime, onnx_infer() gives it to ONNX shape inference, check() compares
infer() with run(), fails() expects a ShapeError. A graph input (In) may have symbolic dims,
which take the values of SYM when the model runs. Importing this module skips the test module
that imports it when onnx or onnxruntime is missing."""

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

ort.set_default_logger_severity(4)  # the runs that are meant to fail stay quiet

OPSET = 21
SYM = {"N": 2, "B": 3, "S": 5, "H": 8, "W": 6}  # values symbolic dims take when run
NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
      "i32": np.int32, "i64": np.int64, "u8": np.uint8, "bool": np.bool_}
DT = {np.dtype(v): k for k, v in NP.items()}
I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


class In:
    """A graph input (not a constant). `shape` may hold symbols from SYM; `data` fixes the
    values used when the model runs (indices must be in range, for instance)."""

    def __init__(self, shape, dtype="f32", data=None):
        self.shape, self.dtype, self.data = tuple(shape), dtype, data

    def concrete(self):
        return tuple(SYM.get(d, d) for d in self.shape)

    def array(self, rng):
        if self.data is not None:
            return np.asarray(self.data, NP[self.dtype]).reshape(self.concrete())
        t = NP[self.dtype]
        if np.issubdtype(t, np.floating):
            return rng.standard_normal(self.concrete()).astype(t)
        if t == np.bool_:
            return rng.random(self.concrete()) > 0.5
        return rng.integers(0, 3, self.concrete()).astype(t)


def i64(*v):
    return np.array(v, np.int64)


def f32(*v):
    return np.array(v, np.float32)


def infer(op, inputs, attrs=None, n_out=1):
    """dnnfusion's inferred (shape, dtype) per output."""
    g = _core.Graph("t")
    vals = []
    for i, a in enumerate(inputs):
        if a is None:
            vals.append(None)
        elif isinstance(a, In):
            vals.append(g.add_input(f"in{i}", a.dtype, list(a.shape)))
        else:
            vals.append(g.add_constant(f"c{i}", np.asarray(a, order="C")))
    outs = g.add_node(op, vals, dict(attrs or {}), n_out)
    return [(tuple(o.shape), o.dtype) for o in outs]


def run(op, inputs, attrs=None, n_out=1, opset=OPSET, seed=0):
    """(shape, dtype) per output of the one-node ONNX model run by onnxruntime."""
    rng = np.random.default_rng(seed)
    names, inits, graph_inputs, feeds = [], [], [], {}
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
        elif isinstance(a, In):
            arr = a.array(rng)
            names.append(f"in{i}")
            feeds[f"in{i}"] = arr
            graph_inputs.append(helper.make_tensor_value_info(
                f"in{i}", helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
        else:
            names.append(f"c{i}")
            inits.append(numpy_helper.from_array(np.asarray(a), f"c{i}"))
    onnx_attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
                  for k, v in (attrs or {}).items()}
    while names and not names[-1]:  # trailing absent inputs are left out
        names.pop()
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **onnx_attrs)
    graph = helper.make_graph([node], "t", graph_inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return [(tuple(r.shape), DT[r.dtype]) for r in sess.run(None, feeds)]


def concrete(result):
    return [(tuple(SYM.get(d, d) for d in s), t) for s, t in result]


def check(op, inputs, attrs=None, n_out=1, opset=OPSET):
    """Inferred shapes (symbols replaced by their run values) equal onnxruntime's."""
    got = infer(op, inputs, attrs, n_out)
    assert concrete(got) == run(op, inputs, attrs, n_out, opset), (op, attrs, got)
    return got


def onnx_infer(op, inputs, attrs=None, n_out=1):
    """(shape, dtype) per output from onnx.shape_inference (strict), all inputs typed."""
    names, inits, graph_inputs = [], [], []
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
        elif isinstance(a, In):
            names.append(f"in{i}")
            graph_inputs.append(helper.make_tensor_value_info(
                f"in{i}", helper.np_dtype_to_tensor_dtype(np.dtype(NP[a.dtype])), a.concrete()))
        else:
            names.append(f"c{i}")
            inits.append(numpy_helper.from_array(np.asarray(a), f"c{i}"))
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], "t", graph_inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    result = []
    for o in inferred.graph.output:
        t = o.type.tensor_type
        result.append((tuple(d.dim_value for d in t.shape.dim),
                       DT[np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type))]))
    return result


def fails(op, inputs, attrs, match, n_out=1):
    with pytest.raises(df.ShapeError, match=match):
        infer(op, inputs, attrs, n_out)


W = np.zeros  # weights: only the shape matters
