"""Shared building blocks for the model zoo: seeding, weight init, conv blocks.

Weights are random but *deterministic*: every builder runs inside
:func:`seeded`, which forks the global RNG so callers are unaffected.

Initialisation (:func:`init_weights`) is chosen so that activations stay
O(1) through very deep random networks (no NaN/Inf, no all-zero ReLU maps),
which keeps numerical comparisons between backends meaningful:

* conv / linear: He-normal with ``fan_in`` (variance preserving for ReLU);
* BatchNorm: non-trivial eval statistics (random mean/var/gamma/beta close to
  identity), so BN folding bugs are visible;
* BN layers tagged ``zoo_residual_last=True`` (the last BN of a residual
  branch) get a small gamma so variance does not double at every skip-add;
* final prediction layers tagged ``zoo_head=True`` get LeCun-normal weights
  (unit gain, no ReLU follows), so logits are O(1) and scores are spread;
* layers with a ``zoo_std`` attribute get N(0, zoo_std) weights and zero bias
  (box-regression layers, as in Detectron: deltas stay small so proposals
  and boxes are well-formed instead of degenerate clipped boxes).
"""
from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterator

import torch
from torch import nn

__all__ = [
    "seeded",
    "init_weights",
    "randomize_affine",
    "ConvBNAct",
    "make_divisible",
    "conv_out",
    "fc_classifier",
]


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the body with ``torch.manual_seed(seed)`` without leaking RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def randomize_affine(module: nn.Module) -> nn.Module:
    """Gives every bias and every 1-D scale (LayerNorm/NoNorm weight) random values.

    ``transformers`` initializes biases to exactly 0 and norm scales to exactly 1. Trained
    networks have neither, and the algebraic rewrites would delete ``x + 0`` and ``x * 1``,
    flattering operator counts with a property no trained model has."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "bias":
                p.uniform_(-0.05, 0.05)
            elif leaf == "weight" and p.dim() == 1:
                p.uniform_(0.9, 1.1)
    return module


def init_weights(module: nn.Module) -> nn.Module:
    """Deterministic, scale-preserving random init (see module docstring)."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)) and getattr(m, "zoo_std", None):
            nn.init.normal_(m.weight, std=m.zoo_std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d)):
            if getattr(m, "zoo_head", False):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="linear")
            else:
                # fan_in of a transposed conv is in_channels * k / stride**2;
                # kaiming's fan computation on the weight layout is close enough.
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.uniform_(m.bias, -0.05, 0.05)
        elif isinstance(m, nn.Linear):
            gain = 1.0 if getattr(m, "zoo_head", False) else 2.0
            std = math.sqrt(gain / m.in_features)
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.uniform_(m.bias, -0.05, 0.05)
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
            lo, hi = (0.1, 0.3) if getattr(m, "zoo_residual_last", False) else (0.7, 1.1)
            with torch.no_grad():
                m.weight.uniform_(lo, hi)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.8, 1.25)
    return module


def make_divisible(v: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round channels to a multiple of ``divisor`` (MobileNet/EfficientNet rule)."""
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def conv_out(n: int, k: int, s: int, p: int, ceil: bool = False) -> int:
    """Output length of a conv/pool along one axis."""
    num = n + 2 * p - k
    return (-(-num // s) if ceil else num // s) + 1


def fc_classifier(cin: int, fc: int, num_classes: int) -> nn.Sequential:
    """VGG's classifier, also C3D's fc6-fc8: Linear -> ReLU -> Dropout(0.5) twice, then the
    prediction Linear (tagged ``zoo_head``)."""
    head = nn.Sequential(
        nn.Linear(cin, fc), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(fc, fc), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(fc, num_classes),
    )
    head[-1].zoo_head = True
    return head


class ConvBNAct(nn.Sequential):
    """Conv2d (no bias) -> BatchNorm2d -> activation (``act=None`` for linear)."""

    def __init__(self, cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1,
                 act: Callable[[], nn.Module] | None = nn.ReLU, p: int | None = None,
                 bn_eps: float = 1e-5, residual_last: bool = False):
        p = (k - 1) // 2 if p is None else p
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, k, s, p, groups=groups, bias=False),
            nn.BatchNorm2d(cout, eps=bn_eps),
        ]
        layers[1].zoo_residual_last = residual_last
        if act is not None:
            layers.append(act())
        super().__init__(*layers)
