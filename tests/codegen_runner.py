"""Test helper: lower an ECG with a planner and run the generated module through the
executor, at -O0 (the tests compile a few hundred small modules; the optimisation level
changes no semantics: generated code never uses -ffast-math, and -ffp-contract=off holds at
every level)."""

from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np

import dnnfusion as df
from dnnfusion import _core
from dnnfusion.compiler import prelude_dir


# Code compiled and never run (a dialect this CPU lacks) is built at -O0: the same source checked
# (templates instantiated, intrinsics against the dialect's target flags, object code emitted) in
# about a third of -O1's time (the AVX-512 conv/pool test driver: 7.9 s against 27 s).
COMPILE_ONLY_LEVEL = "0"
# Code that runs is built at -O0 too: these tests check what the generated source computes on
# small tensors, where g++'s optimising took most of the time and running unoptimised code
# little (2-vCPU Xeon, fresh caches, -O1 -> -O0: tests/test_views.py with test_codegen.py 287
# -> 205 s, the ONNX node suite 157 -> 99 s). Optimised builds stay tested where models run:
# df.compile at -O1 in the suite (tests/conftest.py), at -O3 in tests/test_compile_api.py.
RUN_LEVEL = "0"


@contextmanager
def _opt_level(level: str):
    old = os.environ.get("DNNF_OPT_LEVEL")
    os.environ["DNNF_OPT_LEVEL"] = level
    try:
        yield
    finally:
        if old is None:
            del os.environ["DNNF_OPT_LEVEL"]
        else:
            os.environ["DNNF_OPT_LEVEL"] = old


def run(ecg, feeds: dict, planner: str = "dnnfusion", isa: str | None = None, threads: int = 2,
        horizontal: bool = False):
    """Outputs of the compiled plan, and the generated module as a dict. `isa`: default the
    best this machine runs (``$DNNF_ISA`` lowers it)."""
    isa = isa or _core.cpu_features()["isa"]
    gen = _core.generate_cpu(ecg, df.plan.plan(ecg, planner=planner, horizontal=horizontal), isa)
    with _opt_level(RUN_LEVEL):
        exe = _core.CpuExecutable(ecg, gen, isa, threads, prelude_dir())
    return exe.run([feeds[v.name] for v in ecg.inputs]), gen.to_dict()


def compile_only(ecg, planner: str, isa: str, horizontal: bool = False) -> dict:
    """Generates the plan's module for `isa` and compiles it without running it (a dialect
    this machine lacks); returns the generated module as a dict."""
    gen = _core.generate_cpu(ecg, df.plan.plan(ecg, planner=planner, horizontal=horizontal), isa)
    with _opt_level(COMPILE_ONLY_LEVEL):
        path = _core.compile_only(gen, isa, prelude_dir())
    assert os.path.getsize(path) > 0, path
    return gen.to_dict()


def run_or_compile(model, feeds: dict, isa: str, planner: str = "dnnfusion"):
    """The outputs of an ONNX model's plan in `isa`, or None once its code is compiled only
    (a dialect this CPU lacks, dialects.compile_only)."""
    from dialects import compile_only as lacks_here

    ecg = df.load(model.SerializeToString())
    if lacks_here(isa):
        compile_only(ecg, planner, isa)
        return None
    return run(ecg, feeds, planner=planner, isa=isa)[0]


def assert_matches_reference(ecg, feeds, outs, rtol=1e-4, atol=1e-5, of_scale=0.0):
    """Outputs against the NumPy reference: floats within rtol of each value plus atol plus
    of_scale times the output's largest magnitude (for sums whose rounding follows the terms'
    size, not the result's: Winograd F(4x4)'s transforms scale by up to 8, so a value near 0
    summed from terms near 100 carries their error), everything else exactly."""
    ref = ecg.run_reference(**feeds)
    for got, want, v in zip(outs, ref, ecg.outputs):
        want = np.asarray(want)
        assert got.shape == want.shape, v.name
        if got.dtype.kind == "f":
            if of_scale and want.size and np.isfinite(want).any():
                atol = atol + of_scale * float(np.abs(want[np.isfinite(want)]).max())
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=v.name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=v.name)
