"""Which ONNX operator versions the ONNX front-end reads (paper §3): the default-domain
opsets it takes, and for every ECG operator the schema versions whose semantics were checked
against the ECG's; any other version, domain or operator is refused with the node named."""

from __future__ import annotations

from typing import Any

from dnnfusion import _core
from dnnfusion.errors import DTypeError, ModelFormatError, UnsupportedOperatorError

MIN_OPSET = 13

# Models declaring an older default-domain opset, from OLDEST_CONVERTED (ONNX Runtime's
# oldest) up to MIN_OPSET - 1, are converted to MIN_OPSET at import with onnx's own
# version converter (upgrade below), which rewrites every operator whose meaning changed
# (Softmax's 2-D coercion, Clip's bounds as attributes, Upsample into Resize...). The ECG
# reads only the converted model.
OLDEST_CONVERTED = 7
# Operators of those opsets that the converter replaces by ECG operators, with the opset that
# removed them: Upsample becomes Resize, Scatter ScatterElements.
RENAMED_BY_CONVERSION = {"Upsample": 10, "Scatter": 11}

# For every ECG operator, the ONNX schema versions (since_version) reachable from opset 13
# on whose semantics were checked against the ECG's (the newest form). A bump not listed
# here raises UnsupportedOperatorError until someone reads its changelog entry. Unless a
# comment says otherwise, the later versions only add element types (bfloat16 in 22,
# 8/4/2-bit types in 19..25, optional/sequence types for Identity) or edit the docs.
CHECKED_VERSIONS: dict[str, tuple[int, ...]] = {
    "Relu": (13, 14), "LeakyRelu": (6, 16), "PRelu": (9, 16), "Elu": (6, 22),
    "Selu": (6, 22), "Sigmoid": (13,), "HardSigmoid": (6, 22), "HardSwish": (14, 22),
    "Tanh": (13,), "Softplus": (1, 22), "Softsign": (1, 22), "Mish": (18, 22),
    "Gelu": (20,), "Erf": (13,), "Sqrt": (13,), "Reciprocal": (13,), "Exp": (13,),
    "Log": (13,), "Neg": (13,), "Abs": (13,), "Floor": (13,), "Ceil": (13,),
    "Round": (11, 22), "Sign": (13,), "Sin": (7, 22), "Cos": (7, 22), "Not": (1,),
    "Tan": (7, 22), "Asin": (7, 22), "Acos": (7, 22), "Atan": (7, 22), "Sinh": (9, 22),
    "Cosh": (9, 22), "Asinh": (9, 22), "Acosh": (9, 22), "Atanh": (9, 22),
    "BitwiseAnd": (18,), "BitwiseOr": (18,), "BitwiseXor": (18,), "BitwiseNot": (18,),
    # 28 adds signed types (arithmetic right shift) and defines negative and too-wide shifts.
    "BitShift": (11, 28),
    # 20 adds float8 inputs: the same test.
    "IsNaN": (13, 20), "IsInf": (10, 20),
    # 19 adds `saturate`, 24 `round_mode`: both only affect float8 targets.
    "Cast": (13, 19, 21, 23, 24, 25, 28),
    "BitCast": (26,),
    "Clip": (13,),
    "Identity": (13, 14, 16, 19, 21, 23, 24, 25),
    "Dropout": (13, 22),
    "Add": (13, 14), "Sub": (13, 14), "Mul": (13, 14), "Div": (13, 14), "Pow": (13, 15),
    # 28 defines fmod=0 for floats (floor semantics); 13 allowed it for integers only.
    "Mod": (13, 28),
    "Max": (13,), "Min": (13,), "Sum": (13,), "Mean": (13,),
    "Equal": (13, 19), "Less": (13,), "LessOrEqual": (12, 16), "Greater": (13,),
    "GreaterOrEqual": (12, 16), "And": (7,), "Or": (7,), "Xor": (7,), "Where": (9, 16),
    "Trilu": (14,),
    # 19 adds float8 types (refused) with `saturate` (float8 only) and float16 scales; 21
    # int16/uint16, int4 (an ECG type), `block_size` (read) and Q's `output_dtype`; 23 Q's
    # `precision` and int32 x (refused) and DQ's `output_dtype`; 24, 25 and 28 only types
    # (float8e8m0 scales, int2, float6: refused). frontends/onnx_quantize.py reads them.
    "QuantizeLinear": (13, 19, 21, 23, 24, 25, 28),
    "DequantizeLinear": (13, 19, 21, 23, 24, 25, 28),
    # 9: training mode is "more than one output"; 14 adds `training_mode`; 15 lets scale,
    # bias, mean and var have their own types. Inference mode only.
    "BatchNormalization": (9, 14, 15),
    "Conv": (11, 22), "ConvTranspose": (11, 22), "Gemm": (13,), "MatMul": (13,),
    "InstanceNormalization": (6, 22), "LayerNormalization": (17,),
    # 22 clarifies ceil_mode: windows starting in the right padding are dropped.
    "MaxPool": (12, 22),
    # 19 adds `dilations` (default 1); 22 as MaxPool.
    "AveragePool": (11, 19, 22),
    "GlobalAveragePool": (1, 22), "GlobalMaxPool": (1, 22),
    # `axes` is an attribute before 18 (ReduceSum: before 13); 20 adds bool for Max/Min.
    "ReduceMean": (13, 18), "ReduceSum": (13,), "ReduceMax": (13, 18, 20),
    "ReduceMin": (13, 18, 20), "ReduceProd": (13, 18), "ReduceL2": (13, 18),
    "ArgMax": (13,), "ArgMin": (13,), "CumSum": (11, 14), "CumProd": (26,),
    "Softmax": (13,), "LogSoftmax": (13,),
    "TopK": (11, 24), "NonMaxSuppression": (11,),
    # 16 adds coordinate_transformation_mode (default half_pixel); 10 behaves as
    # 'output_half_pixel'.
    "RoiAlign": (10, 16, 22),
    # 20 allows 1 to 3 spatial axes (16: 2) and renames modes bilinear/bicubic to linear/cubic.
    "GridSample": (16, 20, 22),
    # 14 adds `allowzero` (default 0, the 13 behaviour).
    "Reshape": (13, 14, 19, 21, 23, 24, 25),
    "Flatten": (13, 21, 23, 24, 25), "Squeeze": (13, 21, 23, 24, 25),
    "Unsqueeze": (13, 21, 23, 24, 25), "Concat": (13,),
    # 18 adds `num_outputs` (used when there is no `split` input).
    "Split": (13, 18),
    "Slice": (13,),
    # 18 adds the `axes` input, 19 mode 'wrap'.
    "Pad": (13, 18, 19, 21, 23, 24, 25),
    # 15 adds `start` / `end` (defaults: the whole shape).
    "Shape": (13, 15, 19, 21, 23, 24, 25),
    "Size": (13, 19, 21, 23, 24, 25), "Transpose": (13, 21, 23, 24, 25),
    "DepthToSpace": (13, 28),
    # 28 adds `mode` (default DCR, the 13 behaviour).
    "SpaceToDepth": (13, 28),
    "Expand": (13,), "Tile": (13,),
    # 18 adds `antialias`, `axes`, `keep_aspect_ratio_policy` (defaults: the 13
    # behaviour); 19 adds coordinate_transformation_mode 'half_pixel_symmetric'.
    "Resize": (13, 18, 19),
    "Gather": (13,), "GatherElements": (13,),
    # 16 adds reduction add/mul, 18 max/min.
    "ScatterElements": (13, 16, 18), "ScatterND": (13, 16, 18),
    "GatherND": (13,), "NonZero": (13,),
    # 28 adds bfloat16.
    "Unique": (11, 28),
    "ConstantOfShape": (9, 20, 21, 23, 24, 25),
    # 27 adds `stash_type`, the accumulation type of float16 ranges.
    "Range": (11, 27),
    "Constant": (13, 19, 21, 23, 24, 25),
}

ECG_OPS: dict[str, dict] = {row["onnx_name"]: row for row in _core.op_table() if not row["internal"]}
DEFAULT_DOMAINS = ("", "ai.onnx")


def default_opset(proto: Any) -> int | None:
    """The model's default-domain opset (None when it imports none)."""
    for o in proto.opset_import:
        if o.domain in DEFAULT_DOMAINS:
            return int(o.version)
    return None


def upgrade(onnx: Any, proto: Any, what: str) -> Any:
    """`proto` at MIN_OPSET: itself when it declares MIN_OPSET or newer, else converted by
    ``onnx.version_converter`` (the caller has screened and checked it at its own opset). A
    conversion onnx cannot do is an UnsupportedOperatorError naming the opsets and its
    reason."""
    opset = default_opset(proto)
    if opset is None or opset >= MIN_OPSET:
        return proto
    from onnx import version_converter

    resizes = _old_resizes(onnx, proto, opset, what)
    try:
        out = version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # noqa: BLE001 - the converter's RuntimeError, ValueError, ...
        msg = " ".join(str(e).split())
        raise UnsupportedOperatorError(
            f"{what} uses default-domain opset {opset}; dnnfusion reads opsets {MIN_OPSET} and "
            f"newer and converts older ones with onnx.version_converter, which failed on this "
            f"model: {msg[:300]}") from None
    if default_opset(out) != MIN_OPSET:  # never seen; the importer must not misread it
        raise UnsupportedOperatorError(
            f"{what}: onnx.version_converter returned opset {default_opset(out)}, not {MIN_OPSET}")
    _mend_resizes(onnx, out, resizes)
    # The converted model must take and return what the model declares: the converter drops
    # Scan-8's batch axis from the graph's inputs and outputs, for one.
    before, after = _interface(proto), _interface(out)
    for name, was in before.items():
        if after.get(name) != was:
            now = after.get(name)
            raise UnsupportedOperatorError(
                f"{what} uses default-domain opset {opset}; onnx.version_converter's conversion to "
                f"opset {MIN_OPSET} changes the graph's interface ('{name}': {_spell(onnx, was)} "
                f"becomes {_spell(onnx, now)}), so dnnfusion cannot read it")
    return out


def _old_resizes(onnx: Any, proto: Any, opset: int, what: str) -> dict[str, str]:
    """Upsample (7, 9) and Resize-10 nodes: {output name: nearest_mode ('' for linear)}.

    onnx.version_converter turns them into Resize-11 without a coordinate_transformation_mode,
    i.e. half_pixel, but they map output pixel i to input i / scale ('asymmetric'), and
    ONNX Runtime takes the nearest pixel by floor where the scale is >= 1 and by ceil where it
    is below (measured against its Resize-13). Upsample's scales are >= 1; Resize-10's must be
    a constant whose axes do not mix the two (else refused: nearest_mode is one for all)."""
    if opset >= 11:
        return {}
    consts = {t.name: t for t in proto.graph.initializer}
    consts.update({n.output[0]: a.t for n in proto.graph.node if n.op_type == "Constant"
                   for a in n.attribute if a.name == "value"})
    out = {}
    for i, n in enumerate(proto.graph.node):
        if n.op_type not in ("Upsample", "Resize") or not n.output:
            continue
        mode = next((a.s.decode() for a in n.attribute if a.name == "mode"), "nearest")
        if mode != "nearest" or n.op_type == "Upsample":
            out[n.output[0]] = "floor" if mode == "nearest" else ""
            continue
        t = consts.get(n.input[1]) if len(n.input) > 1 else None
        if t is None:
            raise UnsupportedOperatorError(
                f"{what}: node '{n.name or f'Resize_{i}'}' (Resize-10, mode nearest) has scales that are "
                "not a constant; dnnfusion converts it to Resize-13 only where they are (its rounding "
                "depends on whether each scale is below 1)")
        scales = [float(v) for v in onnx.numpy_helper.to_array(t).ravel() if float(v) != 1.0]
        if scales and min(scales) < 1 <= max(scales):
            raise UnsupportedOperatorError(
                f"{what}: node '{n.name or f'Resize_{i}'}' (Resize-10, mode nearest) enlarges some axes "
                "and shrinks others, which ONNX Runtime rounds differently (floor, ceil) and Resize-13 "
                "cannot say with one nearest_mode")
        out[n.output[0]] = "ceil" if scales and max(scales) < 1 else "floor"
    return out


def _mend_resizes(onnx: Any, proto: Any, resizes: dict[str, str]) -> None:
    """Gives the converted Resize nodes of _old_resizes their coordinate mapping and rounding."""
    for n in proto.graph.node:
        if n.op_type != "Resize" or not n.output or n.output[0] not in resizes:
            continue
        nearest = resizes[n.output[0]]
        keep = [a for a in n.attribute if a.name not in ("coordinate_transformation_mode", "nearest_mode")]
        del n.attribute[:]
        n.attribute.extend(keep)
        n.attribute.append(onnx.helper.make_attribute("coordinate_transformation_mode", "asymmetric"))
        if nearest:
            n.attribute.append(onnx.helper.make_attribute("nearest_mode", nearest))


def _spell(onnx: Any, sig: tuple | None) -> str:
    if sig is None:
        return "absent"
    elem, dims = sig
    name = onnx.TensorProto.DataType.Name(elem).lower() if elem in onnx.TensorProto.DataType.values() else str(elem)
    return name + ("[?]" if dims is None else "[" + ",".join(map(str, dims)) + "]")


def _interface(proto: Any) -> dict[str, tuple]:
    """Each graph input and output: its element type and dims (values and symbols)."""
    g = proto.graph
    inits = {t.name for t in g.initializer}
    out = {}
    for v in [*g.input, *g.output]:
        if v.name in inits or not v.type.HasField("tensor_type"):
            continue
        tt = v.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in tt.shape.dim) \
            if tt.HasField("shape") else None
        out[v.name] = (tt.elem_type, dims)
    return out


# The element types ONNX gives only a few operators (data movement, Cast, the quantization
# pair): a node reading one is checked against its schema's type constraints, as ONNX Runtime
# checks every node (which the checker does not). compile() computes them in wider types, so an
# arithmetic operator on them would otherwise run without the rounding the reference applies.
_CHECKED_TYPES = frozenset({"i4", "u4", "i2", "u2", "f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0",
                            "f4e2m1", "f6e2m3", "f6e3m2"})


# Operators that convert to and from those types, which the front-end reads by its own rules
# (onnx_quantize.py: what each opset's form takes, with its own refusals).
_OWN_TYPE_RULES = frozenset({"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear"})


def check_input_types(onnx: Any, node: Any, name: str, dtypes: list[str | None], opset: int | None) -> None:
    """DTypeError when an input of a narrow or small-float type is not one the node's schema
    takes at `opset`."""
    if opset is None or node.op_type in _OWN_TYPE_RULES or not any(d in _CHECKED_TYPES for d in dtypes):
        return
    from dnnfusion.dtypes import ONNX_CODES

    schema = onnx.defs.get_schema(node.op_type, opset, "")
    allowed = {t.type_param_str: set(t.allowed_type_strs) for t in schema.type_constraints}
    params = list(schema.inputs)
    for i, d in enumerate(dtypes):
        if d not in _CHECKED_TYPES or not params:
            continue
        p = params[min(i, len(params) - 1)]
        ok = allowed.get(p.type_str, {p.type_str})
        spelled = f"tensor({onnx.TensorProto.DataType.Name(ONNX_CODES[d]).lower()})"
        if spelled not in ok:
            raise DTypeError(
                f"node '{name}' ({node.op_type}-{schema.since_version}): input {i} is "
                f"{spelled[7:-1]}, which the operator does not take (ONNX Runtime refuses it too); Cast it "
                "to float32 or an integer type first")


# What to do about an operator that is not imported, by the kind of work it does.
_STRING_OPS = frozenset({"StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch",
                         "TfIdfVectorizer"})
_CUT_GRAPH = ("cut the graph around it (onnx.utils.extract_model) and run that part with ONNX Runtime, "
              "the rest with dnnfusion")


def what_to_do(node: Any) -> str:
    """The advice a refused operator's error ends with."""
    if node.domain == "ai.onnx.ml":
        return ("classical-ML operators (domain ai.onnx.ml) are not compiled: " + _CUT_GRAPH)
    if node.domain == "ai.onnx.preview.training":
        return "training operators are not compiled: export the inference graph (without optimizer updates)"
    if node.op_type in _STRING_OPS:
        return ("string tensors are not compiled: process the text before the model (a tokenizer) and feed "
                "the numbers it gives")
    if node.op_type == "ImageDecoder":
        return "decode the image before the model (PIL, OpenCV) and feed the pixels as a uint8 or float tensor"
    return _CUT_GRAPH + ", or express it with standard ONNX operators"


def unsupported_op(name: str, node: Any, opset: int | None) -> UnsupportedOperatorError:
    return UnsupportedOperatorError(
        f"node '{name}' uses operator '{node.op_type}' (domain '{node.domain}', opset "
        f"{'?' if opset is None else opset}), which dnnfusion does not support; {what_to_do(node)}")


def schema_version(onnx: Any, node: Any, name: str, opset: int | None, opsets: dict[str, int]) -> int:
    """The schema version (since_version) of `node` at `opset`, if dnnfusion has checked it."""
    if node.domain not in DEFAULT_DOMAINS:
        raise unsupported_op(name, node, opsets.get(node.domain))
    if node.op_type not in ECG_OPS or node.op_type not in CHECKED_VERSIONS:
        raise unsupported_op(name, node, opset)
    if opset is None:
        raise ModelFormatError(f"node '{name}' uses the default domain, which the model "
                               "does not import (no opset_import for domain '')")
    try:
        version = int(onnx.defs.get_schema(node.op_type, opset, "").since_version)
    except Exception:  # noqa: BLE001 - the op does not exist at this opset
        raise unsupported_op(name, node, opset) from None
    if version not in CHECKED_VERSIONS[node.op_type]:
        raise UnsupportedOperatorError(
            f"node '{name}' uses operator '{node.op_type}' version {version} (domain '', "
            f"opset {opset}); dnnfusion has checked versions "
            f"{', '.join(map(str, CHECKED_VERSIONS[node.op_type]))} of it and does not know "
            f"whether version {version} changed its meaning")
    return version
