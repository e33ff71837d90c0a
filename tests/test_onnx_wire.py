"""frontends.onnx_wire: a file's graph inputs read from the wire format agree with onnx's
full parse, and anything unusual falls back to it (compile's symbolic-dimension check)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dnnfusion as df
from dnnfusion import specialize
from dnnfusion.frontends.onnx_wire import graph_inputs


def _model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    b = numpy_helper.from_array(np.ones(3, np.float32), "b")  # also listed as an input
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"]),
             helper.make_node("Add", ["z", "s"], ["out"])]
    g = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, None]),
    ], [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 3])], initializer=[w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_inputs_agree_with_the_full_parse(tmp_path):
    m = _model()
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    inputs, inits = graph_inputs(path)
    assert inputs == list(m.graph.input) and inits == {"w", "b"}
    assert specialize.onnx_inputs(path) == (["x", "s"], {"x": [(0, "batch")], "s": [(1, "s:1")]})
    assert specialize.static_dims(path) == {"x": [1, 4], "s": [1, 1]}
    # bytes and protos take the full parse, with the same answer
    assert specialize.onnx_inputs(m.SerializeToString()) == specialize.onnx_inputs(path)
    assert specialize.onnx_inputs(m) == specialize.onnx_inputs(path)


@pytest.mark.parametrize("damage", ["truncated", "two_graphs", "sparse", "empty", "garbage"])
def test_unusual_files_fall_back_to_the_full_parse(tmp_path, damage):
    m = _model()
    data = m.SerializeToString()
    if damage == "truncated":
        data = data[: len(data) - 20]
    elif damage == "two_graphs":  # protobuf merges repeated message fields: leave it to onnx
        data = data + helper.make_model(m.graph).SerializeToString()
    elif damage == "sparse":
        sp = helper.make_sparse_tensor(numpy_helper.from_array(np.ones(1, np.float32), "sv"),
                                       numpy_helper.from_array(np.zeros(1, np.int64), "si"), [2])
        m.graph.sparse_initializer.append(sp)
        data = m.SerializeToString()
    elif damage == "empty":
        data = b""
    else:
        data = b"\xff" * 64
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    assert graph_inputs(path) is None
    # compile's check then parses the whole file: a good file as before, a bad one an
    # error from load() (not from the input check)
    if damage in ("two_graphs", "sparse"):
        full = onnx.load(str(path))
        inits = {t.name for t in full.graph.initializer}
        assert specialize.onnx_inputs(path)[0] == [vi.name for vi in full.graph.input if vi.name not in inits]
    else:
        assert specialize.onnx_inputs(path) == ([], {})
        with pytest.raises(df.Error):
            df.compile(str(path), input_shapes={"x": [1, 4], "s": [1, 3]})


def test_a_missing_file_is_none(tmp_path):
    assert graph_inputs(tmp_path / "nothing.onnx") is None
