"""3-D video CNNs: C3D and S3D, written in plain PyTorch."""
from __future__ import annotations

import torch
from torch import nn

from .common import conv_out, fc_classifier

__all__ = ["C3D", "S3D"]


class C3D(nn.Module):
    """C3D, Tran et al., ICCV 2015 ("Learning Spatiotemporal Features with 3D
    Convolutional Networks"), Figure 3.

    Input 3x16x112x112.  8 conv3d 3x3x3 (pad 1, stride 1) + ReLU with
    [64 | 128 | 256, 256 | 512, 512 | 512, 512] filters, 5 max-pools (pool1
    1x2x2, pool2..5 2x2x2), FC6-4096, FC7-4096 (ReLU, dropout), FC8 with 487
    Sports-1M classes: 79.99 M parameters.  pool5 uses ``ceil_mode`` to
    reproduce Caffe's pooling arithmetic (512x1x4x4 = 8192 features into fc6).
    ``width_div``/``fc`` only exist for the reduced zoo variant.
    """

    def __init__(self, num_classes: int = 487, clip: tuple[int, int, int] = (16, 112, 112),
                 width_div: int = 1, fc: int = 4096):
        super().__init__()
        w = [c // width_div for c in (64, 128, 256, 512, 512)]

        def conv(cin, cout):
            return [nn.Conv3d(cin, cout, 3, padding=1), nn.ReLU()]

        self.features = nn.Sequential(
            *conv(3, w[0]), nn.MaxPool3d((1, 2, 2), (1, 2, 2)),
            *conv(w[0], w[1]), nn.MaxPool3d(2, 2),
            *conv(w[1], w[2]), *conv(w[2], w[2]), nn.MaxPool3d(2, 2),
            *conv(w[2], w[3]), *conv(w[3], w[3]), nn.MaxPool3d(2, 2),
            *conv(w[3], w[4]), *conv(w[4], w[4]), nn.MaxPool3d(2, 2, ceil_mode=True),
        )
        t, h, wd = clip
        t = conv_out(conv_out(conv_out(t, 2, 2, 0), 2, 2, 0), 2, 2, 0)
        t = conv_out(t, 2, 2, 0, ceil=True)
        for _ in range(4):
            h, wd = conv_out(h, 2, 2, 0), conv_out(wd, 2, 2, 0)
        h, wd = conv_out(h, 2, 2, 0, ceil=True), conv_out(wd, 2, 2, 0, ceil=True)
        self.classifier = fc_classifier(w[4] * t * h * wd, fc, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class Conv3dBNReLU(nn.Sequential):
    def __init__(self, cin, cout, k, s=1, p=0):
        super().__init__(nn.Conv3d(cin, cout, k, s, p, bias=False),
                         nn.BatchNorm3d(cout, eps=1e-3), nn.ReLU())


class SepConv3d(nn.Sequential):
    """S3D separable conv: 1xkxk spatial conv then kx1x1 temporal conv (BN+ReLU each)."""

    def __init__(self, cin: int, cout: int, k: int, s: int, p: int):
        super().__init__(Conv3dBNReLU(cin, cout, (1, k, k), (1, s, s), (0, p, p)),
                         Conv3dBNReLU(cout, cout, (k, 1, 1), (s, 1, 1), (p, 0, 0)))


class SepInception(nn.Module):
    """Inception block with the 3x3x3 convs replaced by separable convs."""

    def __init__(self, cin, b0, b1m, b1, b2m, b2, b3):
        super().__init__()
        self.branch0 = Conv3dBNReLU(cin, b0, 1)
        self.branch1 = nn.Sequential(Conv3dBNReLU(cin, b1m, 1), SepConv3d(b1m, b1, 3, 1, 1))
        self.branch2 = nn.Sequential(Conv3dBNReLU(cin, b2m, 1), SepConv3d(b2m, b2, 3, 1, 1))
        self.branch3 = nn.Sequential(nn.MaxPool3d(3, 1, 1), Conv3dBNReLU(cin, b3, 1))
        self.out_channels = b0 + b1 + b2 + b3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch0(x), self.branch1(x), self.branch2(x), self.branch3(x)], 1)


class S3D(nn.Module):
    """S3D (separable 3-D Inception), Xie et al., ECCV 2018 ("Rethinking
    Spatiotemporal Feature Learning"), Section 4 / Figure 2 -- the I3D
    (Inception-v1 inflated) topology with every 3-D conv replaced by a 1xkxk
    spatial conv followed by a kx1x1 temporal conv.

    Stem: SepConv 7 (64, stride 2), maxpool 1x3x3/1x2x2, conv 1x1x1 (64),
    SepConv 3 (192), maxpool 1x3x3/1x2x2; Mixed_3b/3c, maxpool 3x3x3/2,
    Mixed_4b..4f, maxpool 2x2x2/2, Mixed_5b/5c (Inception-v1 widths), then
    avg-pool 2x7x7/1, dropout, conv1x1x1 to 400 Kinetics classes and a mean
    over the remaining time steps (same head as the reference/torchvision
    implementation): 8.32 M parameters.  Plain S3D, i.e. without the
    feature gating of S3D-G.  The final avg-pool kernel is (2, H/32, W/32) so
    the reduced zoo variant can use a smaller clip.
    """

    MIXED = {
        "3b": (192, 64, 96, 128, 16, 32, 32), "3c": (256, 128, 128, 192, 32, 96, 64),
        "4b": (480, 192, 96, 208, 16, 48, 64), "4c": (512, 160, 112, 224, 24, 64, 64),
        "4d": (512, 128, 128, 256, 24, 64, 64), "4e": (512, 112, 144, 288, 32, 64, 64),
        "4f": (528, 256, 160, 320, 32, 128, 128), "5b": (832, 256, 160, 320, 32, 128, 128),
        "5c": (832, 384, 192, 384, 48, 128, 128),
    }

    def __init__(self, num_classes: int = 400, clip: tuple[int, int, int] = (64, 224, 224)):
        super().__init__()
        m = {k: SepInception(*v) for k, v in self.MIXED.items()}
        self.features = nn.Sequential(
            SepConv3d(3, 64, 7, 2, 3),
            nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)),
            Conv3dBNReLU(64, 64, 1),
            SepConv3d(64, 192, 3, 1, 1),
            nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)),
            m["3b"], m["3c"],
            nn.MaxPool3d(3, 2, 1),
            m["4b"], m["4c"], m["4d"], m["4e"], m["4f"],
            nn.MaxPool3d(2, 2, 0),
            m["5b"], m["5c"],
        )
        _, h, w = clip
        self.avgpool = nn.AvgPool3d((2, h // 32, w // 32), stride=1)
        self.dropout = nn.Dropout(0.2)
        self.classifier = nn.Conv3d(1024, num_classes, 1)
        self.classifier.zoo_head = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.classifier(self.dropout(self.avgpool(self.features(x))))
        return torch.mean(x, dim=(2, 3, 4))
