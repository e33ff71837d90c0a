"""Model registry: names, builders, example inputs and cached ONNX export.

Every entry is built with random weights under a fixed per-model seed (so two
``get`` calls give identical weights and inputs) and is returned in eval mode.
``reduced=True`` gives the same architecture family at a smaller input and/or
fewer/narrower layers for fast tests; what is reduced is listed per entry in
``_SPECS`` (``reduced_note``) and repeated in :func:`describe`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import tempfile
import warnings
import zlib
from typing import Callable

import torch
from torch import nn

from .common import init_weights, randomize_affine, seeded

__all__ = ["ZooModel", "list", "get", "export_onnx", "describe", "paper_layers"]

_builtin_list = list
_HERE = pathlib.Path(__file__).resolve().parent


@dataclasses.dataclass
class ZooModel:
    name: str
    family: str  # "cnn" | "transformer" | "detection" | "video"
    module: nn.Module
    example_inputs: tuple[torch.Tensor, ...]
    input_names: list[str]
    output_names: list[str]
    description: str
    paper_layers: int | None = None
    reduced: bool = False


@dataclasses.dataclass(frozen=True)
class _Spec:
    family: str
    build: Callable[[bool], nn.Module]
    inputs: Callable[[bool], tuple[torch.Tensor, ...]]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    description: str
    reduced_note: str
    sources: tuple[str, ...]  # zoo files whose text keys the ONNX cache
    paper_layers: int | None = None
    min_opset: int = 13


def _img(full: int, red: int, ch: int = 3):
    return lambda r: (torch.randn(1, ch, red if r else full, red if r else full),)


def _clip(full, red):
    return lambda r: (torch.randn(1, 3, *(red if r else full)),)


def _tokens(r: bool):
    n, vocab = (16, 1000) if r else (128, 30000)
    ids = torch.randint(0, vocab, (1, n), dtype=torch.int64)
    mask = torch.ones(1, n, dtype=torch.int64)
    mask[:, n - n // 8:] = 0  # right padding, so the traced graph keeps the mask path
    return ids, mask


def _b_effnet(r):
    from .cnn import EfficientNetB0
    return EfficientNetB0()


def _b_mbv2(r):
    from .cnn import MobileNetV2
    return MobileNetV2()


def _b_vgg(r):
    from .cnn import VGG16
    return VGG16(image_size=32, width_div=8, fc=256) if r else VGG16()


def _b_resnet(r):
    from .cnn import ResNet50
    return ResNet50()


def _b_unet(r):
    from .cnn import UNet
    return UNet(base=16) if r else UNet()


def _b_ssd(r):
    from .detection import MobileNetV1SSD
    return MobileNetV1SSD(width_div=4) if r else MobileNetV1SSD()


def _b_yolo(r):
    from .detection import YOLOv4
    return YOLOv4(image_size=128, width_div=8) if r else YOLOv4(image_size=416)


def _b_rcnn(mask: bool):
    def build(r):
        from .rcnn import FasterRCNN, MaskRCNN
        cls = MaskRCNN if mask else FasterRCNN
        if not r:
            return cls()
        kw = dict(image_size=128, layers=(1, 1, 1, 1), base=16, fpn_channels=32,
                  representation=64, num_proposals=64, num_detections=8)
        return cls(mask_channels=32, **kw) if mask else cls(**kw)
    return build


def _b_c3d(r):
    from .video import C3D
    return C3D(clip=(16, 56, 56), width_div=4, fc=256) if r else C3D()


def _b_s3d(r):
    from .video import S3D
    return S3D(clip=(16, 64, 64)) if r else S3D()


def _b_text(name):
    def build(r):
        from .transformers_models import build_text_model
        return build_text_model(name, r)
    return build


def _b_vit(r):
    from .transformers_models import build_vit
    return build_vit(r)


_TXT_NOTE = "2 layers, hidden 48-64, vocab 1000, sequence length 16"
_TXT_SRC = ("transformers_models.py",)
_DET_OUT = ("det_boxes", "det_scores", "det_labels")

_SPECS: dict[str, _Spec] = {
    "efficientnet_b0": _Spec(
        "cnn", _b_effnet, _img(224, 64), ("input",), ("logits",),
        "EfficientNet-B0 (Tan & Le, ICML 2019), 1x3x224x224",
        "input 64x64 (full architecture)", ("cnn.py",)),
    "vgg16": _Spec(
        "cnn", _b_vgg, _img(224, 32), ("input",), ("logits",),
        "VGG-16 config D (Simonyan & Zisserman, ICLR 2015), 1x3x224x224",
        "input 32x32, channels /8, FC 256", ("cnn.py",), paper_layers=51),
    "mobilenetv1_ssd": _Spec(
        "detection", _b_ssd, _img(300, 300), ("input",), ("scores", "boxes"),
        "MobileNetV1-SSD (Howard et al. 2017 + Liu et al. ECCV 2016), 1x3x300x300",
        "channels /4 (input stays 300x300 so the 3000 priors are unchanged)",
        ("detection.py",)),
    "yolov4": _Spec(
        "detection", _b_yolo, _img(416, 128), ("input",), ("boxes", "scores"),
        "YOLOv4 CSPDarknet53-SPP-PANet (Bochkovskiy et al. 2020), 1x3x416x416",
        "input 128x128, channels /8", ("detection.py",)),
    "c3d": _Spec(
        "video", _b_c3d, _clip((16, 112, 112), (16, 56, 56)), ("input",), ("logits",),
        "C3D (Tran et al., ICCV 2015), 1x3x16x112x112",
        "clip 16x56x56, channels /4, FC 256", ("video.py",)),
    "s3d": _Spec(
        "video", _b_s3d, _clip((64, 224, 224), (16, 64, 64)), ("input",), ("logits",),
        "S3D (Xie et al., ECCV 2018), 1x3x64x224x224",
        "clip 16x64x64 (full architecture)", ("video.py",)),
    "unet": _Spec(
        "cnn", _b_unet, _img(256, 64), ("input",), ("logits",),
        "U-Net (Ronneberger et al., MICCAI 2015), padded convs, 1x3x256x256",
        "input 64x64, base width 16", ("cnn.py",)),
    "faster_rcnn": _Spec(
        "detection", _b_rcnn(False), _img(800, 128), ("image",), _DET_OUT,
        "Faster R-CNN ResNet-50-FPN (Ren et al., NeurIPS 2015), 1x3x800x800, no NMS",
        "input 128x128, ResNet blocks (1,1,1,1) base 16, FPN 32 ch, 64 proposals, 8 dets",
        ("rcnn.py", "cnn.py"), min_opset=16),
    "mask_rcnn": _Spec(
        "detection", _b_rcnn(True), _img(800, 128), ("image",), _DET_OUT + ("masks",),
        "Mask R-CNN ResNet-50-FPN (He et al., ICCV 2017), 1x3x800x800, no NMS",
        "as faster_rcnn, mask head 32 ch", ("rcnn.py", "cnn.py"), min_opset=16),
    "tinybert": _Spec(
        "transformer", _b_text("tinybert"), _tokens, ("input_ids", "attention_mask"),
        ("last_hidden_state", "pooler_output"),
        "TinyBERT-4L-312 (Jiao et al. 2020), seq len 128", _TXT_NOTE, _TXT_SRC),
    "distilbert": _Spec(
        "transformer", _b_text("distilbert"), _tokens, ("input_ids", "attention_mask"),
        ("last_hidden_state",),
        "DistilBERT-base (Sanh et al. 2019), seq len 128", _TXT_NOTE, _TXT_SRC,
        paper_layers=457),
    "albert": _Spec(
        "transformer", _b_text("albert"), _tokens, ("input_ids", "attention_mask"),
        ("last_hidden_state", "pooler_output"),
        "ALBERT-base-v2 (Lan et al., ICLR 2020), seq len 128", _TXT_NOTE, _TXT_SRC),
    "bert_base": _Spec(
        "transformer", _b_text("bert_base"), _tokens, ("input_ids", "attention_mask"),
        ("last_hidden_state", "pooler_output"),
        "BERT-base (Devlin et al., NAACL 2019), seq len 128", _TXT_NOTE, _TXT_SRC),
    "mobilebert": _Spec(
        "transformer", _b_text("mobilebert"), _tokens, ("input_ids", "attention_mask"),
        ("last_hidden_state", "pooler_output"),
        "MobileBERT (Sun et al., ACL 2020), seq len 128", _TXT_NOTE, _TXT_SRC),
    "gpt2": _Spec(
        "transformer", _b_text("gpt2"), _tokens, ("input_ids", "attention_mask"),
        ("last_hidden_state",),
        "GPT-2 small (Radford et al. 2019), seq len 128", _TXT_NOTE, _TXT_SRC),
    "resnet50": _Spec(
        "cnn", _b_resnet, _img(224, 64), ("input",), ("logits",),
        "ResNet-50 (He et al., CVPR 2016), 1x3x224x224",
        "input 64x64 (full architecture)", ("cnn.py",)),
    "mobilenetv2": _Spec(
        "cnn", _b_mbv2, _img(224, 64), ("input",), ("logits",),
        "MobileNetV2 1.0 (Sandler et al., CVPR 2018), 1x3x224x224",
        "input 64x64 (full architecture)", ("cnn.py",)),
    "vit_b16": _Spec(
        "transformer", _b_vit, _img(224, 32), ("pixel_values",),
        ("last_hidden_state", "pooler_output"),
        "ViT-B/16 (Dosovitskiy et al., ICLR 2021), 1x3x224x224",
        "image 32x32, patch 8, 2 layers, hidden 64", ("transformers_models.py",)),
}


def list() -> _builtin_list[str]:  # noqa: A001 - API name requested by the project
    """Names of all zoo models, in a stable order."""
    return _builtin_list(_SPECS)


def _spec(name: str) -> _Spec:
    try:
        return _SPECS[name]
    except KeyError:
        raise KeyError(f"unknown zoo model {name!r}; valid names: {', '.join(_SPECS)}") from None


def describe(name: str) -> str:
    s = _spec(name)
    return f"{name}: {s.description} | reduced: {s.reduced_note}"


def paper_layers(name: str) -> int | None:
    """The unfused layer count the DNNFusion paper publishes for model ``name`` (VGG-16 and
    DistilBERT), or None; without building the model."""
    return _spec(name).paper_layers


def get(name: str, *, reduced: bool = False) -> ZooModel:
    """Build model ``name`` (random, seeded weights; eval mode) with example inputs."""
    s = _spec(name)
    seed = zlib.crc32(name.encode()) & 0x7FFFFFFF
    with seeded(seed):
        module = s.build(reduced)
        if s.family != "transformer":  # HF models run their own (seeded) init
            init_weights(module)
        else:
            randomize_affine(module)
        module.eval()
    with seeded(seed + 1):
        inputs = s.inputs(reduced)
    desc = s.description
    if reduced:
        shape = "x".join(str(d) for d in inputs[0].shape)
        desc = f"{desc} -- reduced ({s.reduced_note}), input {shape}"
    return ZooModel(name=name, family=s.family, module=module, example_inputs=tuple(inputs),
                    input_names=_builtin_list(s.input_names),
                    output_names=_builtin_list(s.output_names),
                    description=desc, paper_layers=s.paper_layers, reduced=reduced)


def _source_hash(name: str) -> str:
    s = _spec(name)
    h = hashlib.sha256()
    for f in sorted({"registry.py", "common.py", *s.sources}):
        h.update(f.encode())
        h.update((_HERE / f).read_bytes())
    if s.family == "transformer":
        import transformers
        h.update(transformers.__version__.encode())
    return h.hexdigest()[:12]


def cache_dir_default() -> pathlib.Path:
    env = os.environ.get("DNNF_CACHE_DIR")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "dnnfusion" / "zoo"


def dynamic_axes(name: str) -> dict[str, dict[int, str]]:
    """The axes :func:`export_onnx` (``dynamic=True``) leaves symbolic: the batch (axis 0) of
    every input and of the outputs that have one, and for token inputs ([batch, sequence])
    also the sequence (axis 1), with the outputs that carry it (rank >= 3 outputs)."""
    zm = get(name, reduced=True)
    axes: dict[str, dict[int, str]] = {}
    tokens = any(x.dim() == 2 and not x.is_floating_point() for x in zm.example_inputs)
    for n, x in zip(zm.input_names, zm.example_inputs):
        axes[n] = {0: "batch"}
        if tokens and x.dim() == 2:
            axes[n][1] = "sequence"
    with torch.no_grad():
        outs = zm.module(*zm.example_inputs)
    outs = [outs] if isinstance(outs, torch.Tensor) else outs  # (`list` is this module's)
    for n, o in zip(zm.output_names, outs):
        # The examples have batch 1: an output whose first dim is not 1 has no batch axis
        # (the R-CNNs' detections of their one image).
        axes[n] = {0: "batch"} if o.dim() >= 1 and o.shape[0] == 1 else {}
        if tokens and o.dim() >= 3:
            axes[n][1] = "sequence"
    return {n: a for n, a in axes.items() if a}


def export_onnx(name: str, *, reduced: bool = False, opset: int = 17,
                cache_dir: str | os.PathLike | None = None,
                exporter: str = "torchscript", dynamic: bool = False) -> pathlib.Path:
    """Export model ``name`` to ONNX (static shapes; with ``dynamic``, the batch and sequence
    axes of :func:`dynamic_axes` symbolic) and return the cached path.

    Exporter: the TorchScript-based ``torch.onnx.export(..., dynamo=False)``
    by default, because it is the one that works for all 18 models (both were
    tried with ``python -m dnnfusion.zoo.check --exporter ...``, torch 2.13):

    * the R-CNN models use an ``autograd.Function`` whose ``symbolic`` emits
      ONNX ``RoiAlign`` (opset >= 16); only this exporter supports that --
      ``torch.export`` rejects the function's data-dependent eager body;
    * the dynamo exporter only implements opset >= 18 and down-converts: for
      GPT-2 it produced an invalid opset-17 model (``Split`` with the
      opset-18 ``num_outputs`` attribute), and models using ``Mish`` (YOLOv4)
      silently stay at opset 18;
    * it is 3-10x faster to export.

    ``exporter="dynamo"`` (``torch.export`` based) is kept for comparison; it
    works for the other 15 models (its graphs are smaller for transformers).

    The file is keyed by name, reduced flag, opset, exporter, torch version and
    a hash of the zoo source files that define the model; it is written to a
    temp file in the cache directory and moved into place with ``os.replace``;
    stale files for the same name/flag/opset/exporter are then removed.
    Cache directory: ``cache_dir``, else ``$DNNF_CACHE_DIR``, else
    ``~/.cache/dnnfusion/zoo``.
    """
    if exporter not in ("torchscript", "dynamo"):
        raise ValueError(f"exporter must be 'torchscript' or 'dynamo', not {exporter!r}")
    if opset < _spec(name).min_opset:
        raise ValueError(f"{name} needs opset >= {_spec(name).min_opset} (got {opset})")
    cdir = pathlib.Path(cache_dir) if cache_dir is not None else cache_dir_default()
    tv = torch.__version__.replace("+", "_")
    if dynamic and exporter != "torchscript":
        raise ValueError("dynamic exports use the torchscript exporter")
    tag = ("-reduced" if reduced else "") + ("-dynamic" if dynamic else "")
    ex = "" if exporter == "torchscript" else "-dynamo"
    path = cdir / f"{name}{tag}-opset{opset}{ex}-torch{tv}-{_source_hash(name)}.onnx"
    if path.exists():
        return path
    zm = get(name, reduced=reduced)
    cdir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cdir, prefix=f".{path.stem}.", suffix=".tmp")
    os.close(fd)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kw = dict(opset_version=opset, input_names=zm.input_names,
                      output_names=zm.output_names)
            if exporter == "dynamo":
                prog = torch.onnx.export(zm.module, zm.example_inputs, dynamo=True,
                                         verbose=False, **kw)
                prog.save(tmp, external_data=False)
            else:
                if dynamic:
                    kw["dynamic_axes"] = dynamic_axes(name)
                torch.onnx.export(zm.module, zm.example_inputs, tmp, dynamo=False,
                                  do_constant_folding=True, **kw)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    # Drop exports of the same model/config made from older sources or torch.
    for old in cdir.glob(f"{name}{tag}-opset{opset}{ex}-torch*.onnx"):
        if old != path:
            old.unlink(missing_ok=True)
    return path
