"""dnnfusion.viz's charts over harness results: the numbers they plot are the results' numbers,
and the SVG they render names the models, frameworks and the geomean."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from dnnfusion.compiler import KernelProfile
from dnnfusion import viz

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
FULL = RESULTS / "20261122-132229-merged.json"  # all six frameworks, 1 and 2 threads


def _cell(model, fw, t, ms, kernels, status="ok"):
    return {"model": model, "framework": fw, "threads": t, "status": status, "kernels": kernels,
            "latency_ms": {"median": ms} if ms else None}


def _tiny_result():
    return {"meta": {"started": "2026-11-22T10:00:00", "cpu": {"model_name": "Test CPU", "logical_cpus": 2}},
            "models": ["a", "b"], "frameworks": ["ort", "dnnfusion"], "threads": [2],
            "references": {"a": {"onnx_ops": 10}, "b": {"onnx_ops": 40}},
            "cells": [_cell("a", "ort", 2, 4.0, 8), _cell("a", "dnnfusion", 2, 2.0, 3),
                      _cell("b", "ort", 2, 9.0, 30), _cell("b", "dnnfusion", 2, 1.0, 12),
                      ]}


def _texts(fig) -> str:
    root = ET.fromstring(fig.svg)  # fails on malformed SVG
    return " ".join(t for t in root.itertext())


def test_counts_and_speedups_are_the_results_numbers():
    r = _tiny_result()
    assert viz.kernel_counts(r) == {"a": {"onnx ops": 10, "ort": 8, "dnnfusion": 3},
                                    "b": {"onnx ops": 40, "ort": 30, "dnnfusion": 12}}
    assert viz.speedups(r, 2) == {"ort": {"a": 2.0, "b": 9.0}}
    assert viz.geomean([2.0, 8.0]) == pytest.approx(4.0)
    r["cells"][3]["status"] = "wrong"  # a wrong answer has no speed-up
    assert viz.speedups(r, 2) == {"ort": {"a": 2.0}}
    assert "Test CPU" in viz.result_origin(r) and "2026-11-22" in viz.result_origin(r)


def test_speedups_leave_out_other_dnnfusion_builds():
    """The harness's dnnfusion_avx2 column is dnnfusion's own AVX2 code, not a peer: no
    "speed-up over dnnfusion_avx2" bar; with eager as the base it is compared like the rest."""
    r = _tiny_result()
    r["frameworks"] += ["dnnfusion_avx2", "eager"]
    r["cells"] += [_cell("a", "dnnfusion_avx2", 2, 3.0, 3), _cell("a", "eager", 2, 12.0, 20)]
    assert viz.speedups(r, 2) == {"ort": {"a": 2.0, "b": 9.0}, "eager": {"a": 6.0}}
    assert viz.speedups(r, 2, over="eager") == {"ort": {"a": 1 / 3}, "dnnfusion": {"a": 1 / 6},
                                                 "dnnfusion_avx2": {"a": 0.25}}


def test_layer_count_chart_names_every_model_and_framework():
    r = viz.load_results(FULL)
    text = _texts(viz.plot_layer_counts(viz.kernel_counts(r), title=viz.result_origin(r)))
    for name in r["models"] + r["frameworks"] + ["onnx ops", "Intel(R) Xeon(R) Processor"]:
        assert name in text
    counts = viz.kernel_counts(r)
    assert counts["vgg16"]["dnnfusion"] is not None and counts["vgg16"]["onnx ops"] > counts["vgg16"]["dnnfusion"]


def test_speedup_chart_marks_the_geomean():
    r = viz.load_results(FULL)
    sp = viz.speedups(r, 2)
    text = _texts(viz.plot_speedups(r, 2))
    for fw, per_model in sp.items():
        assert f"vs {fw} (geomean {viz.geomean(list(per_model.values())):.2f}x" in text
    assert "log scale" in text
    with pytest.raises(ValueError):
        viz.plot_speedups(_tiny_result(), threads=1)  # nothing measured at 1 thread


def test_kernel_profile_chart_lists_the_slowest_kernels():
    prof = KernelProfile([{"function": "k0", "block": 0, "stages": ["Conv", "Relu"], "ms": 0.5},
                          {"function": "k1", "block": 1, "stages": ["MatMul"], "ms": 2.0},
                          {"function": "k2", "block": 2, "stages": ["Add"], "ms": 0.1}], 5, 2)
    text = _texts(viz.plot_kernel_profile(prof, n=2))
    assert "k1: MatMul" in text and "k0: Conv; Relu" in text and "k2" not in text


def test_roofline_says_when_the_results_have_no_roof():
    r = viz.load_results(FULL)
    assert viz.roofline_inputs(r) is None  # the committed results carry no peak/bandwidth
    assert "No roofline" in _texts(viz.plot_roofline([], None, None))
    r = _tiny_result()  # a run that measured its roof (harness/roofline.py) and the models' work
    r["meta"]["roofline"] = {"per_threads": {"1": {"peak_gflops": 100.0, "bandwidth_gbs": 20.0},
                                             "2": {"peak_gflops": 200.0, "bandwidth_gbs": 30.0}}}
    assert viz.roofline_inputs(r) == (200.0, 30.0) and viz.roofline_inputs(r, 1) == (100.0, 20.0)
    r["references"]["a"]["work"] = {"flops": 4e9, "compulsory_bytes": 1e8}
    assert viz.roofline_points(r) == [{"model": "a", "flops": 4e9, "bytes": 1e8, "ms": 2.0,
                                       "framework": "dnnfusion"}]  # b: no work
    assert viz.roofline_points(r, "ort") == [{"model": "a", "flops": 4e9, "bytes": 1e8, "ms": 4.0,
                                              "framework": "ort"}]
    assert viz.roofline_points(r, threads=1) == []
    pts = [{"model": "vgg16", "flops": 3.1e10, "bytes": 6e8, "ms": 300.0}]
    text = _texts(viz.plot_roofline(pts, peak_gflops=200.0, bandwidth_gbs=20.0))
    assert "vgg16" in text and "200 GFLOP/s" in text
    text = _texts(viz.plot_roofline(viz.roofline_points(r) + viz.roofline_points(r, "ort"), *viz.roofline_inputs(r)))
    assert text.count(" a ") + text.split().count("a") >= 1 and "ort" in text and "dnnfusion" in text


def test_latest_results_picks_the_newest_full_run_with_the_framework(tmp_path):
    r = _tiny_result()
    r["args"] = {"reduced": False}
    (tmp_path / "20260101-000000.json").write_text(json.dumps(r))
    r["args"] = {"reduced": True}  # newer, but reduced models: not a full result
    (tmp_path / "20260102-000000.json").write_text(json.dumps(r))
    r["args"] = {"reduced": False, "batch": 8}  # newer, but batch 8: not the batch-1 table
    (tmp_path / "20260103-000000-b8.json").write_text(json.dumps(r))
    assert viz.latest_results(tmp_path).name == "20260101-000000.json"
    with pytest.raises(FileNotFoundError):
        viz.latest_results(tmp_path, "tvm")


def test_zoo_counts_match_a_compiled_model():
    import dnnfusion as df
    from dnnfusion.builtin import tiny_convnet

    g = tiny_convnet()
    rewritten, _ = df.rewrite.rewrite(g)
    counts = viz.planner_counts(rewritten, ["dnnfusion", "none"])
    m = df.compile(g)
    for key in ("plan_blocks", "kernels", "passes", "intermediate_bytes_written"):
        assert counts["dnnfusion"][key] == m.stats[key]
    assert counts["none"]["plan_blocks"] > counts["dnnfusion"]["plan_blocks"]
