"""ONNX operators defined as functions of other operators, imported as their bodies.

Many ONNX operators have a function body in their schema (``OpSchema.function_body``, or one
built for the node at hand, ``get_context_dependent_function``): CastLike, Celu, Shrink,
ThresholdedRelu, Swish, MeanVarianceNormalization, GroupNormalization, RMSNormalization,
ReduceL1 / ReduceLogSum / ReduceLogSumExp / ReduceSumSquare, ... ONNX Runtime runs them;
dnnfusion has no ECG operator for them. The importer reads such a node as its body, with the
function version for the model's opset, the node's attributes (or the defaults) put where the
body refers to them, and fresh value names under the node's name ("<node>/<op><k>:<name>"),
so the ECG holds the body's operators and everything after import (rewriting, fusion, code
generation, the reference) treats them as any other. A body operator dnnfusion does not
support is refused as usual, with the function named.

Only the default domain, and only operators that are not ECG operators themselves: an
operator with both (e.g. LayerNormalization) is imported as its ECG operator, except on doubles
(double_form below)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnfusion.errors import DTypeError, InternalError, ModelFormatError, ShapeError, UnsupportedOperatorError
from dnnfusion.frontends.onnx_body import MAX_CONSTANT, function_proto  # noqa: F401 (MAX_CONSTANT: public here)
from dnnfusion.frontends.onnx_body import ONNX_CODES as _ONNX_CODES
from dnnfusion.frontends.onnx_body import bounded as _bounded
from dnnfusion.frontends.onnx_body import const_node as _const
from dnnfusion.frontends.onnx_body import np_dtype as _np_dtype
from dnnfusion.frontends.onnx_versions import DEFAULT_DOMAINS, ECG_OPS, MIN_OPSET

_MAX_DEPTH = 8  # bodies inside bodies (no schema nests this deep; a cycle would)
# Bodies built at an opset below the ECG's (MIN_OPSET) that read the same at it: Celu's
# opset-12 body (Constant, Div, Elu, Mul), whose operators' opset-13 versions only add bfloat16;
# DynamicQuantizeLinear's opset-11 body, whose operators' later versions add types (ReduceMin/Max,
# Min/Max, Sub, Div, Clip, Cast, Identity, Constant) or an axis its per-tensor QuantizeLinear lacks.
_READ_AT_MIN_OPSET = {"Celu", "DynamicQuantizeLinear"}


def _schema(onnx: Any, node: Any, opset: int | None) -> Any | None:
    if node.domain not in DEFAULT_DOMAINS or node.op_type in ECG_OPS or opset is None:
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except Exception:  # noqa: BLE001 - no such operator at this opset
        return None
    versions = [*schema.function_opset_versions, *schema.context_dependent_function_opset_versions]
    return schema if versions else None


def _version(versions: Any, opset: int) -> int | None:
    """The function version to read: the newest at or below the model's opset, else the oldest
    (every body attached to a schema defines that same schema version, e.g. Shrink-9's only body
    is written with opset-18 operators, which the importer reads at 18)."""
    versions = sorted(versions)
    if not versions:
        return None
    return max((v for v in versions if v <= opset), default=versions[0])


def has_body(onnx: Any, node: Any, opset: int | None) -> bool:
    """Whether `node` is a default-domain operator outside the ECG with a function body (the
    schema's, or for the operators ONNX gives none, _HAND_FORMS below)."""
    if node.domain in DEFAULT_DOMAINS and node.op_type in hand_forms() and opset is not None:
        return True
    return _schema(onnx, node, opset) is not None


def _body(imp: Any, node: Any, name: str, schema: Any) -> Any:
    onnx = imp.onnx
    fn = onnx.FunctionProto()
    plain = _version(schema.function_opset_versions, imp.opset)
    if plain is not None:
        fn.ParseFromString(schema.get_function_with_opset_version(plain))
        return fn
    version = _version(schema.context_dependent_function_opset_versions, imp.opset)
    types = []
    for i in node.input:
        if not i:
            types.append(onnx.TypeProto().SerializeToString())
            continue
        v = imp.env[i]
        dims = [d if isinstance(d, int) else str(d) for d in v.shape]
        types.append(onnx.helper.make_tensor_type_proto(_ONNX_CODES[v.dtype], dims).SerializeToString())
    try:
        data = schema.get_context_dependent_function_with_opset_version(
            version, node.SerializeToString(), types) if version is not None else b""
    except Exception as e:  # noqa: BLE001 - the schema's builder rejects this node
        raise UnsupportedOperatorError(f"node '{name}' ({node.op_type}): ONNX could not build its function body "
                                       f"for these inputs ({str(e).splitlines()[0][:200]})") from None
    if not data:
        raise UnsupportedOperatorError(f"node '{name}' ({node.op_type}): ONNX has no function body for these "
                                       "inputs, and dnnfusion has no operator for it")
    fn.ParseFromString(data)
    return fn


def _attributes(onnx: Any, node: Any, fn: Any, schema: Any) -> dict[str, Any]:
    """The value of each attribute the body may refer to: the node's, else the function's
    default, else the schema's default (absent: the body's reference is dropped)."""
    out = {}
    for name, a in schema.attributes.items():
        d = a.default_value
        if d is not None and d.type != 0:
            out[name] = d
    for d in fn.attribute_proto:
        out[d.name] = d
    for a in node.attribute:
        out[a.name] = a
    return out


def inline(imp: Any, node: Any, name: str, depth: int = 0) -> None:
    """Imports `node` (a default-domain operator outside the ECG, has_body true, or one with a
    double_form) as the nodes of its function body."""
    onnx = imp.onnx
    if depth > _MAX_DEPTH:
        raise UnsupportedOperatorError(f"node '{name}' ({node.op_type}): function bodies nest deeper than "
                                       f"{_MAX_DEPTH}")
    undefined = [i for i in node.input if i and i not in imp.env]
    if undefined:
        raise ModelFormatError(f"node '{name}' reads {undefined}, which no node before it defines (the graph "
                               "must be topologically sorted)")
    try:
        fn, attrs = double_form(imp, node), {}
        if fn is None and node.op_type in hand_forms() and node.domain in DEFAULT_DOMAINS:
            named = onnx.NodeProto()
            named.CopyFrom(node)
            named.name = name  # (what the messages call it)
            fn = hand_forms()[node.op_type](imp, named)
        if fn is None:
            schema = _schema(onnx, node, imp.opset)
            if schema is None:
                raise InternalError(f"node '{name}' ({node.op_type}) has no function body at opset {imp.opset}")
            fn = _body(imp, node, name, schema)
            attrs = _attributes(onnx, node, fn, schema)
    except (IndexError, KeyError, ValueError, TypeError, AttributeError) as e:  # a malformed node
        raise ModelFormatError(f"node '{name}' ({node.op_type}) is malformed: {type(e).__name__}: {e}") from None
    except MemoryError:
        raise ShapeError(f"node '{name}' ({node.op_type}): its sizes need more memory at import than there is") from None
    rename: dict[str, str] = {}
    for formal, actual in zip(fn.input, node.input):
        rename[formal] = actual
    for formal in list(fn.input)[len(node.input):]:
        rename[formal] = ""  # an optional input the node leaves out
    for formal, actual in zip(fn.output, node.output):
        rename[formal] = actual
    body_opset = next((int(o.version) for o in fn.opset_import if o.domain in DEFAULT_DOMAINS), imp.opset)
    if body_opset < MIN_OPSET and node.op_type in _READ_AT_MIN_OPSET:
        body_opset = MIN_OPSET
    saved = imp.opset
    imp.opset = body_opset
    try:
        for k, b in enumerate(fn.node):
            sub_graphs = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in b.attribute)
            sub = onnx.NodeProto()
            sub.CopyFrom(b)
            inner = f"{name}/{b.op_type}{k}"
            del sub.input[:]
            for i in b.input:
                if i and i not in rename:
                    raise ModelFormatError(f"the function body of {node.op_type} (node '{name}') reads '{i}' "
                                           "before any of its nodes computes it")
                sub.input.append(rename[i] if i else "")
            del sub.output[:]
            for o in b.output:
                if o and o not in rename:
                    rename[o] = imp._fresh(f"{name}:{o}")
                sub.output.append(rename.get(o, "") if o else "")
            del sub.attribute[:]
            for a in b.attribute:
                if a.ref_attr_name:
                    if a.ref_attr_name not in attrs:
                        continue
                    value = onnx.AttributeProto()
                    value.CopyFrom(attrs[a.ref_attr_name])
                    value.name = a.name
                    sub.attribute.append(value)
                else:
                    sub.attribute.append(a)
            if sub_graphs:  # control flow in the body: its sub-graphs read the body's names too
                _bind_sub_graphs(onnx, sub, rename, attrs, f"the function body of {node.op_type} (node '{name}')")
            sub.name = inner
            if has_body(onnx, sub, imp.opset):
                inline(imp, sub, inner, depth + 1)
            else:
                imp._node(sub, inner)
    finally:
        imp.opset = saved
    missing = [o for o in node.output if o and o not in imp.env]
    if missing:
        raise UnsupportedOperatorError(f"node '{name}' ({node.op_type}): its function body does not compute "
                                       f"{missing}")


def _bind_sub_graphs(onnx: Any, node: Any, rename: dict[str, str], attrs: dict, where: str) -> None:
    """Rewrites the sub-graphs of a function-body node in place: every name a sub-graph reads
    from outside itself (a body value) becomes the name it was imported as (rename), and its
    nodes' references to the function's attributes become the attributes' values. Names a
    sub-graph defines (inputs, initializers, node outputs) shadow the body's, level by level."""
    A = onnx.AttributeProto

    def graph(g: Any, bound: set[str]) -> None:
        local = bound | {v.name for v in g.input} | {t.name for t in g.initializer} | \
            {o for n in g.node for o in n.output if o}
        for n in g.node:
            for j, i in enumerate(n.input):
                if i and i not in local:
                    if i not in rename or not rename[i]:
                        raise ModelFormatError(f"{where}: a sub-graph reads '{i}', which the body does not define")
                    n.input[j] = rename[i]
            attributes(n, local)
        for v in g.output:  # an output that is a body value passed through
            if v.name not in local and v.name in rename and rename[v.name]:
                v.name = rename[v.name]

    def attributes(n: Any, bound: set[str]) -> None:
        keep = []
        for a in n.attribute:
            if a.ref_attr_name:
                if a.ref_attr_name not in attrs:
                    continue
                value = A()
                value.CopyFrom(attrs[a.ref_attr_name])
                value.name = a.name
                a = value
            if a.type == A.GRAPH:
                graph(a.g, bound)
            elif a.type == A.GRAPHS:
                for g in a.graphs:
                    graph(g, bound)
            keep.append(a)
        del n.attribute[:]
        n.attribute.extend(keep)

    for a in node.attribute:
        if a.type == A.GRAPH:
            graph(a.g, set())
        elif a.type == A.GRAPHS:
            for g in a.graphs:
                graph(g, set())


# ---- ECG operators whose kernels compute in float32, on doubles --------------------------------
# Gemm, BatchNormalization and LayerNormalization have float32 kernels (GEMM, folding, row
# kernels); ONNX Runtime also runs them on doubles. A double instance is imported as the
# operators it is made of, which generated code runs in double: Gemm as [Transpose,] MatMul,
# Mul by alpha, Add of beta * C; BatchNormalization (inference) as (x - mean) * scale /
# sqrt(var + epsilon) + B per channel; LayerNormalization as its ONNX function body (which
# computes in its stash_type, float32 by default, as the specification says).
def double_form(imp: Any, node: Any) -> Any | None:
    """The operators a double Gemm / BatchNormalization / LayerNormalization is imported as (a
    FunctionProto over the node's inputs and outputs), else None."""
    if node.domain not in DEFAULT_DOMAINS or node.op_type not in ("Gemm", "BatchNormalization", "LayerNormalization"):
        return None
    x = imp.env.get(node.input[0]) if node.input and node.input[0] else None
    if x is None or x.dtype != "f64":
        return None
    onnx = imp.onnx
    h = onnx.helper
    attrs = {a.name: h.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "LayerNormalization":  # its ONNX function body, as for operators outside the ECG
        schema = onnx.defs.get_schema("LayerNormalization", imp.opset, "")
        return _body(imp, node, node.name or "LayerNormalization", schema)
    rank = len(x.shape)
    ins = [f"in{k}" if i else "" for k, i in enumerate(node.input)]  # formal names; the body's own
    outs = ["out0"]                                                     # below never start so
    nodes = []
    d = lambda v, n: h.make_node("Constant", [], [n], value=onnx.numpy_helper.from_array(np.array(v, np.float64), n))  # noqa: E731
    if node.op_type == "Gemm":
        a, b = ins[0], ins[1]
        if attrs.get("transA", 0):
            nodes.append(h.make_node("Transpose", [a], ["at"], perm=[1, 0]))
            a = "at"
        if attrs.get("transB", 0):
            nodes.append(h.make_node("Transpose", [b], ["bt"], perm=[1, 0]))
            b = "bt"
        alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
        c = ins[2] if len(ins) > 2 and ins[2] else None
        nodes.append(h.make_node("MatMul", [a, b], ["p" if alpha != 1.0 or c else outs[0]]))
        p = "p"
        if alpha != 1.0:
            nodes += [d(alpha, "alpha"), h.make_node("Mul", ["p", "alpha"], ["pa" if c else outs[0]])]
            p = "pa"
        if c:
            if beta != 1.0:
                nodes += [d(beta, "beta"), h.make_node("Mul", [c, "beta"], ["cb"])]
                c = "cb"
            nodes.append(h.make_node("Add", [p, c], [outs[0]]))
    else:  # BatchNormalization, inference (training mode goes on to the importer, which refuses it)
        if attrs.get("training_mode", 0) or len([o for o in node.output if o]) > 1:
            return None
        shape = np.array([-1] + [1] * max(rank - 2, 0), np.int64)
        nodes.append(h.make_node("Constant", [], ["shape"], value=onnx.numpy_helper.from_array(shape, "shape")))
        for i, k in zip(ins[1:5], ("scale", "b", "mean", "var")):
            nodes.append(h.make_node("Reshape", [i, "shape"], [k + "_c"]))
        nodes += [d(attrs.get("epsilon", 1e-5), "eps"), h.make_node("Add", ["var_c", "eps"], ["ve"]),
                  h.make_node("Sqrt", ["ve"], ["sd"]), h.make_node("Div", ["scale_c", "sd"], ["k"]),
                  h.make_node("Sub", [ins[0], "mean_c"], ["xc"]), h.make_node("Mul", ["xc", "k"], ["xk"]),
                  h.make_node("Add", ["xk", "b_c"], [outs[0]])]
    fn = onnx.FunctionProto()
    fn.name = node.op_type
    fn.input.extend(ins)
    fn.output.extend(outs)
    fn.node.extend(nodes)
    fn.opset_import.extend([h.make_opsetid("", max(imp.opset, MIN_OPSET))])
    return fn


# ---- Operators ONNX gives no function body, with one written here ------------------------------
def _hand_body(imp: Any, op: str, n_in: int, nodes: list) -> Any:
    return function_proto(imp, op, n_in, nodes)


def one_hot(imp: Any, node: Any) -> Any:
    """OneHot: Equal(indices (negative ones + depth), a Range of depth along `axis`), then Where
    on the values' [off, on]; indices outside [-depth, depth) give a row of `off`. depth must be
    a constant (the output's shape)."""
    h, name = imp.onnx.helper, node.name or "OneHot"
    idx, depth = imp.env[node.input[0]], imp.env[node.input[1]]
    if not depth.is_constant:
        raise ShapeError(f"node '{name}' (OneHot): depth (input 1) must be a constant, the output's shape")
    d = int(np.asarray(depth.numpy()).reshape(-1)[0])
    if d < 1:
        raise ShapeError(f"node '{name}' (OneHot): depth {d} must be positive")
    _bounded(d, "a depth", node)
    rank = len(idx.shape) + 1
    axis = {a.name: h.get_attribute_value(a) for a in node.attribute}.get("axis", -1)
    if not -rank <= axis < rank:
        raise ShapeError(f"node '{name}' (OneHot): axis {axis} outside the output's rank {rank}")
    axis %= rank
    nodes = [h.make_node("Cast", ["in0"], ["i"], to=7), _const(imp, "d", np.array(d, np.int64)),
             _const(imp, "z", np.array(0, np.int64)), h.make_node("Less", ["i", "z"], ["neg"]),
             h.make_node("Add", ["i", "d"], ["wrapped"]), h.make_node("Where", ["neg", "wrapped", "i"], ["j"]),
             _const(imp, "ax", np.array([axis], np.int64)), h.make_node("Unsqueeze", ["j", "ax"], ["ju"]),
             _const(imp, "r", np.arange(d, dtype=np.int64).reshape([d] + [1] * (rank - 1 - axis))),
             h.make_node("Equal", ["ju", "r"], ["hot"]),
             _const(imp, "k0", np.array(0, np.int64)), _const(imp, "k1", np.array(1, np.int64)),
             h.make_node("Gather", ["in2", "k0"], ["off"]), h.make_node("Gather", ["in2", "k1"], ["on"]),
             h.make_node("Where", ["hot", "on", "off"], ["out0"])]
    return _hand_body(imp, "OneHot", 3, nodes)


def hardmax(imp: Any, node: Any) -> Any:
    """Hardmax: 1 where ArgMax along `axis` (the first maximum) is, 0 elsewhere."""
    h = imp.onnx.helper
    x = imp.env[node.input[0]]
    rank = len(x.shape)
    axis = {a.name: h.get_attribute_value(a) for a in node.attribute}.get("axis", -1)
    if not -rank <= axis < rank:
        raise ShapeError(f"node '{node.name}' (Hardmax): axis {axis} is outside the input's rank {rank}")
    axis %= rank
    n = x.shape[axis]
    if not isinstance(n, int):
        raise ShapeError(f"node '{node.name or 'Hardmax'}' (Hardmax) needs a static size on axis {axis}")
    _bounded(n, "an axis", node)
    dt = _np_dtype(x.dtype)
    nodes = [h.make_node("ArgMax", ["in0"], ["am"], axis=axis, keepdims=1),
             _const(imp, "r", np.arange(n, dtype=np.int64).reshape([n] + [1] * (rank - 1 - axis))),
             h.make_node("Equal", ["am", "r"], ["hot"]),
             _const(imp, "one", np.array(1, dt)), _const(imp, "zero", np.array(0, dt)),
             h.make_node("Where", ["hot", "one", "zero"], ["out0"])]
    return _hand_body(imp, "Hardmax", 1, nodes)


def eye_like(imp: Any, node: Any) -> Any:
    """EyeLike: a constant, ones on diagonal k of the input's (static, 2-D) shape."""
    h, name = imp.onnx.helper, node.name or "EyeLike"
    x = imp.env[node.input[0]]
    attrs = {a.name: h.get_attribute_value(a) for a in node.attribute}
    if len(x.shape) != 2 or not all(isinstance(d, int) for d in x.shape):
        raise ShapeError(f"node '{name}' (EyeLike) needs a static 2-D input, got {list(x.shape)}")
    if "dtype" in attrs:
        ecg_type = {code: t for t, code in _ONNX_CODES.items()}.get(attrs["dtype"])
        if ecg_type is None:
            raise DTypeError(f"node '{name}' (EyeLike): dtype {attrs['dtype']} is not one dnnfusion supports")
        dt = _np_dtype(ecg_type)
    else:
        dt = _np_dtype(x.dtype)
    _bounded(x.shape[0] * x.shape[1], "a matrix", node)
    eye = np.eye(x.shape[0], x.shape[1], k=int(attrs.get("k", 0)), dtype=dt)
    return _hand_body(imp, "EyeLike", 1, [_const(imp, "out0", eye)])


def affine_grid(imp: Any, node: Any) -> Any:
    """AffineGrid (opset 20; ONNX's body branches with If on the rank): the sampling grid
    [N, H, W, 2] ([N, D, H, W, 3]) of theta [N, 2, 3] ([N, 3, 4]), a MatMul of the base
    coordinates (a constant [H*W, 3] of rows (x, y, 1), x along W, from the constant `size`,
    the output's shape) and theta transposed, then a Reshape. The base coordinates are the
    pixel centres in [-1, 1]: from -1 to 1 with align_corners=1, (2i + 1) / L - 1 otherwise."""
    h, name = imp.onnx.helper, node.name or "AffineGrid"
    theta, size = imp.env[node.input[0]], imp.env[node.input[1]]
    if not size.is_constant:
        raise ShapeError(f"node '{name}' (AffineGrid): size (input 1) must be a constant, the output's shape")
    sz = [int(v) for v in np.asarray(size.numpy()).reshape(-1)]
    if len(sz) not in (4, 5) or min(sz) < 0:
        raise ShapeError(f"node '{name}' (AffineGrid): size must be [N, C, H, W] or [N, C, D, H, W], got {sz}")
    nd = len(sz) - 2
    ts = list(theta.shape)
    if len(ts) != 3 or ts[1:] != [nd, nd + 1] or (isinstance(ts[0], int) and ts[0] != sz[0]):
        raise ShapeError(f"node '{name}' (AffineGrid): theta must have shape [{sz[0]}, {nd}, {nd + 1}] for size "
                         f"{sz}, got {ts}")
    spatial = sz[2:]
    points = _bounded(int(np.prod(spatial)) * (nd + 1), "a base grid", node) // (nd + 1)
    align = {a.name: h.get_attribute_value(a) for a in node.attribute}.get("align_corners", 0)

    def axis(n: int) -> np.ndarray:
        if align:  # an axis of 1: its centre, 0, as PyTorch's affine_grid (ONNX Runtime 1.32 puts
            # it at 1, the ONNX reference at -1)
            return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(n)
        return (2.0 * np.arange(n) + 1.0) / max(n, 1) - 1.0

    mesh = np.meshgrid(*[axis(n) for n in spatial], indexing="ij")  # D, H, W order
    base = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(points)], axis=1)  # (x, y, [z,] 1)
    dt = _np_dtype(theta.dtype)
    nodes = [_const(imp, "base", base.astype(dt)),
             h.make_node("Transpose", ["in0"], ["tt"], perm=[0, 2, 1]),
             h.make_node("MatMul", ["base", "tt"], ["g"]),
             _const(imp, "shape", np.array([sz[0], *spatial, nd], np.int64)),
             h.make_node("Reshape", ["g", "shape"], ["out0"])]
    return _hand_body(imp, "AffineGrid", 2, nodes)


def lrn(imp: Any, node: Any) -> Any:
    """LRN: x / (bias + alpha / size * the sum of squares over `size` neighbouring channels)^beta;
    the channel sums as an AveragePool (zeros padded, counted) over [N, 1, C, pixels]."""
    h = imp.onnx.helper
    x = imp.env[node.input[0]]
    attrs = {a.name: h.get_attribute_value(a) for a in node.attribute}
    if len(x.shape) < 2 or not all(isinstance(d, int) for d in x.shape):
        raise ShapeError(f"node '{node.name}' (LRN) needs a static input of rank 2 or more, got {list(x.shape)}")
    size = int(attrs.get("size", 0))
    if size < 1:
        raise ShapeError(f"node '{node.name}' (LRN): size must be a positive integer, got {size}")
    dt = _np_dtype(x.dtype)
    n, c = x.shape[0], x.shape[1]
    pixels = int(np.prod(x.shape[2:], dtype=np.int64))
    nodes = [h.make_node("Mul", ["in0", "in0"], ["sq"]),
             _const(imp, "s4", np.array([n, 1, c, pixels], np.int64)), h.make_node("Reshape", ["sq", "s4"], ["sq4"]),
             h.make_node("AveragePool", ["sq4"], ["avg"], kernel_shape=[size, 1], count_include_pad=1,
                         pads=[(size - 1) // 2, 0, size - 1 - (size - 1) // 2, 0]),
             _const(imp, "sx", np.array(x.shape, np.int64)), h.make_node("Reshape", ["avg", "sx"], ["mean"]),
             _const(imp, "alpha", np.array(attrs.get("alpha", 1e-4), dt)),
             _const(imp, "bias", np.array(attrs.get("bias", 1.0), dt)),
             _const(imp, "beta", np.array(attrs.get("beta", 0.75), dt)),
             h.make_node("Mul", ["mean", "alpha"], ["am"]), h.make_node("Add", ["am", "bias"], ["base"]),
             h.make_node("Pow", ["base", "beta"], ["den"]), h.make_node("Div", ["in0", "den"], ["out0"])]
    return _hand_body(imp, "LRN", 1, nodes)


def lp_pool(imp: Any, node: Any) -> Any:
    """LpPool: (the sum over each window of |x|^p)^(1/p), the sum as an AveragePool that counts
    the padding (zeros) times the window's size. ceil_mode windows that run past the padding
    would be averaged over fewer elements: refused, unless ceil_mode changes no output size."""
    h = imp.onnx.helper
    x = imp.env[node.input[0]]
    attrs = {a.name: h.get_attribute_value(a) for a in node.attribute}
    kernel = [int(k) for k in attrs.get("kernel_shape", [])]
    if not kernel or any(k < 1 for k in kernel) or len(kernel) != len(x.shape) - 2:
        raise ShapeError(f"node '{node.name}' (LpPool): kernel_shape {kernel} must give a positive size to each of "
                         f"the input's {len(x.shape) - 2} spatial axes")
    p = attrs.get("p", 2)
    if not isinstance(p, int) or p < 1:
        raise UnsupportedOperatorError(f"node '{node.name}' (LpPool): p={p}; a positive integer is supported")
    pool = {k: v for k, v in attrs.items() if k in ("auto_pad", "dilations", "pads", "strides", "ceil_mode")}
    if pool.get("ceil_mode", 0):
        if not all(isinstance(d, int) for d in x.shape):
            raise ShapeError(f"node '{node.name}' (LpPool) with ceil_mode=1 needs static input sizes")
        if pool.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
            raise UnsupportedOperatorError(f"node '{node.name}' (LpPool): ceil_mode=1 with auto_pad")
        n = len(kernel)
        pads = list(pool.get("pads", [0] * 2 * n))
        strides = list(pool.get("strides", [1] * n))
        dil = list(pool.get("dilations", [1] * n))
        for i in range(n):
            span = x.shape[2 + i] + pads[i] + pads[n + i] - dil[i] * (kernel[i] - 1) - 1
            if span % strides[i]:
                raise UnsupportedOperatorError(
                    f"node '{node.name}' (LpPool): ceil_mode=1 adds a window past the padding on axis {2 + i}, "
                    "which dnnfusion does not support; export with ceil_mode=0 or pads that cover it")
        pool["ceil_mode"] = 0  # no output size changes
    dt = _np_dtype(x.dtype)
    nodes = [h.make_node("Abs", ["in0"], ["a"]), _const(imp, "p", np.array(p, dt)),
             h.make_node("Pow", ["a", "p"], ["ap"]),
             h.make_node("AveragePool", ["ap"], ["avg"], kernel_shape=kernel, count_include_pad=1, **pool),
             _const(imp, "size", np.array(int(np.prod(kernel)), dt)), h.make_node("Mul", ["avg", "size"], ["sum"]),
             _const(imp, "inv_p", np.array(1.0 / p, dt)), h.make_node("Pow", ["sum", "inv_p"], ["out0"])]
    return _hand_body(imp, "LpPool", 1, nodes)


def lp_normalization(imp: Any, node: Any) -> Any | None:
    """LpNormalization (no function body in ONNX): x divided by its L1 or L2 norm along `axis`;
    an all-zero slice stays zero (ONNX Runtime's result), never 0/0."""
    onnx = imp.onnx
    h = onnx.helper
    attrs = {a.name: h.get_attribute_value(a) for a in node.attribute}
    p, axis = attrs.get("p", 2), attrs.get("axis", -1)
    if p not in (1, 2):
        raise UnsupportedOperatorError(f"node '{node.name}' (LpNormalization): p={p}; ONNX defines p as 1 or 2")
    axes = onnx.numpy_helper.from_array(np.array([axis], np.int64), "axes")
    dtype = imp.env[node.input[0]].dtype
    one = onnx.numpy_helper.from_array(np.array(1, {"f64": np.float64, "f16": np.float16}.get(dtype, np.float32)), "one")
    zero = onnx.numpy_helper.from_array(np.array(0, {"f64": np.float64, "f16": np.float16}.get(dtype, np.float32)), "zero")
    nodes = [h.make_node("Constant", [], ["axes"], value=axes), h.make_node("Constant", [], ["one"], value=one),
             h.make_node("Constant", [], ["zero"], value=zero)]
    if p == 2:
        nodes.append(h.make_node("ReduceL2", ["in0", "axes"], ["norm"], keepdims=1))
    else:
        nodes += [h.make_node("Abs", ["in0"], ["abs"]), h.make_node("ReduceSum", ["abs", "axes"], ["norm"], keepdims=1)]
    nodes += [h.make_node("Equal", ["norm", "zero"], ["is0"]), h.make_node("Where", ["is0", "one", "norm"], ["den"]),
              h.make_node("Div", ["in0", "den"], ["out0"])]
    return _hand_body(imp, "LpNormalization", 1, nodes)


def _einsum(imp: Any, node: Any) -> Any:
    from dnnfusion.frontends.onnx_einsum import einsum

    return einsum(imp, node)


def _det(imp: Any, node: Any) -> Any:
    from dnnfusion.frontends.onnx_linalg import det

    return det(imp, node)


def _deform_conv(imp: Any, node: Any) -> Any:
    from dnnfusion.frontends.onnx_deform_conv import deform_conv

    return deform_conv(imp, node)


def _recurrent(imp: Any, node: Any) -> Any:
    from dnnfusion.frontends.onnx_recurrent import recurrent

    return recurrent(imp, node)


def log_sum_exp(imp: Any, node: Any) -> Any:
    """ReduceLogSumExp on floats as ONNX Runtime computes it, not as its schema's body (log of
    a sum of exps, which overflows from 89 in float32, 710 in the body's double): the maximum
    m taken out first, log(sum(exp(x - m))) + m, with m = 0 where it is infinite (all -inf:
    -inf; any +inf: +inf). Other element types keep the schema's body (None)."""
    x = imp.env.get(node.input[0]) if node.input and node.input[0] else None
    if x is None or x.dtype not in ("f32", "f64", "f16", "bf16"):
        return None
    h = imp.onnx.helper
    attrs = {a.name: h.get_attribute_value(a) for a in node.attribute}
    keep, common = int(attrs.get("keepdims", 1)), {}
    if "noop_with_empty_axes" in attrs:
        common["noop_with_empty_axes"] = int(attrs["noop_with_empty_axes"])
    nodes, axes = [], []
    if "axes" in attrs:  # an opset below 18: the attribute; the body's opset takes them as an input
        nodes.append(_const(imp, "axes", np.array(list(attrs["axes"]), np.int64)))
        axes = ["axes"]
    elif len(node.input) > 1 and node.input[1]:
        axes = ["in1"]
    zero = np.array(0, _np_dtype(x.dtype))
    nodes += [h.make_node("ReduceMax", ["in0"] + axes, ["m"], keepdims=1, **common),
              h.make_node("IsInf", ["m"], ["inf"]), _const(imp, "zero", zero),
              h.make_node("Where", ["inf", "zero", "m"], ["ms"]), h.make_node("Sub", ["in0", "ms"], ["d"]),
              h.make_node("Exp", ["d"], ["e"]), h.make_node("ReduceSum", ["e"] + axes, ["s"], keepdims=keep, **common),
              h.make_node("Log", ["s"], ["l"])]
    if keep:
        nodes.append(h.make_node("Add", ["l", "ms"], ["out0"]))
    else:
        nodes += [h.make_node("ReduceMax", ["ms"] + axes, ["mk"], keepdims=0, **common),
                  h.make_node("Add", ["l", "mk"], ["out0"])]
    return function_proto(imp, "ReduceLogSumExp", len(node.input), nodes)


_HAND_FORMS = {"ReduceLogSumExp": log_sum_exp, "LpNormalization": lp_normalization, "Einsum": _einsum, "OneHot": one_hot, "Hardmax": hardmax,
               "EyeLike": eye_like, "AffineGrid": affine_grid, "LRN": lrn, "LpPool": lp_pool, "LSTM": _recurrent, "GRU": _recurrent, "RNN": _recurrent,
               "Det": _det, "DeformConv": _deform_conv}


def hand_forms() -> dict[str, Any]:
    """Every written body: the ones above and those of the modules that hold a family of them
    (signal processing, QOperator quantization, index arithmetic), which import this module's
    helpers and so are read on first use."""
    global _ALL_FORMS
    if _ALL_FORMS is None:
        from dnnfusion.frontends import onnx_index_forms, onnx_qoperator, onnx_signal

        _ALL_FORMS = {**_HAND_FORMS, **onnx_signal.HAND_FORMS, **onnx_qoperator.HAND_FORMS,
                      **onnx_index_forms.HAND_FORMS}
    return _ALL_FORMS


_ALL_FORMS: dict[str, Any] | None = None
