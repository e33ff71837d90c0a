"""ONNX control flow (If, Loop, Scan), rewritten at import into plain dataflow nodes.

The ECG is a static dataflow graph: it has no branch and no loop. Exported models still hold
control flow that is static in practice (an If on a shape-derived condition, a Loop with a
constant trip count, a Scan over a static axis, the Loop in Range's function body), so the
importer removes it:

* **If** with a constant condition (a constant, or one the builder folded, e.g. from a static
  shape) imports only the branch taken. With a runtime condition both branches are imported
  and each output is ``Where(cond, then, else)``. If is side-effect free, so computing the
  branch not taken changes no result, only costs its work; this needs each pair of outputs to
  have one dtype and one shape, since a value whose shape depends on the branch needs a
  runtime branch, which is refused. (A branch guarded against its inputs still runs on them:
  a Gather index out of range there fails the run, as in the masked Loop below.)
* **Loop** is unrolled when its trip count is a constant (at most :data:`MAX_ITERATIONS`), or
  when it has none and the body's condition folds to false within that many iterations. A
  body condition that is not a constant is supported for loops without scan outputs by
  masking: a running ``alive`` flag (And of the conditions so far) freezes every carried value
  with ``Where(alive, new, old)`` for the remaining iterations. Scan outputs are stacked
  (Unsqueeze each iteration's value, one Concat); the iteration number is a constant.
* **Scan** is unrolled over its (static) scan length: each iteration's slices are Gathers of a
  constant index (the axis removed), honouring the input/output axes and directions.

A body's values get fresh names per iteration (``<node>/iter<k>:<name>``); names a body reads
from enclosing scopes resolve through the scopes of the bodies being imported, then the
importer's ``env``. Nested control flow takes the same path, to :data:`MAX_DEPTH` levels, and
all unrolling of one model is bounded by :data:`MAX_NODES` imported nodes. Model names only
ever become ECG value and node names, never generated code.

Control flow inside a function body (LinearAttention's Scan) reads the body's values:
onnx_functions.inline renames the names its sub-graphs read from the body, and the function's
attribute references in them, before the node comes here."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnfusion.errors import ModelFormatError, ShapeError, UnsupportedOperatorError
from dnnfusion.frontends.onnx_versions import DEFAULT_DOMAINS, unsupported_op

OPS = frozenset({"If", "Loop", "Scan"})
# Schema versions read: If-11 and Loop-11 are the opset-13 forms on tensors (13 adds
# sequences, 16 optionals, later ones element types); Scan-11 adds negative axes, later versions
# only element types. Sequences and optionals are refused where they appear (no ECG type).
CHECKED = {"If": (11, 13, 16, 19, 21, 23, 24, 25), "Loop": (11, 13, 16, 19, 21, 23, 24, 25),
           "Scan": (11, 16, 19, 21, 23, 24, 25)}
MAX_ITERATIONS = 256   # a loop unrolled further is no longer a "small static loop"
MAX_NODES = 20000      # nodes imported for control flow in one model, all bodies and iterations
MAX_DEPTH = 8          # control flow inside control flow

Scopes = list[dict[str, str]]  # body-local name -> env name, innermost last


@dataclass
class _State:
    depth: int = 0
    nodes: int = 0


_STATES: "weakref.WeakKeyDictionary[Any, _State]" = weakref.WeakKeyDictionary()


def _state(imp: Any) -> _State:
    st = _STATES.get(imp)
    if st is None:
        st = _STATES[imp] = _State()
    return st


def handles(node: Any) -> bool:
    """Whether `node` is control flow this module imports."""
    return node.op_type in OPS and node.domain in DEFAULT_DOMAINS


def import_node(imp: Any, node: Any, name: str) -> None:
    """Imports a model-level If / Loop / Scan: its outputs keep the model's names."""
    outs = _control(imp, node, name, [])
    for k, (o, v) in enumerate(zip(node.output, outs)):
        if o:
            imp._node(imp.onnx.helper.make_node("Identity", [v], [o]), f"{name}/out{k}")


def _control(imp: Any, node: Any, name: str, scopes: Scopes) -> list[str]:
    """The env names of the node's outputs, after importing what it computes."""
    where = f"node '{name}' ({node.op_type})"
    _check_version(imp, node, name)
    st = _state(imp)
    if st.depth >= MAX_DEPTH:
        raise UnsupportedOperatorError(f"{where}: control flow nests deeper than {MAX_DEPTH} levels")
    attrs = {}
    for a in node.attribute:
        if a.ref_attr_name:
            raise ModelFormatError(f"{where}: attribute '{a.name}' refers to a function attribute outside a function")
        attrs[a.name] = imp.onnx.helper.get_attribute_value(a)
    ins = [_resolve(imp, scopes, i, where) if i else "" for i in node.input]
    st.depth += 1
    try:
        outs = {"If": _if, "Loop": _loop, "Scan": _scan}[node.op_type](imp, node, name, where, attrs, ins, scopes)
    finally:
        st.depth -= 1
    if len(outs) < len(node.output):
        raise ModelFormatError(f"{where} has {len(node.output)} outputs; its body gives {len(outs)}")
    return outs


def _check_version(imp: Any, node: Any, name: str) -> None:
    if imp.opset is None:
        raise ModelFormatError(f"node '{name}' uses the default domain, which the model does not import")
    try:
        version = int(imp.onnx.defs.get_schema(node.op_type, imp.opset, "").since_version)
    except Exception:  # noqa: BLE001 - not an operator at this opset
        raise unsupported_op(name, node, imp.opset) from None
    if version not in CHECKED[node.op_type]:
        raise UnsupportedOperatorError(
            f"node '{name}' uses operator '{node.op_type}' version {version} (opset {imp.opset}); dnnfusion has "
            f"checked versions {', '.join(map(str, CHECKED[node.op_type]))} of it")


# ---- Bodies ------------------------------------------------------------------------------
def _resolve(imp: Any, scopes: Scopes, n: str, where: str) -> str:
    for scope in reversed(scopes):
        if n in scope:
            return scope[n]
    if n in imp.env:
        return n
    # The checker has checked the model's own scopes, so this is a sub-graph in a function body
    # (see the module's docstring).
    raise UnsupportedOperatorError(f"{where} reads '{n}', which is not defined in its scope or an enclosing one; "
                                   "a sub-graph in an ONNX function body that reads the function's own values is "
                                   "not supported")


def _count(imp: Any, n: int, where: str, add: bool = True) -> None:
    """Counts `n` more imported nodes (add=False: only checks, before unrolling, that they fit)."""
    st = _state(imp)
    if add:
        st.nodes += n
    if st.nodes + (0 if add else n) > MAX_NODES:
        raise UnsupportedOperatorError(f"{where}: unrolling the model's control flow imports more than "
                                       f"{MAX_NODES} nodes, more than dnnfusion builds at import")


def _body(imp: Any, graph: Any, args: list[str], prefix: str, scopes: Scopes, where: str) -> list[str]:
    """Imports one instance of `graph` (a body) with its inputs bound to the env names `args`;
    the env names of its outputs."""
    if len(args) != len(graph.input):
        raise ModelFormatError(f"{where}: its body '{graph.name}' has {len(graph.input)} inputs, where "
                               f"{len(args)} are given")
    if graph.sparse_initializer:
        raise UnsupportedOperatorError(f"{where}: its body has a sparse initializer, which dnnfusion does not "
                                       "support")
    _count(imp, len(graph.node), where)
    local = {v.name: a for v, a in zip(graph.input, args)}
    for t in graph.initializer:
        n = imp._fresh(f"{prefix}:{t.name}")
        imp.env[n] = imp.b.constant(n, imp._tensor(t, f"{where}: initializer '{t.name}' of its body"))
        local[t.name] = n
    inner_scopes = scopes + [local]
    for k, b in enumerate(graph.node):
        inner = f"{prefix}/{b.name or b.op_type + str(k)}"
        if handles(b):  # resolves its inputs and its bodies' free names through the scopes
            for o, v in zip(b.output, _control(imp, b, inner, inner_scopes)):
                if o:
                    local[o] = v
            continue
        sub = imp.onnx.NodeProto()
        sub.CopyFrom(b)
        del sub.input[:]
        sub.input.extend(_resolve(imp, inner_scopes, i, f"node '{inner}' ({b.op_type})") if i else ""
                         for i in b.input)
        del sub.output[:]
        for o in b.output:
            if o:
                local[o] = imp._fresh(f"{prefix}:{o}")
            sub.output.append(local[o] if o else "")
        imp._node(sub, inner)
    return [_resolve(imp, inner_scopes, o.name, f"{where}: the output of its body") for o in graph.output]


# ---- Nodes the rewrites are made of --------------------------------------------------------
def _const(imp: Any, base: str, array: np.ndarray) -> str:
    n = imp._fresh(base)
    imp.env[n] = imp.b.constant(n, np.asarray(array))
    return n


def _emit(imp: Any, op: str, inputs: list[str], name: str, where: str, **attrs: Any) -> str:
    _count(imp, 1, where)
    out = imp._fresh(f"{name}:{op.lower()}")
    imp._node(imp.onnx.helper.make_node(op, inputs, [out], **attrs), out)
    return out


def _const_bool(imp: Any, n: str, what: str, where: str) -> bool | None:
    """A condition's value when it is a constant, else None."""
    v = imp.env[n]
    if v.dtype != "bool":
        raise ModelFormatError(f"{where}: {what} ('{n}') is {v.dtype}, not bool")
    if not v.is_constant:
        return None
    a = np.asarray(v.numpy())
    if a.size != 1:
        raise ShapeError(f"{where}: {what} ('{n}') must hold one element, it has shape {list(a.shape)}")
    return bool(a.reshape(-1)[0])


def _scalar(imp: Any, n: str, name: str, where: str) -> str:
    """A one-element condition as a scalar, so that Where on it keeps the selected value's shape."""
    v = imp.env[n]
    if len(v.shape) == 0:
        return n
    if any(not isinstance(d, int) for d in v.shape) or int(np.prod(v.shape)) != 1:
        raise ShapeError(f"{where}: its condition ('{n}') must hold one element, it has shape {list(v.shape)}")
    return _emit(imp, "Reshape", [n, _const(imp, f"{name}:scalar", np.zeros(0, np.int64))], name, where)


def _same_type(imp: Any, a: str, b: str) -> bool:
    va, vb = imp.env[a], imp.env[b]
    return va.dtype == vb.dtype and list(va.shape) == list(vb.shape)


def _type(imp: Any, n: str) -> str:
    v = imp.env[n]
    return f"{v.dtype}{list(v.shape)}"


def _stack(imp: Any, values: list[str], axis: int, name: str, where: str, what: str) -> str:
    """Per-iteration values stacked along a new `axis` (Unsqueeze each, one Concat)."""
    for k, v in enumerate(values[1:], 1):
        if not _same_type(imp, v, values[0]):
            raise ShapeError(f"{where}: {what} is {_type(imp, values[0])} in iteration 0 but {_type(imp, v)} in "
                             f"iteration {k}; a scan output's iterations must agree")
    rank = len(imp.env[values[0]].shape) + 1
    if not -rank <= axis < rank:
        raise ShapeError(f"{where}: axis {axis} of {what} is outside its rank {rank}")
    axes = _const(imp, f"{name}:axes", np.array([axis], np.int64))
    parts = [_emit(imp, "Unsqueeze", [v, axes], name, where) for v in values]
    return parts[0] if len(parts) == 1 else _emit(imp, "Concat", parts, name, where, axis=axis)


# ---- If, Loop, Scan ----------------------------------------------------------------------
def _if(imp: Any, node: Any, name: str, where: str, attrs: dict, ins: list[str], scopes: Scopes) -> list[str]:
    if not ins or not ins[0] or "then_branch" not in attrs or "else_branch" not in attrs:
        raise ModelFormatError(f"{where} needs a condition and both then_branch and else_branch")
    cond = ins[0]
    taken = _const_bool(imp, cond, "its condition", where)
    if taken is not None:
        branch = "then_branch" if taken else "else_branch"
        return _body(imp, attrs[branch], [], f"{name}/{branch[:4]}", scopes, where)
    then = _body(imp, attrs["then_branch"], [], f"{name}/then", scopes, where)
    other = _body(imp, attrs["else_branch"], [], f"{name}/else", scopes, where)
    if len(then) != len(other):
        raise ModelFormatError(f"{where}: then_branch has {len(then)} outputs, else_branch {len(other)}")
    c = _scalar(imp, cond, name, where)
    outs = []
    for k, (a, b) in enumerate(zip(then, other)):
        if not _same_type(imp, a, b):
            out = node.output[k] if k < len(node.output) else str(k)
            raise UnsupportedOperatorError(
                f"{where}: its condition ('{node.input[0]}') is not a constant, and output {k} ('{out}') is "
                f"{_type(imp, a)} in then_branch but {_type(imp, b)} in else_branch; dnnfusion computes both "
                "branches and selects with Where, which needs one dtype and shape (a result whose shape "
                "depends on the branch needs a runtime branch, which a static graph does not have)")
        outs.append(a if a == b else _emit(imp, "Where", [c, a, b], name, where))
    return outs


def _loop(imp: Any, node: Any, name: str, where: str, attrs: dict, ins: list[str], scopes: Scopes) -> list[str]:
    body = attrs.get("body")
    if body is None:
        raise ModelFormatError(f"{where} has no body")
    m_in, c_in = (ins + ["", ""])[:2]
    carried = ins[2:]
    if any(not v for v in carried):
        raise ModelFormatError(f"{where}: a loop-carried initial value is empty")
    n = len(carried)
    n_scan = len(body.output) - 1 - n
    if len(body.input) != n + 2 or n_scan < 0:
        raise ModelFormatError(f"{where}: its body takes {len(body.input)} inputs and gives {len(body.output)} "
                               f"outputs, which does not fit {n} loop-carried values")
    trips = None
    if m_in:
        m = imp.env[m_in]
        if not m.is_constant:
            raise UnsupportedOperatorError(f"{where}: its trip count M ('{node.input[0]}') is not a constant; "
                                           "dnnfusion unrolls loops, so it must be known at import")
        trips = max(int(np.asarray(m.numpy()).reshape(-1)[0]), 0)
        if trips > MAX_ITERATIONS:
            raise UnsupportedOperatorError(f"{where}: trip count {trips} is more than the {MAX_ITERATIONS} "
                                           "iterations dnnfusion unrolls")
        _count(imp, trips * len(body.node), where, add=False)
    alive = None  # the masked form's running condition (an env name), once it is not a constant
    if c_in:
        first = _const_bool(imp, c_in, "its condition", where)
        if first is False:
            trips = 0
        elif first is None:
            _can_mask(trips, n_scan, where, f"its condition ('{node.input[1]}')")
            alive = _scalar(imp, c_in, name, where)
    scans: list[list[str]] = [[] for _ in range(n_scan)]
    for it in range(MAX_ITERATIONS if trips is None else trips):
        prefix = f"{name}/iter{it}"
        i = _const(imp, f"{prefix}:iteration", np.array(it, np.int64))
        t = _const(imp, f"{prefix}:cond", np.array(True))  # an iteration runs only while the condition holds
        outs = _body(imp, body, [i, t, *carried], prefix, scopes, where)
        going = _const_bool(imp, outs[0], "the condition its body gives", where)
        if alive is None:
            carried = outs[1:1 + n]
            for j, s in enumerate(outs[1 + n:]):
                scans[j].append(s)
            if going is None:
                _can_mask(trips, n_scan, where, f"the condition its body gives ('{body.output[0].name}')")
                alive = _scalar(imp, outs[0], name, where)
        else:
            new = []
            for j, (a, b) in enumerate(zip(outs[1:1 + n], carried)):
                if not _same_type(imp, a, b):
                    raise UnsupportedOperatorError(
                        f"{where}: loop-carried value {j} ('{body.output[1 + j].name}') goes from {_type(imp, b)} to "
                        f"{_type(imp, a)} under a condition that is not a constant; the masked form needs it fixed")
                new.append(b if a == b else _emit(imp, "Where", [alive, a, b], name, where))
            carried = new
            if going is None:
                alive = _emit(imp, "And", [alive, _scalar(imp, outs[0], name, where)], name, where)
        if going is False:
            break
    else:
        if trips is None:
            raise UnsupportedOperatorError(f"{where} has no trip count and its condition is still true after "
                                           f"{MAX_ITERATIONS} iterations; dnnfusion unrolls at most that many")
    if n_scan and not scans[0]:
        raise UnsupportedOperatorError(f"{where} runs no iteration, so its scan outputs are empty, of a shape "
                                       "its body does not fix; dnnfusion does not build them")
    return carried + [_stack(imp, s, 0, name, where, f"scan output {j} ('{body.output[1 + n + j].name}')")
                      for j, s in enumerate(scans)]


def _can_mask(trips: int | None, n_scan: int, where: str, what: str) -> None:
    if trips is None:
        raise UnsupportedOperatorError(f"{where}: {what} is not a constant and there is no trip count; "
                                       "dnnfusion unrolls loops only to a bound known at import")
    if n_scan:
        raise UnsupportedOperatorError(f"{where}: {what} is not a constant; with scan outputs the number of "
                                       "iterations fixes their shape, so dnnfusion cannot unroll it")


def _ints(attrs: dict, key: str, n: int, where: str) -> list[int]:
    v = [int(x) for x in attrs.get(key, [0] * n)]
    if len(v) != n:
        raise ModelFormatError(f"{where}: {key} has {len(v)} entries, expected {n}")
    return v


def _scan(imp: Any, node: Any, name: str, where: str, attrs: dict, ins: list[str], scopes: Scopes) -> list[str]:
    body, m = attrs.get("body"), int(attrs.get("num_scan_inputs", 0))
    if body is None or not 1 <= m <= len(ins) or any(not v for v in ins):
        raise ModelFormatError(f"{where} needs a body, num_scan_inputs >= 1 and that many non-empty scan inputs")
    n = len(ins) - m
    states, xs = ins[:n], ins[n:]
    k = len(body.output) - n
    if len(body.input) != n + m or k < 0:
        raise ModelFormatError(f"{where}: its body takes {len(body.input)} inputs and gives {len(body.output)} "
                               f"outputs, which does not fit {n} state values and {m} scan inputs")
    in_axes, in_dirs = _ints(attrs, "scan_input_axes", m, where), _ints(attrs, "scan_input_directions", m, where)
    out_axes, out_dirs = _ints(attrs, "scan_output_axes", k, where), _ints(attrs, "scan_output_directions", k, where)
    length = None
    for j, x in enumerate(xs):
        shape = imp.env[x].shape
        if not -len(shape) <= in_axes[j] < len(shape):
            raise ShapeError(f"{where}: scan_input_axes[{j}] = {in_axes[j]} is outside the rank {len(shape)} of "
                             f"'{node.input[n + j]}'")
        in_axes[j] %= len(shape)
        size = shape[in_axes[j]]
        if not isinstance(size, int):
            raise ShapeError(f"{where}: scan input '{node.input[n + j]}' has the symbolic length '{size}' on axis "
                             f"{in_axes[j]}; dnnfusion unrolls scans over a static length")
        if length is not None and size != length:
            raise ShapeError(f"{where}: scan inputs have lengths {length} and {size}; they must agree")
        length = size
    if length > MAX_ITERATIONS:
        raise UnsupportedOperatorError(f"{where}: scan length {length} is more than the {MAX_ITERATIONS} "
                                       "iterations dnnfusion unrolls")
    if k and length == 0:
        raise UnsupportedOperatorError(f"{where} scans a length of 0, so its scan outputs are empty, of a shape "
                                       "its body does not fix; dnnfusion does not build them")
    _count(imp, length * len(body.node), where, add=False)
    per_iter: list[list[str]] = [[] for _ in range(k)]
    for it in range(length):
        prefix = f"{name}/iter{it}"
        index = {d: _const(imp, f"{prefix}:index", np.array(length - 1 - it if d else it, np.int64))
                 for d in sorted(set(in_dirs))}
        slices = [_emit(imp, "Gather", [x, index[in_dirs[j]]], name, where, axis=in_axes[j])
                  for j, x in enumerate(xs)]
        outs = _body(imp, body, [*states, *slices], prefix, scopes, where)
        states = outs[:n]
        for j in range(k):
            per_iter[j].append(outs[n + j])
    return states + [_stack(imp, per_iter[j][::-1] if out_dirs[j] else per_iter[j], out_axes[j], name, where,
                            f"scan output {j} ('{body.output[n + j].name}')") for j in range(k)]
