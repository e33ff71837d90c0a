"""Operator and kernel counting.  The definitions are documented in benchmarks/README.md.

Everything here is pure analysis of a graph or of generated code; it is imported inside the
cell subprocesses, so heavy imports stay inside the functions.
"""
from __future__ import annotations

import collections
import re
from typing import Any, Iterable

# ONNX ops that read only the *shape* (metadata) of their input, never its values.
ONNX_METADATA_OPS = frozenset({"Shape", "Size"})
# ONNX ops that do nothing at run time when their input is data.
ONNX_NOOP_OPS = frozenset({"Identity"})


def _hist(items: Iterable[str]) -> dict[str, int]:
    return dict(sorted(collections.Counter(items).items(), key=lambda kv: (-kv[1], kv[0])))


def onnx_op_count(model: Any) -> dict[str, Any]:
    """ONNX operators before fusion, excluding shape plumbing and constant subgraphs.

    A tensor *carries data* if it is a graph input (not an initializer) or an output of a
    counted node.  A node is counted iff it is not ``Shape``/``Size``/``Identity`` and at
    least one of its inputs carries data (inputs of nested subgraphs included).  So nodes
    that only compute from constants, initializers or shapes -- ``Shape -> Gather ->
    Unsqueeze -> Concat -> Reshape.shape`` chains, ``Constant``, ``ConstantOfShape``,
    weight transposes -- are excluded: every framework folds them before running.
    Only the top-level graph is counted (an ``If``/``Loop`` node counts once).
    """
    import onnx

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model), load_external_data=False)
    g = model.graph
    inits = {i.name for i in g.initializer} | {i.name for i in g.sparse_initializer}
    data = {i.name for i in g.input if i.name not in inits}

    def node_inputs(n) -> list[str]:
        names = [x for x in n.input if x]
        for a in n.attribute:  # outer-scope names used inside subgraphs
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                for sn in sub.node:
                    names += node_inputs(sn)
        return names

    counted: list[str] = []
    excluded: list[str] = []
    for n in g.node:
        is_data = any(x in data for x in node_inputs(n))
        if n.op_type in ONNX_METADATA_OPS or not is_data:
            excluded.append(n.op_type)
            continue
        data.update(o for o in n.output if o)
        if n.op_type in ONNX_NOOP_OPS:
            excluded.append(n.op_type)
            continue
        counted.append(n.op_type)
    return {
        "onnx_ops": len(counted),
        "onnx_nodes_total": len(g.node),
        "onnx_hist": _hist(counted),
        "onnx_excluded_hist": _hist(excluded),
        "opset": next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None),
    }


def aten_op_count(module: Any, example_inputs: tuple) -> dict[str, Any]:
    """Core-ATen operators: ``torch.export.export(...).run_decompositions()``.

    ``aten_ops``: ``call_function`` nodes whose target is an ``OpOverload`` or a
    higher-order op, excluding view ops (``OpOverload.is_view``: view, permute, expand,
    slice, select, squeeze, unsqueeze, t, transpose, alias ...) and the allocation /
    metadata ops of :data:`ATEN_NON_KERNEL`.  ``operator.getitem``
    and symbolic-int arithmetic are never counted.  ``aten_ops_all`` includes the views.
    """
    import torch

    ep = torch.export.export(module, tuple(example_inputs), strict=False)
    ep = ep.run_decompositions()
    ops, views = [], []
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        t = node.target
        if isinstance(t, torch._ops.OpOverload):
            (views if _is_view(t) else ops).append(_aten_name(t))
        elif isinstance(t, torch._ops.HigherOrderOperator):
            ops.append(t.name())
    return {"aten_ops": len(ops), "aten_ops_all": len(ops) + len(views),
            "aten_hist": _hist(ops), "aten_view_hist": _hist(views)}


# ATen ops that are not kernels although their schema is not a view: allocation and
# metadata-only reshapes.  Excluded from the ATen and eager counts, like views.
ATEN_NON_KERNEL = frozenset({"empty", "empty_strided", "empty_like", "_unsafe_view", "detach",
                             "lift_fresh", "lift_fresh_copy", "alias", "sym_size", "sym_stride",
                             "sym_numel", "sym_storage_offset", "_assert_tensor_metadata"})


def _aten_name(t) -> str:
    return str(t.overloadpacket.__name__) if hasattr(t, "overloadpacket") else str(t)


def _is_view(t) -> bool:
    return bool(getattr(t, "is_view", False)) or _aten_name(t) in ATEN_NON_KERNEL


class DispatchCounter:
    """Counts the ATen ops that eager PyTorch dispatches (a TorchDispatchMode).

    Use it under ``torch.no_grad()`` (not ``inference_mode``): then the mode sits below
    autograd and sees composite-implicit ops (``linear``, ``conv2d``, ``matmul``) decomposed
    into the ops eager actually runs (``addmm``, ``convolution``, ``bmm``).  View, alias and
    allocation ops (:data:`ATEN_NON_KERNEL`) are counted separately, not as kernels.
    """

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                (counter.views if _is_view(func) else counter.ops).append(_aten_name(func))
                return func(*args, **(kwargs or {}))

        self.ops: list[str] = []
        self.views: list[str] = []
        self.mode = _Mode()

    def result(self) -> dict[str, Any]:
        return {"kernels": len(self.ops), "views": len(self.views), "hist": _hist(self.ops)}


# ---------------------------------------------------------------- Inductor output code
_IND_SKIP = {
    "empty_strided_cpu", "empty_strided", "empty", "reinterpret_tensor", "assert_size_stride",
    "assert_alignment", "as_strided", "torch._C._dynamo.guards.assert_size_stride",
    "torch._C._dynamo.guards._empty_strided_cpu", "buf", "len", "range", "int", "float", "tuple",
    "list", "print", "super", "torch.empty_strided", "torch.empty", "alloc_from_pool",
    "get_args", "benchmark_compiled_module", "print_performance",
}
_CALL_RE = re.compile(r"^\s*(?:[\w, ]+=\s*)?([A-Za-z_][\w.]*)\s*\(")


def inductor_kernel_count(codes: list[str]) -> dict[str, Any]:
    """Kernels in Inductor's generated Python wrapper code (``run_and_get_code``).

    Counts the *call sites* in each ``call`` function: calls of kernels Inductor
    generated (names bound via ``async_compile.*``, e.g. ``cpp_fused_*``) plus extern
    calls (``extern_kernels.*``, ``torch.ops.*``, ``aten.*``: oneDNN convolutions, GEMMs
    and fallbacks).  Allocation/view helpers (``empty_strided_cpu``, ``reinterpret_tensor``,
    ``assert_size_stride``) are not kernels.
    """
    generated, extern, other = [], [], []
    for src in codes:
        gen_names = set(re.findall(r"^(\w+)\s*=\s*async_compile\.", src, re.M))
        in_call = False
        call_indent = 0
        for line in src.splitlines():
            m = re.match(r"^(\s*)def call\(", line)
            if m:
                in_call, call_indent = True, len(m.group(1))
                continue
            if not in_call:
                continue
            stripped = line.strip()
            if stripped and (len(line) - len(line.lstrip())) <= call_indent:
                in_call = False  # dedent: end of the call function
                continue
            if not stripped or stripped.startswith(("#", "del ", "return")):
                continue
            cm = _CALL_RE.match(line)
            if not cm:
                continue
            fn = cm.group(1)
            if fn in gen_names or fn.startswith(("cpp_fused", "kernel_cpp", "triton_")):
                generated.append(fn)
            elif fn.startswith(("extern_kernels.", "torch.ops.", "aten.")):
                extern.append(fn)
            elif fn not in _IND_SKIP and not fn.endswith(("empty_strided_cpu", "reinterpret_tensor",
                                                            ".clear", ".append", ".pop")):
                other.append(fn)
    return {"kernels": len(generated) + len(extern), "generated": len(generated),
            "extern": len(extern), "extern_hist": _hist(extern), "uncounted_calls": _hist(other),
            "graphs": len(codes)}


# ---------------------------------------------------------------- TVM Relax
def tvm_kernel_count(mod: Any) -> dict[str, Any]:
    """Kernel launches in a Relax IRModule after LegalizeOps + FuseOps + FuseTIR.

    Counts ``relax.call_tir`` (one per fused TIR function call) and ``relax.call_dps_packed``
    / ``relax.call_pure_packed`` (library calls) in all Relax functions.  ``relax.reshape``
    and other ops that lower to no kernel (memory views) are reported, not counted.
    """
    from tvm import relax
    import tvm

    calls: list[str] = []
    tir_funcs: list[str] = []
    other: list[str] = []

    def visit(e):
        if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op):
            name = e.op.name
            if name == "relax.call_tir":
                calls.append(name)
                tir_funcs.append(str(e.args[0].name_hint))
            elif name in ("relax.call_dps_packed", "relax.call_pure_packed"):
                calls.append(name)
            else:
                other.append(name)

    for _gv, f in mod.functions.items():
        if isinstance(f, relax.Function):
            relax.analysis.post_order_visit(f.body, visit)
    return {"kernels": len(calls), "call_tir": calls.count("relax.call_tir"),
            "packed_calls": len(calls) - calls.count("relax.call_tir"),
            "distinct_tir_functions": len(set(tir_funcs)), "uncounted_ops": _hist(other)}


# ---------------------------------------------------------------- OpenVINO
OV_NON_KERNEL = frozenset({"Input", "Output", "Const", "Parameter", "Result", "Constant"})


def openvino_kernel_count(runtime_model: Any) -> dict[str, Any]:
    """Nodes of OpenVINO's CPU execution graph (``compiled_model.get_runtime_model()``).

    Counts executed nodes by their ``layerType`` runtime info, excluding ``Input``,
    ``Output`` and ``Const`` nodes and nodes whose inputs all come from constants
    (computed once at compile time).  ``Reorder`` (layout conversion) nodes are kernels
    and are counted; the histogram shows how many there are.
    """
    const_like: set[str] = set()
    kernels: list[str] = []
    for op in runtime_model.get_ordered_ops():
        ri = op.get_rt_info()
        lt = ri["layerType"].astype(str) if "layerType" in ri else op.get_type_name()
        name = op.get_friendly_name()
        srcs = [inp.get_source_output().get_node().get_friendly_name() for inp in op.inputs()]
        if lt in OV_NON_KERNEL:
            if lt in ("Const", "Constant"):
                const_like.add(name)
            continue
        if srcs and all(s in const_like for s in srcs):
            const_like.add(name)
            continue
        kernels.append(lt)
    return {"kernels": len(kernels), "hist": _hist(kernels)}


def hist(items: Iterable[str]) -> dict[str, int]:
    return _hist(items)
