"""A small built-in network, built directly as an ECG with NumPy weights, so the CLI and
the docs work with no model file and no optional dependency installed."""

from __future__ import annotations

import numpy as np

from dnnfusion.ecg import ECG
from dnnfusion.frontends.builder import GraphBuilder


def tiny_convnet(batch: int = 1, size: int = 32, seed: int = 0) -> ECG:
    """Conv-BN-ReLU x2, max-pool, a residual 1x1 branch, global pooling, a classifier and
    softmax, with a squeeze-and-excitation gate: every mapping type of the paper appears at least once."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("tiny_convnet")

    def w(name: str, *shape: int, scale: float = 0.1) -> object:
        return b.constant(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def conv_bn_relu(x, name: str, cin: int, cout: int, stride: int = 1):
        (y,) = b.node("Conv", [x, w(f"{name}.weight", cout, cin, 3, 3), None],
                      {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [stride, stride]},
                      name=f"{name}.conv")
        bn = [b.constant(f"{name}.bn.{p}", v.astype(np.float32)) for p, v in (
            ("scale", 1 + 0.1 * rng.standard_normal(cout)), ("bias", 0.1 * rng.standard_normal(cout)),
            ("mean", 0.1 * rng.standard_normal(cout)), ("var", 1 + 0.1 * rng.random(cout)))]
        (y,) = b.node("BatchNormalization", [y, *bn], {"epsilon": 1e-5}, name=f"{name}.bn")
        (y,) = b.node("Relu", [y], name=f"{name}.relu")
        return y

    x = b.input("image", "f32", [batch, 3, size, size])
    y = conv_bn_relu(x, "block1", 3, 16)
    y = conv_bn_relu(y, "block2", 16, 32, stride=2)
    (skip,) = b.node("Conv", [y, w("skip.weight", 32, 32, 1, 1), w("skip.bias", 32)],
                     {"kernel_shape": [1, 1]}, name="skip.conv")
    (y,) = b.node("Add", [y, skip], name="residual")
    (y,) = b.node("MaxPool", [y], {"kernel_shape": [2, 2], "strides": [2, 2]}, name="pool")
    (t,) = b.node("Transpose", [y], {"perm": [0, 2, 3, 1]}, name="to_nhwc")
    (t,) = b.node("Transpose", [t], {"perm": [0, 3, 1, 2]}, name="to_nchw")
    # A squeeze-and-excitation gate: multiplying by a computed [N,C,1,1] tensor broadcasts
    # it (One-to-Many), as in EfficientNet.
    (g,) = b.node("GlobalAveragePool", [t], name="se.pool")
    (g,) = b.node("Sigmoid", [g], name="se.gate")
    (y,) = b.node("Mul", [t, g], name="se.scale")
    (y,) = b.node("GlobalAveragePool", [y], name="gap")
    (y,) = b.node("Flatten", [y], {"axis": 1}, name="flatten")
    (y,) = b.node("Gemm", [y, w("fc.weight", 10, 32), w("fc.bias", 10)], {"transB": 1}, name="fc")
    (y,) = b.node("Softmax", [y], {"axis": -1}, name="softmax")
    b.outputs([y])
    return ECG(b.graph)
