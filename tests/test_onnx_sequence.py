"""ONNX sequences resolved at import (frontends/onnx_sequence.py): a sequence is a list of ECG
values while the graph is read. Split / insert / erase / at / length / concat, and a Loop that
builds a list (the exported form of appending to a Python list), compiled against ONNX
Runtime; what cannot be resolved at import is refused with the node or value named."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

N = h.make_node


def _model(nodes, x, outputs, inits=(), opset=17):
    outs = [onnx.ValueInfoProto(name=o) for o in outputs]
    g = h.make_graph(nodes, "seq", [h.make_tensor_value_info("x", T.FLOAT, x.shape)], outs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)


def _i64(name, v):
    return nh.from_array(np.array(v, np.int64), name)


def _run(m, x):
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", df.ModelWarning)
        cm = df.compile(m.SerializeToString())
    got = cm.run(x)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6)
    return cm


def test_split_edit_and_concat():
    x = np.random.default_rng(0).standard_normal((2, 6, 4)).astype(np.float32)
    nodes = [N("SplitToSequence", ["x", "sp"], ["seq"], axis=1),                 # pieces of 1, 2 and 3 rows
             N("SequenceLength", ["seq"], ["len"]),
             N("SequenceAt", ["seq", "m1"], ["last"]),                             # a negative position
             N("SequenceErase", ["seq", "zero"], ["seq2"]),
             N("SequenceInsert", ["seq2", "x", "zero"], ["seq3"]),                 # at the front
             N("ConcatFromSequence", ["seq3"], ["cat"], axis=1), N("Relu", ["cat"], ["y"]),
             N("SplitToSequence", ["x"], ["seq4"], axis=2, keepdims=0),            # 4 pieces, axis squeezed
             N("ConcatFromSequence", ["seq4"], ["stk"], axis=-1, new_axis=1),     # stacked back: x itself
             N("SplitToSequence", ["x", "two"], ["seq5"], axis=1),                 # chunks of 2
             N("SequenceAt", ["seq5", "one"], ["mid"])]
    inits = [_i64("sp", [1, 2, 3]), _i64("m1", -1), _i64("zero", 0), _i64("one", 1), _i64("two", 2)]
    m = _model(nodes, x, ["y", "len", "last", "stk", "mid"], inits)
    cm = _run(m, x)
    assert cm.stats["kernels"] >= 1


def test_loop_builds_a_list():
    """for i in range(3): out.append(x * i); torch.stack(out): a Loop carrying a sequence."""
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    body = h.make_graph(
        [N("Cast", ["i"], ["fi"], to=T.FLOAT), N("Mul", ["x", "fi"], ["xi"]), N("SequenceInsert", ["s_in", "xi"], ["s_out"]),
         N("Identity", ["c"], ["c_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_sequence_value_info("s_in", T.FLOAT, None)],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_sequence_value_info("s_out", T.FLOAT, None)])
    nodes = [N("SequenceEmpty", [], ["s0"], dtype=T.FLOAT), N("Loop", ["trips", "", "s0"], ["sf"], body=body),
             N("ConcatFromSequence", ["sf"], ["y"], axis=0, new_axis=1)]
    _run(_model(nodes, x, ["y"], [_i64("trips", 3)]), x)


def _refused(nodes, outputs, inits=(), match="", opset=17):
    x = np.zeros((2, 4), np.float32)
    g = h.make_graph(nodes, "seq", [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                     [onnx.ValueInfoProto(name=o) for o in outputs], list(inits))
    m = onnx.shape_inference.infer_shapes(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(df.Error, match=match):
            df.compile(m.SerializeToString())


def test_refusals_name_what_they_refuse():
    split = N("SplitToSequence", ["x"], ["s"], axis=1, name="split")
    _refused([split], ["s"], match=r"graph output 's' is a sequence")
    _refused([split, N("Relu", ["s"], ["y"], name="r")], ["y"],
             match=r"node 'r' \(Relu\) reads the sequence 's'")
    _refused([split, N("Shape", ["x"], ["sh"]), N("Gather", ["sh", "z"], ["p"]), N("Sub", ["p", "p4"], ["q"]),
              N("ReduceSum", ["x"], ["t"], keepdims=0), N("Cast", ["t"], ["ti"], to=T.INT64),
              N("Sub", ["ti", "ti"], ["pos"]), N("SequenceAt", ["s", "pos"], ["y"], name="at")], ["y"],
             [_i64("z", 0), _i64("p4", 4)], match=r"node 'at' \(SequenceAt\): the position must be a constant")
    _refused([split, N("SequenceAt", ["s", "far"], ["y"], name="at")], ["y"], [_i64("far", 4)],
             match=r"position 4 is outside \[-4, 3\] for a sequence of 4")


def test_optionals():
    """Optional(x) is x and Optional() empty: OptionalHasElement folds to a constant that a
    Where reads; OptionalGetElement gives the element; reading an empty one is an error."""
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    nodes = [N("Optional", ["x"], ["ox"]), N("Optional", [], ["none"], type=h.make_tensor_type_proto(T.FLOAT, None)),
             N("OptionalHasElement", ["ox"], ["has"]), N("OptionalHasElement", ["none"], ["hasnt"]),
             N("OptionalHasElement", [], ["no_input"]),
             N("OptionalGetElement", ["ox"], ["gx"]), N("Neg", ["gx"], ["ng"]),
             N("Where", ["hasnt", "x", "ng"], ["y"])]
    m = _model(nodes, x, ["y", "has", "hasnt", "no_input"], opset=18)
    cm = _run(m, x)
    assert [bool(v) for v in cm.run(x)[1:]] == [True, False, False]
    _refused([N("Optional", [], ["none"], type=h.make_tensor_type_proto(T.FLOAT, None)),
              N("OptionalGetElement", ["none"], ["y"], name="get")], ["y"],
             match=r"node 'get' \(OptionalGetElement\): the optional is empty", opset=18)
