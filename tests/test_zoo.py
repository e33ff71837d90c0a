"""Tests for dnnfusion.zoo (reduced models; full-size models are only built,
never run -- ``python -m dnnfusion.zoo.check`` runs the full-size comparison)."""
from __future__ import annotations

import os

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dnnfusion import zoo  # noqa: E402

NAMES = ["efficientnet_b0", "vgg16", "mobilenetv1_ssd", "yolov4", "c3d", "s3d", "unet",
         "faster_rcnn", "mask_rcnn", "tinybert", "distilbert", "albert", "bert_base",
         "mobilebert", "gpt2", "resnet50", "mobilenetv2", "vit_b16"]

REDUCED_SHAPES = {
    "efficientnet_b0": [(1, 1000)],
    "vgg16": [(1, 1000)],
    "mobilenetv1_ssd": [(1, 3000, 21), (1, 3000, 4)],
    "yolov4": [(1, 1008, 4), (1, 1008, 80)],
    "c3d": [(1, 487)],
    "s3d": [(1, 400)],
    "unet": [(1, 2, 64, 64)],
    "faster_rcnn": [(8, 4), (8,), (8,)],
    "mask_rcnn": [(8, 4), (8,), (8,), (8, 1, 28, 28)],
    "tinybert": [(1, 16, 48), (1, 48)],
    "distilbert": [(1, 16, 64)],
    "albert": [(1, 16, 64), (1, 64)],
    "bert_base": [(1, 16, 64), (1, 64)],
    "mobilebert": [(1, 16, 64), (1, 64)],
    "gpt2": [(1, 16, 64)],
    "resnet50": [(1, 1000)],
    "mobilenetv2": [(1, 1000)],
    "vit_b16": [(1, 17, 64), (1, 64)],
}

FAMILIES = {"cnn", "transformer", "detection", "video"}


TRANSFORMERS = {"tinybert", "distilbert", "albert", "bert_base", "mobilebert", "gpt2", "vit_b16"}


def _need(name=None, *modules):
    """Skip when an optional dependency is missing (transformers for HF models)."""
    mods = list(modules) + (["transformers"] if name in TRANSFORMERS else [])
    for m in mods:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"{m} not installed")


def _flat(out):
    return [out] if isinstance(out, torch.Tensor) else list(out)


def test_paper_layer_counts_without_building():
    assert zoo.paper_layers("vgg16") == 51 and zoo.paper_layers("distilbert") == 457
    assert zoo.paper_layers("resnet50") is None
    with pytest.raises(KeyError, match="unknown zoo model 'vgg'"):
        zoo.paper_layers("vgg")


def test_list_names_and_order():
    assert zoo.list() == NAMES
    assert zoo.list() == zoo.list()


def test_unknown_name_raises_keyerror_listing_names():
    with pytest.raises(KeyError) as exc:
        zoo.get("alexnet")
    assert "vgg16" in str(exc.value) and "gpt2" in str(exc.value)


@pytest.mark.parametrize("name", NAMES)
def test_reduced_model(name):
    _need(name)
    a = zoo.get(name, reduced=True)
    b = zoo.get(name, reduced=True)
    assert a.name == name and a.family in FAMILIES and a.reduced
    assert a.description and "reduced" in a.description and isinstance(a.input_names, list)
    assert not a.module.training
    # deterministic weights and example inputs
    sa, sb = a.module.state_dict(), b.module.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    assert len(a.example_inputs) == len(a.input_names)
    for x, y in zip(a.example_inputs, b.example_inputs):
        assert torch.equal(x, y)
    with torch.no_grad():
        outs = _flat(a.module(*a.example_inputs))
    assert [tuple(o.shape) for o in outs] == REDUCED_SHAPES[name]
    assert len(outs) == len(a.output_names)
    for o in outs:
        if o.is_floating_point():
            assert torch.isfinite(o).all()
            assert o.abs().max() > 0


def test_paper_layers():
    _need("distilbert")
    assert zoo.get("vgg16", reduced=True).paper_layers == 51
    assert zoo.get("distilbert", reduced=True).paper_layers == 457


def _ort_compare(name, cache_dir, **kw):
    _need(name, "onnx", "onnxruntime")
    import onnxruntime as ort

    zm = zoo.get(name, reduced=True)
    path = zoo.export_onnx(name, reduced=True, cache_dir=cache_dir, **kw)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == zm.input_names
    assert [o.name for o in sess.get_outputs()] == zm.output_names
    got = sess.run(None, {n: x.numpy() for n, x in zip(zm.input_names, zm.example_inputs)})
    with torch.no_grad():
        ref = _flat(zm.module(*zm.example_inputs))
    for r, g in zip(ref, got):
        r = r.numpy()
        assert r.shape == g.shape
        scale = max(float(np.abs(r).max()), 1e-6)
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-4 * scale)
    return path, sess, zm


@pytest.mark.parametrize("name", ["vgg16", "c3d", "mask_rcnn", "tinybert", "gpt2", "yolov4"])
def test_export_matches_onnxruntime(name, tmp_path):
    _ort_compare(name, tmp_path)


def test_export_cache_and_env(tmp_path, monkeypatch):
    stale = tmp_path / "vgg16-reduced-opset17-torch0.0-000000000000.onnx"
    stale.write_bytes(b"old")
    p1, _, _ = _ort_compare("vgg16", tmp_path)
    assert not stale.exists()  # superseded export pruned
    mtime = p1.stat().st_mtime_ns
    assert zoo.export_onnx("vgg16", reduced=True, cache_dir=tmp_path) == p1
    assert p1.stat().st_mtime_ns == mtime  # cache hit, not rewritten
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "env"))
    p2 = zoo.export_onnx("vgg16", reduced=True, opset=16)
    assert p2.parent == tmp_path / "env" and p2 != p1 and p2.exists()


def test_transformer_mask_is_an_input(tmp_path):
    """The traced graph must not bake in the example attention mask."""
    _, sess, zm = _ort_compare("bert_base", tmp_path)
    ids = zm.example_inputs[0]
    mask = torch.zeros_like(zm.example_inputs[1])
    mask[:, :5] = 1
    got = sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
    with torch.no_grad():
        ref = zm.module(ids, mask)
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r.numpy(), rtol=0, atol=1e-4)


def test_rcnn_needs_opset_16(tmp_path):
    with pytest.raises(ValueError, match="opset"):
        zoo.export_onnx("mask_rcnn", reduced=True, opset=13, cache_dir=tmp_path)


def test_roi_align_matches_onnx_roialign():
    _need(None, "onnx", "onnxruntime")
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from dnnfusion.zoo.rcnn import roi_align

    g = torch.Generator().manual_seed(0)
    feat = torch.randn(1, 4, 20, 24, generator=g)
    xy = torch.rand(64, 2, generator=g) * 120 - 10
    rois = torch.cat([xy, xy + torch.rand(64, 2, generator=g) * 60], 1)
    rois[:3, 2:] = rois[:3, :2]  # degenerate boxes
    node = helper.make_node("RoiAlign", ["X", "R", "B"], ["Y"], mode="avg", output_height=7,
                            output_width=7, sampling_ratio=2, spatial_scale=0.25,
                            coordinate_transformation_mode="output_half_pixel")
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4, 20, 24]),
         helper.make_tensor_value_info("R", TensorProto.FLOAT, [64, 4]),
         helper.make_tensor_value_info("B", TensorProto.INT64, [64])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"X": feat.numpy(), "R": rois.numpy(), "B": np.zeros(64, np.int64)})[0]
    ref = roi_align(feat, rois, (7, 7), 0.25, 2).numpy()
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5)


# Published parameter counts (millions) and, for the rest, the counts of the
# reference implementations the modules are checked against.
PUBLISHED_PARAMS = {
    "resnet50": 25.6, "vgg16": 138.4, "mobilenetv2": 3.5, "efficientnet_b0": 5.3,
    "bert_base": 110.0, "gpt2": 124.0,
}
REFERENCE_PARAMS = {
    "yolov4": 64.36,          # darknet yolov4.cfg
    "mobilenetv1_ssd": 9.47,  # pytorch-ssd mb1-ssd (VOC)
    "s3d": 8.32,              # torchvision s3d
    "unet": 31.03,            # Ronneberger et al., 2 classes
    "c3d": 79.99,             # Caffe C3D, 487 Sports-1M classes
    "faster_rcnn": 41.81,     # torchvision 41.76 + 0.05 trainable (not frozen) BN affine
    "mask_rcnn": 44.46,       # torchvision 44.40 + 0.05 BN affine
    "distilbert": 66.36, "tinybert": 14.35, "albert": 11.68, "mobilebert": 24.85,
    "vit_b16": 86.39,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS) + sorted(REFERENCE_PARAMS))
def test_full_size_param_counts(name):
    _need(name)
    zm = zoo.get(name)
    assert "reduced" not in zm.description
    assert not zm.reduced
    n = sum(p.numel() for p in zm.module.parameters()) / 1e6
    if name in PUBLISHED_PARAMS:
        assert n == pytest.approx(PUBLISHED_PARAMS[name], rel=0.02)
    else:
        assert n == pytest.approx(REFERENCE_PARAMS[name], rel=0.005)
