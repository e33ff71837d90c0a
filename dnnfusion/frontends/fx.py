"""The PyTorch front-end: ``torch.export`` -> core ATen -> ECG.

``import_torch(model, example_inputs)`` exports ``model`` (an ``nn.Module``, a
``torch.fx.GraphModule`` from ``symbolic_trace``, or the GraphModule ``torch.compile`` hands
a backend) with static shapes, decomposes it to the core ATen opset and translates every
ATen call to ECG operators (``cpp/ir/ops.def``, ONNX semantics) through the table in
:mod:`dnnfusion.frontends.aten_ops`.

Choices:

* **Decomposition.** ``run_decompositions`` with the default (core ATen) table, except for
  composite ops the ECG has natively or that the default table would expand into index
  arithmetic: ``linear`` and ``matmul`` (Gemm / MatMul+Add instead of
  permute+addmm+views), ``hardswish``, ``hardsigmoid``, ``silu``, ``mish``, ``softplus``,
  ``pixel_shuffle`` (DepthToSpace), ``triu``/``tril`` (Trilu), ``prelu``,
  ``instance_norm``, the upsampling ops (Resize), the reflection/replication pads (Pad)
  and ``scaled_dot_product_attention`` (decomposed here into MatMul/Softmax, without the
  masking machinery of torch's own decomposition). ``layer_norm``, ``batch_norm`` and
  ``gelu`` reach us as the core ops ``native_layer_norm`` (LayerNormalization),
  ``_native_batch_norm_legit_no_training`` (BatchNormalization) and ``gelu`` (Gelu).
* **Inference mode.** The module is exported in eval mode (its own and its submodules'
  ``training`` flags are restored afterwards), as ``torch.onnx.export`` does: dnnfusion
  compiles inference graphs. Ops that only exist in training (batch statistics, random
  dropout) raise :class:`UnsupportedOperatorError`.
* **Constants.** Parameters, buffers and lifted tensor constants become ECG constants that
  share memory with the module (``tensor.detach().numpy()``); ops that build tensors from
  static arguments (``full``, ``arange``, ``zeros_like``...) become constants too, or an
  ``Expand`` of a scalar when large. Shape arithmetic on small constants is folded by the
  :class:`GraphBuilder`.
* **Names.** Graph inputs keep the placeholder names of the user inputs; parameters keep
  their qualified names (``encoder.layer.0.attention.self.query.weight``); each ATen call
  becomes nodes named after its fx node (``conv2d``, then ``conv2d.1``... when it needs
  several).
* **torch.compile.** Dynamo lifts parameters and buffers into graph inputs of the
  GraphModule it hands a backend, and keeps only fake tensors for them; pass the
  ``example_inputs`` the backend received. The placeholders Dynamo marks as static
  (parameters, buffers) become constants; the others are the graph inputs.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any, Sequence

import numpy as np

from dnnfusion.dtypes import TORCH_DTYPES, ecg_dtype, torch_numpy  # noqa: F401 - ecg_dtype is public here
from dnnfusion.errors import Error, InternalError, ModelFormatError, UnsupportedOperatorError
from dnnfusion.frontends.builder import GraphBuilder


def import_torch(model: Any, example_inputs: Sequence[Any]) -> Any:
    """Exports ``model`` with ``example_inputs`` and returns the ECG as a ``_core.Graph``.

    Outputs follow the order the module returns them in (tuples and lists flattened, dicts
    and ``ModelOutput`` by their values in order); non-tensor outputs are left out."""
    import torch

    if example_inputs is None:
        raise TypeError("import_torch needs example_inputs (a tuple of tensors)")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise TypeError("example_inputs must be a tuple of tensors, got "
                        f"{type(example_inputs).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"expected a torch.nn.Module, got {type(model).__name__}")
    example_inputs = tuple(example_inputs)
    static = _dynamo_static_inputs(model, example_inputs)
    ep = _export(torch, model, example_inputs)
    return _Importer(torch, ep, type(model).__name__, static).run()


def _dynamo_static_inputs(model: Any, example_inputs: tuple) -> dict[int, Any]:
    """For a GraphModule from ``torch.compile``: the positions of the placeholders Dynamo
    marks as static (lifted parameters and buffers) with their tensors."""
    import torch

    if not isinstance(model, torch.fx.GraphModule):
        return {}
    placeholders = [n for n in model.graph.nodes if n.op == "placeholder"]
    marks = [bool((n.meta.get("tensor_dict") or {}).get("_dynamo_static_input_type"))
             for n in placeholders]
    if not any(marks):
        return {}
    if len(example_inputs) != len(placeholders):
        n_user = len(placeholders) - sum(marks)
        lifted = ", ".join(n.name for n, m in zip(placeholders, marks) if m)
        raise TypeError(
            f"this GraphModule from torch.compile takes {len(placeholders)} inputs, got "
            f"{len(example_inputs)}: Dynamo lifted the parameters and buffers ({lifted}) into "
            f"inputs besides the {n_user} user input(s); pass the example_inputs the "
            "backend received")
    return {i: t for i, (t, m) in enumerate(zip(example_inputs, marks)) if m}


def _export(torch: Any, model: Any, args: tuple) -> Any:
    from dnnfusion.frontends import aten_common

    modes = [(m, m.training) for m in model.modules()]
    try:
        model.eval()
        with warnings.catch_warnings():  # torch-internal deprecation noise of pytree specs
            warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
            ep = torch.export.export(model, args, strict=False)
            ep = ep.run_decompositions(aten_common.decomposition_table())
    except (TypeError, Error):
        raise
    except Exception as e:  # noqa: BLE001 - torch raises many kinds; all mean "cannot export"
        raise ModelFormatError(
            f"torch.export could not export {type(model).__name__}: {type(e).__name__}: {e}"
        ) from e
    finally:
        for m, training in modes:
            m.training = training
    return ep


_DTYPES = TORCH_DTYPES  # the old name


def _aten_table() -> dict:
    """The ATen converter registry with every family registered (importing a family
    registers its converters)."""
    from dnnfusion.frontends import aten_common, aten_nn, aten_ops, aten_tensor  # noqa: F401

    return aten_common.TABLE


def tensor_array(t: Any, what: str) -> np.ndarray:
    """A NumPy view of a CPU tensor's data (no copy for contiguous tensors)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    ecg_dtype(t.dtype)  # raises DTypeError for complex, quantized...
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    try:
        return torch_numpy(t)
    except Exception as e:  # noqa: BLE001
        raise ModelFormatError(f"{what}: cannot read the tensor's data ({e})") from e


class _Importer:
    """Walks the exported fx graph once, in order, converting each node."""

    def __init__(self, torch: Any, ep: Any, name: str, static: dict[int, Any]):
        self.torch = torch
        self.ep = ep
        self.table = _aten_table()
        self.b = GraphBuilder(name)
        self.static = static
        self.env: dict[str, Any] = {}
        self.node: Any = None  # the fx node being converted
        self._k = 0  # ECG nodes emitted for it so far

    # -- API for the converters (aten_ops) ------------------------------------------------
    @property
    def graph(self) -> Any:
        return self.b.graph

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while self.b.graph.value(name) is not None:
            k += 1
            name = f"{base}_{k}"
        return name

    def op(self, op: str, inputs: Sequence[Any], attrs: dict | None = None,
           num_outputs: int = 1) -> Any:
        """Adds an ECG node for the current fx node; returns its output (or outputs)."""
        base = self.node.name if self._k == 0 else f"{self.node.name}.{self._k}"
        self._k += 1
        name = self.fresh(base)
        onames = [name] if num_outputs == 1 else [self.fresh(f"{name}:{i}")
                                                  for i in range(num_outputs)]
        try:
            outs = self.b.node(op, list(inputs), attrs or {}, num_outputs, name=name,
                               output_names=onames)
        except Error as e:
            raise type(e)(f"fx node '{self.node.name}' ({self.node.target}): {e}") from e
        return outs[0] if num_outputs == 1 else outs

    def const(self, array: Any, tag: str = "c") -> Any:
        arr = np.asarray(array, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        return self.b.constant(self.fresh(f"{self.node.name}.{tag}"), arr)

    def fail(self, why: str) -> UnsupportedOperatorError:
        return UnsupportedOperatorError(
            f"fx node '{self.node.name}' calls {self.node.target}: {why}")

    def meta(self, i: int | None = None) -> Any:
        v = self.node.meta.get("val")
        return v if i is None else v[i]

    # -- the walk ---------------------------------------------------------------------------
    def run(self) -> Any:
        torch = self.torch
        sig = self.ep.graph_signature
        specs = {s.arg.name: s for s in sig.input_specs if hasattr(s.arg, "name")}
        user_index = 0
        outputs: list[Any] = []
        for node in self.ep.graph.nodes:
            self.node, self._k = node, 0
            if node.op == "placeholder":
                self.env[node.name] = self._placeholder(node, specs.get(node.name), user_index)
                if specs.get(node.name) is None or _kind(specs[node.name]) == "USER_INPUT":
                    user_index += 1
            elif node.op == "call_function":
                self.env[node.name] = self._call(node)
            elif node.op == "output":
                outputs = self._outputs(node)
            elif node.op == "get_attr":
                val = getattr(self.ep.graph_module, node.target)
                if not isinstance(val, torch.Tensor):
                    raise self.fail("get_attr of a non-tensor (a submodule or higher-order "
                                    "op body) is not supported")
                self.env[node.name] = self.b.constant(
                    self.fresh(node.target), tensor_array(val, node.name))
            else:
                raise UnsupportedOperatorError(f"fx node '{node.name}': {node.op} nodes are "
                                               "not supported")
        if not outputs:
            raise ModelFormatError(f"{self.b.graph.name} returns no tensor")
        self.b.outputs(outputs)
        return self.b.graph

    def _placeholder(self, node: Any, spec: Any, user_index: int) -> Any:
        kind = _kind(spec) if spec is not None else "USER_INPUT"
        if kind == "USER_INPUT":
            if user_index in self.static:
                if not node.users:
                    return None
                return self.b.constant(self.fresh(node.name),
                                       tensor_array(self.static[user_index], node.name))
            val = node.meta.get("val")
            if not isinstance(val, self.torch.Tensor):
                return val  # a non-tensor input (a Python scalar) is baked in
            shape = [int(d) for d in val.shape]
            return self.b.input(node.name, ecg_dtype(val.dtype), shape)
        if kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            target = spec.target
            if not node.users:
                return None  # unused (e.g. num_batches_tracked): not in the graph
            t = self.ep.state_dict.get(target)
            if t is None:
                t = self.ep.constants.get(target)
            if t is None:
                raise ModelFormatError(f"{kind.lower()} '{target}' has no data in the export")
            return self.b.constant(self.fresh(target), tensor_array(t, target))
        raise UnsupportedOperatorError(f"fx node '{node.name}': {kind.lower()} inputs are not "
                                       "supported")

    def _call(self, node: Any) -> Any:
        target = node.target
        if target is operator.getitem:
            src, i = node.args
            outs = self.env[src.name]
            val = outs[i]
            if val is None:
                raise UnsupportedOperatorError(
                    f"fx node '{node.name}' uses output {i} of '{src.name}' ({src.target}), "
                    "which dnnfusion does not support")
            return val
        packet = getattr(target, "overloadpacket", None)
        fn = self.table.get(packet) if packet is not None else None
        if fn is None:
            raise UnsupportedOperatorError(
                f"fx node '{node.name}' calls {target}, which dnnfusion does not support; "
                "torch.compile(module, backend=\"dnnfusion\") runs a graph it cannot compile in PyTorch instead "
                "(with a warning), or express the call with other torch operations")
        args = self._bind(node)
        result = fn(self, args)
        self._check(node, result)
        return result

    def _bind(self, node: Any) -> dict[str, Any]:
        """The node's arguments by schema name, defaults filled, fx nodes resolved."""
        import torch.fx

        def resolve(a: Any) -> Any:
            return torch.fx.node.map_arg(a, lambda n: self.env[n.name])

        schema = node.target._schema
        bound: dict[str, Any] = {}
        pos = list(node.args)
        for i, a in enumerate(schema.arguments):
            if i < len(pos) and not a.kwarg_only:
                v = pos[i]
            elif a.name in node.kwargs:
                v = node.kwargs[a.name]
            elif a.has_default_value():
                v = a.default_value
            else:
                v = None
            bound[a.name] = resolve(v)
        return bound

    def _check(self, node: Any, result: Any) -> None:
        """Every output's ECG type must be the one torch computed (node.meta['val'])."""
        val = node.meta.get("val")
        vals = val if isinstance(val, (tuple, list)) else [val]
        outs = result if isinstance(result, (tuple, list)) else [result]
        for v, o in zip(vals, outs):
            if o is None or not isinstance(v, self.torch.Tensor) or not hasattr(o, "shape"):
                continue
            want = (ecg_dtype(v.dtype), tuple(int(d) for d in v.shape))
            if (o.dtype, tuple(o.shape)) != want:
                raise InternalError(
                    f"fx node '{node.name}' ({node.target}) became %{o.name}: {o.type}, but "
                    f"torch computes {want[0]}{list(want[1])}")

    def _outputs(self, node: Any) -> list[Any]:
        sig = self.ep.graph_signature
        flat = list(node.args[0]) if isinstance(node.args[0], (tuple, list)) else [node.args[0]]
        specs = list(sig.output_specs)
        self.node, self._k = node, 0
        outs, seen = [], set()
        for i, arg in enumerate(flat):
            kind = _kind(specs[i]) if i < len(specs) else "USER_OUTPUT"
            if kind in ("BUFFER_MUTATION", "USER_INPUT_MUTATION", "PARAMETER_MUTATION"):
                raise UnsupportedOperatorError(
                    f"{self.b.graph.name} updates '{specs[i].target}' in place "
                    f"({kind.lower()}); dnnfusion compiles stateless inference graphs")
            if kind != "USER_OUTPUT":
                continue  # e.g. effect tokens
            if not hasattr(arg, "name"):
                continue  # a constant (non-tensor) output
            v = self.env.get(arg.name)
            if v is None or not hasattr(v, "shape"):
                continue
            # A graph output must be computed by a node, and be listed once.
            if v.is_input or v.is_constant or v.name in seen:
                v = self.op("Identity", [v])
            seen.add(v.name)
            outs.append(v)
        return outs


def _kind(spec: Any) -> str:
    return getattr(spec.kind, "name", str(spec.kind))
