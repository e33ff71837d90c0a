"""Tests of single kernels of the NumPy reference interpreter (dnnfusion/reference.py)
beyond ONNX's backend cases (test_reference_kernels.py): hand-written checks of its
conventions (unknown operators, integer division, float32 precision, TopK ties, Slice
clamping); kernels where ONNX's cases are thin checked against PyTorch; and the geometric
kernels (Conv, ConvTranspose, pools, Resize, RoiAlign, NonMaxSuppression) against
onnxruntime on seeded random attribute combinations.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from dnnfusion.reference import run_node

from reference_helpers import _assert_same, _rand

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# --------------------------------------------------------------------------------------------
# Hand-written checks
# --------------------------------------------------------------------------------------------
def test_unknown_op_and_unsupported_attribute() -> None:
    with pytest.raises(NotImplementedError, match="NoSuchOp"):
        run_node("NoSuchOp", [], {})
    with pytest.raises(NotImplementedError, match="Cast.*to"):
        run_node("Cast", [_rand(2)], {"to": 14})  # complex64
    with pytest.raises(NotImplementedError, match="Pad.*mode"):
        run_node("Pad", [_rand(2), np.array([1, 1])], {"mode": "mirror"})


def test_integer_div_truncates_toward_zero() -> None:
    a = np.array([-7, 7, -7, 7, 6], dtype=np.int32)
    b = np.array([2, -2, -2, 2, 3], dtype=np.int32)
    (y,) = run_node("Div", [a, b], {})
    np.testing.assert_array_equal(y, [-3, -3, 3, 3, 2])
    assert y.dtype == np.int32


def test_float32_stays_float32_and_erf_is_precise() -> None:
    import math

    x = np.linspace(-4, 4, 101, dtype=np.float32)
    (y,) = run_node("Erf", [x], {})
    assert y.dtype == np.float32
    want = np.array([math.erf(float(v)) for v in x], dtype=np.float32)
    np.testing.assert_allclose(y, want, rtol=1e-7, atol=0)


def test_topk_ties_prefer_lower_index() -> None:
    x = np.array([[3, 1, 3, 2, 1]], dtype=np.int64)
    values, idx = run_node("TopK", [x, np.array([3])], {"axis": 1})
    np.testing.assert_array_equal(values, [[3, 3, 2]])
    np.testing.assert_array_equal(idx, [[0, 2, 3]])
    values, idx = run_node("TopK", [x, np.array([2])], {"axis": 1, "largest": 0})
    np.testing.assert_array_equal(idx, [[1, 4]])


def test_slice_negative_steps_and_clamping() -> None:
    x = np.arange(10, dtype=np.float32)
    cases = [((-1,), (-1000,), (-1,)), ((20,), (2,), (-3,)), ((-100,), (100,), (4,))]
    for starts, ends, steps in cases:
        (y,) = run_node("Slice", [x, np.array(starts), np.array(ends), None, np.array(steps)],
                        {})
        np.testing.assert_array_equal(y, x[slice(starts[0], ends[0], steps[0])])


@pytest.fixture(scope="module")
def F() -> Any:
    """torch.nn.functional (the tests using it are skipped when torch is missing)."""
    return pytest.importorskip("torch").nn.functional


def _t(x: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(x).double()


def test_conv3d_groups_against_torch(F: Any) -> None:
    x, w, b = _rand(2, 4, 7, 8, 6), _rand(6, 2, 3, 2, 3), _rand(6)
    attrs = {"group": 2, "strides": [2, 1, 2], "dilations": [1, 2, 1],
             "pads": [1, 0, 2, 1, 0, 2]}
    (y,) = run_node("Conv", [x, w, b], attrs)
    want = F.conv3d(_t(x), _t(w), _t(b), stride=(2, 1, 2), padding=(1, 0, 2),
                    dilation=(1, 2, 1), groups=2).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_conv_same_lower_against_explicit_pads() -> None:
    x, w = _rand(1, 2, 7, 6), _rand(3, 2, 4, 3)
    (same,) = run_node("Conv", [x, w], {"auto_pad": "SAME_LOWER", "strides": [2, 2]})
    # out = ceil(in / stride) = (4, 3); total pads = (3*2+4-7, 2*2+3-6) = (3, 1); lower gets more
    (explicit,) = run_node("Conv", [x, w], {"pads": [2, 1, 1, 0], "strides": [2, 2]})
    np.testing.assert_array_equal(same, explicit)


def test_conv_transpose2d_output_padding_groups_against_torch(F: Any) -> None:
    x, w, b = _rand(2, 4, 5, 4), _rand(4, 3, 3, 2), _rand(6)
    attrs = {"group": 2, "strides": [2, 3], "dilations": [2, 1], "pads": [1, 0, 2, 0],
             "output_padding": [1, 2]}
    (y,) = run_node("ConvTranspose", [x, w, b], attrs)
    # torch pads symmetrically: run with pads (1, 0) and crop the extra end pad of dim 0.
    want = F.conv_transpose2d(_t(x), _t(w), _t(b), stride=(2, 3), padding=(1, 0),
                              output_padding=(1, 2), groups=2, dilation=(2, 1)).numpy()
    np.testing.assert_allclose(y, want[:, :, :-1, :], rtol=1e-5, atol=1e-5)


def test_conv_transpose_output_shape(F: Any) -> None:
    x, w = _rand(1, 2, 3, 3), _rand(2, 1, 3, 3)
    (y,) = run_node("ConvTranspose", [x, w], {"strides": [2, 2], "output_shape": [7, 8]})
    assert y.shape == (1, 1, 7, 8)
    want = F.conv_transpose2d(_t(x), _t(w), stride=2, output_padding=(0, 1)).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_maxpool_against_torch(F: Any, ceil_mode: bool) -> None:
    x = _rand(2, 3, 9, 10)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 1, 1, 1],
             "dilations": [1, 2], "ceil_mode": int(ceil_mode)}
    y, idx = run_node("MaxPool", [x], attrs)
    want, want_idx = F.max_pool2d(_t(x).float(), (3, 2), (2, 3), (1, 1), (1, 2),
                                  ceil_mode=ceil_mode, return_indices=True)
    np.testing.assert_array_equal(y, want.numpy())
    plane = np.arange(6).reshape(2, 3, 1, 1) * 90  # ONNX indices count N and C too
    np.testing.assert_array_equal(idx - plane, want_idx.numpy())


def test_maxpool_storage_order_column_major() -> None:
    x = _rand(1, 1, 4, 5)
    _, row = run_node("MaxPool", [x], {"kernel_shape": [2, 2]})
    _, col = run_node("MaxPool", [x], {"kernel_shape": [2, 2], "storage_order": 1})
    h, w = np.divmod(row, 5)
    np.testing.assert_array_equal(col, h + w * 4)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_averagepool_against_torch(F: Any, include_pad: int, ceil_mode: bool) -> None:
    x = _rand(2, 3, 8, 7)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
             "ceil_mode": int(ceil_mode), "count_include_pad": include_pad}
    (y,) = run_node("AveragePool", [x], attrs)
    want = F.avg_pool2d(_t(x), 3, 2, 1, ceil_mode=ceil_mode,
                        count_include_pad=bool(include_pad)).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_layernorm_against_torch(F: Any) -> None:
    x, scale, bias = _rand(3, 4, 5, 6), _rand(5, 6), _rand(5, 6)
    y, mean, inv_std = run_node("LayerNormalization", [x, scale, bias],
                                {"axis": -2, "epsilon": 1e-3})
    want = F.layer_norm(_t(x), (5, 6), _t(scale), _t(bias), eps=1e-3).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    assert mean.shape == inv_std.shape == (3, 4, 1, 1)
    assert y.dtype == mean.dtype == np.float32


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_against_torch(F: Any, approximate: str) -> None:
    x = _rand(1000) * 4
    (y,) = run_node("Gelu", [x], {"approximate": approximate})
    want = F.gelu(_t(x), approximate=approximate).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-7)


def test_resize_bilinear_and_bicubic_against_torch(F: Any) -> None:
    x = _rand(1, 2, 5, 6)
    scales = np.array([1, 1, 2.0, 1.5], dtype=np.float32)
    (y,) = run_node("Resize", [x, None, scales], {"mode": "linear"})
    want = F.interpolate(_t(x), scale_factor=(2.0, 1.5), mode="bilinear",
                         align_corners=False).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    sizes = np.array([1, 2, 9, 4], dtype=np.int64)
    (y,) = run_node("Resize", [x, None, None, sizes],
                    {"mode": "cubic", "coordinate_transformation_mode": "align_corners"})
    want = F.interpolate(_t(x), size=(9, 4), mode="bicubic", align_corners=True).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------------
# Randomised differential checks against onnxruntime (seeded, so the cases are fixed)
# --------------------------------------------------------------------------------------------
def _ort_run(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any],
             out_dtypes: list[np.dtype], opset: int = 21) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper

    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = [f"out{i}" for i in range(len(out_dtypes))]
    graph = helper.make_graph(
        [helper.make_node(op, names, outs, **attrs)], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for n, x in zip(names, inputs) if x is not None],
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(d), None)
         for n, d in zip(outs, out_dtypes)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {n: x for n, x in zip(names, inputs) if x is not None})


def _random_window(rng: np.random.Generator, nd: int, auto_pad: str) -> dict[str, Any]:
    kernel = [int(k) for k in rng.integers(1, 4, nd)]
    attrs: dict[str, Any] = {"kernel_shape": kernel,
                             "strides": [int(s) for s in rng.integers(1, 3, nd)]}
    if auto_pad == "NOTSET":
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel * 2]
        attrs["dilations"] = [int(d) for d in rng.integers(1, 3, nd)]
    else:
        attrs["auto_pad"] = auto_pad  # onnxruntime ignores dilations in SAME pool padding
    return attrs


def _differential_cases() -> list[tuple[str, list[np.ndarray | None], dict[str, Any], int]]:
    rng = np.random.default_rng(2024)

    def rand(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    cases = []
    for nd, auto_pad in itertools.product((1, 2, 3), ("NOTSET", "SAME_UPPER", "SAME_LOWER",
                                                       "VALID")):
        attrs = _random_window(rng, nd, auto_pad)
        spatial = [int(s) for s in rng.integers(5, 9, nd)]
        weights = rand(6, 2, *attrs["kernel_shape"])
        cases.append(("Conv", [rand(2, 4, *spatial), weights, rand(6)], {**attrs, "group": 2}, 1))
        pool = {**attrs, "ceil_mode": int(auto_pad == "NOTSET")}
        cases.append(("MaxPool", [rand(2, 3, *spatial)], {**pool, "storage_order": nd % 2}, 2))
        cases.append(("AveragePool", [rand(2, 3, *spatial)],
                      {**pool, "count_include_pad": nd % 2}, 1))
        transposed = {k: v for k, v in attrs.items() if k != "kernel_shape"}
        if auto_pad == "NOTSET":
            transposed["output_padding"] = [int(s) - 1 for s in transposed["strides"]]
        cases.append(("ConvTranspose", [rand(2, 4, *spatial[:nd]), rand(4, 3, *attrs[
            "kernel_shape"]), rand(6)], {**transposed, "group": 2}, 1))
    modes = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
             "asymmetric", "tf_crop_and_resize")
    for mode, ctm in itertools.product(("nearest", "linear", "cubic"), modes):
        attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
        roi = None
        if ctm == "tf_crop_and_resize":
            roi = np.array([0.1, -0.2, 0.9, 1.1], dtype=np.float32)
            attrs["extrapolation_value"] = 7.0
        if mode == "cubic":
            attrs.update(cubic_coeff_a=-0.5, exclude_outside=1)
        scales = np.array([rng.choice([0.6, 1.5, 2.7]), rng.choice([0.5, 1.3, 3.0])], np.float32)
        cases.append(("Resize", [rand(2, 3, 5, 6), roi, scales], {**attrs, "axes": [2, 3]}, 1))
    for mode in ("linear", "cubic"):
        scales = np.array([0.45, 0.3], dtype=np.float32)
        cases.append(("Resize", [rand(1, 2, 9, 11), None, scales],
                      {"mode": mode, "antialias": 1, "axes": [2, 3]}, 1))
    for mode, ctm in itertools.product(("avg", "max"), ("half_pixel", "output_half_pixel")):
        corner = rng.uniform(-2, 9, (6, 2))
        rois = np.concatenate([corner, corner + rng.uniform(0, 6, (6, 2))], 1)
        attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "output_height": 3,
                 "output_width": 2, "sampling_ratio": 2 if mode == "max" else 0,
                 "spatial_scale": 0.5}
        cases.append(("RoiAlign", [rand(2, 3, 10, 12), rois.astype(np.float32),
                                   rng.integers(0, 2, 6)], attrs, 1))
    for center_point_box in (0, 1):
        boxes = rng.uniform(0, 10, (2, 30, 4)).astype(np.float32)
        scores = np.round(rng.uniform(0, 1, (2, 3, 30)), 1).astype(np.float32)
        limits = [np.array([5]), np.array([0.4], np.float32), np.array([0.2], np.float32)]
        cases.append(("NonMaxSuppression", [boxes, scores, *limits],
                      {"center_point_box": center_point_box}, 1))
    return cases


DIFFERENTIAL = _differential_cases()


@pytest.mark.parametrize("op, inputs, attrs, num_outputs", DIFFERENTIAL,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(DIFFERENTIAL)])
def test_against_onnxruntime(op: str, inputs: list, attrs: dict, num_outputs: int) -> None:
    got = run_node(op, inputs, attrs, num_outputs)
    want = _ort_run(op, inputs, attrs, [g.dtype for g in got])
    for i, (g, w) in enumerate(zip(got, want)):
        _assert_same(f"{op} output {i}", g, w, (1e-4, 1e-4))
