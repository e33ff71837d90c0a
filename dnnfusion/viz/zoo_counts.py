"""Operator, kernel and pass counts of a model under each planner (paper §6.2's fused-layer
table), counted from the generated CPU code's kernel plan without compiling it."""
from __future__ import annotations

from typing import Any, Sequence

from dnnfusion import _core
from dnnfusion import plan as _plan
from dnnfusion import rewrite as _rewrite
from dnnfusion.ecg import ECG, load


def planner_counts(rewritten: ECG, planners: Sequence[str] = _plan.PLANNERS,
                   profile_db: str | None = None) -> dict[str, dict[str, int]]:
    """planner -> plan_blocks, kernels, passes, intermediate_bytes_written for an already
    rewritten ECG; the same counts as CompiledModel.stats (the kernel plan does not depend on
    the ISA, so the scalar dialect is generated: it exists on every machine)."""
    ecg, _ = _rewrite.select_layout(rewritten, "auto")
    out = {}
    for p in planners:
        fusion = _plan.plan(ecg, planner=p, profile_db=profile_db)
        c = _core.generate_cpu(ecg.graph, fusion, "scalar").counts
        out[p] = {"plan_blocks": len(fusion.blocks), "kernels": c["kernels"], "passes": c["passes"],
                  "intermediate_bytes_written": c["intermediate_bytes_written"]}
    return out


def model_counts(name: str, reduced: bool = False, planners: Sequence[str] = _plan.PLANNERS,
                 profile_db: str | None = None) -> dict[str, Any]:
    """A zoo model's operators before fusion, its rewrite report, each planner's counts and
    how many producer/consumer pairs are yellow cells (settled by profiling or the estimate)."""
    from dnnfusion.profiling import yellow_pairs
    from dnnfusion.zoo import registry

    ecg = load(str(registry.export_onnx(name, reduced=reduced)))
    rewritten, report = _rewrite.rewrite(ecg)
    return {"model": name, "operators": len(ecg), "rewrite": report,
            "planners": planner_counts(rewritten, planners, profile_db),
            "yellow_pairs": len(yellow_pairs(rewritten))}

