"""The ONNX backend node tests through generated code: every case the reference covers
(:mod:`dnnfusion.testing.onnx_node_suite`) whose graph code generation supports is compiled
and run, and its outputs compared with the expected ones.

Compiling each case alone would cost a C++ compile per case, so cases are merged: each
(case, data set) becomes a copy of the case's graph with a name prefix, and all copies that
share an opset import go into one model, compiled once. A case whose graph code generation
rejects (an operator or element type it does not support yet) is listed with the reason.
Float16 cases are computed as ``dnnfusion.compile`` computes them by default: in float32,
with float16 and bfloat16 feeds widened and the outputs rounded back before the comparison.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnfusion.dtypes import SMALL_FLOAT_NUMPY, is_bfloat16

from . import onnx_node_suite as suite


@dataclass
class Entry:
    """One data set of one case, frozen and ready to merge."""

    case: str
    op: str
    model: Any                     # onnx.ModelProto with static inputs frozen
    feeds: dict[str, np.ndarray]
    expected: list[np.ndarray]
    atol: float | None


@dataclass
class Collected:
    entries: list[Entry] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # case -> why codegen rejects it
    # cases of random operators: their outputs are draws, checked by their statistics against
    # ONNX Runtime in tests/test_onnx_random.py instead of number by number here
    random: list[str] = field(default_factory=list)


def _prepare(case: suite.Case, isa: str) -> tuple[list[Entry], str | None]:
    import dnnfusion as df
    from dnnfusion import _core
    from dnnfusion import plan as _plan

    init = {t.name for t in case.model.graph.initializer}
    input_names = [v.name for v in case.model.graph.input if v.name not in init]
    static = suite.static_inputs(case.model)
    atol = suite.ROUNDED_ATOL if case.name in suite.ROUNDED_EXPECTED else None
    entries = []
    for inputs, outputs in case.data_sets:
        feeds = {n: suite._array(x) for n, x in zip(input_names, inputs)}
        raw = dict(feeds)
        model = suite.freeze(case.model, {n: feeds.pop(n) for n in static}) if static else case.model
        try:
            g = _as_computed(df.load(model))
            _core.generate_cpu(g.graph, _plan.plan(g, planner="none"), isa)
        except (df.UnsupportedOperatorError, df.ShapeError) as e:
            return [], f"{type(e).__name__}: {str(e).splitlines()[0]}"
        if case.name in suite.EXPECTED_FROM_ORT:
            outputs = suite._expected_from_ort(case.model, raw)
        entries.append(Entry(case.name, case.op, model, feeds,
                             [suite._array(o) for o in outputs], atol))
    return entries, None


@functools.lru_cache(maxsize=4)
def collect(isa: str = "scalar") -> Collected:
    """Entries for every covered case that generates, and why the others do not."""
    out = Collected()
    for case in suite.collect():
        if not case.covered or case.name in suite.UNSUPPORTED_ATTRIBUTE:
            continue
        if any(n.op_type in suite.RANDOM_OPS for n in case.model.graph.node) or case.name in suite.TRAINING_DROPOUT:
            out.random.append(case.name)
            continue
        entries, why = _prepare(case, isa)
        if why is not None:
            out.rejected[case.name] = why
        out.entries.extend(entries)
    return out


def _as_computed(g: Any) -> Any:
    """The graph as dnnfusion.compile computes it: float16 cases in float32 (its default
    float16="f32"), int4 / uint4 / int2 / uint2 ones in int8 / uint8 (run_batch converts feeds
    and outputs at the boundary, as compile does)."""
    from dnnfusion import rewrite

    g = rewrite.float16_to_float32(g) if rewrite.uses_float16(g) else g
    return rewrite.narrow_to_wide(g) if rewrite.uses_narrow(g) else g


def _wide(a: np.ndarray) -> np.ndarray:
    """A feed as the computed graph takes it: float16 / bfloat16 as float32, the narrow
    integers as int8 / uint8."""
    if a.dtype == np.float16 or is_bfloat16(a.dtype):
        return a.astype(np.float32)
    if a.dtype.kind == "V" and a.dtype.name in ("int4", "int2"):
        return a.astype(np.int8)
    if a.dtype.kind == "V" and a.dtype.name in ("uint4", "uint2"):
        return a.astype(np.uint8)
    if a.dtype.name in SMALL_FLOAT_NUMPY:
        return a.astype(np.float32)
    return a


def _opsets(model: Any) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((o.domain or "", o.version) for o in model.opset_import))


def batches(entries: list[Entry], size: int = 80) -> list[list[Entry]]:
    """Entries grouped by opset import, in chunks of at most ``size``."""
    groups: dict[tuple, list[Entry]] = {}
    for e in entries:
        groups.setdefault(_opsets(e.model), []).append(e)
    out = []
    for key in sorted(groups):
        g = groups[key]
        out.extend(g[i:i + size] for i in range(0, len(g), size))
    return out


def merge(batch: list[Entry]) -> tuple[Any, dict[str, np.ndarray], list[tuple[Entry, int]]]:
    """One model holding every entry's graph under the prefix ``e<k>_``; its feeds; and for
    each merged output, the entry and the index of its expected output."""
    from onnx import compose, helper

    nodes, inputs, outputs, inits, vinfo = [], [], [], [], []
    feeds: dict[str, np.ndarray] = {}
    where: list[tuple[Entry, int]] = []
    for k, e in enumerate(batch):
        m = compose.add_prefix(e.model, f"e{k}_")
        g = m.graph
        init = {t.name for t in g.initializer}
        nodes += g.node
        inputs += [v for v in g.input if v.name not in init]
        outputs += g.output
        inits += g.initializer
        vinfo += g.value_info
        for name, a in e.feeds.items():
            feeds[f"e{k}_{name}"] = a
        where += [(e, j) for j in range(len(g.output))]
    graph = helper.make_graph(nodes, "merged_node_cases", inputs, outputs, inits, value_info=vinfo)
    ops = [helper.make_opsetid(d, v) for d, v in _opsets(batch[0].model)]
    ir = max(e.model.ir_version for e in batch)
    return helper.make_model(graph, opset_imports=ops, ir_version=ir), feeds, where


def run_batch(batch: list[Entry], isa: str, planner: str = "dnnfusion",
              run: bool = True) -> dict[str, str]:
    """Compiles and runs the merged batch; case -> what differs, for each failing case.
    ``run`` False: compile only (a dialect this CPU lacks); a compile failure raises."""
    import dnnfusion as df
    from dnnfusion import _core
    from dnnfusion import plan as _plan
    from dnnfusion.compiler import prelude_dir

    model, feeds, where = merge(batch)
    g = _as_computed(df.load(model))
    feeds = {k: _wide(v) for k, v in feeds.items()}
    inputs = [feeds[v.name] for v in g.inputs]
    # Builds unoptimised (-O0; -cl-opt-disable before the user's own OpenCL options):
    # semantics do not depend on it, build time does.
    if isa == "opencl":  # the OpenCL target on the default device
        gen = _core.generate_opencl(g.graph, _plan.plan(g, planner=planner, target="opencl"))
        user = os.environ.get("DNNF_OPENCL_BUILD_OPTIONS", "")
        with _env("DNNF_OPENCL_BUILD_OPTIONS", f"-cl-opt-disable {user}"):
            exe = _core.OpenclExecutable(gen)
        return _problems(where, exe.run(inputs))
    gen = _core.generate_cpu(g.graph, _plan.plan(g, planner=planner), isa)
    with _env("DNNF_OPT_LEVEL", "0"):  # run or compiled only: the source's semantics, at -O0
        if not run:
            _core.compile_only(gen, isa, prelude_dir())
            return {}
        exe = _core.CpuExecutable(g.graph, gen, isa, 2, prelude_dir())
    return _problems(where, exe.run(inputs))


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """The environment variable `name` set to `value` inside the block, restored after."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _problems(where: list[tuple[Entry, int]], got: list) -> dict[str, str]:
    problems: dict[str, str] = {}
    for (e, j), x in zip(where, got):
        x = np.asarray(x)
        want = e.expected[j].dtype
        if (want == np.float16 or is_bfloat16(want)) and x.dtype == np.float32:  # computed in float32
            x = x.astype(want)
        elif want.kind == "V" and want.name in ("int4", "uint4", "int2", "uint2") and x.dtype.kind in "iu":
            x = x.astype(want)  # computed in int8 / uint8
        elif want.name in SMALL_FLOAT_NUMPY and x.dtype == np.float32:
            x = x.astype(want)  # computed in float32
        p = suite.compare(x, e.expected[j], f"output {j}", e.atol)
        if p and e.case not in problems:
            problems[e.case] = f"[{e.op}] {p}"
    return problems
