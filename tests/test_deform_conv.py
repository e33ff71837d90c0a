"""DeformConv as a GridSample over every tap's shifted input, the mask and a grouped MatMul
(frontends/onnx_deform_conv.py): compiled models against ONNX Runtime and the ONNX reference,
with groups, offset groups, strides, dilations, pads, a mask and a bias, the offsets computed
by a convolution in the model (as deformable networks compute them)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402


def _model(c, oc, hw, k, group=1, og=1, stride=1, dil=1, pad=0, mask=True, bias=True):
    """y = DeformConv(x, W, offset = Conv(x) * 0.5, B, mask = Sigmoid(Conv(x)))."""
    rng = np.random.default_rng(c * 7 + oc)
    kk = k * k
    oh = (hw + 2 * pad - (k - 1) * dil - 1) // stride + 1
    cw = lambda o: (0.3 * rng.standard_normal((o, c, k, k))).astype(np.float32)  # noqa: E731
    conv = dict(kernel_shape=[k, k], strides=[stride] * 2, dilations=[dil] * 2, pads=[pad] * 4)
    inits = [nh.from_array(cw(og * kk * 2), "wo"), nh.from_array(np.array(0.5, np.float32), "half"),
             nh.from_array((0.3 * rng.standard_normal((oc, c // group, k, k))).astype(np.float32), "w")]
    nodes = [h.make_node("Conv", ["x", "wo"], ["o"], **conv), h.make_node("Mul", ["o", "half"], ["off"])]
    ins = ["x", "w", "off", "", ""]
    if bias:
        inits.append(nh.from_array(rng.standard_normal(oc).astype(np.float32), "b"))
        ins[3] = "b"
    if mask:
        inits.append(nh.from_array(cw(og * kk), "wm"))
        nodes += [h.make_node("Conv", ["x", "wm"], ["ml"], **conv), h.make_node("Sigmoid", ["ml"], ["m"])]
        ins[4] = "m"
    while not ins[-1]:
        ins.pop()
    nodes.append(h.make_node("DeformConv", ins, ["y"], group=group, offset_group=og, **conv))
    g = h.make_graph(nodes, "dcn", [h.make_tensor_value_info("x", T.FLOAT, [2, c, hw, hw])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, oc, oh, oh])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 19)])
    m.ir_version = 9
    return m


CASES = {
    "3x3": dict(c=4, oc=6, hw=7, k=3, pad=1),
    "groups2_og2": dict(c=4, oc=6, hw=6, k=3, group=2, og=2, pad=1),
    "stride2_dil2": dict(c=3, oc=4, hw=9, k=3, stride=2, dil=2, pad=2, bias=False),
    "no_mask_og4": dict(c=8, oc=8, hw=5, k=2, og=4, mask=False),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_deform_conv_against_ort(case):
    m = _model(**CASES[case])
    x = np.random.default_rng(3).standard_normal([2, CASES[case]["c"]] + [CASES[case]["hw"]] * 2).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(ReferenceEvaluator(m).run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    cm = df.compile(m.SerializeToString())
    np.testing.assert_allclose(np.asarray(cm(x)), want, rtol=1e-4, atol=1e-5)


def test_deform_conv_refusals_name_the_node():
    m = _model(c=4, oc=6, hw=7, k=3, pad=1)
    m.graph.node[-1].name = "dcn"
    for a in m.graph.node[-1].attribute:
        if a.name == "pads":
            a.ints[:] = [0, 0, 0, 0]  # the offsets were made for pads 1: shape mismatch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(df.ShapeError, match=r"node 'dcn' \(DeformConv\): offset must have shape \[2, 18, 5, 5\], "
                                                r"got \[2, 18, 7, 7\]"):
            df.load(m)
