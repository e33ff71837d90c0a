"""int4, uint4, int2 and uint2 (issue 17 part 3): ECG element types held a byte an element, as
ml_dtypes holds them; the reference computes them with ml_dtypes, compile() in int8 / uint8
(rewrite.narrow_to_wide), converting at the model's boundary. Checked against ml_dtypes and
the ONNX reference (ONNX Runtime's Python API cannot return these types) and, where ONNX
Runtime computes a float result from them, against it."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")

import dnnfusion as df  # noqa: E402
from dnnfusion import reference, rewrite  # noqa: E402
from onnx import TensorProto as T, helper, numpy_helper  # noqa: E402

NARROW = [(T.INT4, ml_dtypes.int4), (T.UINT4, ml_dtypes.uint4), (T.INT2, ml_dtypes.int2), (T.UINT2, ml_dtypes.uint2)]
IDS = ["int4", "uint4", "int2", "uint2"]


def _model(nodes, inputs, outputs, inits=(), opset=21):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("to,mt", NARROW, ids=IDS)
def test_cast_from_float_and_back(to, mt):
    """In range: truncation toward zero, as to int8; out of range (undefined in ONNX) and NaN:
    0, as ml_dtypes and the ONNX reference give; the widened graph computes the same."""
    x = np.array([-9, -8.5, -8, -7.5, -2.5, -1.6, -0.5, 0.5, 1.5, 2.5, 2.6, 3.9, 6.5, 7, 7.5, 8, 9, 15, 15.9, 16,
                  1e9, -np.inf, np.inf, np.nan], np.float32)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=to), helper.make_node("Cast", ["y"], ["z"], to=T.FLOAT)],
               [helper.make_tensor_value_info("x", T.FLOAT, [x.size])],
               [helper.make_tensor_value_info("y", to, [x.size]), helper.make_tensor_value_info("z", T.FLOAT, [x.size])])
    with np.errstate(invalid="ignore"):
        want = x.astype(mt)
    g = df.load(m)
    assert g.graph.outputs[0].dtype == {T.INT4: "i4", T.UINT4: "u4", T.INT2: "i2", T.UINT2: "u2"}[to]
    ry, rz = reference.run(g.graph, [x])
    assert ry.dtype == np.dtype(mt) and np.array_equal(ry.astype(np.int8), want.astype(np.int8))
    y, z = df.compile(m)(x)
    assert y.dtype == np.dtype(mt), y.dtype  # the model's own type at the boundary
    assert np.array_equal(y.astype(np.int8), want.astype(np.int8)), (y, want)
    assert np.array_equal(z, want.astype(np.float32))
    assert not rewrite.uses_narrow(rewrite.narrow_to_wide(g))


@pytest.mark.parametrize("to,mt", NARROW, ids=IDS)
def test_cast_from_integers_keeps_the_low_bits(to, mt):
    """From an integer: higher bits discarded and the rest reinterpreted (ONNX: 200 (int16) ->
    -56 (int8)), as ml_dtypes does; also narrow to narrow and narrow to int8."""
    x = np.array([-200, -129, -9, -8, -3, -2, -1, 0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 127, 300], np.int32)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=to), helper.make_node("Cast", ["y"], ["z"], to=T.INT4),
                helper.make_node("Cast", ["y"], ["w"], to=T.INT8)],
               [helper.make_tensor_value_info("x", T.INT32, [x.size])],
               [helper.make_tensor_value_info(n, t, [x.size]) for n, t in (("y", to), ("z", T.INT4), ("w", T.INT8))])
    want = x.astype(mt)
    want_z, want_w = want.astype(ml_dtypes.int4), want.astype(np.int8)
    # y -> int4 -> float inside the graph (not only at the boundary): uint4 15 is int4 -1
    m.graph.node.append(helper.make_node("Cast", ["z"], ["zf"], to=T.FLOAT))
    m.graph.output.append(helper.make_tensor_value_info("zf", T.FLOAT, [x.size]))
    for got in (reference.run(df.load(m).graph, [x]), df.compile(m)(x)):
        y, z, w, zf = got
        assert np.array_equal(y.astype(np.int32), want.astype(np.int32)), (y, want)
        assert np.array_equal(z.astype(np.int32), want_z.astype(np.int32))
        assert w.dtype == np.int8 and np.array_equal(w, want_w)
        np.testing.assert_array_equal(zf, want_z.astype(np.float32))


def test_int4_weights_dequantized_into_a_matmul_match_onnxruntime():
    """The weight-only int4 pattern: a constant int4 weight with a per-column scale and zero
    point, DequantizeLinear, MatMul; against ONNX Runtime with its graph optimizations off
    and against float64. (With them on, ONNX Runtime 1.32 fuses the pair into its own int4
    MatMul, which is 0.036 off the exact result here: a speed trade, not the ONNX semantics.)"""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    w = rng.integers(-8, 8, size=(64, 48)).astype(ml_dtypes.int4)
    zp = rng.integers(-2, 3, size=48).astype(ml_dtypes.int4)
    scale = rng.uniform(0.01, 0.1, size=48).astype(np.float32)
    m = _model([helper.make_node("DequantizeLinear", ["w", "s", "zp"], ["wf"], axis=1),
                helper.make_node("MatMul", ["x", "wf"], ["y"])],
               [helper.make_tensor_value_info("x", T.FLOAT, [5, 64])],
               [helper.make_tensor_value_info("y", T.FLOAT, [5, 48])],
               [numpy_helper.from_array(w, "w"), numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "zp")])
    x = rng.standard_normal((5, 64)).astype(np.float32)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    exact = x.astype(np.float64) @ ((w.astype(np.float64) - zp.astype(np.float64)) * scale)
    got = df.compile(m)(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("to,mt", NARROW, ids=IDS)
def test_quantize_saturates_to_the_narrow_range_and_dequantize_inverts(to, mt):
    """QuantizeLinear to a narrow zero point saturates to the narrow range (not int8's);
    both against the ONNX reference, and the dequantized float result of int4 / uint4 also
    against ONNX Runtime (its QuantizeLinear takes no int2 / uint2)."""
    ort = pytest.importorskip("onnxruntime")
    from onnx.reference import ReferenceEvaluator

    x = np.linspace(-20, 30, 65, dtype=np.float32).reshape(5, 13)
    zero = np.array(1 if to in (T.INT4, T.UINT4) else 0).astype(mt)
    m = _model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
                helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"])],
               [helper.make_tensor_value_info("x", T.FLOAT, [5, 13])],
               [helper.make_tensor_value_info("q", to, [5, 13]), helper.make_tensor_value_info("y", T.FLOAT, [5, 13])],
               [numpy_helper.from_array(np.array(1.5, np.float32), "s"), numpy_helper.from_array(zero, "zp")])
    opset = 21 if to in (T.INT4, T.UINT4) else 25
    m.opset_import[0].version = opset
    want_q, want_y = ReferenceEvaluator(m).run(None, {"x": x})
    lo, hi = int(ml_dtypes.iinfo(mt).min), int(ml_dtypes.iinfo(mt).max)
    assert want_q.astype(np.int32).min() == lo and want_q.astype(np.int32).max() == hi  # both ends saturate
    if opset == 21:
        only_y = _model(list(m.graph.node), list(m.graph.input), [m.graph.output[1]], list(m.graph.initializer))
        by_ort = ort.InferenceSession(only_y.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_array_equal(by_ort, want_y)
    for q, y in (reference.run(df.load(m).graph, [x]), df.compile(m)(x)):
        assert np.array_equal(q.astype(np.int32), want_q.astype(np.int32)), (q, want_q)
        np.testing.assert_array_equal(y, want_y)


def test_inputs_of_a_narrow_type_are_taken_as_ml_dtypes_and_nothing_else():
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT)], [helper.make_tensor_value_info("x", T.INT4, [4])],
               [helper.make_tensor_value_info("y", T.FLOAT, [4])])
    c = df.compile(m)
    x = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    np.testing.assert_array_equal(c(x), [-8, -1, 0, 7])
    with pytest.raises(df.DTypeError, match="int4 in the model, got int8"):
        c(x.astype(np.int8))


def test_text_form_round_trips_a_narrow_constant():
    """Narrow constants are written in hex, their bytes as ml_dtypes holds them."""
    w = np.array([[-8, -1, 0], [1, 6, 7]], ml_dtypes.int4)
    m = _model([helper.make_node("Cast", ["w"], ["y"], to=T.FLOAT)], [], [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])],
               [numpy_helper.from_array(w, "w")])
    g = df.load(m)
    text = g.to_text()
    assert "i4[2,3]" in text
    back = df.parse(text)
    (c,) = [v for v in back.graph.constants if v.name == "w"]
    assert c.dtype == "i4" and np.array_equal(c.numpy().astype(np.int8), w.astype(np.int8))
    assert "i4[2,3] = const 0x080f00010607" in text  # -8 is 0x8, -1 0xf: ml_dtypes' bytes
    np.testing.assert_array_equal(reference.run(back.graph, [])[0], w.astype(np.float32))


def test_a_model_from_onnxruntimes_4_bit_quantizer_matches_it():
    """onnxruntime.quantization's MatMulNBitsQuantizer in QDQ form: uint4 weights with a
    zero point per block of 32 rows (DequantizeLinear block_size=32), MatMul. dnnfusion folds
    the dequantization at compile time and matches ONNX Runtime's unoptimized session exactly;
    ONNX Runtime's default session fuses the pair into its own 4-bit MatMul, which rounds
    differently (0.3% of the output's scale here)."""
    ort = pytest.importorskip("onnxruntime")
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization import matmul_nbits_quantizer as mq

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((64, 96)).astype(np.float32)
    w2 = rng.standard_normal((80, 32)).astype(np.float32)  # 80 rows: the last block is partial
    m = _model([helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                helper.make_node("Slice", ["r", "st", "en", "ax"], ["rs"]), helper.make_node("MatMul", ["rs", "w2"], ["y"])],
               [helper.make_tensor_value_info("x", T.FLOAT, [4, 64])], [helper.make_tensor_value_info("y", T.FLOAT, [4, 32])],
               [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
                numpy_helper.from_array(np.array([0], np.int64), "st"),
                numpy_helper.from_array(np.array([80], np.int64), "en"),
                numpy_helper.from_array(np.array([1], np.int64), "ax")])
    q = mq.MatMulNBitsQuantizer(m, block_size=32, is_symmetric=False, quant_format=QuantFormat.QDQ)
    q.process()
    qm = q.model.model
    dq = [n for n in qm.graph.node if n.op_type == "DequantizeLinear"]
    assert len(dq) == 2 and all(helper.get_attribute_value(a) == 32 for n in dq for a in n.attribute
                                if a.name == "block_size")
    assert {t.data_type for t in qm.graph.initializer if t.name.endswith("_Q4")} == {T.UINT4}
    x = rng.standard_normal((4, 64)).astype(np.float32)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(qm.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    c = df.compile(qm)
    np.testing.assert_allclose(c(x), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(reference.run(df.load(qm).graph, [x])[0], want, rtol=1e-5, atol=1e-4)
    assert c.stats["kernels"] == 2  # generated kernels: the dequantizations folded into the weights


def test_blocked_dequantize_of_a_computed_tensor():
    """block_size with a scale computed at run time (not folded): spread over its blocks by
    Reshape, Expand and Slice in the graph; against the ONNX reference."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(1)
    x = rng.integers(-8, 8, size=(2, 10)).astype(ml_dtypes.int4)
    s = rng.uniform(0.5, 2, size=(2, 3)).astype(np.float32)
    m = _model([helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=1, block_size=4)],
               [helper.make_tensor_value_info("x", T.INT4, [2, 10]), helper.make_tensor_value_info("s", T.FLOAT, [2, 3])],
               [helper.make_tensor_value_info("y", T.FLOAT, [2, 10])])
    want = ReferenceEvaluator(m).run(None, {"x": x, "s": s})[0]
    assert {n.op for n in df.load(m).nodes} >= {"Reshape", "Expand", "Slice", "DequantizeLinear"}
    np.testing.assert_array_equal(df.compile(m)(x, s), want)
    np.testing.assert_array_equal(reference.run(df.load(m).graph, [x, s])[0], want)
