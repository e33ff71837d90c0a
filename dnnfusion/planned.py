"""The graph that is planned: a model imported, its float16 / bfloat16 computed in float32 and
its narrow integers widened, rewritten (§4.2), given its layout (§4.4 inter-block) and cut
before a data-dependent output length (host_tail). ``compile`` runs it once per program;
``dynamic=True``'s runtime sequence length runs it again on the twin one position shorter
(:mod:`dnnfusion.seq_extents`)."""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from dnnfusion import host_tail as _host_tail
from dnnfusion import rewrite as _rewrite
from dnnfusion.dtypes import HALF_DTYPES, NARROW_DTYPES, SMALL_FLOAT_NAMES, numpy_dtype
from dnnfusion.ecg import load
from dnnfusion.errors import DTypeError


def planned_graph(model: Any, example_inputs: Sequence[Any] | None, input_shapes: dict | None, optimize: bool,
                  layout: str, float16: str) -> tuple:
    """Import, the float16 / narrow-integer conversions, the rewrites, the layout and the host
    tail: the graph that is planned (dynamic=True's runtime extents run it twice, at two
    sequence lengths). Returns (ecg, operators_before, f16_in, f16_out, halves, t_loaded,
    report, layout_report, tail)."""
    ecg = load(model, example_inputs, input_shapes=input_shapes)
    operators_before = len(ecg)
    f16_in: dict[str, np.dtype] = {}
    f16_out: list[np.dtype | None] = []
    if _rewrite.uses_float16(ecg):
        if float16 == "error":
            raise DTypeError("the model computes in float16 or bfloat16 and compile(..., float16='error') "
                             "refuses it; float16='f32' (the default) computes it in float32")
        f16_in = {v.name: numpy_dtype(v.dtype) for v in ecg.inputs if v.dtype in HALF_DTYPES}
        f16_out = [numpy_dtype(v.dtype) if v.dtype in HALF_DTYPES else None for v in ecg.outputs]
        ecg = _rewrite.float16_to_float32(ecg)
    halves = bool(f16_out)
    if _rewrite.uses_narrow(ecg):  # int4, uint4, int2, uint2: computed in int8 / uint8, exactly
        small = set(NARROW_DTYPES) | set(SMALL_FLOAT_NAMES)
        f16_in.update({v.name: numpy_dtype(v.dtype) for v in ecg.inputs if v.dtype in small})
        f16_out = [numpy_dtype(v.dtype) if v.dtype in small else (f16_out[i] if f16_out else None)
                   for i, v in enumerate(ecg.outputs)]
        ecg = _rewrite.narrow_to_wide(ecg)
    t_loaded = time.perf_counter()
    report = None
    if optimize:
        ecg, report = _rewrite.rewrite(ecg)
    ecg, layout_report = _rewrite.select_layout(ecg, layout)
    layout_report["mode"] = layout
    ecg, tail = _host_tail.split(ecg)  # what follows a data-dependent output length (NMS)
    return ecg, operators_before, f16_in, f16_out, halves, t_loaded, report, layout_report, tail


__all__ = ["planned_graph"]
