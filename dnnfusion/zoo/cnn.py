"""Image-classification / segmentation CNNs written in plain PyTorch.

Models: VGG-16, ResNet-50, MobileNetV2, EfficientNet-B0, U-Net.  Each class
follows the architecture table of its paper (see class docstrings); widths and
depths are parameters only so that ``reduced=True`` zoo entries can shrink
them for fast tests.
"""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from .common import ConvBNAct, fc_classifier, make_divisible

__all__ = ["VGG16", "ResNet50", "Bottleneck", "MobileNetV2", "EfficientNetB0", "UNet"]


class VGG16(nn.Module):
    """VGG-16 (configuration "D"), Simonyan & Zisserman, ICLR 2015, Table 1.

    13 conv3x3 (pad 1) + ReLU in 5 stages [64,64 | 128,128 | 256x3 | 512x3 |
    512x3], each stage followed by 2x2/2 max-pooling, then FC-4096, FC-4096,
    FC-1000 with ReLU and dropout (identity in eval) -- 138.36 M parameters at
    224x224.  No BatchNorm (as in the paper) and no adaptive pooling (the FC
    input size is derived from the input resolution).  ``width_div`` and
    ``fc`` only exist for the reduced zoo variant.
    """

    CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M"]

    def __init__(self, num_classes: int = 1000, image_size: int = 224,
                 width_div: int = 1, fc: int = 4096):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in self.CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                cout = v // width_div
                layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]
                cin = cout
        self.features = nn.Sequential(*layers)
        side = image_size // 32
        self.classifier = fc_classifier(cin * side * side, fc, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class Bottleneck(nn.Module):
    """ResNet bottleneck 1x1 -> 3x3 -> 1x1 (x4) with projection shortcut."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1, stride_in_1x1: bool = True):
        super().__init__()
        cout = width * self.expansion
        s1, s3 = (stride, 1) if stride_in_1x1 else (1, stride)
        self.conv1 = ConvBNAct(cin, width, 1, s1)
        self.conv2 = ConvBNAct(width, width, 3, s3)
        self.conv3 = ConvBNAct(width, cout, 1, act=None, residual_last=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = ConvBNAct(cin, cout, 1, stride, act=None)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + idt)


class ResNet50(nn.Module):
    """ResNet-50, He et al., CVPR 2016, Table 1 (50-layer column).

    conv1 7x7/2 (64) + BN + ReLU, max-pool 3x3/2, bottleneck stages
    [3, 4, 6, 3] with widths [64, 128, 256, 512] (x4 expansion), global
    average pool, FC-1000: 25.56 M parameters.  Follows the paper's original
    "v1" layout (stride 2 in the first 1x1 conv of a stage, projection
    shortcuts -- option B), which is also the MSRA backbone used by the
    Faster/Mask R-CNN papers; torchvision's "v1.5" moves the stride to the 3x3
    (same parameter count).  ``return_features=True`` returns C2..C5 for FPN.
    """

    def __init__(self, num_classes: int = 1000, layers=(3, 4, 6, 3), base: int = 64,
                 stride_in_1x1: bool = True, return_features: bool = False):
        super().__init__()
        self.return_features = return_features
        self.stem = nn.Sequential(ConvBNAct(3, base, 7, 2), nn.MaxPool2d(3, 2, 1))
        cin = base
        stages = []
        for i, n in enumerate(layers):
            width = base * 2 ** i
            blocks = []
            for j in range(n):
                stride = 2 if (j == 0 and i > 0) else 1
                blocks.append(Bottleneck(cin, width, stride, stride_in_1x1))
                cin = width * Bottleneck.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.out_channels = [base * 2 ** i * Bottleneck.expansion for i in range(4)]
        if not return_features:
            self.fc = nn.Linear(cin, num_classes)
            self.fc.zoo_head = True

    def forward(self, x: torch.Tensor):
        c2 = self.layer1(self.stem(x))
        c3 = self.layer2(c2)
        c4 = self.layer3(c3)
        c5 = self.layer4(c4)
        if self.return_features:
            return c2, c3, c4, c5
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(c5, 1), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2 bottleneck: 1x1 expand (ReLU6) -> 3x3 dw (ReLU6) -> 1x1 linear."""

    def __init__(self, cin: int, cout: int, stride: int, t: int):
        super().__init__()
        hidden = cin * t
        layers: list[nn.Module] = []
        if t != 1:
            layers.append(ConvBNAct(cin, hidden, 1, act=nn.ReLU6))
        layers += [ConvBNAct(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   ConvBNAct(hidden, cout, 1, act=None, residual_last=True)]
        self.conv = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (width 1.0), Sandler et al., CVPR 2018, Table 2.

    conv3x3/2 (32) -> bottlenecks (t, c, n, s) = (1,16,1,1) (6,24,2,2)
    (6,32,3,2) (6,64,4,2) (6,96,3,1) (6,160,3,2) (6,320,1,1) -> conv1x1 1280
    -> global avg pool -> classifier (the paper's final 1x1 conv, written as a
    Linear; dropout 0.2 as in the reference implementation): 3.50 M params.
    """

    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0):
        super().__init__()
        cin = make_divisible(32 * width_mult)
        last = make_divisible(1280 * max(1.0, width_mult))
        layers: list[nn.Module] = [ConvBNAct(3, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in self.SETTINGS:
            cout = make_divisible(c * width_mult)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(ConvBNAct(cin, last, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))
        self.classifier[1].zoo_head = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


class SqueezeExcite(nn.Module):
    """SE block (Hu et al.) with SiLU/sigmoid, as used in EfficientNet's MBConv."""

    def __init__(self, channels: int, squeeze: int):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        s = torch.sigmoid(self.fc2(F.silu(self.fc1(s))))
        return x * s


class MBConv(nn.Module):
    """EfficientNet MBConv: expand 1x1 -> depthwise kxk -> SE(0.25) -> project 1x1."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvBNAct(cin, hidden, 1, act=nn.SiLU, bn_eps=1e-3))
        layers += [
            ConvBNAct(hidden, hidden, k, stride, groups=hidden, act=nn.SiLU, bn_eps=1e-3),
            SqueezeExcite(hidden, max(1, cin // 4)),
            ConvBNAct(hidden, cout, 1, act=None, bn_eps=1e-3, residual_last=True),
        ]
        self.block = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Stochastic depth is identity at inference.
        return x + self.block(x) if self.use_res else self.block(x)


class EfficientNetB0(nn.Module):
    """EfficientNet-B0, Tan & Le, ICML 2019, Table 1.

    Stem conv3x3/2 (32) -> MBConv stages (expand, k, stride, channels, layers):
    (1,3,1,16,1) (6,3,2,24,2) (6,5,2,40,2) (6,3,2,80,3) (6,5,1,112,3)
    (6,5,2,192,4) (6,3,1,320,1) -> conv1x1 1280 -> avg pool -> dropout 0.2 ->
    FC-1000; SiLU (swish) activations, SE ratio 0.25 of the block input
    channels: 5.29 M parameters.  Simplification: symmetric ``k//2`` padding
    (as torchvision) instead of TensorFlow's asymmetric "SAME" padding.
    """

    STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
              (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 32, 3, 2, act=nn.SiLU, bn_eps=1e-3)]
        cin = 32
        for e, k, s, c, n in self.STAGES:
            for i in range(n):
                layers.append(MBConv(cin, c, k, s if i == 0 else 1, e))
                cin = c
        layers.append(ConvBNAct(cin, 1280, 1, act=nn.SiLU, bn_eps=1e-3))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))
        self.classifier[1].zoo_head = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


class _DoubleConv(nn.Sequential):
    def __init__(self, cin: int, cout: int, pad: int):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=pad), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=pad), nn.ReLU())


class UNet(nn.Module):
    """U-Net, Ronneberger et al., MICCAI 2015, Figure 1.

    Contracting path of 4 x (two conv3x3 + ReLU, maxpool 2x2) with 64, 128,
    256, 512 channels, a 1024-channel bottom, expanding path of 4 x (up-conv
    2x2 halving channels, concatenation with the skip, two conv3x3 + ReLU) and
    a final 1x1 conv to ``num_classes`` (2): 23 conv layers, 31.03 M params,
    no BatchNorm (as in the paper).

    ``valid=True`` reproduces the paper exactly (unpadded convs with
    center-crop of the skip connection; 572x572 input -> 388x388 output).  The
    zoo uses ``valid=False`` (padding 1, output size == input size, no crop),
    the common modern variant, at 1x3x256x256 (RGB input); the layer sequence
    and channel widths are unchanged.
    """

    def __init__(self, in_channels: int = 3, num_classes: int = 2, base: int = 64,
                 valid: bool = False):
        super().__init__()
        pad = 0 if valid else 1
        ch = [base * 2 ** i for i in range(5)]
        self.downs = nn.ModuleList()
        cin = in_channels
        for c in ch[:4]:
            self.downs.append(_DoubleConv(cin, c, pad))
            cin = c
        self.bottom = _DoubleConv(ch[3], ch[4], pad)
        self.ups = nn.ModuleList()
        self.up_convs = nn.ModuleList()
        for c in reversed(ch[:4]):
            self.ups.append(nn.ConvTranspose2d(c * 2, c, 2, stride=2))
            self.up_convs.append(_DoubleConv(c * 2, c, pad))
        self.head = nn.Conv2d(ch[0], num_classes, 1)
        self.pool = nn.MaxPool2d(2, 2)

    @staticmethod
    def _crop(skip: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        dh = (skip.shape[2] - ref.shape[2]) // 2
        dw = (skip.shape[3] - ref.shape[3]) // 2
        if dh == 0 and dw == 0:
            return skip
        return skip[:, :, dh:dh + ref.shape[2], dw:dw + ref.shape[3]]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for down in self.downs:
            x = down(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for up, conv, skip in zip(self.ups, self.up_convs, reversed(skips)):
            x = up(x)
            x = conv(torch.cat([self._crop(skip, x), x], dim=1))
        return self.head(x)
