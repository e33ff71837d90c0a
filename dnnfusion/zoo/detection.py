"""Single-shot detectors: MobileNetV1-SSD and YOLOv4, in plain PyTorch.

Both include their box decoding (priors / grid offsets, exp, sigmoid ...) in
the graph because those elementwise tails are typical fusion targets; the
data-dependent NMS is left out (its output size is not static).
"""
from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from .common import ConvBNAct

__all__ = ["MobileNetV1SSD", "YOLOv4"]


def _dw_sep(cin: int, cout: int, stride: int) -> nn.Sequential:
    """MobileNetV1 depthwise-separable block: dw3x3+BN+ReLU, pw1x1+BN+ReLU."""
    return nn.Sequential(ConvBNAct(cin, cin, 3, stride, groups=cin), ConvBNAct(cin, cout, 1))


class MobileNetV1SSD(nn.Module):
    """MobileNetV1-SSD at 300x300: SSD (Liu et al., ECCV 2016) on a
    MobileNetV1 backbone (Howard et al. 2017, Table 1), laid out like the
    widely used ``pytorch-ssd`` ``mb1-ssd`` model (VOC, 21 classes).

    Backbone: conv3x3/2 (32) + 13 depthwise-separable blocks (64, 128/2, 128,
    256/2, 256, 512/2, 5x512, 1024/2, 1024).  Feature maps: the 11th block's
    output (512 @ 19x19) and the last (1024 @ 10x10), plus 4 extra layers
    (1x1 reduce + 3x3/2 conv, ReLU) giving 512@5, 256@3, 256@2, 256@1.  Each
    of the 6 maps has 3x3 conv heads for 6 priors x (4 box + 21 class)
    values: 3000 priors in total.  Outputs: ``scores`` (softmax, 1x3000x21)
    and ``boxes`` (priors-decoded corner boxes with variances 0.1/0.2,
    normalized coordinates, 1x3000x4).  ~9.5 M parameters.  NMS omitted.
    """

    SPECS = [(16, (60, 105)), (32, (105, 150)), (64, (150, 195)), (100, (195, 240)),
             (150, (240, 285)), (300, (285, 330))]  # (shrinkage, (min, max) box size)

    def __init__(self, num_classes: int = 21, image_size: int = 300, width_div: int = 1):
        super().__init__()
        d = width_div
        cfg = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 \
            + [(1024, 2), (1024, 1)]
        layers: list[nn.Module] = [ConvBNAct(3, 32 // d, 3, 2)]
        cin = 32 // d
        for c, s in cfg:
            layers.append(_dw_sep(cin, c // d, s))
            cin = c // d
        self.base_a = nn.Sequential(*layers[:12])  # -> 512 @ 19x19
        self.base_b = nn.Sequential(*layers[12:])  # -> 1024 @ 10x10
        ext = [(1024, 256, 512), (512, 128, 256), (256, 128, 256), (256, 128, 256)]
        self.extras = nn.ModuleList(
            nn.Sequential(nn.Conv2d(a // d, b // d, 1), nn.ReLU(),
                          nn.Conv2d(b // d, c // d, 3, 2, 1), nn.ReLU())
            for a, b, c in ext)
        chans = [512 // d, 1024 // d, 512 // d, 256 // d, 256 // d, 256 // d]
        self.num_classes = num_classes
        self.reg = nn.ModuleList(nn.Conv2d(c, 6 * 4, 3, padding=1) for c in chans)
        self.cls = nn.ModuleList(nn.Conv2d(c, 6 * num_classes, 3, padding=1) for c in chans)
        for m in itertools.chain(self.reg, self.cls):
            m.zoo_head = True
        self.register_buffer("priors", self._priors(image_size), persistent=False)

    @classmethod
    def _priors(cls, image_size: int) -> torch.Tensor:
        sizes = []
        n = image_size
        for _ in range(4):  # stem + 3 stride-2 blocks -> /16
            n = (n + 1) // 2
        for _ in range(6):
            sizes.append(n)
            n = (n + 1) // 2
        out = []
        for fm, (shrink, (lo, hi)) in zip(sizes, cls.SPECS):
            scale = image_size / shrink
            for j, i in itertools.product(range(fm), repeat=2):
                x, y = (i + 0.5) / scale, (j + 0.5) / scale
                s = lo / image_size
                out.append([x, y, s, s])
                b = math.sqrt(hi * lo) / image_size
                out.append([x, y, b, b])
                for r in (2, 3):
                    r = math.sqrt(r)
                    out += [[x, y, s * r, s / r], [x, y, s / r, s * r]]
        return torch.tensor(out, dtype=torch.float32).clamp_(0.0, 1.0)

    def forward(self, x: torch.Tensor):
        feats = [self.base_a(x)]
        feats.append(self.base_b(feats[0]))
        for e in self.extras:
            feats.append(e(feats[-1]))
        b = x.shape[0]
        conf = torch.cat([h(f).permute(0, 2, 3, 1).reshape(b, -1, self.num_classes)
                          for h, f in zip(self.cls, feats)], 1)
        loc = torch.cat([h(f).permute(0, 2, 3, 1).reshape(b, -1, 4)
                         for h, f in zip(self.reg, feats)], 1)
        p = self.priors
        cxcy = loc[..., :2] * 0.1 * p[:, 2:] + p[:, :2]
        wh = torch.exp(loc[..., 2:] * 0.2) * p[:, 2:]
        boxes = torch.cat([cxcy - wh / 2, cxcy + wh / 2], dim=-1)
        return torch.softmax(conf, dim=2), boxes


# ----------------------------------------------------------------------------- YOLOv4

def _cbm(cin, cout, k, s=1):  # conv + BN + Mish (backbone)
    return ConvBNAct(cin, cout, k, s, act=nn.Mish)


def _cbl(cin, cout, k, s=1):  # conv + BN + LeakyReLU(0.1) (neck / head)
    return ConvBNAct(cin, cout, k, s, act=lambda: nn.LeakyReLU(0.1))


class _DarkRes(nn.Module):
    def __init__(self, c: int, mid: int):
        super().__init__()
        self.conv1 = _cbm(c, mid, 1)
        self.conv2 = _cbm(mid, c, 3)
        self.conv2[1].zoo_residual_last = True

    def forward(self, x):
        return x + self.conv2(self.conv1(x))


class _CSPStage(nn.Module):
    """CSPDarknet53 stage: downsample, split into two 1x1 paths, residual
    blocks on one, concat [blocks, bypass], 1x1 transition (yolov4.cfg)."""

    def __init__(self, cin: int, cout: int, n: int, first: bool):
        super().__init__()
        part = cout if first else cout // 2
        mid = cout // 2 if first else part
        self.down = _cbm(cin, cout, 3, 2)
        self.split0 = _cbm(cout, part, 1)
        self.split1 = _cbm(cout, part, 1)
        self.blocks = nn.Sequential(*[_DarkRes(part, mid) for _ in range(n)])
        self.post = _cbm(part, part, 1)
        self.transition = _cbm(2 * part, cout, 1)

    def forward(self, x):
        x = self.down(x)
        b = self.post(self.blocks(self.split1(x)))
        return self.transition(torch.cat([b, self.split0(x)], 1))


def _five(cin: int, c: int) -> nn.Sequential:
    """The 5-conv (1x1, 3x3, 1x1, 3x3, 1x1) stacks of the PANet neck."""
    return nn.Sequential(_cbl(cin, c, 1), _cbl(c, 2 * c, 3), _cbl(2 * c, c, 1),
                         _cbl(c, 2 * c, 3), _cbl(2 * c, c, 1))


class YOLOv4(nn.Module):
    """YOLOv4, Bochkovskiy et al. 2020, following ``yolov4.cfg`` (darknet).

    CSPDarknet53 backbone (Mish; conv 32, then CSP stages with 1, 2, 8, 8, 4
    residual blocks -> 64..1024 channels), SPP (max-pool 5/9/13, stride 1),
    PANet neck (LeakyReLU 0.1, nearest 2x upsampling, 5-conv stacks) and 3
    YOLO heads (3x3 conv + 1x1 conv to 3 x (5 + 80) channels) at strides 8,
    16, 32: 110 conv layers, 64.36 M parameters.  Input 416x416 (the cfg's
    other standard size is 608).  The YOLO-layer decoding is included
    (sigmoid with ``scale_x_y`` 1.2/1.1/1.05, grid offsets, exp * anchors):
    outputs ``boxes`` (1x10647x4, x1y1x2y2 pixels) and ``scores``
    (1x10647x80, objectness * class prob).  NMS omitted.
    """

    ANCHORS = [(12, 16), (19, 36), (40, 28), (36, 75), (76, 55), (72, 146),
               (142, 110), (192, 243), (459, 401)]
    SCALE_XY = (1.2, 1.1, 1.05)

    def __init__(self, num_classes: int = 80, image_size: int = 416, width_div: int = 1):
        super().__init__()
        d = width_div
        c = [x // d for x in (32, 64, 128, 256, 512, 1024)]
        self.num_classes = num_classes
        self.stem = _cbm(3, c[0], 3)
        self.stage1 = _CSPStage(c[0], c[1], 1, True)
        self.stage2 = _CSPStage(c[1], c[2], 2, False)
        self.stage3 = _CSPStage(c[2], c[3], 8, False)
        self.stage4 = _CSPStage(c[3], c[4], 8, False)
        self.stage5 = _CSPStage(c[4], c[5], 4, False)
        # SPP block
        self.spp_pre = nn.Sequential(_cbl(c[5], c[4], 1), _cbl(c[4], c[5], 3), _cbl(c[5], c[4], 1))
        self.pools = nn.ModuleList(nn.MaxPool2d(k, 1, k // 2) for k in (13, 9, 5))
        self.spp_post = nn.Sequential(_cbl(4 * c[4], c[4], 1), _cbl(c[4], c[5], 3),
                                      _cbl(c[5], c[4], 1))
        # top-down path
        self.up5 = _cbl(c[4], c[3], 1)
        self.lat4 = _cbl(c[4], c[3], 1)
        self.td4 = _five(c[4], c[3])
        self.up4 = _cbl(c[3], c[2], 1)
        self.lat3 = _cbl(c[3], c[2], 1)
        self.td3 = _five(c[3], c[2])
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
        # bottom-up path + heads
        no = 3 * (5 + num_classes)
        self.head3 = nn.Sequential(_cbl(c[2], c[3], 3), nn.Conv2d(c[3], no, 1))
        self.down3 = _cbl(c[2], c[3], 3, 2)
        self.bu4 = _five(c[4], c[3])
        self.head4 = nn.Sequential(_cbl(c[3], c[4], 3), nn.Conv2d(c[4], no, 1))
        self.down4 = _cbl(c[3], c[4], 3, 2)
        self.bu5 = _five(c[5], c[4])
        self.head5 = nn.Sequential(_cbl(c[4], c[5], 3), nn.Conv2d(c[5], no, 1))
        for h in (self.head3, self.head4, self.head5):
            h[1].zoo_head = True
        for i, stride in enumerate((8, 16, 32)):
            n = image_size // stride
            ys, xs = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
            self.register_buffer(f"grid{i}", torch.stack([xs, ys], -1).float().view(1, 1, n, n, 2),
                                 persistent=False)
            anc = torch.tensor(self.ANCHORS[3 * i:3 * i + 3], dtype=torch.float32)
            self.register_buffer(f"anchor{i}", anc.view(1, 3, 1, 1, 2), persistent=False)

    def _decode(self, p: torch.Tensor, i: int):
        b, _, h, w = p.shape
        p = p.view(b, 3, 5 + self.num_classes, h, w).permute(0, 1, 3, 4, 2)
        s = self.SCALE_XY[i]
        stride = 8 * 2 ** i
        xy = (torch.sigmoid(p[..., 0:2]) * s - 0.5 * (s - 1) + getattr(self, f"grid{i}")) * stride
        wh = torch.exp(p[..., 2:4]) * getattr(self, f"anchor{i}")
        scores = torch.sigmoid(p[..., 4:5]) * torch.sigmoid(p[..., 5:])
        boxes = torch.cat([xy - wh / 2, xy + wh / 2], -1)
        return boxes.reshape(b, -1, 4), scores.reshape(b, -1, self.num_classes)

    def forward(self, x: torch.Tensor):
        x = self.stage2(self.stage1(self.stem(x)))
        c3 = self.stage3(x)
        c4 = self.stage4(c3)
        x = self.spp_pre(self.stage5(c4))
        p5 = self.spp_post(torch.cat([pool(x) for pool in self.pools] + [x], 1))
        p4 = self.td4(torch.cat([self.lat4(c4), self.upsample(self.up5(p5))], 1))
        p3 = self.td3(torch.cat([self.lat3(c3), self.upsample(self.up4(p4))], 1))
        n4 = self.bu4(torch.cat([self.down3(p3), p4], 1))
        n5 = self.bu5(torch.cat([self.down4(n4), p5], 1))
        outs = [self._decode(h(f), i) for i, (h, f) in
                enumerate(((self.head3, p3), (self.head4, n4), (self.head5, n5)))]
        return torch.cat([o[0] for o in outs], 1), torch.cat([o[1] for o in outs], 1)
