"""Resize with coordinate_transformation_mode tf_crop_and_resize and a roi computed at run time
(issue 17 part 3): the generated kernel reads the roi from its buffer on every call, so one
compile serves every crop. Checked against ONNX Runtime with several rois through one compiled
model (a roi baked in at compile time would get all but one wrong), on every x86 dialect
(compiled only where this CPU lacks it) and on the OpenCL target, whose kernel computes each
axis' taps from the roi where a constant roi's are baked into the program."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

from codegen_runner import compile_only, run  # noqa: E402
from dialects import compile_only as lacks_here, params  # noqa: E402

X_SHAPE = (1, 2, 6, 7)
# name: (roi dtype, axes attribute or None, output sizes, mode, rois to try, other attributes)
CASES = {
    "all_axes_linear": (np.float32, None, (1, 2, 4, 5), "linear",
                        [[0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8], [0, 0, 0.0, 0.1, 1, 1, 0.9, 0.5],
                         [0, 0, -0.2, 0.3, 1, 1, 1.3, 0.9]], {}),
    "axes_3_2_nearest_f64_roi": (np.float64, [3, 2], (1, 2, 3, 5), "nearest",
                                 [[0.1, 0.2, 0.9, 0.7], [0.5, 0.0, 1.0, 0.4], [-0.3, 0.25, 0.6, 1.2]], {}),
    "axes_2_3_cubic": (np.float32, [2, 3], (1, 2, 5, 4), "cubic",
                       [[0.2, 0.3, 0.8, 0.9], [0.0, 0.0, 1.0, 1.0], [0.45, 0.1, 0.55, 0.95]], {"exclude_outside": 1}),
    "antialias_down_linear": (np.float32, [2, 3], (1, 2, 3, 2), "linear",
                              [[0.0, 0.0, 1.0, 1.0], [0.1, 0.3, 0.7, 0.9], [-0.1, 0.2, 1.1, 0.6]], {"antialias": 1}),
}


def _model(case, roi_dtype=None):
    rdt, axes, out, mode, rois, more = CASES[case]
    rdt = roi_dtype or rdt
    attrs = dict(mode=mode, coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0, **more)
    if axes is not None:
        attrs["axes"] = axes
    sizes = onnx.numpy_helper.from_array(np.array(out if axes is None else [out[a] for a in axes], np.int64), "sizes")
    rtype = T.DOUBLE if rdt == np.float64 else T.FLOAT
    g = h.make_graph([h.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], **attrs)], case,
                     [h.make_tensor_value_info("x", T.FLOAT, X_SHAPE),
                      h.make_tensor_value_info("roi", rtype, (len(rois[0]),))],
                     [h.make_tensor_value_info("y", T.FLOAT, out)], [sizes])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 19)])


def _feeds(case):
    rdt, _, _, _, rois, _ = CASES[case]
    x = np.random.default_rng(3).standard_normal(X_SHAPE).astype(np.float32)
    return [{"x": x, "roi": np.array(r, rdt)} for r in rois]


def _onnxruntime(case, feeds):
    """ONNX Runtime's result; for a float64 roi (which ONNX Runtime 1.32 fails to read: "Tensor
    type mismatch") that of the same model with the roi in float32, the precision the kernel
    computes its taps in."""
    if CASES[case][0] == np.float64:
        m, feeds = _model(case, np.float32), {**feeds, "roi": feeds["roi"].astype(np.float32)}
    else:
        m = _model(case)
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@pytest.mark.parametrize("case", list(CASES))
def test_one_compile_serves_every_roi(case):
    m = _model(case)
    compiled = df.compile(m.SerializeToString())
    outs = []
    for feeds in _feeds(case):
        want = _onnxruntime(case, feeds)
        got = compiled(**feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        outs.append(got)
    assert not np.array_equal(outs[0], outs[1])  # the rois differ, so must the crops


@pytest.mark.parametrize("isa", params())
def test_every_dialect_reads_the_roi_at_run_time(isa):
    """All cases in one module, each dialect; the second roi of each case against ONNX
    Runtime (the first would also match a kernel that had kept an example's roi)."""
    from onnx import compose

    models = {c: _model(c) for c in CASES}
    parts = [compose.add_prefix(m, f"{k}_").graph for k, m in models.items()]
    merged = h.make_model(h.make_graph([n for p in parts for n in p.node], "merged", [i for p in parts for i in p.input],
                                       [o for p in parts for o in p.output], [t for p in parts for t in p.initializer]),
                          opset_imports=[h.make_opsetid("", 19)])
    ecg = df.load(merged.SerializeToString())
    if lacks_here(isa):
        compile_only(ecg, "dnnfusion", isa)
        return
    feeds, want = {}, []
    for c, m in models.items():
        f = _feeds(c)[1]
        feeds.update({f"{c}_{k}": v for k, v in f.items()})
        want.append(_onnxruntime(c, f))
    outs, _ = run(ecg, feeds, planner="dnnfusion", isa=isa)
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)


def test_a_roi_of_the_wrong_length_is_refused():
    m = _model("axes_2_3_cubic")
    m.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 8  # 4 axes' worth for 2 axes
    with pytest.raises((df.ShapeError, df.ModelFormatError), match=r"roi"):
        df.compile(m.SerializeToString())


@pytest.mark.parametrize("case", list(CASES))
def test_opencl_computes_the_taps_from_the_roi(case, ocl_device):
    compiled = df.compile(_model(case).SerializeToString(), target="opencl")
    for feeds in _feeds(case):
        np.testing.assert_allclose(compiled(**feeds), _onnxruntime(case, feeds), rtol=1e-5, atol=1e-5)
