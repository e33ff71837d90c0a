"""The ONNX front-end: translates an ONNX model into an ECG (paper §3).

ECG operators are ONNX operators with ONNX semantics and attribute names, in the newest
form of each (see ``cpp/ir/ops.def``), so importing is mostly a matter of reading the model
carefully and refusing what dnnfusion cannot represent. What :func:`import_onnx` accepts:

* **Sources.** An ``onnx.ModelProto``, a path (``str`` / ``os.PathLike``; external data is
  loaded relative to the file's folder) or serialized bytes. ``onnx`` is an optional
  dependency (``pip install dnnfusion[onnx]``) and is imported only here.
* **Validation.** Unreadable files (truncated, corrupt, empty, not ONNX), missing external
  data, models failing ``onnx.checker.check_model`` (run by path when the model came from a
  file, which also covers models over 2 GB) and graphs with no nodes or no outputs raise
  :class:`ModelFormatError`; no protobuf traceback reaches the caller. Before the checker,
  the operators are screened so that an operator dnnfusion does not support is reported as
  such (the checker would only say "No Op registered").
* **Opsets.** The default-domain (``''`` / ``ai.onnx``) opset must be 13 or newer, and at
  most the newest opset the installed ``onnx`` knows; a model declaring 7 to 12 (as older
  exporters and model zoos wrote them) is checked at its own opset, converted to 13 with
  ``onnx.version_converter`` and screened and checked again (``onnx_versions.upgrade``,
  which also gives Upsample and Resize-10 the coordinate mapping the converter drops, and
  refuses a conversion that changes the graph's inputs or outputs). For every node the operator's schema
  version (``onnx.defs.get_schema(op, opset).since_version``) must be one listed in
  :data:`CHECKED_VERSIONS`: the versions whose semantics were read against the ECG's. A new
  schema version (a future opset) is refused rather than silently misread. Older forms
  are normalized to the newest: ``axes`` of ReduceMean/Max/Min/Prod/L2 becomes an input
  (it was an attribute before opset 18), Split without a ``split`` input gets
  ``num_outputs`` (opset 18), RoiAlign-10 gets its implied
  ``coordinate_transformation_mode='output_half_pixel'``. Operators in any other domain
  (``com.microsoft``, ``ai.onnx.ml``, model-local functions) are unsupported.
* **Refusals.** Operators outside the ECG table raise :class:`UnsupportedOperatorError`
  naming the node, the operator, the domain and the opset. So do attribute values the ECG
  does not represent, naming the node and the attribute: sub-graphs (but If, Loop and Scan
  are unrolled or selected at import: onnx_control.py), sparse tensors,
  string-tensor attributes (``Constant`` strings), BatchNormalization in training mode.
  (Dropout in training mode and the random operators draw on the host: onnx_random.py.)
  Element types outside the ECG's (string, complex...; the
  ECG holds int4, uint4, int2, uint2, float8, float6 and float4 a byte an element, as ml_dtypes
  does) in graph inputs, initializers, tensor attributes or Cast
  targets raise :class:`DTypeError` naming the tensor (and the Quantize/DequantizeLinear nodes
  that read it, with what to do: onnx_quantize.py, which also reads those two operators).
* **Graph inputs** are the graph's inputs that are not initializers (an initializer listed
  as an input, as in IR < 4, is a constant: dnnfusion does not let it be overridden).
  Dimensions are ``dim_value`` (an int), ``dim_param`` (that symbol) or, when neither is
  set, a generated symbol ``<input>_dim<i>``. ``input_shapes={name: dims}`` specializes
  inputs: the rank must match and fixed dims must agree (:class:`ShapeError` otherwise,
  also for names that are not graph inputs). A symbol bound this way is bound in every
  input that uses it (ONNX gives one ``dim_param`` one meaning across the graph); an entry
  may be ``None`` to keep the model's dim, or a string to rename a symbol.
* **Values and nodes.** Value and node names are kept (they are model strings; the core
  never splices them into generated code); an unnamed node is named ``<op>_<index>``.
  An optional input given as ``""`` becomes ``None`` (trailing ones are dropped), trailing
  empty outputs are dropped, and an empty output in the middle gets a generated name.
  Initializers and ``Constant`` nodes (any of ``value``, ``value_float(s)``,
  ``value_int(s)``) become graph constants.
* **Folding.** Every node goes through :class:`~dnnfusion.frontends.builder.GraphBuilder`,
  which folds shape arithmetic on static shapes (``Shape -> Gather -> Concat -> Reshape``
  chains end as a Reshape with a constant shape). Shape rules run as nodes are added and
  raise :class:`ShapeError` naming the node.

Decisions worth knowing: MaxPool-12 / AveragePool-19 are read with the clarification of
opset 22 (with ``ceil_mode``, windows that would start in the right padding are dropped,
as PyTorch computes them). Attributes that only concern types the ECG
lacks (Cast's ``saturate`` and ``round_mode``, for float8 targets) are passed through
unchanged, as is every other attribute.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnfusion.dtypes import ONNX_CODES
from dnnfusion.errors import DTypeError, ModelFormatError, ModelWarning, ShapeError, UnsupportedOperatorError
from dnnfusion.frontends import (onnx_cache, onnx_control, onnx_functions, onnx_normalize, onnx_quantize, onnx_random,
                                 onnx_sequence)
from dnnfusion.frontends.onnx_versions import CHECKED_VERSIONS, ECG_OPS, MIN_OPSET, OLDEST_CONVERTED  # noqa: F401
from dnnfusion.frontends.onnx_versions import upgrade as _upgrade
from dnnfusion.frontends.onnx_versions import default_opset as _default_opset
from dnnfusion.frontends.onnx_versions import DEFAULT_DOMAINS
from dnnfusion.frontends.onnx_versions import check_input_types as _check_input_types
from dnnfusion.frontends.onnx_versions import schema_version as _schema_version
from dnnfusion.frontends.onnx_versions import unsupported_op as _unsupported_op
from dnnfusion.frontends.onnx_versions import RENAMED_BY_CONVERSION  # noqa: F401 (re-exported)
from dnnfusion.frontends.builder import GraphBuilder
from dnnfusion.frontends.onnx_checker import TOLERATED as _TOLERATED
from dnnfusion.frontends.onnx_checker import check_proto as _check_proto
from dnnfusion.frontends.onnx_checker import short as _short


# ONNX TensorProto element-type codes -> ECG dtype names (cpp/ir/types.h).
ONNX_DTYPES: dict[int, str] = {code: name for name, code in ONNX_CODES.items()}



def _require_onnx() -> Any:
    try:
        import onnx
    except ImportError as e:
        raise ImportError("importing ONNX models needs the 'onnx' package: "
                          "pip install dnnfusion[onnx]") from e
    return onnx


def import_onnx(model: Any, input_shapes: Mapping[str, Sequence[int | str | None]] | None = None
                ) -> Any:
    """Imports an ONNX model (a ``ModelProto``, a path or serialized bytes) into a
    ``_core.Graph``. See the module docstring for what is supported."""
    onnx = _require_onnx()
    key = None
    if isinstance(model, (str, os.PathLike)) and onnx_cache.enabled():
        key = onnx_cache.key_for(os.fspath(model), input_shapes)
        if key is not None:
            graph = onnx_cache.load(key, os.fspath(model))
            if graph is not None:
                return graph
    try:  # a string field that is not UTF-8 fails where it is read, anywhere below
        with warnings.catch_warnings(record=True) as found:
            warnings.simplefilter("always", ModelWarning)
            proto = _read_and_check(onnx, model)
        for w in found:  # re-raised to the caller's filters
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        graph = _Importer(onnx, proto, dict(input_shapes or {})).run()
    except UnicodeDecodeError as e:
        raise ModelFormatError(f"the model holds a name or string that is not UTF-8 ({_short(e)})") from None
    # External data is refused by the store (its files are not keyed); a model with checker
    # warnings is not stored, so that every load repeats them.
    if key is not None and not any(issubclass(w.category, ModelWarning) for w in found):
        onnx_cache.store(key, os.fspath(model), graph)
    return graph


# ------------------------------------------------------------------------------------------
# Reading and validating
# ------------------------------------------------------------------------------------------
def _read_and_check(onnx: Any, model: Any) -> Any:
    """The ModelProto, parsed, screened, checked, with its external data loaded."""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise ModelFormatError(f"no such file: '{path}'")
        if not os.path.isfile(path):
            raise ModelFormatError(f"'{path}' is not a file")
        if os.path.getsize(path) == 0:
            raise ModelFormatError(f"'{path}' is empty (0 bytes), not an ONNX model")
        try:
            proto = onnx.load_model(path, load_external_data=False)
        except Exception as e:  # noqa: BLE001 - protobuf/IO errors of any kind
            raise ModelFormatError(f"'{path}' is not a readable ONNX model (truncated, "
                                   f"corrupt or not ONNX): {_short(e)}") from None
        _screen(onnx, proto, f"'{path}'")
        recheck = False
        try:
            onnx.checker.check_model(path)  # by path: external data checked, no 2 GB limit
        except Exception as e:  # noqa: BLE001
            if not any(text in str(e) for text in _TOLERATED):
                raise ModelFormatError(f"'{path}' fails the ONNX checker: {_short(e)}") from None
            recheck = True  # a complaint ORT tolerates: _check_proto warns or finds worse
        base = os.path.dirname(os.path.abspath(path))
        try:
            onnx.external_data_helper.load_external_data_for_model(proto, base)
        except Exception as e:  # noqa: BLE001
            raise ModelFormatError(f"'{path}': cannot load its external data (looked in "
                                   f"'{base}'): {_short(e)}") from None
        if recheck:
            _check_proto(onnx, proto, f"'{path}'")
        return _upgraded(onnx, proto, f"'{path}'")
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        if not data:
            raise ModelFormatError("the model bytes are empty, not an ONNX model")
        try:
            proto = onnx.load_model_from_string(data)
        except Exception as e:  # noqa: BLE001
            raise ModelFormatError("the bytes are not a readable ONNX model (truncated, "
                                   f"corrupt or not ONNX): {_short(e)}") from None
        what = "the model bytes"
    elif isinstance(model, onnx.ModelProto):
        proto, what, data = model, "the model", None  # (a proto may change; its check is not remembered)
    else:
        raise ModelFormatError(f"cannot import a {type(model).__name__} as ONNX: expected an "
                               "onnx.ModelProto, a path or bytes")
    _screen(onnx, proto, what)
    for t in _all_tensors(proto):
        if onnx.external_data_helper.uses_external_data(t):
            raise ModelFormatError(
                f"tensor '{t.name}' keeps its data in an external file; load the model by "
                "its path so dnnfusion can find the data next to it")
    _check_proto(onnx, proto, what, data)
    return _upgraded(onnx, proto, what)


def _upgraded(onnx: Any, proto: Any, what: str) -> Any:
    """`proto`, checked at its own opset, converted to MIN_OPSET when older (onnx_versions.
    upgrade), then screened and checked again: the importer reads only the converted model."""
    opset = _default_opset(proto)
    if opset is None or opset >= MIN_OPSET:
        return proto
    proto = _upgrade(onnx, proto, what)
    what = f"{what} (converted from opset {opset} to {MIN_OPSET})"
    _screen(onnx, proto, what)
    _check_proto(onnx, proto, what)
    return proto


def _all_tensors(proto: Any) -> list:
    tensors = list(proto.graph.initializer)
    for node in proto.graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                tensors.append(a.t)
            tensors.extend(a.tensors)
    return tensors


def _screen(onnx: Any, proto: Any, what: str) -> None:
    """Cheap checks before the ONNX checker, so that the error names the real problem: a
    missing graph, an opset out of range or an operator dnnfusion does not support."""
    if not proto.HasField("graph"):
        raise ModelFormatError(f"{what} has no graph (is it an ONNX model?)")
    g = proto.graph
    if not g.node:
        raise ModelFormatError(f"{what}: graph '{g.name}' is empty (it has no nodes)")
    if not g.output:
        raise ModelFormatError(f"{what}: graph '{g.name}' has no outputs")
    opset = _default_opset(proto)
    newest = onnx.defs.onnx_opset_version()
    if opset is not None and not OLDEST_CONVERTED <= opset <= newest:
        raise UnsupportedOperatorError(
            f"{what} uses default-domain opset {opset}; dnnfusion supports opsets "
            f"{MIN_OPSET}..{newest} and converts {OLDEST_CONVERTED}..{MIN_OPSET - 1} to {MIN_OPSET} "
            "(ONNX Runtime, too, runs none older)" if opset < OLDEST_CONVERTED else
            f"{what} uses default-domain opset {opset}; dnnfusion supports opsets "
            f"{MIN_OPSET}..{newest} (the newest this 'onnx' package knows)")
    opsets = {o.domain: int(o.version) for o in proto.opset_import}
    old = opset is not None and opset < MIN_OPSET
    for i, node in enumerate(g.node):
        name = node.name or f"{node.op_type}_{i}"
        if old:  # versions are checked after the conversion (upgrade); the operator now
            if node.domain not in DEFAULT_DOMAINS:
                raise _unsupported_op(name, node, opsets.get(node.domain))
            if not (node.op_type in ECG_OPS or RENAMED_BY_CONVERSION.get(node.op_type, 0) > opset
                    or onnx_functions.has_body(onnx, node, MIN_OPSET) or onnx_control.handles(node)
                    or onnx_sequence.handles(node) or onnx_random.handles(node)):
                raise _unsupported_op(name, node, opset)
        elif not (onnx_functions.has_body(onnx, node, opset) or onnx_control.handles(node)
                  or onnx_sequence.handles(node) or onnx_random.handles(node)):
            _schema_version(onnx, node, name, opset, opsets)


# ------------------------------------------------------------------------------------------
# Translating
# ------------------------------------------------------------------------------------------
@dataclass
class _Node:
    """A node on its way into the ECG: the normalizers below edit it in place."""

    op: str
    name: str
    version: int
    inputs: list[Any]          # ECG values, None for an absent optional input
    attrs: dict[str, Any]
    outputs: list[str]


class _Importer:
    def __init__(self, onnx: Any, proto: Any, input_shapes: dict[str, Sequence]):
        self.onnx = onnx
        self.proto = proto
        self.g = proto.graph
        self.opset = _default_opset(proto)
        self.opsets = {o.domain: int(o.version) for o in proto.opset_import}
        self.input_shapes = input_shapes
        self.b = GraphBuilder(self.g.name or "main")
        self.env: dict[str, Any] = {}
        # Every name the model uses, so generated names never collide with a later one.
        self.taken: set[str] = {v.name for v in self.g.input} | {t.name for t in self.g.initializer}
        for n in self.g.node:
            self.taken.update(n.output)

    def run(self) -> Any:
        if self.g.sparse_initializer:
            t = self.g.sparse_initializer[0]
            raise UnsupportedOperatorError(
                f"sparse initializer '{t.values.name}': dnnfusion does not support sparse "
                "tensors")
        for t in self.g.initializer:
            self.env[t.name] = self.b.constant(t.name, self._tensor(t, f"initializer '{t.name}'"))
        self._inputs()
        for i, node in enumerate(self.g.node):
            self._node(node, node.name or f"{node.op_type}_{i}")
        outs = []
        onnx_sequence.check_outputs(self, [o.name for o in self.g.output])
        for o in self.g.output:
            if o.name not in self.env:
                raise ModelFormatError(f"graph output '{o.name}' is not computed by any node")
            outs.append(self.env[o.name])
        self.b.outputs(outs)
        return self.b.graph

    # Names -----------------------------------------------------------------------------
    def _fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken or self.b.graph.value(name) is not None:
            k += 1
            name = f"{base}.{k}"
        self.taken.add(name)
        return name

    # Tensors ---------------------------------------------------------------------------
    def _tensor(self, t: Any, what: str) -> np.ndarray:
        if t.data_type == self.onnx.TensorProto.STRING:
            raise DTypeError(f"{what} is a string tensor; dnnfusion supports numeric and "
                             "bool tensors only")
        if t.data_type not in ONNX_DTYPES:
            raise DTypeError(f"{what} has element type {_type_name(self.onnx, t.data_type)}, which dnnfusion does "
                             f"not support ({_SUPPORTED}){onnx_quantize.dtype_hint(self.g, t.name)}")
        try:
            arr = self.onnx.numpy_helper.to_array(t)
        except Exception as e:  # noqa: BLE001 - e.g. raw_data of the wrong size
            raise ModelFormatError(f"{what}: cannot read its data: {_short(e)}") from None
        return np.asarray(arr)

    # Graph inputs ----------------------------------------------------------------------
    def _inputs(self) -> None:
        graph_inputs = [v for v in self.g.input if v.name not in self.env]
        names = [v.name for v in graph_inputs]
        for n in names:
            onnx_random.check_input_name(n)
        unknown = [k for k in self.input_shapes if k not in names]
        if unknown:
            raise ShapeError(f"input_shapes names {unknown}, which are not graph inputs; the "
                             f"graph inputs are {names}")
        shapes: dict[str, list[int | str]] = {}
        dtypes: dict[str, str] = {}
        for v in graph_inputs:
            dtypes[v.name], shapes[v.name] = self._input_type(v)
        used = {d for s in shapes.values() for d in s if isinstance(d, str)}
        for name, s in shapes.items():  # unnamed dims get a symbol of their own
            for i in (i for i, d in enumerate(s) if d is None):
                sym, k = f"{name}_dim{i}", 0
                while sym in used:
                    k += 1
                    sym = f"{name}_dim{i}.{k}"
                used.add(sym)
                s[i] = sym
        bound: dict[str, int | str] = {}
        for name, want in self.input_shapes.items():
            shapes[name] = self._specialize(name, shapes[name], want, bound)
        for v in graph_inputs:
            s = [bound.get(d, d) if isinstance(d, str) else d for d in shapes[v.name]]
            self.env[v.name] = self.b.input(v.name, dtypes[v.name], s)

    def _input_type(self, v: Any) -> tuple[str, list]:
        kind = v.type.WhichOneof("value")
        if kind != "tensor_type":
            raise DTypeError(f"graph input '{v.name}' is a {kind or 'value of no type'}; "
                             f"dnnfusion supports tensor inputs only: {_NON_TENSOR_ADVICE.get(kind, _NON_TENSOR_ADVICE[None])}")
        tt = v.type.tensor_type
        if tt.elem_type not in ONNX_DTYPES:
            raise DTypeError(f"graph input '{v.name}' has element type {_type_name(self.onnx, tt.elem_type)}, which "
                             f"dnnfusion does not support ({_SUPPORTED}){onnx_quantize.dtype_hint(self.g, v.name)}"
                             + (_STRING_ADVICE if tt.elem_type == self.onnx.TensorProto.STRING else ""))
        if not tt.HasField("shape"):  # the checker requires it
            raise ModelFormatError(f"graph input '{v.name}' has no shape")
        dims: list = []
        for d in tt.shape.dim:
            which = d.WhichOneof("value")
            if which == "dim_value":
                if d.dim_value < 0:
                    raise ModelFormatError(f"graph input '{v.name}' has a negative dimension "
                                           f"{d.dim_value}")
                dims.append(int(d.dim_value))
            elif which == "dim_param" and d.dim_param:
                dims.append(d.dim_param)
            else:
                dims.append(None)
        return ONNX_DTYPES[tt.elem_type], dims

    @staticmethod
    def _specialize(name: str, dims: list, want: Sequence, bound: dict) -> list:
        try:
            want = list(want)
        except TypeError:
            raise ShapeError(f"input_shapes['{name}'] must be a list of dims, got "
                             f"{want!r}") from None
        for w in want:
            ok = w is None or isinstance(w, str) and w or (
                isinstance(w, (int, np.integer)) and not isinstance(w, bool) and w >= 0)
            if not ok:
                raise ShapeError(f"input_shapes['{name}']: {w!r} is not a dimension (a "
                                 "non-negative int, a symbol name, or None to keep the model's)")
        if len(want) != len(dims):
            raise ShapeError(f"input_shapes['{name}'] = {want} has rank {len(want)}, but the "
                             f"model's input '{name}' has rank {len(dims)} (shape {dims})")
        out = []
        for axis, (d, w) in enumerate(zip(dims, want)):
            if w is None:
                out.append(d)
                continue
            w = w if isinstance(w, str) else int(w)
            if isinstance(d, int) and d != w:
                raise ShapeError(f"input_shapes['{name}'] = {want} disagrees with the model's "
                                 f"shape {dims} at axis {axis}: the model fixes it to {d}")
            if isinstance(d, str):
                if bound.setdefault(d, w) != w:
                    raise ShapeError(f"input_shapes binds symbol '{d}' to both {bound[d]} "
                                     f"and {w} (input '{name}', axis {axis})")
            out.append(w)
        return out

    # Nodes -----------------------------------------------------------------------------
    def _node(self, node: Any, name: str) -> None:
        if onnx_control.handles(node):  # If / Loop / Scan: rewritten into dataflow (onnx_control.py)
            return onnx_control.import_node(self, node, name)
        if onnx_random.handles(node):  # drawn on the host before each call (onnx_random.py)
            return onnx_random.import_node(self, node, name)
        if onnx_random.training_dropout(self, node):  # likewise its mask
            return onnx_random.import_dropout(self, node, name)
        if onnx_sequence.handles(node) or onnx_sequence.reads_sequence(self, node, name):
            return onnx_sequence.import_node(self, node, name)  # lists of values at import (onnx_sequence.py)
        if onnx_functions.has_body(self.onnx, node, self.opset) or onnx_functions.double_form(self, node):
            return onnx_functions.inline(self, node, name)  # imported as the operators it is made of
        version = _schema_version(self.onnx, node, name, self.opset, self.opsets)
        if node.op_type == "Constant":
            self._constant(node, name)
            return
        attrs = {a.name: self._attr(a, node, name) for a in node.attribute}
        inputs = []
        for i in node.input:
            if not i:
                inputs.append(None)
            elif i in self.env:
                inputs.append(self.env[i])
            else:
                raise ModelFormatError(f"node '{name}' reads '{i}', which is not defined "
                                       "before it (the graph must be topologically sorted)")
        while inputs and inputs[-1] is None:
            inputs.pop()
        _check_input_types(self.onnx, node, name, [v.dtype if v is not None else None for v in inputs], self.opset)
        outputs = list(node.output)
        min_out = max(ECG_OPS[node.op_type]["min_outputs"], 1)
        while len(outputs) > min_out and not outputs[-1]:
            outputs.pop()
        outputs = [o or self._fresh(f"{name}:{i}") for i, o in enumerate(outputs)]
        n = _Node(ECG_OPS[node.op_type]["name"], name, version, inputs, attrs, outputs)
        normalize = _NORMALIZE.get(node.op_type)
        if normalize is not None:
            normalize(self, n)
        values = self.b.node(n.op, n.inputs, n.attrs, num_outputs=len(n.outputs), name=n.name,
                             output_names=n.outputs)
        for o, v in zip(n.outputs, values):
            self.env[o] = v

    def _attr(self, a: Any, node: Any, name: str) -> Any:
        A = self.onnx.AttributeProto
        where = f"node '{name}' ({node.op_type}): attribute '{a.name}'"
        if a.ref_attr_name:
            raise ModelFormatError(f"{where} refers to a function attribute outside a function")
        if a.type in (A.GRAPH, A.GRAPHS):
            raise UnsupportedOperatorError(f"{where} is a sub-graph; dnnfusion does not "
                                           "support control flow")
        if a.type in (A.SPARSE_TENSOR, A.SPARSE_TENSORS):
            raise UnsupportedOperatorError(f"{where} is a sparse tensor, which dnnfusion does "
                                           "not support")
        if a.type in (A.TYPE_PROTO, A.TYPE_PROTOS):
            raise UnsupportedOperatorError(f"{where} is a type, which dnnfusion does not support")
        if a.type in (A.TENSOR, A.TENSORS):
            ts = [a.t] if a.type == A.TENSOR else list(a.tensors)
            if any(t.data_type == self.onnx.TensorProto.STRING for t in ts):
                raise UnsupportedOperatorError(f"{where} is a string tensor, which dnnfusion "
                                               "does not support")
            arrays = [self._tensor(t, where) for t in ts]
            return arrays[0] if a.type == A.TENSOR else arrays
        value = self.onnx.helper.get_attribute_value(a)
        if isinstance(value, bytes):
            return _utf8(value, where)
        if isinstance(value, list):
            return [_utf8(v, where) if isinstance(v, bytes) else v for v in value]
        return value

    def _constant(self, node: Any, name: str) -> None:
        if len(node.attribute) != 1 or len(node.output) != 1:
            raise ModelFormatError(f"node '{name}' (Constant) needs exactly one value "
                                   "attribute and one output")
        a = node.attribute[0]
        if a.name not in _CONSTANT_DTYPES:
            raise UnsupportedOperatorError(f"node '{name}' (Constant): attribute '{a.name}' "
                                           "is not supported (dnnfusion has no string or "
                                           "sparse tensors)")
        out = node.output[0] or self._fresh(f"{name}:0")
        arr = np.asarray(self._attr(a, node, name), dtype=_CONSTANT_DTYPES[a.name])
        self.env[out] = self.b.constant(out, arr)


_CONSTANT_DTYPES = {"value": None, "value_float": np.float32, "value_floats": np.float32,
                    "value_int": np.int64, "value_ints": np.int64}


# ------------------------------------------------------------------------------------------
# Normalizing older forms to the ECG's and refusing unsupported attributes (onnx_normalize.py)
# ------------------------------------------------------------------------------------------
def _cast_target(imp: _Importer, n: _Node) -> None:
    to = n.attrs.get("to")
    if to not in ONNX_DTYPES:
        raise DTypeError(f"node '{n.name}' (Cast) makes '{n.outputs[0]}' of element type "
                         f"{_type_name(imp.onnx, to)}, which dnnfusion does not support "
                         f"({_SUPPORTED})")


_NORMALIZE = {
    **onnx_normalize.NORMALIZE,
    "Cast": _cast_target,
    **onnx_quantize.NORMALIZE,  # per-axis scales reshaped to broadcast, output_dtype, refusals
}


# ------------------------------------------------------------------------------------------
def _utf8(b: bytes, where: str) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelFormatError(f"{where}: the string is not UTF-8") from None


def _type_name(onnx: Any, code: Any) -> str:
    try:
        return onnx.TensorProto.DataType.Name(int(code))
    except (ValueError, TypeError):
        return f"code {code!r}"


# What to do about a graph input that is not a tensor (by its type's kind), or one of strings.
_NON_TENSOR_ADVICE = {
    "sequence_type": "pass its tensors as inputs of their own and build the sequence in the model "
                     "(SequenceConstruct), or feed them stacked as one tensor",
    "optional_type": "declare the input as a plain tensor and always feed it, or leave it out of the graph",
    "map_type": "maps come from classical-ML models (ai.onnx.ml), which dnnfusion does not compile: run "
                "that part with ONNX Runtime",
    None: "declare the input as a tensor",
}
_STRING_ADVICE = "; process the text before the model (a tokenizer) and feed the numbers it gives"
_SUPPORTED = "supported: float16, bfloat16, float, double, int8..int64, uint8..uint64, bool, int4, uint4, int2, uint2, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), float6 (e2m3, e3m2), float4e2m1"
