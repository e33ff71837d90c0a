"""ONNX sequences and optionals, resolved at import: a sequence is a Python list of ECG values
while the importer reads the graph, an optional its element (or :class:`Empty`), and the ECG
itself never holds either.

The sequence operators (SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase,
SequenceAt, SequenceLength, SplitToSequence, ConcatFromSequence, and Identity of a sequence)
act on those lists; every position must be a constant (after the builder's folding), so the
list is known when the graph is read, as it is in exports that build a list in a loop the
importer unrolls (onnx_control.py) or split a tensor and join the pieces. What reads a sequence
otherwise, or a sequence that is a graph input or output, is refused with its name: the ECG
and the compiled model take and return tensors.

SplitToSequence becomes Slices of the input (then a Squeeze of the axis where keepdims=0
without `split`); ConcatFromSequence one Concat (each element Unsqueezed first with
new_axis=1); SequenceAt and SequenceLength are the element and a constant. Optional(x) is x, Optional()
an Empty; OptionalHasElement is a constant (false for an Empty or a missing input, true for a
tensor or sequence, as opset 18 reads it) and OptionalGetElement the element (an Empty is an
error, which ONNX leaves undefined)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnfusion.dtypes import ONNX_CODES
from dnnfusion.errors import ModelFormatError, ShapeError, UnsupportedOperatorError
from dnnfusion.frontends.onnx_versions import DEFAULT_DOMAINS

# Schema versions read (11: the operators; 22 and 24 only add element types to ConcatFromSequence's
# and the others' constraints).
OPS = {"SequenceEmpty": (11,), "SequenceConstruct": (11,), "SequenceInsert": (11,), "SequenceErase": (11,),
       "SequenceAt": (11,), "SequenceLength": (11,), "SplitToSequence": (11, 24), "ConcatFromSequence": (11,),
       # 18 lets them take a tensor or sequence (15: optionals only); 28 adds element types.
       "Optional": (15, 28), "OptionalHasElement": (15, 18, 28), "OptionalGetElement": (15, 18, 28)}


class _Held:
    """A value only the importer holds (a sequence, an empty optional), with the attributes
    code written for tensors reads, so that it fails with a message and not a crash."""

    is_constant = False
    name = ""

    @property
    def shape(self) -> tuple:
        return ()


@dataclass
class Seq(_Held):
    """A sequence being imported: its elements (ECG values) and their element type."""

    items: list = field(default_factory=list)
    elem: str | None = None
    name: str = ""

    @property
    def dtype(self) -> str:
        return f"sequence({self.elem or '?'})"


class Empty(_Held):
    """An optional without an element."""

    dtype = "optional(empty)"


def handles(node: Any) -> bool:
    return node.op_type in OPS and node.domain in DEFAULT_DOMAINS


def reads_sequence(imp: Any, node: Any, name: str) -> bool:
    """An Identity of a sequence (a sequence passes through). Any other operator but the
    sequence ones reading one is refused here."""
    held = [i for i in node.input if i and isinstance(imp.env.get(i), _Held)]
    if not held:
        return False
    if node.op_type == "Identity" and len(node.input) == 1 and len(node.output) == 1:
        return True
    what = "sequence" if isinstance(imp.env[held[0]], Seq) else "empty optional"
    raise UnsupportedOperatorError(
        f"node '{name}' ({node.op_type}) reads the {what} '{held[0]}'; dnnfusion resolves sequences and optionals "
        "at import, where only their operators (SequenceAt, ConcatFromSequence, OptionalGetElement, ...) may read "
        "them")


def import_node(imp: Any, node: Any, name: str) -> None:
    where = f"node '{name}' ({node.op_type})"
    _check_version(imp, node, where)
    if node.op_type == "Identity":
        imp.env[node.output[0]] = imp.env[node.input[0]]
        return
    attrs = {a.name: imp.onnx.helper.get_attribute_value(a) for a in node.attribute}
    ins = [imp.env.get(i) if i else None for i in node.input]
    for i, v in zip(node.input, ins):
        if i and v is None:
            raise ModelFormatError(f"{where} reads '{i}', which is not defined before it")
    out = _OPS[node.op_type](imp, where, ins, attrs, name)
    if isinstance(out, Seq):
        out.name = node.output[0]
    imp.env[node.output[0]] = out


def check_outputs(imp: Any, names: list[str]) -> None:
    for n in names:
        if isinstance(imp.env.get(n), Seq):
            raise UnsupportedOperatorError(f"graph output '{n}' is a sequence; dnnfusion's compiled models return "
                                           "tensors (a ConcatFromSequence in the model makes it one)")
        if isinstance(imp.env.get(n), Empty):
            raise UnsupportedOperatorError(f"graph output '{n}' is an empty optional; dnnfusion's compiled models "
                                           "return tensors (an OptionalGetElement, or a tensor in every branch, "
                                           "makes it one)")


def _check_version(imp: Any, node: Any, where: str) -> None:
    if node.op_type == "Identity":
        return
    try:
        version = int(imp.onnx.defs.get_schema(node.op_type, imp.opset, "").since_version)
    except Exception:  # noqa: BLE001 - not defined at this opset (Optional before 15)
        raise UnsupportedOperatorError(f"{where}: the operator does not exist at opset {imp.opset}") from None
    if version not in OPS[node.op_type]:
        raise UnsupportedOperatorError(f"{where}: version {version} (opset {imp.opset}); dnnfusion has checked "
                                       f"versions {', '.join(map(str, OPS[node.op_type]))}")


def _seq(v: Any, where: str, what: str = "input 0") -> Seq:
    if not isinstance(v, Seq):
        raise ModelFormatError(f"{where}: {what} must be a sequence, got a tensor")
    return v


def _tensor(v: Any, where: str, what: str) -> Any:
    if v is None or isinstance(v, Seq):
        raise ModelFormatError(f"{where}: {what} must be a tensor")
    return v


def _position(v: Any, n: int, where: str, default: int, insert: bool = False) -> int:
    """A constant position in [-n, n - 1] (SequenceInsert: [-n, n]), as a non-negative index."""
    if v is None:
        return default
    if not v.is_constant:
        raise ShapeError(f"{where}: the position must be a constant (dnnfusion resolves sequences at import)")
    a = np.asarray(v.numpy())
    if a.size != 1 or a.dtype.kind not in "iu":
        raise ShapeError(f"{where}: the position must be one integer, got {a.dtype}{list(a.shape)}")
    p, hi = int(a.reshape(-1)[0]), n if insert else n - 1
    if not -n <= p <= hi:
        raise ShapeError(f"{where}: position {p} is outside [{-n}, {hi}] for a sequence of {n}")
    return p + n if p < 0 else p


def _elem(where: str, seq: Seq, v: Any) -> str:
    if seq.elem is not None and v.dtype != seq.elem:
        raise ModelFormatError(f"{where}: a {v.dtype} tensor in a sequence of {seq.elem}")
    return v.dtype


def _const(imp: Any, base: str, array: Any) -> Any:
    return imp.b.constant(imp._fresh(base), np.asarray(array))


def _op(imp: Any, op: str, inputs: list, base: str, **attrs: Any) -> Any:
    out = imp._fresh(base)
    return imp.b.node(op, inputs, attrs, num_outputs=1, name=out, output_names=[out])[0]


def _empty(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Seq:
    code = int(attrs.get("dtype", imp.onnx.TensorProto.FLOAT))
    ecg = {c: name for name, c in ONNX_CODES.items()}.get(code)
    if ecg is None:
        raise UnsupportedOperatorError(f"{where}: element type {code} is not one dnnfusion supports")
    return Seq([], ecg)


def _construct(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Seq:
    items = [_tensor(v, where, f"input {k}") for k, v in enumerate(ins)]
    if not items:
        raise ModelFormatError(f"{where} has no inputs")
    if len({v.dtype for v in items}) != 1:
        raise ModelFormatError(f"{where}: the elements' types differ ({sorted({v.dtype for v in items})})")
    return Seq(items, items[0].dtype)


def _insert(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Seq:
    s, t = _seq(ins[0], where), _tensor(ins[1] if len(ins) > 1 else None, where, "the tensor (input 1)")
    p = _position(ins[2] if len(ins) > 2 else None, len(s.items), where, len(s.items), insert=True)
    return Seq(s.items[:p] + [t] + s.items[p:], _elem(where, s, t))


def _erase(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Seq:
    s = _seq(ins[0], where)
    if not s.items:
        raise ShapeError(f"{where}: erasing from an empty sequence")
    p = _position(ins[1] if len(ins) > 1 else None, len(s.items), where, len(s.items) - 1)
    return Seq(s.items[:p] + s.items[p + 1:], s.elem)


def _at(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Any:
    s = _seq(ins[0], where)
    if not s.items:
        raise ShapeError(f"{where}: SequenceAt of an empty sequence")
    return s.items[_position(ins[1] if len(ins) > 1 else None, len(s.items), where, 0)]


def _length(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Any:
    s = _seq(ins[0], where)
    return _const(imp, f"{name}:length", np.array(len(s.items), np.int64))


def _split(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Seq:
    x = _tensor(ins[0], where, "the input")
    rank = len(x.shape)
    axis = int(attrs.get("axis", 0))
    if not -rank <= axis < rank:
        raise ShapeError(f"{where}: axis {axis} is outside the input's rank {rank}")
    axis %= rank
    n = x.shape[axis]
    if not isinstance(n, int):
        raise ShapeError(f"{where}: the split axis must have a static size, got {list(x.shape)}")
    split = ins[1] if len(ins) > 1 else None
    squeeze = split is None and not int(attrs.get("keepdims", 1))
    if split is None:
        sizes = [1] * n
    else:
        if not split.is_constant:
            raise ShapeError(f"{where}: split (input 1) must be a constant (dnnfusion resolves sequences at import)")
        a = np.asarray(split.numpy()).astype(np.int64)
        if a.ndim == 0:
            c = int(a)
            if c < 1:
                raise ShapeError(f"{where}: a split size of {c}")
            sizes = [c] * (n // c) + ([n % c] if n % c else [])
        else:
            sizes = [int(v) for v in a.reshape(-1)]
            if any(v < 0 for v in sizes) or sum(sizes) != n:
                raise ShapeError(f"{where}: split {sizes} must be non-negative and sum to the axis's size {n}")
    items, start = [], 0
    ax = _const(imp, f"{name}:axis", np.array([axis], np.int64))
    for k, size in enumerate(sizes):
        st = _const(imp, f"{name}:start{k}", np.array([start], np.int64))
        en = _const(imp, f"{name}:end{k}", np.array([start + size], np.int64))
        v = _op(imp, "Slice", [x, st, en, ax], f"{name}:part{k}")
        if squeeze:
            v = _op(imp, "Squeeze", [v, ax], f"{name}:item{k}")
        items.append(v)
        start += size
    return Seq(items, x.dtype)


def _concat(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Any:
    s = _seq(ins[0], where)
    if not s.items:
        raise ShapeError(f"{where}: ConcatFromSequence of an empty sequence")
    if "axis" not in attrs:
        raise ModelFormatError(f"{where}: attribute 'axis' is required")
    axis, new = int(attrs["axis"]), int(attrs.get("new_axis", 0))
    items = s.items
    if new:
        rank = len(items[0].shape) + 1
        if not -rank <= axis < rank:
            raise ShapeError(f"{where}: axis {axis} is outside [{-rank}, {rank - 1}] with new_axis=1")
        ax = _const(imp, f"{name}:axis", np.array([axis], np.int64))
        items = [_op(imp, "Unsqueeze", [v, ax], f"{name}:unsqueezed{k}") for k, v in enumerate(s.items)]
    if len(items) == 1:
        return items[0]
    return _op(imp, "Concat", items, f"{name}:concat", axis=axis)


def _optional(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Any:
    return ins[0] if ins and ins[0] is not None else Empty()


def _has_element(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Any:
    has = bool(ins) and ins[0] is not None and not isinstance(ins[0], Empty)
    return _const(imp, f"{name}:has", np.array(has))


def _get_element(imp: Any, where: str, ins: list, attrs: dict, name: str) -> Any:
    if not ins or ins[0] is None:
        raise ModelFormatError(f"{where} has no input")
    if isinstance(ins[0], Empty):
        raise ShapeError(f"{where}: the optional is empty (ONNX leaves reading it undefined)")
    return ins[0]


_OPS = {"SequenceEmpty": _empty, "SequenceConstruct": _construct, "SequenceInsert": _insert, "SequenceErase": _erase,
        "SequenceAt": _at, "SequenceLength": _length, "SplitToSequence": _split, "ConcatFromSequence": _concat,
        "Optional": _optional, "OptionalHasElement": _has_element, "OptionalGetElement": _get_element}
