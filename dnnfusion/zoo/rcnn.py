"""Two-stage detectors: Faster R-CNN and Mask R-CNN with a ResNet-50-FPN
backbone, written in plain PyTorch (no torchvision).

Layout follows torchvision's ``fasterrcnn_resnet50_fpn`` / ``maskrcnn_resnet50_fpn``
(Ren et al., NeurIPS 2015; He et al., ICCV 2017; Lin et al., CVPR 2017 FPN).

Simplifications (all so the graph has static shapes, batch size 1):

* no NMS anywhere: the RPN keeps the top-``num_proposals`` (1000) anchors by
  objectness over all FPN levels (torchvision: per-level top-1000, NMS 0.7,
  then top-1000); the detection stage keeps the top-``num_detections`` (100)
  (proposal, class) pairs by softmax score (torchvision: score threshold,
  per-class NMS, top-100);
* no image resizing / normalisation transform (input is already 800x800) and
  no removal of small boxes;
* multi-level RoIAlign (7x7 box / 14x14 mask, sampling ratio 2,
  ``aligned=False``) evaluates RoIAlign on all four levels in the ONNX graph
  and picks each RoI's level (FPN eq. 1) with ``Where``; PyTorch computes only
  the assigned level.  Both are the same function.
"""
from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F

from .cnn import ResNet50

__all__ = ["FasterRCNN", "MaskRCNN", "roi_align"]


def roi_align(feat: torch.Tensor, rois: torch.Tensor, out_hw: tuple[int, int],
              spatial_scale: float, sampling_ratio: int) -> torch.Tensor:
    """RoIAlign (avg, ``aligned=False``) in plain torch ops, batch size 1.

    Matches torchvision ``roi_align(..., aligned=False)`` and ONNX ``RoiAlign``
    with ``coordinate_transformation_mode="output_half_pixel"``.  Because the
    sampling grid is separable, bilinear weights are built per axis and the
    four corners are gathered from the flattened feature map.
    """
    n = rois.shape[0]
    c, h, w = feat.shape[1:]
    oh, ow = out_hw
    sr = sampling_ratio
    r = rois * spatial_scale
    x1, y1, x2, y2 = r.unbind(1)
    bw = (x2 - x1).clamp(min=1.0) / ow
    bh = (y2 - y1).clamp(min=1.0) / oh

    def axis(start, bin_sz, bins, size):
        k = torch.arange(bins * sr, device=feat.device, dtype=feat.dtype)
        pos = torch.div(k, sr, rounding_mode="floor") + ((k % sr) + 0.5) / sr
        v = start[:, None] + pos[None, :] * bin_sz[:, None]          # [N, bins*sr]
        valid = ((v >= -1.0) & (v <= size)).to(feat.dtype)
        v = v.clamp(min=0.0)
        low = v.floor().long()
        edge = low >= size - 1
        low = torch.where(edge, torch.full_like(low, size - 1), low)
        high = torch.where(edge, low, low + 1)
        v = torch.where(edge, low.to(v.dtype), v)
        frac = v - low.to(v.dtype)
        return (low, high), ((1.0 - frac) * valid, frac * valid)

    (yl, yh), (wyl, wyh) = axis(y1, bh, oh, h)
    (xl, xh), (wxl, wxh) = axis(x1, bw, ow, w)
    flat = feat[0].reshape(c, h * w)
    out = feat.new_zeros(c, n, oh * sr, ow * sr)
    for yi, wy in ((yl, wyl), (yh, wyh)):
        for xi, wx in ((xl, wxl), (xh, wxh)):
            idx = (yi[:, :, None] * w + xi[:, None, :]).reshape(-1)
            vals = flat.index_select(1, idx).view(c, n, oh * sr, ow * sr)
            out += vals * (wy[:, :, None] * wx[:, None, :])
    out = out.view(c, n, oh, sr, ow, sr).mean(dim=(3, 5))
    return out.permute(1, 0, 2, 3).contiguous()


class _MultiLevelRoIAlign(torch.autograd.Function):
    """RoIAlign over FPN levels; exports to ONNX ``RoiAlign`` (opset >= 16)."""

    @staticmethod
    def forward(ctx, rois, levels, batch_idx, out_h, out_w, sampling_ratio, scales, *feats):
        out = feats[0].new_zeros(rois.shape[0], feats[0].shape[1], out_h, out_w)
        for lvl, (f, s) in enumerate(zip(feats, scales)):
            sel = (levels == lvl).nonzero().squeeze(1)
            if sel.numel():
                out[sel] = roi_align(f, rois[sel], (out_h, out_w), s, sampling_ratio)
        return out

    @staticmethod
    def symbolic(g, rois, levels, batch_idx, out_h, out_w, sampling_ratio, scales, *feats):
        out = None
        for lvl in reversed(range(len(feats))):
            r = g.op("RoiAlign", feats[lvl], rois, batch_idx, mode_s="avg",
                     output_height_i=out_h, output_width_i=out_w,
                     sampling_ratio_i=sampling_ratio, spatial_scale_f=scales[lvl],
                     coordinate_transformation_mode_s="output_half_pixel")
            if out is None:
                out = r
                continue
            cond = g.op("Equal", levels, g.op("Constant", value_t=torch.tensor(lvl)))
            cond = g.op("Reshape", cond, g.op("Constant", value_t=torch.tensor([-1, 1, 1, 1])))
            out = g.op("Where", cond, r, out)
        return out


def multilevel_roi_align(feats, rois, out_hw, scales, sampling_ratio=2):
    """FPN level mapping (k = floor(4 + log2(sqrt(area)/224)), clamped to
    [2, 5]) followed by RoIAlign on the assigned level."""
    area = (rois[:, 2] - rois[:, 0]) * (rois[:, 3] - rois[:, 1])
    k = torch.floor(4.0 + torch.log2(torch.sqrt(area) / 224.0) + 1e-6)
    k_min = -math.log2(scales[0])
    levels = (k.clamp(k_min, k_min + len(feats) - 1) - k_min).to(torch.int64)
    batch_idx = torch.zeros(rois.shape[0], dtype=torch.int64)
    return _MultiLevelRoIAlign.apply(rois, levels, batch_idx, out_hw[0], out_hw[1],
                                     sampling_ratio, tuple(scales), *feats)


def _decode(deltas, boxes, weights, clip_hw):
    """Standard R-CNN box decoding (BoxCoder) + clipping to the image."""
    wx, wy, ww, wh = weights
    w = boxes[..., 2] - boxes[..., 0]
    h = boxes[..., 3] - boxes[..., 1]
    cx = boxes[..., 0] + 0.5 * w
    cy = boxes[..., 1] + 0.5 * h
    lim = math.log(1000.0 / 16)
    dw = (deltas[..., 2] / ww).clamp(max=lim)
    dh = (deltas[..., 3] / wh).clamp(max=lim)
    pcx = deltas[..., 0] / wx * w + cx
    pcy = deltas[..., 1] / wy * h + cy
    pw, ph = torch.exp(dw) * w, torch.exp(dh) * h
    H, W = clip_hw
    return torch.stack([(pcx - 0.5 * pw).clamp(0, W), (pcy - 0.5 * ph).clamp(0, H),
                        (pcx + 0.5 * pw).clamp(0, W), (pcy + 0.5 * ph).clamp(0, H)], -1)


class FPN(nn.Module):
    """FPN: 1x1 laterals, nearest 2x top-down adds, 3x3 outputs, P6 = maxpool(P5)."""

    def __init__(self, in_channels, out_channels=256):
        super().__init__()
        self.inner = nn.ModuleList(nn.Conv2d(c, out_channels, 1) for c in in_channels)
        self.layer = nn.ModuleList(nn.Conv2d(out_channels, out_channels, 3, padding=1)
                                   for _ in in_channels)

    def forward(self, feats):
        last = self.inner[-1](feats[-1])
        outs = [self.layer[-1](last)]
        for i in range(len(feats) - 2, -1, -1):
            last = self.inner[i](feats[i]) + F.interpolate(last, scale_factor=2.0, mode="nearest")
            outs.insert(0, self.layer[i](last))
        outs.append(F.max_pool2d(outs[-1], 1, 2, 0))
        return outs


class FasterRCNN(nn.Module):
    """Faster R-CNN with ResNet-50-FPN (torchvision layout), 91 COCO classes.

    Backbone ResNet-50 (C2..C5, see :class:`ResNet50`), FPN (256 ch,
    P2..P6), RPN head (shared 3x3 conv + ReLU, 1x1 objectness for 3 anchors,
    1x1 deltas; anchor sizes 32..512 on P2..P6, ratios 0.5/1/2), top-1000
    proposals, MultiScaleRoIAlign 7x7 on P2..P5, TwoMLPHead (2 x FC-1024),
    FastRCNNPredictor (91 scores, 91x4 deltas): 41.81 M params (torchvision
    reports 41.76 M because its frozen BN affine terms are buffers).  Outputs
    ``det_boxes`` [100, 4], ``det_scores`` [100], ``det_labels`` [100] (int64).
    See the module docstring for what is simplified (no NMS).
    """

    def __init__(self, num_classes=91, image_size=800, layers=(3, 4, 6, 3), base=64,
                 fpn_channels=256, representation=1024, num_proposals=1000,
                 num_detections=100):
        super().__init__()
        self.image_size = image_size
        self.num_classes = num_classes
        self.num_proposals, self.num_detections = num_proposals, num_detections
        self.backbone = ResNet50(layers=layers, base=base, return_features=True)
        self.fpn = FPN(self.backbone.out_channels, fpn_channels)
        a = 3
        self.rpn_conv = nn.Conv2d(fpn_channels, fpn_channels, 3, padding=1)
        self.rpn_cls = nn.Conv2d(fpn_channels, a, 1)
        self.rpn_bbox = nn.Conv2d(fpn_channels, 4 * a, 1)
        self.fc6 = nn.Linear(fpn_channels * 49, representation)
        self.fc7 = nn.Linear(representation, representation)
        self.cls_score = nn.Linear(representation, num_classes)
        self.bbox_pred = nn.Linear(representation, num_classes * 4)
        for m in (self.rpn_cls, self.cls_score):
            m.zoo_head = True
        self.rpn_bbox.zoo_std = 0.01  # Detectron init: deltas stay small, so
        self.bbox_pred.zoo_std = 0.001  # proposals/boxes are well-formed
        self.register_buffer("anchors", self._anchors(image_size), persistent=False)

    @staticmethod
    def _anchors(image_size: int) -> torch.Tensor:
        out, n = [], image_size
        sizes = []
        for _ in range(2):  # conv1 /2, maxpool /2 -> P2 at /4
            n = (n + 1) // 2
        for _ in range(5):
            sizes.append(n)
            n = (n + 1) // 2  # every stride-2 op here is ceil(n / 2), P6 included
        ratios = torch.tensor([0.5, 1.0, 2.0])
        for lvl, fm in enumerate(sizes):
            stride = image_size // fm
            scale = float(32 * 2 ** lvl)
            hr = torch.sqrt(ratios)
            ws, hs = scale / hr, scale * hr
            base = (torch.stack([-ws, -hs, ws, hs], 1) / 2).round()
            sh = torch.arange(fm, dtype=torch.float32) * stride
            yy, xx = torch.meshgrid(sh, sh, indexing="ij")
            shifts = torch.stack([xx, yy, xx, yy], -1).reshape(-1, 1, 4)
            out.append((shifts + base[None]).reshape(-1, 4))
        return torch.cat(out)

    def _rpn(self, feats):
        logits, deltas = [], []
        for f in feats:
            t = F.relu(self.rpn_conv(f))
            logits.append(self.rpn_cls(t).permute(0, 2, 3, 1).reshape(-1))
            d = self.rpn_bbox(t)
            n, _, h, w = d.shape
            deltas.append(d.view(n, -1, 4, h, w).permute(0, 3, 4, 1, 2).reshape(-1, 4))
        _, idx = torch.topk(torch.cat(logits), self.num_proposals)
        hw = (self.image_size, self.image_size)
        return _decode(torch.cat(deltas)[idx], self.anchors[idx], (1.0, 1.0, 1.0, 1.0), hw)

    def _detect(self, feats, proposals):
        scales = [1.0 / 2 ** (i + 2) for i in range(4)]
        x = multilevel_roi_align(feats[:4], proposals, (7, 7), scales)
        x = F.relu(self.fc7(F.relu(self.fc6(torch.flatten(x, 1)))))
        scores = torch.softmax(self.cls_score(x), -1)
        deltas = self.bbox_pred(x).view(-1, self.num_classes, 4)
        hw = (self.image_size, self.image_size)
        boxes = _decode(deltas, proposals[:, None, :], (10.0, 10.0, 5.0, 5.0), hw)
        k = self.num_classes - 1  # drop background column
        top_s, top_i = torch.topk(scores[:, 1:].reshape(-1), self.num_detections)
        det_boxes = boxes[:, 1:, :].reshape(-1, 4)[top_i]
        labels = top_i - torch.div(top_i, k, rounding_mode="floor") * k + 1
        return det_boxes, top_s, labels

    def forward(self, x: torch.Tensor):
        feats = self.fpn(list(self.backbone(x)))
        return self._detect(feats, self._rpn(feats))


class MaskRCNN(FasterRCNN):
    """Mask R-CNN (He et al., ICCV 2017) = :class:`FasterRCNN` + mask branch.

    Mask head on the 100 detections: MultiScaleRoIAlign 14x14, 4 x (conv3x3
    256 + ReLU), ConvTranspose 2x2/2 + ReLU, conv1x1 to 91 class masks, the
    detected class's 28x28 mask is selected and passed through a sigmoid:
    44.45 M params (torchvision: 44.40 M, frozen BN).  Extra output
    ``masks`` [100, 1, 28, 28] (not pasted into the image).
    """

    def __init__(self, *args, mask_channels=256, **kw):
        super().__init__(*args, **kw)
        c = mask_channels
        fpn_c = self.rpn_conv.in_channels
        self.mask_head = nn.Sequential(
            nn.Conv2d(fpn_c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(c, c, 2, 2), nn.ReLU(), nn.Conv2d(c, self.num_classes, 1))
        self.mask_head[-1].zoo_head = True

    def forward(self, x: torch.Tensor):
        feats = self.fpn(list(self.backbone(x)))
        boxes, scores, labels = self._detect(feats, self._rpn(feats))
        scales = [1.0 / 2 ** (i + 2) for i in range(4)]
        m = self.mask_head(multilevel_roi_align(feats[:4], boxes, (14, 14), scales))
        idx = labels.view(-1, 1, 1, 1).expand(-1, 1, m.shape[2], m.shape[3])
        return boxes, scores, labels, torch.sigmoid(torch.gather(m, 1, idx))
