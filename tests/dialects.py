"""Which SIMD dialects the tests run on this machine and which they only compile.

A dialect runs here when the hardware has it and ``$DNNF_ISA`` (which lowers the best ISA,
e.g. ``DNNF_ISA=avx2`` on an AVX-512 machine) does not rule it out. An x86 dialect this
machine cannot run is still generated and compiled, never run: its tests carry the id
``<isa>-compile-only`` so the test list says what ran, and the session header says why.
NEON always runs, cross-compiled, under qemu (native_toolchain.py). Nothing here is a skip:
a dialect the machine lacks is not a missing dependency."""

from __future__ import annotations

import pytest

from dnnfusion import _core

X86 = ("scalar", "avx2", "avx512")


def table() -> dict[str, dict]:
    """The ISA table of cpp/target/isa.h, by name."""
    return {row["name"]: row for row in _core.isas()}


def runnable() -> list[str]:
    """The dialects whose code this process may run, lowest first: those the hardware runs,
    up to the best one (``cpu_features()["isa"]``, lowered by ``$DNNF_ISA``)."""
    best = _core.cpu_features()["isa"]
    out = []
    for name, row in table().items():
        if row["hardware"]:
            out.append(name)
        if name == best:
            break
    return out


def why_not(isa: str) -> str:
    """Why code for `isa` is compiled but not run here."""
    row = table()[isa]
    if not row["hardware"]:
        return f"this CPU lacks {row['needs']}"
    return f"DNNF_ISA={_core.cpu_features()['isa']} rules it out"


def compile_only(isa: str) -> bool:
    return isa not in runnable()


def params(names=X86) -> list:
    """pytest parameters for `names`: the isa itself where it runs here, else
    ``<isa>-compile-only`` (the test then compiles the dialect's code and stops)."""
    return [pytest.param(n, id=f"{n}-compile-only" if n != "neon" and compile_only(n) else n)
            for n in names]


def planner_params(planners, names=X86, everywhere=("dnnfusion", "none")) -> list:
    """pytest parameters (planner, isa) for generated-code tests: every planner in the best
    dialect this process runs, and the `everywhere` planners (the fusing one and one kernel per
    operator, the two ends of what a plan asks of the code) in every other dialect too, run or
    compiled only. A dialect spells the stages a plan is made of, not the plan's choices: the
    planners between the ends make the same kinds of stages, so crossing every planner with
    every dialect tested each spelling five times over (40% of the suite's compile time)."""
    best = runnable()[-1]
    out = []
    for planner in planners:
        for p in params(names):
            isa = p.values[0]
            if planner in everywhere or isa == best:
                out.append(pytest.param(planner, isa, id=f"{planner}-{p.id}"))
    return out


def summary() -> str:
    run = runnable()
    lacking = [f"{n} ({why_not(n)})" for n in X86 if n not in run]
    return ("dnnfusion dialects: run " + ", ".join(run)
            + ("; compiled only: " + ", ".join(lacking) if lacking else "")
            + "; neon cross-compiled, run under qemu")
