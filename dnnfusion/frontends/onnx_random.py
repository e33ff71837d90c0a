"""RandomUniform, RandomNormal, RandomUniformLike and RandomNormalLike (and so Bernoulli, whose
function body draws with RandomUniformLike), and Dropout in training mode (Monte Carlo dropout
at inference), as ONNX Runtime runs them: new numbers on every call.

Each becomes a hidden graph input holding standard draws (uniform on [0, 1) or standard
normal) of the output's shape, scaled and shifted in the graph (``low + (high - low) * u``,
``mean + scale * z``) and cast to the node's dtype, so the kernels fuse the arithmetic
around it. The compiled model fills the hidden inputs before every call from a NumPy
generator per node, created at compile time: seeded by the node's ``seed`` attribute when it
has one (the same sequence of calls gives the same numbers, as ONNX Runtime's seeded
generator does within a session, though not ONNX Runtime's numbers), from fresh entropy
otherwise. The hidden inputs' names carry what to draw (:func:`hidden`,
:class:`Draws`); a model input whose name starts with :data:`PREFIX` is refused."""

from __future__ import annotations

import re
import struct
from typing import Any, Sequence

import numpy as np

from dnnfusion.dtypes import ONNX_CODES
from dnnfusion.errors import ModelFormatError, ShapeError

OPS = ("RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike")
ONNX_DTYPES = {code: name for name, code in ONNX_CODES.items()}
PREFIX = "__dnnf_random__"
MAX_DRAWS = 1 << 31  # numbers one node draws a call (8 GiB of float32)
_NAME = re.compile(rf"^{re.escape(PREFIX)}\.(uniform|normal)\.(none|[0-9a-f]{{8}})\.\d+$")


def handles(node: Any) -> bool:
    return node.op_type in OPS and node.domain in ("", "ai.onnx")


def check_input_name(name: str) -> None:
    if name.startswith(PREFIX):
        raise ModelFormatError(f"graph input '{name}' starts with '{PREFIX}', which dnnfusion reserves for the "
                               "random numbers of RandomUniform/RandomNormal nodes; rename the input")


def import_node(imp: Any, node: Any, name: str) -> None:
    attrs = {a.name: imp._attr(a, node, name) for a in node.attribute}
    like = node.op_type.endswith("Like")
    if len(node.output) != 1 or not node.output[0] or len(node.input) != (1 if like else 0):
        raise ModelFormatError(f"node '{name}' ({node.op_type}) takes {1 if like else 0} input and one output")
    if like:
        src = imp.env.get(node.input[0])
        if src is None:
            raise ModelFormatError(f"node '{name}' reads '{node.input[0]}', which is not defined before it")
        shape = [int(d) for d in src.shape]
        code = attrs.get("dtype")
        dtype = src.dtype if code is None else ONNX_DTYPES.get(int(code))
    else:
        if "shape" not in attrs:
            raise ModelFormatError(f"node '{name}' ({node.op_type}) has no shape attribute")
        shape = [int(d) for d in attrs["shape"]]
        if any(d < 0 for d in shape):
            raise ShapeError(f"node '{name}' ({node.op_type}): shape {shape} has a negative dimension")
        dtype = ONNX_DTYPES.get(int(attrs.get("dtype", 1)))
    if dtype not in ("f16", "bf16", "f32", "f64"):
        raise ModelFormatError(f"node '{name}' ({node.op_type}) draws {dtype}; ONNX defines it for float16, "
                               "float, double and bfloat16")
    normal = "Normal" in node.op_type
    seed = attrs.get("seed")
    try:
        draws = _hidden(imp, "normal" if normal else "uniform", None if seed is None else float(seed), shape)
    except ShapeError as e:
        raise ShapeError(f"node '{name}' ({node.op_type}): {e}") from None
    a, b = (float(attrs.get("mean", 0.0)), float(attrs.get("scale", 1.0))) if normal else (
        float(attrs.get("low", 0.0)), float(attrs.get("high", 1.0)) - float(attrs.get("low", 0.0)))
    scaled = imp.b.node("Mul", [draws, imp.b.constant(imp._fresh(f"{name}:scale"), np.array(b, np.float32))],
                        {}, num_outputs=1, name=imp._fresh(f"{name}:mul"), output_names=[imp._fresh(f"{name}:m")])[0]
    out = imp.b.node("Add", [scaled, imp.b.constant(imp._fresh(f"{name}:shift"), np.array(a, np.float32))], {},
                     num_outputs=1, name=imp._fresh(f"{name}:add"),
                     output_names=[node.output[0] if dtype == "f32" else imp._fresh(f"{name}:a")])[0]
    if dtype != "f32":
        out = imp.b.node("Cast", [out], {"to": ONNX_CODES[dtype]}, num_outputs=1, name=imp._fresh(f"{name}:cast"),
                         output_names=[node.output[0]])[0]
    imp.env[node.output[0]] = out


def training_dropout(imp: Any, node: Any) -> bool:
    """A Dropout whose training_mode may be true with a ratio that may be nonzero: random."""
    if node.op_type != "Dropout" or node.domain not in ("", "ai.onnx") or len(node.input) < 3 or not node.input[2]:
        return False
    training, ratio = imp.env.get(node.input[2]), imp.env.get(node.input[1]) if node.input[1] else None
    const = (lambda v: v is not None and v.is_constant)
    if const(training) and not np.asarray(training.numpy()).any():
        return False
    return not (const(ratio) and not np.asarray(ratio.numpy()).any())


def import_dropout(imp: Any, node: Any, name: str) -> None:
    """Dropout in training mode, as ONNX defines it: mask = u >= ratio for u uniform on
    [0, 1), y = x * mask / (1 - ratio) where training_mode is true, else y = x and the mask
    all true."""
    x = imp.env.get(node.input[0])
    ratio = imp.env.get(node.input[1]) if node.input[1] else None
    training = imp.env.get(node.input[2])
    if x is None or training is None or (node.input[1] and ratio is None):
        raise ModelFormatError(f"node '{name}' (Dropout) reads a value that is not defined before it")
    if x.dtype not in ("f16", "bf16", "f32", "f64"):
        raise ModelFormatError(f"node '{name}' (Dropout) drops {x.dtype} elements; ONNX defines it for floats")
    seed = next((a.i for a in node.attribute if a.name == "seed"), None)
    b = imp.b

    def op(kind: str, ins: list, out: str | None = None, **attrs) -> Any:
        return b.node(kind, ins, attrs, num_outputs=1, name=imp._fresh(f"{name}:{kind.lower()}"),
                      output_names=[out or imp._fresh(f"{name}:{kind.lower()}")])[0]

    def const(v: float, dtype: str) -> Any:
        from dnnfusion.dtypes import numpy_dtype

        return b.constant(imp._fresh(f"{name}:c"), np.array(v, numpy_dtype(dtype)))

    u = _hidden(imp, "uniform", None if seed is None else float(seed), [int(d) for d in x.shape])
    r32 = const(0.5, "f32") if ratio is None else (ratio if ratio.dtype == "f32" else op("Cast", [ratio], to=1))
    keep = op("GreaterOrEqual", [u, r32])
    rx = r32 if x.dtype == "f32" else op("Cast", [r32], to=ONNX_CODES[x.dtype])
    scale = op("Div", [const(1.0, x.dtype), op("Sub", [const(1.0, x.dtype), rx])])
    outs = list(node.output) + [""] * (2 - len(node.output))
    always = training.is_constant  # (a constant false does not come here)
    dropped = op("Where", [keep, op("Mul", [x, scale]), const(0.0, x.dtype)], None if not always else outs[0] or None)
    y = dropped if always else op("Where", [training, dropped, x], outs[0] or None)
    imp.env[outs[0]] = y
    if outs[1]:
        imp.env[outs[1]] = op("Identity", [keep], outs[1]) if always else op(
            "Or", [keep, op("Not", [training])], outs[1])


def _hidden(imp: Any, kind: str, seed: float | None, shape: list[int]) -> Any:
    """A new hidden input of standard `kind` draws of `shape` (see the module docstring)."""
    if int(np.prod(shape, dtype=np.float64)) > MAX_DRAWS:
        raise ShapeError(f"a random operator would draw {int(np.prod(shape, dtype=np.float64))} numbers a call "
                         f"(shape {shape}); dnnfusion draws at most {MAX_DRAWS} per node")
    tag = "none" if seed is None else struct.pack(">f", float(seed)).hex()
    base = f"{PREFIX}.{kind}.{tag}"
    k = 0
    while f"{base}.{k}" in imp.taken or imp.b.graph.value(f"{base}.{k}") is not None:
        k += 1
    imp.taken.add(f"{base}.{k}")
    return imp.b.input(f"{base}.{k}", "f32", shape)


class Draws:
    """Fills a graph's hidden random inputs: positions[i] of the graph's inputs, each with its
    generator."""

    def __init__(self, inputs: Sequence[Any]):
        self.slots: list[tuple[int, str, np.random.Generator, tuple[int, ...]]] = []
        for i, v in enumerate(inputs):
            m = _NAME.match(v.name)
            if m:
                kind, tag = m.group(1), m.group(2)
                seed = None if tag == "none" else int(struct.unpack(">I", bytes.fromhex(tag))[0])
                self.slots.append((i, kind, np.random.default_rng(seed), tuple(int(d) for d in v.shape)))

    def __bool__(self) -> bool:
        return bool(self.slots)

    @property
    def positions(self) -> set[int]:
        return {i for i, *_ in self.slots}

    def fill(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """`arrays` (the model's own inputs, in order) with the hidden inputs drawn anew and
        put in their places."""
        out = list(arrays)
        for i, kind, rng, shape in self.slots:
            x = rng.standard_normal(shape, np.float32) if kind == "normal" else rng.random(shape, np.float32)
            out.insert(i, x)
        return out


__all__ = ["Draws", "OPS", "PREFIX", "check_input_name", "handles", "import_dropout", "import_node",
           "training_dropout"]
