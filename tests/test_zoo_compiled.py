"""Every zoo model (reduced) compiled by dnnfusion.compile matches PyTorch eager and ONNX
Runtime (relative error <= 1e-3, fp32) with the DNNFusion planner; a CNN, a detection model
and a transformer also with every baseline planner. The full-size run with all planners is
`python -m dnnfusion.zoo.compiled_check --full`."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
from dnnfusion import plan as _plan  # noqa: E402
from dnnfusion.zoo import compiled_check, registry  # noqa: E402

BASELINES = [p for p in _plan.PLANNERS if p != "dnnfusion"]


def _check(name, planners, monkeypatch):
    monkeypatch.setenv("DNNF_OPT_LEVEL", "1")  # compile time; semantics do not depend on it
    rows = compiled_check.check(name, planners, reduced=True, threads=2)
    assert [r["planner"] for r in rows] == planners
    for r in rows:
        assert "error" not in r, f"{name}/{r['planner']}: {r['error']}"
        assert r["rel_torch"] <= compiled_check.REL_TOL, (name, r["planner"], r["rel_torch"])
        assert r["rel_ort"] <= compiled_check.REL_TOL, (name, r["planner"], r["rel_ort"])
        assert r["ok"]
    return rows


@pytest.mark.parametrize("name", registry.list())
def test_zoo_model_compiles_and_matches(name, monkeypatch):
    (row,) = _check(name, ["dnnfusion"], monkeypatch)
    assert row["kernels"] < row["ops"], "fusion should leave fewer kernels than operators"


@pytest.mark.parametrize("name", ["mobilenetv2", "mask_rcnn", "tinybert"])
def test_zoo_model_with_every_baseline_planner(name, monkeypatch):
    rows = _check(name, BASELINES, monkeypatch)
    kernels = {r["planner"]: r["kernels"] for r in rows}
    assert kernels["none"] >= max(kernels.values())
