"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (issue 17: dtype and operator
coverage where ONNX Runtime has it): each op against the NumPy reference and ONNX Runtime,
per tensor and per axis (negative axes too), on int8/uint8/int16/uint16 (and int32 into
DequantizeLinear), with and without a zero point, on ties of round-half-to-even and saturating
at both ends; in every x86 dialect (compiled only where this CPU lacks one) and on OpenCL; a
whole QDQ model quantized by onnxruntime.quantization; and the clear errors for what dnnfusion
refuses (float8e8m0, a blocked scale of the wrong shape, a scale that does not fit its axis,
mismatched types)."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from codegen_runner import run_or_compile  # noqa: E402
from dialects import params  # noqa: E402

SHAPE = (2, 3, 4, 37)  # 37 columns: a vector body and a tail where a fused f32 op vectorises
QTYPES = {"u8": T.UINT8, "i8": T.INT8, "u16": T.UINT16, "i16": T.INT16}
# axis -> (the axis ONNX gets, the per-axis scale: powers of two, so x / scale is exact and the
# ties below are ties); None: per tensor
AXES = {"tensor": None, "axis1": 1, "axis-3": -3, "axis-1": -1}


def _np(code):
    return onnx.helper.tensor_dtype_to_np_dtype(code)


def _scale(axis):
    if axis is None:
        return np.array(0.5, np.float32)
    n = SHAPE[axis]
    return (2.0 ** np.arange(-2, n - 2)).astype(np.float32)  # 0.25, 0.5, 1, 2, ...


def _zero_point(code, axis, scale):
    info = np.iinfo(_np(code))
    zp = np.linspace(info.min + 3, info.max - 7, scale.size).round().astype(_np(code))
    return zp.reshape(scale.shape)


def _model(op, code, axis, with_zp, opset=21, then_relu=False):
    """One QuantizeLinear (float x -> `code`; without a zero point, output_dtype says `code`) or
    DequantizeLinear (`code` x -> float) with a constant scale and zero point; with
    `then_relu`, a Q -> DQ -> Relu chain fused in one loop."""
    scale = _scale(axis)
    inits = [nh.from_array(scale, "s")]
    names = ["s"]
    if with_zp:
        inits.append(nh.from_array(_zero_point(code, axis, scale), "z"))
        names.append("z")
    kw = {} if axis is None else {"axis": axis}
    if op == "QuantizeLinear" and not with_zp and code != T.UINT8:
        kw["output_dtype"] = code  # (opset 21) without a zero point, else uint8
    if then_relu:
        nodes = [h.make_node("QuantizeLinear", ["x", *names], ["q"], **kw),
                 h.make_node("DequantizeLinear", ["q", *names], ["d"], **kw), h.make_node("Relu", ["d"], ["y"])]
        ins, outs = [("x", T.FLOAT)], [("q", code), ("y", T.FLOAT)]
    else:
        nodes = [h.make_node(op, ["x", *names], ["y"], **kw)]
        ins = [("x", T.FLOAT if op == "QuantizeLinear" else code)]
        outs = [("y", code if op == "QuantizeLinear" else T.FLOAT)]
    g = h.make_graph(nodes, "q", [h.make_tensor_value_info(n, t, SHAPE) for n, t in ins],
                     [h.make_tensor_value_info(n, t, SHAPE) for n, t in outs], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _float_x(code, axis, with_zp):
    """Ties (k + 0.5 after the exact division, both signs), values saturating at both ends
    (and infinities), and random values of a few tens of quantization steps."""
    rng = np.random.default_rng(3)
    scale = _scale(axis)
    if axis is not None:
        shape = [1] * len(SHAPE)
        shape[axis % len(SHAPE)] = scale.size
        scale = scale.reshape(shape)
    scale = np.broadcast_to(scale, SHAPE).reshape(-1)
    info = np.iinfo(_np(code))
    span = float(info.max) - float(info.min)
    q = rng.integers(-300, 300, scale.size).astype(np.float32) + 0.5  # ties
    q[::7] = rng.standard_normal(q[::7].shape).astype(np.float32) * 40
    q[1::11] = 3 * span + 1000   # above the top whatever the zero point
    q[2::11] = -3 * span - 1000  # below the bottom
    x = (q * scale).astype(np.float32)
    x[3], x[4] = np.inf, -np.inf
    return x.reshape(SHAPE)


def _int_x(code):
    info = np.iinfo(_np(code))
    x = np.random.default_rng(4).integers(info.min, info.max, SHAPE, endpoint=True).astype(_np(code))
    x.reshape(-1)[:2] = info.min, info.max
    return x


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _check(got, model, feeds):
    """Equal to ONNX Runtime and to the NumPy reference, element for element."""
    ref = df.load(model.SerializeToString()).run_reference(**feeds)
    for g, o, r in zip(got, _ort(model, feeds), ref):
        assert g.dtype == o.dtype == np.asarray(r).dtype
        np.testing.assert_array_equal(g, o)
        np.testing.assert_array_equal(g, r)


CASES = [(op, q, a, z) for op in ("QuantizeLinear", "DequantizeLinear") for q in QTYPES for a in AXES
         for z in (True, False)]


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("op,qtype,axis,zp", CASES, ids=["-".join([o[:1], q, a, "zp" if z else "nozp"])
                                                         for o, q, a, z in CASES])
def test_op_every_dialect(op, qtype, axis, zp, isa):
    code, ax = QTYPES[qtype], AXES[axis]
    m = _model(op, code, ax, zp)
    feeds = {"x": _float_x(code, ax, zp) if op == "QuantizeLinear" else _int_x(code)}
    got = run_or_compile(m, feeds, isa)
    if got is not None:
        _check(got, m, feeds)


@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("qtype", ["u8", "i8"])
def test_quantize_dequantize_relu_fused_every_dialect(qtype, isa):
    """Q -> DQ -> Relu per axis: the f32 Relu reads the dequantized value in the same loop."""
    code = QTYPES[qtype]
    m = _model("", code, 1, True, then_relu=True)
    feeds = {"x": _float_x(code, 1, True)}
    got = run_or_compile(m, feeds, isa)
    if got is not None:
        _check(got, m, feeds)


def test_int32_dequantize_and_output_dtype():
    """DequantizeLinear of int32 (a quantized bias), output_dtype float16 (opset 23: a Cast
    after it), QuantizeLinear output_dtype int8 without a zero point (opset 21)."""
    x = np.array([[-300000, -7, 0, 5, 500000, 123456]], np.int32)
    s = nh.from_array(np.array(0.125, np.float32), "s")
    g = h.make_graph([h.make_node("DequantizeLinear", ["x", "s"], ["y"]),
                      h.make_node("DequantizeLinear", ["x", "s"], ["h"], output_dtype=T.FLOAT16),
                      h.make_node("QuantizeLinear", ["y", "s"], ["q"], output_dtype=T.INT8)], "i32",
                     [h.make_tensor_value_info("x", T.INT32, x.shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, x.shape), h.make_tensor_value_info("h", T.FLOAT16, x.shape),
                      h.make_tensor_value_info("q", T.INT8, x.shape)], [s])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 23)])
    got = df.compile(m.SerializeToString())(x=x)
    np.testing.assert_array_equal(got[0], x.astype(np.float32) * 0.125)
    assert got[1].dtype == np.float16
    np.testing.assert_array_equal(got[1], (x.astype(np.float32) * 0.125).astype(np.float16))
    np.testing.assert_array_equal(got[2], np.array([[-128, -7, 0, 5, 127, 127]], np.int8))
    ref = df.load(m.SerializeToString()).run_reference(x=x)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)


def test_float16_scale_and_data():
    """float16 x and scale (opset 19+): computed in float32, as compile() does a float16 model,
    equal to ONNX Runtime and the reference."""
    s = nh.from_array(np.array([0.5, 0.25, 2.0], np.float16), "s")
    z = nh.from_array(np.array([1, -3, 7], np.int8), "z")
    g = h.make_graph([h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
                      h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)], "f16",
                     [h.make_tensor_value_info("x", T.FLOAT16, (2, 3, 5))],
                     [h.make_tensor_value_info("q", T.INT8, (2, 3, 5)), h.make_tensor_value_info("y", T.FLOAT16, (2, 3, 5))],
                     [s, z])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 21)])
    x = (np.random.default_rng(0).standard_normal((2, 3, 5)) * 30).astype(np.float16)
    _check(df.compile(m.SerializeToString())(x=x), m, {"x": x})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_fake_quantization_export():
    """torch's fake_quantize_per_tensor_affine / _per_channel_affine exported to ONNX (Q -> DQ
    pairs, a per-channel int8 one along axis 1) compile to one kernel equal to ONNX Runtime."""
    torch = pytest.importorskip("torch")
    import io

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.s, self.z = torch.tensor([0.05, 0.1, 0.2]), torch.tensor([0, 2, -4], dtype=torch.int32)

        def forward(self, x):
            y = torch.fake_quantize_per_tensor_affine(x, 0.1, 3, 0, 255)
            z = torch.fake_quantize_per_channel_affine(x, self.s, self.z, 1, -128, 127)
            return torch.relu(y) + z

    x = torch.randn(2, 3, 4, 37, generator=torch.Generator().manual_seed(0)) * 5
    b = io.BytesIO()
    torch.onnx.export(M(), (x,), b, input_names=["x"], output_names=["y"], opset_version=13, dynamo=False)
    assert [n.op_type for n in onnx.load_from_string(b.getvalue()).graph.node].count("QuantizeLinear") == 2
    compiled = df.compile(b.getvalue())
    want = ort.InferenceSession(b.getvalue(), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    np.testing.assert_array_equal(compiled(x=x.numpy()), want)
    assert compiled.stats["kernels"] == 1


def test_nan_quantizes_to_the_lowest_value():
    """NaN: ONNX leaves it undefined; dnnfusion gives the type's lowest value, as ONNX Runtime's
    vector path does, in the reference and in generated code alike."""
    m = _model("QuantizeLinear", T.INT8, None, True)
    x = np.full(SHAPE, np.nan, np.float32)
    got = df.compile(m.SerializeToString())(x=x)
    want = df.load(m.SerializeToString()).run_reference(x=x)[0]
    np.testing.assert_array_equal(got, want)
    assert (want == -128).all()


def test_opencl(ocl_device):
    for op, qtype, axis, zp in [("QuantizeLinear", "u8", "axis1", True), ("QuantizeLinear", "i16", "tensor", True),
                                ("QuantizeLinear", "u8", "axis-1", False), ("DequantizeLinear", "i8", "axis-3", True),
                                ("DequantizeLinear", "u16", "tensor", False)]:
        code, ax = QTYPES[qtype], AXES[axis]
        m = _model(op, code, ax, zp)
        feeds = {"x": _float_x(code, ax, zp) if op == "QuantizeLinear" else _int_x(code)}
        _check([df.compile(m.SerializeToString(), target="opencl")(**feeds)], m, feeds)
    m = _model("", T.INT8, 1, True, then_relu=True)
    feeds = {"x": _float_x(T.INT8, 1, True)}
    _check(df.compile(m.SerializeToString(), target="opencl")(**feeds), m, feeds)


# --------------------------------------------------------------------------------------------
# DynamicQuantizeLinear (imported as its ONNX function body)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("isa", params())
@pytest.mark.parametrize("lo,hi", [(-3.0, 5.0), (0.5, 9.0), (-7.0, -1.0)])
def test_dynamic_quantize_linear_every_dialect(lo, hi, isa):
    g = h.make_graph([h.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], "dql",
                     [h.make_tensor_value_info("x", T.FLOAT, (5, 37))],
                     [h.make_tensor_value_info("y", T.UINT8, (5, 37)), h.make_tensor_value_info("s", T.FLOAT, ()),
                      h.make_tensor_value_info("z", T.UINT8, ())])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    x = np.random.default_rng(6).uniform(lo, hi, (5, 37)).astype(np.float32)
    got = run_or_compile(m, {"x": x}, isa)
    if got is not None:
        _check(got, m, {"x": x})


def test_dequantize_of_a_large_weight_folds_and_an_expand_does_not():
    """fold_constants keeps a node whose outputs outgrow its inputs by more than 64 KiB, except
    an elementwise op that only widens elements: DequantizeLinear of 65536 int8 weights (256
    KiB once float32) folds; an Expand of a [1, 256] float32 row to [256, 256] (256 KiB from
    1 KiB) stays a node."""
    from dnnfusion.rewrite import fold_constants

    w = np.random.default_rng(7).integers(-127, 127, (256, 256)).astype(np.int8)
    inits = [nh.from_array(w, "w"), nh.from_array(np.full(256, 0.01, np.float32), "s"),
             nh.from_array(np.ones((1, 256), np.float32), "row"), nh.from_array(np.array([256, 256], np.int64), "to")]
    g = h.make_graph([h.make_node("DequantizeLinear", ["w", "s"], ["wf"], axis=0),
                      h.make_node("Expand", ["row", "to"], ["big"]), h.make_node("MatMul", ["x", "wf"], ["m"]),
                      h.make_node("Add", ["m", "big"], ["y"])], "fold",
                     [h.make_tensor_value_info("x", T.FLOAT, (256, 256))],
                     [h.make_tensor_value_info("y", T.FLOAT, (256, 256))], inits)
    folded = fold_constants(df.load(h.make_model(g, opset_imports=[h.make_opsetid("", 21)]).SerializeToString()))
    ops = sorted(n.op for n in folded.graph.nodes)
    assert ops == ["Add", "Expand", "MatMul"], ops
    mm = next(n for n in folded.graph.nodes if n.op == "MatMul")
    assert mm.inputs[1].is_constant and mm.inputs[1].dtype == "f32"
    np.testing.assert_array_equal(mm.inputs[1].numpy(), w.astype(np.float32) * np.float32(0.01))


# --------------------------------------------------------------------------------------------
# A whole QDQ model
# --------------------------------------------------------------------------------------------
def _qdq_cnn(tmp_path):
    """Conv-BN-ReLU x2 + Gemm in torch with random weights and BN statistics, exported to ONNX
    and quantized by onnxruntime.quantization.quantize_static (QDQ, uint8 activations, int8
    per-channel weights) with a tiny random calibration set."""
    torch = pytest.importorskip("torch")
    q = pytest.importorskip("onnxruntime.quantization")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
            self.c2, self.b2 = torch.nn.Conv2d(8, 16, 3, padding=1, stride=2), torch.nn.BatchNorm2d(16)
            self.fc = torch.nn.Linear(16 * 8 * 8, 32)  # 32768 int8 weights: 128 KiB once float32

        def forward(self, x):
            x = torch.relu(self.b1(self.c1(x)))
            x = torch.relu(self.b2(self.c2(x)))
            return self.fc(torch.flatten(x, 1))

    torch.manual_seed(0)
    net = Net().eval()
    for b in (net.b1, net.b2):
        b.running_mean.uniform_(-0.5, 0.5), b.running_var.uniform_(0.5, 2.0)
        b.weight.data.uniform_(0.5, 1.5), b.bias.data.uniform_(-0.2, 0.2)
    fp, qp = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    torch.onnx.export(net, (torch.randn(2, 3, 16, 16),), str(fp), input_names=["x"], output_names=["y"],
                      opset_version=17, dynamo=False)
    rng = np.random.default_rng(1)

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": rng.standard_normal((2, 3, 16, 16)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    q.quantize_static(str(fp), str(qp), Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
    return qp


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_whole_qdq_model_against_onnxruntime(tmp_path, capsys):
    qp = _qdq_cnn(tmp_path)
    proto = onnx.load(str(qp))
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("QuantizeLinear") >= 4 and ops.count("DequantizeLinear") >= 8, ops
    x = np.random.default_rng(2).standard_normal((2, 3, 16, 16)).astype(np.float32)
    compiled = df.compile(str(qp), profile="off")  # yellow cells by the estimate: a fixed plan
    got = compiled(x=x)
    # ONNX Runtime without graph optimizations runs the QDQ graph as written: float Conv/Gemm on
    # dequantized values, as dnnfusion does, so only the float32 summation order differs; a sum
    # that lands on the other side of a rounding boundary moves one activation by one step of
    # its scale, and that can reach the output. Allowed: 2 steps of the output's scale.
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(str(qp), plain, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # ONNX Runtime's default session fuses DQ -> Conv -> Q into QLinearConv (integer sums,
    # requantized by one float multiply instead of a division): more values sit one step apart.
    # Allowed: 4 steps of the output's scale, or 2 past ONNX Runtime's own distance between its
    # two sessions: on an AVX2 CPU without VNNI its u8s8 kernels (pairwise products summed in
    # int16, which saturates) put the fused session up to 6 steps from the plain one (Zen 3),
    # where dnnfusion equals the plain one exactly.
    fused = ort.InferenceSession(str(qp), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    y_scale = float(nh.to_array(next(t for t in proto.graph.initializer if t.name == next(
        n.input[1] for n in proto.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == "y"))))
    err_plain, err_fused = np.abs(got - want).max(), np.abs(got - fused).max()
    assert err_plain <= 2 * y_scale + 1e-6, (err_plain, y_scale)
    ort_own = float(np.abs(fused - want).max())
    assert err_fused <= max(4 * y_scale, ort_own + 2 * y_scale) + 1e-6, (err_fused, ort_own, y_scale)
    # Every weight's and bias's DequantizeLinear folded: Conv and Gemm read float32 constants
    # (the Gemm's 32768 weights too, four times their int8 bytes).
    g = compiled.graph.graph
    anchors = [n for n in g.nodes if n.op in ("Conv", "NhwcConv", "Gemm", "MatMul")]
    assert len(anchors) == 3
    for n in anchors:
        for w in n.inputs[1:]:
            assert w.is_constant and w.dtype == "f32", (n.name, w.name, w.dtype)
    assert not [n for n in g.nodes if n.op == "DequantizeLinear" and n.inputs[0].is_constant]
    # The activations' Q/DQ pairs are One-to-One: they fuse into the Conv/Gemm blocks, one kernel
    # per anchor.
    with capsys.disabled():
        print(f"\nQDQ CNN: {len(ops)} ONNX nodes, {compiled.stats['operators_before']} ECG operators -> "
              f"{compiled.stats['kernels']} kernels; max |error| vs ORT unoptimized {err_plain:.3g}, vs ORT "
              f"default {err_fused:.3g} (output scale {y_scale:.3g})")
    assert compiled.stats["kernels"] == 3


def test_per_channel_activations_in_a_channels_last_region():
    """Hand-written QDQ residual block whose activations are quantized per channel between two
    3x3 convolutions: with layout='nhwc' the layout pass moves the per-channel scale [1, C, 1, 1]
    with the data, and the Q/DQ pairs stay in the convolutions' kernels."""
    rng = np.random.default_rng(0)
    c = 16
    inits = [nh.from_array(np.array(0.05, np.float32), "sa"), nh.from_array(np.array(128, np.uint8), "za"),
             nh.from_array(rng.uniform(0.001, 0.01, c).astype(np.float32), "ws"),
             nh.from_array(np.zeros(c, np.int8), "wz"),
             nh.from_array(rng.uniform(0.02, 0.08, c).astype(np.float32), "cs"),
             nh.from_array(rng.integers(100, 150, c).astype(np.uint8), "cz")]
    inits += [nh.from_array(rng.integers(-127, 127, (c, c, 3, 3)).astype(np.int8), w) for w in ("w1q", "w2q")]

    def qdq(x, s, z, y, **kw):
        return [h.make_node("QuantizeLinear", [x, s, z], [y + "_q"], **kw),
                h.make_node("DequantizeLinear", [y + "_q", s, z], [y], **kw)]

    nodes = [*qdq("x", "sa", "za", "xd"),
             h.make_node("DequantizeLinear", ["w1q", "ws", "wz"], ["w1"], axis=0),
             h.make_node("DequantizeLinear", ["w2q", "ws", "wz"], ["w2"], axis=0),
             h.make_node("Conv", ["xd", "w1"], ["c1"], pads=[1] * 4), h.make_node("Relu", ["c1"], ["r1"]),
             *qdq("r1", "cs", "cz", "r1d", axis=1),
             h.make_node("Conv", ["r1d", "w2"], ["c2"], pads=[1] * 4), h.make_node("Add", ["c2", "xd"], ["a"]),
             *qdq("a", "sa", "za", "y")]
    g = h.make_graph(nodes, "block", [h.make_tensor_value_info("x", T.FLOAT, (1, c, 32, 32))],
                     [h.make_tensor_value_info("y", T.FLOAT, (1, c, 32, 32))], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    x = (rng.standard_normal((1, c, 32, 32)) * 3).astype(np.float32)
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(m, plain, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for layout in ("nchw", "nhwc"):
        compiled = df.compile(m, layout=layout, profile="off")
        assert compiled.stats["layout"]["convs_nhwc"] == (2 if layout == "nhwc" else 0)
        assert compiled.stats["kernels"] <= 3, compiled.explain()
        err = np.abs(compiled(x=x) - want)
        # The channels-last convolution sums in another order: a float32 sum on the other side of a
        # rounding boundary moves an output by one step of its scale (0.05); at most a few do.
        assert err.max() <= 0.05 + 1e-6 and (err > 0).mean() < 1e-3, (layout, err.max(), (err > 0).sum())


# --------------------------------------------------------------------------------------------
# What dnnfusion refuses, with the node, the attribute or type, and what to do
# --------------------------------------------------------------------------------------------
def _one(op, inputs, inits, out_type, opset=21, x_type=T.FLOAT, shape=(2, 3), **attrs):
    g = h.make_graph([h.make_node(op, ["x", *inputs], ["y"], name="n", **attrs)], "bad",
                     [h.make_tensor_value_info("x", x_type, shape)], [h.make_tensor_value_info("y", out_type, shape)],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)]).SerializeToString()


S = nh.from_array(np.array(0.5, np.float32), "s")
S3 = nh.from_array(np.array([0.5, 1.0, 2.0], np.float32), "s")
REFUSALS = {
    "e8m0_zero_point": (lambda: _one("QuantizeLinear", ["s", "z"], [S, h.make_tensor("z", T.FLOAT8E8M0, [], [1])],
                                     T.FLOAT8E8M0, opset=24),
                        df.ShapeError, r"node 'n' \(QuantizeLinear\): quantizes to .*float8 \(not e8m0\).*got f8e8m0"),
    "e8m0_input": (lambda: _one("DequantizeLinear", ["s"], [S], T.FLOAT, x_type=T.FLOAT8E8M0, opset=24),
                   df.ShapeError, r"node 'n' \(DequantizeLinear\): x must be int8, .*float8 \(not e8m0\).*got f8e8m0"),
    "e8m0_output_dtype": (lambda: _one("QuantizeLinear", ["s"], [S], T.FLOAT8E8M0, opset=24, output_dtype=T.FLOAT8E8M0),
                          df.DTypeError, r"node 'n' \(QuantizeLinear\): output_dtype FLOAT8E8M0 .*QuantType"),
    "block_scale_shape": (lambda: _one("QuantizeLinear", ["s"], [nh.from_array(np.ones((2, 3), np.float32), "s")],
                                       T.UINT8, shape=(2, 4), axis=1, block_size=2),
                          df.ShapeError, r"node 'n' \(QuantizeLinear\): with block_size=2 along axis 1, the scale 's' "
                                         r"must have shape \[2, 2\] \(x 'x' is \[2, 4\]\), got \[2, 3\]"),
    "dq_block_negative": (lambda: _one("DequantizeLinear", ["s"], [nh.from_array(np.ones((2, 2), np.float32), "s")],
                                       T.FLOAT, x_type=T.UINT8, shape=(2, 4), axis=1, block_size=-2),
                          df.ModelFormatError, r"\(DequantizeLinear\): block_size must be positive, got -2"),
    "scale_length": (lambda: _one("QuantizeLinear", ["s"], [S3], T.UINT8, shape=(2, 4), axis=1),
                     df.ShapeError, r"scale 's' has 3 entries, but x 'x' \[2, 4\] has 4 along axis 1"),
    "axis_range": (lambda: _one("QuantizeLinear", ["s"], [S3], T.UINT8, shape=(2, 3), axis=2),
                   df.ShapeError, r"axis 2 is out of range"),
    "zero_point_shape": (lambda: _one("QuantizeLinear", ["s", "z"], [S3, nh.from_array(np.zeros(2, np.uint8), "z")],
                                      T.UINT8, axis=1),
                         df.ShapeError, r"zero point 'z' has shape \[2\], the scale 's' \[3\]"),
    "dq_zero_point_type": (lambda: _one("DequantizeLinear", ["s", "z"], [S, nh.from_array(np.array(0, np.uint8), "z")],
                                        T.FLOAT, x_type=T.INT8),
                           df.ShapeError, r"\(DequantizeLinear\): zero point must have x's element type i8, got u8"),
    "q_zero_point_int32": (lambda: _one("QuantizeLinear", ["s", "z"], [S, nh.from_array(np.array(0, np.int32), "z")],
                                        T.INT32),
                           df.ShapeError, r"\(QuantizeLinear\): quantizes to int8, uint8, int16, uint16, int4, .*got i32"),
    "output_dtype_vs_zero_point": (lambda: _one("QuantizeLinear", ["s", "z"], [S, nh.from_array(np.array(0, np.uint8),
                                                                                                  "z")],
                                                T.INT8, output_dtype=T.INT8),
                                   df.ModelFormatError, r"output_dtype INT8 differs from the type u8"),
    "precision": (lambda: _one("QuantizeLinear", ["s"], [S], T.UINT8, opset=23, precision=T.BFLOAT16),
                  df.UnsupportedOperatorError, r"precision=BFLOAT16 is not supported"),
    "int_x": (lambda: _one("QuantizeLinear", ["s"], [S], T.UINT8, opset=23, x_type=T.INT32),
              df.DTypeError, r"\(QuantizeLinear\): x 'x' is i32; .*Cast x to float first"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_are_clear_errors(case):
    make, err, match = REFUSALS[case]
    with pytest.raises(err, match=match):
        df.compile(make())
