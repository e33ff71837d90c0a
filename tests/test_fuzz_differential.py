"""Differential fuzzing against ONNX Runtime (issue 17 part 5): random ONNX graphs from
dnnfusion/testing/onnx_fuzz.py (broadcasts, diamonds, shared inputs, layout operators
between anchors, reductions and row ops on any axis, GEMM/Conv/pools, integer arithmetic,
outputs that are also intermediates) are compiled under every planner, and through
`compile` with the rewrites and the layout pass, and must match ONNX Runtime.

CI runs a fixed set of examples (hypothesis derandomized, so a run is reproducible and a
failure is a bug to fix, not luck). A longer random search:

    DNNF_FUZZ_EXAMPLES=500 python -m pytest tests/test_fuzz_differential.py -n 2

A failure prints the graph in ONNX's text form."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dnnfusion as df

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from dnnfusion.testing import onnx_fuzz  # noqa: E402

from codegen_runner import run  # noqa: E402

LONG = "DNNF_FUZZ_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("DNNF_FUZZ_EXAMPLES", "15"))
MODES = ["dnnfusion", "none", "patterns", "tvm", "dp", "dnnfusion-horizontal", "compile"]


def _ort(m: onnx_fuzz.Model) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, m.feeds)


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_graphs_match_onnxruntime(mode, data, monkeypatch):
    m = onnx_fuzz.build(data.draw)
    want = _ort(m)
    if mode == "compile":  # rewrites, layout selection and the planner, as users compile
        monkeypatch.setenv("DNNF_OPT_LEVEL", "1")
        got = df.compile(m.proto, threads=2).run(**m.feeds)
    else:
        g = df.load(m.proto)
        planner, _, horizontal = mode.partition("-")
        got, _ = run(g, m.feeds, planner=planner, horizontal=bool(horizontal))
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        ctx = f"output {i} of the graph:\n{m.describe()}"
        assert a.shape == b.shape and a.dtype == b.dtype, f"{a.shape} {a.dtype} vs {b.shape} {b.dtype}; {ctx}"
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=ctx)
