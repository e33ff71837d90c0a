"""dnnfusion: an operator-fusion compiler for deep neural networks.

A re-implementation of DNNFusion (Niu et al., PLDI 2021). ``load`` turns an ONNX model,
a ``torch.nn.Module`` or a ``torch.fx.GraphModule`` into an Extended Computational Graph
(ECG); ``compile`` rewrites it, plans fusion, generates code and returns a callable
``CompiledModel``.
"""

import os as _os

if _os.environ.get("DNNF_CORE_LIBRARY"):  # another build of the C++ core (.ci/sanitize's ASan build)
    import importlib.util as _ilu
    import sys as _sys

    _spec = _ilu.spec_from_file_location("dnnfusion._core", _os.environ["DNNF_CORE_LIBRARY"])
    if _spec is None or _spec.loader is None:
        raise ImportError(f"DNNF_CORE_LIBRARY={_os.environ['DNNF_CORE_LIBRARY']} is not a loadable extension")
    _core = _ilu.module_from_spec(_spec)
    _sys.modules["dnnfusion._core"] = _core
    _spec.loader.exec_module(_core)

from dnnfusion.errors import (
    CompileError,
    CompileWarning,
    DTypeError,
    Error,
    InternalError,
    ModelFormatError,
    ModelWarning,
    ShapeError,
    UnsupportedOperatorError,
)
from dnnfusion.ecg import ECG, load, op_table, parse

# The stages as modules: dnnfusion.rewrite.rewrite(g), dnnfusion.plan.plan(g, planner=...).
from dnnfusion import plan, rewrite  # noqa: E402  (after the core types they use)
from dnnfusion.plan import FusionPlan, fusion_table  # noqa: E402
from dnnfusion.rewrite import RewriteReport  # noqa: E402
from dnnfusion.compiler import CompiledModel, compile  # noqa: E402,A004
from dnnfusion.compiler import opencl_devices  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ECG",
    "load",
    "parse",
    "op_table",
    "plan",
    "rewrite",
    "FusionPlan",
    "fusion_table",
    "RewriteReport",
    "compile",
    "CompiledModel",
    "opencl_devices",
    "Error",
    "UnsupportedOperatorError",
    "ShapeError",
    "DTypeError",
    "ModelFormatError",
    "CompileWarning",
    "ModelWarning",
    "CompileError",
    "InternalError",
]
