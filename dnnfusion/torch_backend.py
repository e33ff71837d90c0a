"""The ``torch.compile`` backend: ``torch.compile(module, backend="dnnfusion")``.

The name is registered through the ``torch_dynamo_backends`` entry point (pyproject.toml),
so torch finds it without ``import dnnfusion``; :func:`register` does the same by hand for a
source checkout that is not installed. Nothing here imports torch at module level: importing
dnnfusion must not need it.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

from dnnfusion.errors import DTypeError, UnsupportedOperatorError

BACKEND_NAME = "dnnfusion"


def dnnfusion_backend(gm: Any, example_inputs: Sequence[Any], *, mode: str | None = None,
                      options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """Compiles the ``torch.fx.GraphModule`` Dynamo hands a backend with
    :func:`dnnfusion.compile` and returns a callable over torch tensors.

    ``options`` (``torch.compile(..., options={...})``) go to :func:`dnnfusion.compile`:
    ``planner``, ``threads``, ``isa``, ``optimize``. ``mode`` is accepted and ignored.

    Fallback: a graph dnnfusion cannot compile (an operator or dtype it does not support:
    :class:`UnsupportedOperatorError` or :class:`DTypeError`; or outputs that are not all
    tensors) runs on the GraphModule's own ``forward``, with a warning, as users of a
    ``torch.compile`` backend expect; Dynamo graph breaks keep the rest compiled. Other
    errors propagate.

    Inference only: the outputs carry no autograd history.
    """
    import torch

    from dnnfusion.compiler import compile as df_compile

    opts = dict(options or {})
    unknown = set(opts) - {"planner", "threads", "isa", "optimize"}
    if unknown:
        raise TypeError(f"unknown dnnfusion options {sorted(unknown)}; expected planner, threads, "
                        "isa, optimize")
    example_inputs = list(example_inputs)
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    returned = out_node.args[0]
    as_list, single = isinstance(returned, list), not isinstance(returned, (tuple, list))
    flat = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    if not all(_is_tensor_node(torch, n) for n in flat):
        return _fallback(gm, "it returns values that are not tensors")
    try:
        compiled = df_compile(gm, example_inputs=tuple(example_inputs), **opts)
    except (UnsupportedOperatorError, DTypeError) as e:
        return _fallback(gm, f"{type(e).__name__}: {e}")

    # Dynamo passes lifted parameters and buffers as inputs too; the front-end made them
    # constants, so only the other tensors are the compiled model's inputs.
    from dnnfusion.frontends.fx import _dynamo_static_inputs

    static = _dynamo_static_inputs(gm, tuple(example_inputs))
    positions = [i for i, a in enumerate(example_inputs)
                 if i not in static and isinstance(a, torch.Tensor)]
    if len(positions) != len(compiled.input_names) or len(flat) != len(compiled.output_names):
        return _fallback(gm, f"its {len(positions)} tensor inputs and {len(flat)} outputs do not "
                         f"match the compiled graph's {len(compiled.input_names)} and "
                         f"{len(compiled.output_names)}")

    def run(*args: Any) -> Any:
        outs = compiled.run(*[args[i] for i in positions])
        return outs[0] if single else outs if as_list else tuple(outs)

    run.compiled_model = compiled  # type: ignore[attr-defined]  # for inspection (stats, explain)
    return run


def _is_tensor_node(torch: Any, n: Any) -> bool:
    if not hasattr(n, "meta"):
        return False
    val = n.meta.get("example_value", n.meta.get("val"))
    return isinstance(val, torch.Tensor)


def _fallback(gm: Any, why: str) -> Callable[..., Any]:
    warnings.warn(f"dnnfusion cannot compile this graph ({why}); it runs on PyTorch instead",
                  RuntimeWarning, stacklevel=3)
    return gm.forward


def register() -> None:
    """Registers the backend with Dynamo under the name ``dnnfusion`` (needed only when the
    package's entry point is not installed, e.g. a source tree on PYTHONPATH)."""
    from torch._dynamo.backends import registry

    if BACKEND_NAME not in registry._COMPILER_FNS:
        registry.register_backend(dnnfusion_backend, name=BACKEND_NAME)


__all__ = ["dnnfusion_backend", "register", "BACKEND_NAME"]
