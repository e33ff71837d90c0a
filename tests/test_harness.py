"""The cross-framework benchmark harness (benchmarks/), on a tiny built-in CNN.

One harness run (eager, ONNX Runtime, Inductor, a framework that raises, dnnfusion and its
AVX2 column) is
shared by the tests; it takes ~30-60 s on 2 busy cores, most of it Inductor's C++ compile.
No timing assertions: only that the machinery produces well-formed results.
"""
from __future__ import annotations

import collections
import csv
import itertools
import json
import math
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from harness import cell, counting, models, report, runner  # noqa: E402

FWS = ["eager", "ort", "inductor", "selftest_raise", "dnnfusion", "dnnfusion_avx2"]


def _kernel_cache() -> str:
    """The test session's kernel cache, shared by test_batch_run's dnnfusion cell (--kernel-cache):
    a fresh one per cell (the harness's default, for cold compile times) rebuilds the prelude
    units in every cell, about 25 s each on 2 busy cores."""
    from dnnfusion import _core
    return _core.kernel_cache_dir()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    res = runner.main(["--models", "tiny_cnn", "--frameworks", ",".join(FWS), "--threads", "1",
                       "--repeat", "3", "--warmup", "1", "--budget", "5", "--timeout", "300",
                       "--out", str(out), "--quiet"])  # cold caches: the cold-compile checks below
    return res, out


def _cells(res, fw):
    return [c for c in res["cells"] if c["framework"] == fw]


def test_files_written(run):
    res, out = run
    paths = res["paths"]
    for key in ("json", "cells_csv", "counts_csv", "tables"):
        assert pathlib.Path(paths[key]).exists(), key
        assert pathlib.Path(paths[key]).parent == out
    data = json.loads(pathlib.Path(paths["json"]).read_text())
    assert data["models"] == ["tiny_cnn"]
    assert len(data["cells"]) == len(FWS)
    meta = data["meta"]
    assert meta["cpu"]["logical_cpus"] >= 1
    assert "torch" in meta["versions"] and "onnxruntime" in meta["versions"]
    assert "finished" in meta
    with open(paths["cells_csv"]) as f:
        rows = list(csv.DictReader(f))
    assert [r["framework"] for r in rows] == FWS
    assert rows[0]["model"] == "tiny_cnn"
    with open(paths["counts_csv"]) as f:
        counts = list(csv.DictReader(f))
    assert counts[0]["model"] == "tiny_cnn" and int(counts[0]["onnx_ops"]) > 0
    text = pathlib.Path(paths["tables"]).read_text()
    assert "Latency, 1 thread" in text and "tiny_cnn" in text


def test_operator_counts_positive(run):
    res, _ = run
    ref = res["references"]["tiny_cnn"]
    assert ref["status"] == "ok", ref.get("reason")
    for key in ("onnx_ops", "aten_ops", "aten_ops_all", "onnx_nodes_total"):
        assert isinstance(ref[key], int) and ref[key] > 0, key
    # the tiny CNN: 3 convs, BN, relu, relu6, sigmoid, mul, add, maxpool, mean, linear, softmax
    assert ref["aten_hist"]["convolution"] == 3
    assert ref["onnx_hist"]["Conv"] == 3


@pytest.mark.parametrize("fw", ["eager", "ort", "inductor"])
def test_working_frameworks(run, fw):
    res, _ = run
    (c,) = _cells(res, fw)
    assert c["status"] == "ok", c.get("reason")
    assert isinstance(c["kernels"], int) and c["kernels"] > 0
    assert c["correct"] is True
    assert c["max_rel_err"] is not None and math.isfinite(c["max_rel_err"])
    assert c["max_rel_err"] <= 1e-3
    lat = c["latency_ms"]
    assert lat["n"] >= 3 and 0 < lat["min"] <= lat["median"] <= lat["max"]
    assert c["peak_rss_mb"] > 0
    assert c["compile_s"] is not None and c["compile_s"] >= 0


def test_fusion_reduces_kernels(run):
    res, _ = run
    k = {fw: _cells(res, fw)[0]["kernels"] for fw in ("eager", "ort", "inductor")}
    assert k["ort"] < k["eager"] and k["inductor"] < k["eager"]


def test_failing_framework_gives_reason(run):
    res, _ = run
    (c,) = _cells(res, "selftest_raise")
    assert c["status"] == "error"
    assert "deliberate failure" in c["reason"]
    # the run went on after it
    assert _cells(res, "dnnfusion")


def _check_dnnfusion_cell(c, isa):
    assert c["status"] == "ok", c.get("reason")
    assert c["correct"] is True and c["max_rel_err"] <= 1e-3
    stats = c["details"]["stats"]  # the model timed: the second compile's
    assert stats["isa"] == isa
    # cold: the cell's own empty cache, so the C++ compiler ran; then warm from that cache
    assert c["details"]["compile_cold_cache_hit"] is False
    assert c["compile_s"] > 0
    assert 0 < c["details"]["compile_warm_s"] < c["compile_s"]
    assert c["details"]["compile_warm_cache_hit"] == bool(stats["cache_hit"])
    if c["details"]["compile_warm_profile_s"] == 0:
        # nothing left to measure (profile="auto" settled every yellow pair in the cold
        # compile): the same plan, so the same code, found in the cache
        assert c["details"]["compile_warm_cache_hit"] is True


def test_dnnfusion_column(run):
    from dnnfusion import _core

    res, out = run
    (c,) = _cells(res, "dnnfusion")
    _check_dnnfusion_cell(c, _core.cpu_features()["isa"])
    tables = pathlib.Path(res["paths"]["tables"]).read_text()
    assert "Warm compile s" in tables


def test_dnnfusion_avx2_column(run):
    from dnnfusion import _core

    res, _ = run
    (c,) = _cells(res, "dnnfusion_avx2")
    best = _core.cpu_features()["isa"]
    if best == "avx512":
        _check_dnnfusion_cell(c, "avx2")
    else:
        assert c["status"] == "n/a" and f"best instruction set is {best}" in c["reason"]


def test_timeout_and_crash_are_cells(tmp_path):
    """A hanging or crashing cell process becomes a cell with a reason, not an exception."""
    spec = {"kind": "framework", "model": "tiny_cnn", "framework": "eager", "threads": 1,
            "celldir": str(tmp_path / "c")}
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(60)\n")
    runner_cell = runner.CELL
    try:
        runner.CELL = hang
        c = runner.run_cell(spec, sys.executable, timeout=1)
        assert c["status"] == "timeout" and "timeout" in c["reason"]
        crash = tmp_path / "crash.py"
        crash.write_text("import os, sys\nsys.stderr.write('boom\\n')\nos._exit(3)\n")
        runner.CELL = crash
        c = runner.run_cell(spec, sys.executable, timeout=30)
        assert c["status"] == "error" and "boom" in c["reason"] and "3" in c["reason"]
    finally:
        runner.CELL = runner_cell


def test_compare():
    import numpy as np

    ref = [np.array([1.0, -2.0, 4.0], np.float32)]
    ok = cell.compare([ref[0] + 1e-6], ref, rtol=1e-3, atol=0)
    assert ok["correct"] and ok["max_abs_err"] == pytest.approx(1e-6, rel=0.1)
    bad = cell.compare([ref[0] + 0.1], ref, rtol=1e-3, atol=0)
    assert not bad["correct"] and bad["max_rel_err"] == pytest.approx(0.1 / 4, rel=1e-3)
    assert not cell.compare([np.array([np.nan, 0, 0])], ref, 1e-3, 0)["correct"]
    assert not cell.compare(ref + ref, ref, 1e-3, 0)["correct"]


def test_compare_accepts_near_tied_detections_in_another_order():
    import numpy as np

    boxes = np.array([[0, 0, 10, 10], [5, 5, 20, 20], [1, 2, 3, 4], [7, 7, 9, 9]], np.float32)
    scores = np.array([0.9, 0.8000004, 0.8, 0.5], np.float32)
    labels = np.array([1, 2, 3, 4], np.int64)
    names = ["det_boxes", "det_scores", "det_labels"]
    swap = [0, 2, 1, 3]
    got = [boxes[swap], scores[swap], labels[swap]]
    plain = cell.compare(got, [boxes, scores, labels], 1e-3, 0)
    assert not plain["correct"]  # without names, no reconciliation
    res = cell.compare(got, [boxes, scores, labels], 1e-3, 0, names)
    assert res["correct"] and "rows [1, 2]" in res["reordered"] and res["max_rel_err"] == 0
    # rows whose scores are far apart must not be swapped
    far = scores.copy()
    far[1] = 0.85
    got = [boxes[swap], far[swap], labels[swap]]
    assert not cell.compare(got, [boxes, far, labels], 1e-3, 0, names)["correct"]
    # a reorder that also changes a value is still wrong
    bad = boxes[swap].copy()
    bad[1, 0] += 1
    assert not cell.compare([bad, scores[swap], labels[swap]], [boxes, scores, labels], 1e-3, 0,
                            names)["correct"]


def test_onnx_count_excludes_shape_plumbing():
    import onnx
    from onnx import TensorProto, helper

    # y = Relu(Reshape(x, Concat(Gather(Shape(x), 0), [-1]))) + Transpose(W)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Constant", [], ["m1"], value=helper.make_tensor("m1", TensorProto.INT64, [1], [-1])),
        helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
        helper.make_node("Concat", ["b1", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Relu", ["r"], ["h"]),
        helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]),  # constant subgraph
        helper.make_node("Identity", ["h"], ["h2"]),
        helper.make_node("Add", ["h2", "Wt"], ["y"]),
    ]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])],
        initializer=[helper.make_tensor("i0", TensorProto.INT64, [], [0]),
                     helper.make_tensor("ax", TensorProto.INT64, [1], [0]),
                     helper.make_tensor("W", TensorProto.FLOAT, [12, 2], [0.0] * 24)])
    res = counting.onnx_op_count(helper.make_model(g))
    assert res["onnx_hist"] == {"Add": 1, "Relu": 1, "Reshape": 1}
    assert res["onnx_ops"] == 3 and res["onnx_nodes_total"] == 10


def test_inductor_code_parser():
    code = '''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], r"""...""")
class Runner:
    def call(self, args):
        arg0_1, = args
        buf0 = empty_strided_cpu((1, 8), (8, 1), torch.float32)
        cpp_fused_relu_0(arg0_1, buf0)
        buf1 = extern_kernels.convolution(buf0, w, None, stride=(1, 1))
        buf2 = torch.ops.mkldnn._convolution_pointwise.default(buf1, w2, None)
        buf3 = reinterpret_tensor(buf2, (8, ), (1, ), 0)
        del buf0
        return (buf3, )
def get_args():
    cpp_fused_relu_0(x)
'''
    res = counting.inductor_kernel_count([code])
    assert res["kernels"] == 3 and res["generated"] == 1 and res["extern"] == 2


def test_model_list_and_cli_validation():
    assert "tiny_cnn" in models.known_models()
    with pytest.raises(SystemExit):
        runner.main(["--models", "no_such_model", "--frameworks", "eager"])
    with pytest.raises(SystemExit):
        runner.main(["--models", "tiny_cnn", "--frameworks", "no_such_framework"])


def test_report_render_without_results():
    res = {"models": ["m"], "frameworks": ["eager"], "threads": [1], "references": {},
           "cells": [{"model": "m", "framework": "eager", "threads": 1, "status": "timeout",
                      "reason": "timeout after 1 s", "stage": "compile"}],
           "args": {"rtol": 1e-3}}
    text = report.render(res)
    assert "TIMEOUT" in text and "timeout after 1 s" in text


def test_zoo_loads_when_dnnfusion_core_is_broken():
    """The zoo is pure PyTorch; a broken C++ core (mid-rebuild) must not stop the harness."""
    import subprocess

    code = ("import sys; sys.modules['dnnfusion._core'] = None\n"
            "from harness import models\n"
            "z = models.zoo(); assert 'resnet50' in z.list()\n"
            "assert sys.modules['dnnfusion']._harness_stub\n"
            "print(len(models.zoo_names()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=str(REPO / "benchmarks"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.strip().splitlines()[-1]) == 18


def test_merge_runs(run, tmp_path):
    """Runs made separately (e.g. untuned TVM alone) merge into one set of tables: a later
    file's cell replaces an earlier one with the same (model, framework, threads)."""
    import copy

    import merge_results

    res, _ = run
    other = copy.deepcopy(res)
    for c in other["cells"]:
        c["kernels"] = 12345  # recognisable
    other["frameworks"] = ["ort"]
    other["cells"] = [c for c in other["cells"] if c["framework"] == "ort"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(res))
    b.write_text(json.dumps(other))
    merged = merge_results.main([str(a), str(b), "--out", str(tmp_path / "out"), "--quiet"])
    assert merged["frameworks"] == res["frameworks"]
    ort = [c for c in merged["cells"] if c["framework"] == "ort"]
    assert ort and all(c["kernels"] == 12345 for c in ort)
    assert len(merged["cells"]) == len(res["cells"])
    tables = next((tmp_path / "out").glob("*-merged-tables.txt")).read_text()
    assert "Merged from:" in tables and "12345" in tables and "tiny_cnn" in tables
    # the first run's measured roofline is kept (its table is in the merged tables)
    assert merged["meta"]["roofline"]["per_threads"]["1"] == res["meta"]["roofline"]["per_threads"]["1"]
    assert "Roofline, 1 thread" in tables
    # a merged file merged again lists the runs behind it, not itself (no start time)
    c = tmp_path / "c.json"
    c.write_text(json.dumps(other))
    again = merge_results.main([next((tmp_path / "out").glob("*-merged.json")).as_posix(), str(c),
                                "--out", str(tmp_path / "out2"), "--quiet"])
    runs = again["meta"]["merged_from"]
    assert [pathlib.Path(m["file"]).name for m in runs] == ["a.json", "b.json", "c.json"], runs
    assert all(m["started"] == res["meta"]["started"] for m in runs), runs


def test_rounds_keep_each_cells_least_disturbed_run():
    lat = lambda m: {"median": m, "p25": m, "p75": m}  # noqa: E731
    cells = [{"status": "ok", "latency_ms": lat(5.0), "round": 1},
             {"status": "ok", "latency_ms": lat(3.0), "round": 2},
             {"status": "error", "round": 3}]
    best = runner._best_round(cells)
    assert best["round"] == 2 and best["round_medians_ms"] == [5.0, 3.0, None]
    # No ok round: the first round's failure is the cell; one round: no round list.
    assert runner._best_round([{"status": "error", "round": 1}])["round"] == 1
    assert "round_medians_ms" not in runner._best_round(cells[:1])


def test_roofline_measured_and_tabled(run):
    """The run measures this machine's roof (FMA peak, triad bandwidth) and each model's work,
    and the table's figures follow from them and the cells' medians."""
    res, _ = run
    roof = res["meta"]["roofline"]["per_threads"]["1"]
    assert 1 < roof["peak_gflops"] < 1e4 and 0.5 < roof["bandwidth_gbs"] < 1e4
    ref = res["references"]["tiny_cnn"]
    work = ref["work"]
    io = 4 * (sum(math.prod(s) for s in ref["input_shapes"]) + sum(math.prod(s) for s in ref["output_shapes"]))
    assert work["io_bytes"] == io and work["weight_bytes"] > 0
    assert work["compulsory_bytes"] == work["io_bytes"] + work["weight_bytes"] and work["flops"] > 0
    from harness import roofline

    b = roofline.bound_ms(work, roof)
    assert b == max(work["flops"] / (roof["peak_gflops"] * 1e6), work["compulsory_bytes"] / (roof["bandwidth_gbs"] * 1e6))
    (c,) = _cells(res, "dnnfusion")
    text = report.roofline_table(res, 1)
    ms = c["latency_ms"]["median"]
    assert f"{work['flops'] / (ms * 1e6):.0f} ({100 * b / ms:.0f}%)" in text
    assert "Roofline, 1 thread" in pathlib.Path(res["paths"]["tables"]).read_text()
    assert report.roofline_table({"meta": {}, "models": [], "frameworks": [], "cells": []}, 1) == ""


def test_roofline_bound_is_the_slower_of_compute_and_memory():
    from harness import roofline

    roof = {"peak_gflops": 100.0, "bandwidth_gbs": 10.0}
    assert roofline.bound_ms({"flops": 2e9, "compulsory_bytes": 1e6}, roof) == pytest.approx(20.0)  # compute
    assert roofline.bound_ms({"flops": 1e6, "compulsory_bytes": 1e9}, roof) == pytest.approx(100.0)  # memory
    assert roofline.bound_ms({"flops": 1e6, "compulsory_bytes": 1e9}, {"peak_gflops": 100.0}) is None


def test_batched_inputs():
    import torch

    x = torch.randn(1, 3, 4, 4)
    ids = torch.tensor([[5, 6, 7]])
    bx, bids = models.batched((x, ids), 3)
    assert bx.shape == (3, 3, 4, 4) and bids.shape == (3, 3)
    assert torch.equal(bx[0], x[0]) and not torch.equal(bx[1], bx[2])  # new samples, not copies
    assert torch.equal(bids, ids.repeat(3, 1))
    assert torch.equal(models.batched((x,), 3)[0], bx)  # seeded: every cell sees the same inputs
    with pytest.raises(ValueError, match="no batch axis"):
        models.batched((torch.randn(2, 3),), 4)


def test_batch_run(tmp_path):
    """--batch: every framework runs the batched inputs (the ONNX export has that batch) and
    matches eager on them; the tables say which batch."""
    res = runner.main(["--models", "tiny_cnn", "--frameworks", "eager,ort,dnnfusion", "--threads", "1",
                       "--repeat", "2", "--warmup", "1", "--budget", "2", "--timeout", "300", "--batch", "3",
                       "--kernel-cache", _kernel_cache(), "--no-roofline", "--out", str(tmp_path), "--quiet"])
    ref = res["references"]["tiny_cnn"]
    assert ref["status"] == "ok" and ref["input_shapes"] == [[3, 3, 16, 16]], ref
    assert ref["output_shapes"] == [[3, 10]] and ref["onnx_path"].endswith("-b3.onnx")
    for c in res["cells"]:
        assert c["status"] == "ok" and c["correct"], c
    assert pathlib.Path(res["paths"]["json"]).name.endswith("-b3.json")
    text = pathlib.Path(res["paths"]["tables"]).read_text()
    assert "Latency, 1 thread, batch 3" in text
    # the compile times came from the shared (warm) kernel cache, and the tables say so
    assert res["args"]["kernel_cache"] and "shared kernel cache" in text


def test_ratio_table_geomean_skips_failed_cells():
    """dnnfusion over each framework per model, and the geomean over models where both cells
    are correct: a wrong or failed cell is a '-', not a number in the mean."""
    def cell(m, fw, ms, status="ok"):
        return {"model": m, "framework": fw, "threads": 2, "status": status,
                "latency_ms": {"median": ms} if ms is not None else None}

    res = {"models": ["a", "b", "c"], "frameworks": ["ort", "dnnfusion"], "threads": [2],
           "cells": [cell("a", "ort", 10.0), cell("a", "dnnfusion", 5.0),
                     cell("b", "ort", 4.0), cell("b", "dnnfusion", 8.0),
                     cell("c", "ort", 1.0), cell("c", "dnnfusion", 100.0, status="wrong")]}
    text = report.ratio_table(res, 2)
    lines = {ln.split()[0]: ln.split()[1:] for ln in text.strip().splitlines()[2:] if ln.strip()}
    assert lines["a"] == ["0.50"] and lines["b"] == ["2.00"] and lines["c"] == ["-"]
    assert lines["geomean"] == ["(n)", "1.00", "(2)"]
    assert report.ratio_table({"models": ["a"], "frameworks": ["ort"], "threads": [2], "cells": []}, 2) == ""


def test_side_by_side_kinds():
    import side_by_side as sbs

    assert sbs.dnnf_kind(["gemm 12x[197x197x64] +epilogue(2 ops)"]) == "gemm"
    assert sbs.dnnf_kind(["gemm 1x[128x3072x768] packed-B +prologue(0 ops) +epilogue(5 ops)", "x"]) == "gemm packed-B"
    assert sbs.dnnf_kind(["NhwcConv k3 s2 g96 +epilogue(1 ops)"]) == "NhwcConv k3 s2 grouped"
    assert sbs.dnnf_kind(["NhwcConv k1 s1 g1"]) == "NhwcConv k1 s1 g1"
    assert sbs.dnnf_kind(["vector loop f32[151296]"]) == "vector loop"
    assert sbs.dnnf_kind([]) == "(output copies)"
    w = lambda *s: {"op_name": "Conv", "input_type_shape": [{"float": [1, 96, 56, 56]}, {"float": list(s)}]}  # noqa: E731
    assert sbs.ort_kind(w(96, 1, 3, 3)) == "Conv depthwise"
    assert sbs.ort_kind(w(24, 96, 1, 1)) == "Conv 1x1"
    assert sbs.ort_kind(w(64, 3, 7, 7)) == "Conv 7x7"
    assert sbs.ort_kind({"op_name": "Gemm"}) == "Gemm"


def test_side_by_side_rounds_vary_who_follows_whom():
    """Within its rounds each framework runs right after each other one equally often (a
    runtime's lingering threads or cache contents then cost every peer alike), and every
    round times every framework."""
    import side_by_side as sbs

    order = []
    sides = [sbs.Side(n, (lambda n=n: order.append(n)), None) for n in "abc"]
    rounds = sbs.time_rounds(sides, budget=0.0, min_rounds=6, block=2)
    assert {k: len(v) for k, v in rounds.items()} == {"a": 6, "b": 6, "c": 6}
    turns = order[::3]  # each framework's turn: 1 untimed + 2 timed calls
    assert all(order[3 * i:3 * i + 3] == [t] * 3 for i, t in enumerate(turns)), order
    per_round = [turns[3 * r:3 * r + 3] for r in range(6)]
    assert sorted(map(tuple, per_round)) == sorted(itertools.permutations("abc")), per_round
    follows = collections.Counter(p for r in per_round for p in zip(r, r[1:]))
    assert len(follows) == 6 and set(follows.values()) == {2}, follows


def test_side_by_side_run(tmp_path):
    """dnnfusion and ONNX Runtime in one process (OpenVINO is a benchmark extra, not a test
    dependency): interleaved rounds, per-round ratios and both profiles, grouped by kind; at
    batch 2, as `--batch` exports and feeds it."""
    import side_by_side as sbs

    out = tmp_path / "sbs.json"
    assert sbs.main(["tiny_cnn", "--threads", "1", "--frameworks", "dnnfusion,ort", "--budget", "0.5",
                     "--min-rounds", "3", "--profile-rounds", "2", "--batch", "2", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["isa"] and res["cpu"]["logical_cpus"] >= 1
    (r,) = res["results"]
    assert r["model"] == "tiny_cnn" and r["threads"] == 1 and r["batch"] == 2 and r["rounds"] >= 3
    assert sbs.report(r, 3).startswith("## tiny_cnn, batch 2, 1 thread(s)")
    for fw in ("dnnfusion", "ort"):
        f = r["frameworks"][fw]
        assert 0 < f["min_round_ms"] <= f["p25"] <= f["median_ms"] <= f["p75"]
        assert f["profiled_kernels"] >= 2 and f["kernel_sum_ms"] > 0
        assert sum(g[1] for g in f["groups"]) == f["profiled_kernels"]
        assert math.isclose(sum(g[2] for g in f["groups"]), f["kernel_sum_ms"], rel_tol=1e-9)
        assert any("Conv" in g[0] for g in f["groups"]), f["groups"]
    q = r["ratios"]["ort"]
    assert 0 < q["p25"] <= q["median"] <= q["p75"]
    assert math.isclose(res["geomean"]["1:ort"], q["median"])
    with pytest.raises(SystemExit):
        sbs.main(["tiny_cnn", "--frameworks", "dnnfusion,tvm"])


def test_side_by_side_isolated(tmp_path):
    """--isolate: each framework in a worker process of its own, the rounds still interleaved
    by the parent; the workers' timings and profiles come back, and a worker that cannot build
    its framework is reported by name, not hung on."""
    import side_by_side as sbs

    out = tmp_path / "sbs.json"
    assert sbs.main(["tiny_cnn", "--threads", "1", "--frameworks", "dnnfusion,ort", "--budget", "0.3",
                     "--min-rounds", "3", "--profile-rounds", "2", "--isolate", "--json", str(out)]) == 0
    (r,) = json.loads(out.read_text())["results"]
    assert r["isolated"] is True and r["rounds"] >= 3
    assert sbs.report(r, 3).splitlines()[0].endswith("a process per framework")
    for fw in ("dnnfusion", "ort"):
        f = r["frameworks"][fw]
        assert 0 < f["min_round_ms"] <= f["median_ms"] and f["profiled_kernels"] >= 2, f
    assert r["frameworks"]["dnnfusion"]["kernels"], r["frameworks"]["dnnfusion"]
    with pytest.raises(RuntimeError, match="nope's worker: ValueError: unknown framework 'nope'"):
        sbs.RemoteSide("nope", str(tmp_path / "x.onnx"), [], [], 1).ready()
