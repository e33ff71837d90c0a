"""`dnnfusion profile`: yellow pairs are cut out of a model, compiled fused and apart, timed,
and the measurements settle the planner's decision for their key."""

from __future__ import annotations

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import profiling

# A Transpose feeding a MatMul (Shuffle + Many-to-Many: a yellow cell), then green and
# yellow pairs around a Relu, a Reshape and a Gemm.
TEXT = """graph g(%x: f32[8,32,24], %w: f32[32,16]) {
  %t: f32[8,24,32] = Transpose(%x) {perm=[0,2,1]} @"tr"
  %m: f32[8,24,16] = MatMul(%t, %w) @"mm"
  %r: f32[8,24,16] = Relu(%m) @"relu"
  %shape: i64[2] = const [8,384]
  %f: f32[8,384] = Reshape(%r, %shape) @"flat"
  %g: f32[8,10] = Gemm(%f, %gw) {transB=1} @"gemm"
  return %g
}"""


def _model():
    rng = np.random.default_rng(3)
    gw = rng.standard_normal((10, 384)).astype(np.float32)
    text = TEXT.replace("graph g(%x: f32[8,32,24], %w: f32[32,16]) {",
                        "graph g(%x: f32[8,32,24], %w: f32[32,16]) {\n  %gw: f32[10,384] = const 0x"
                        + gw.tobytes().hex())
    return df.parse(text)


def test_yellow_pairs_carry_their_profile_key():
    pairs = profiling.yellow_pairs(_model())
    got = {(p.name, c.name): k for p, c, k in pairs}
    assert ("tr", "mm") in got
    assert got[("tr", "mm")]["producer_type"] == "Shuffle"
    assert got[("tr", "mm")]["consumer_type"] == "Many-to-Many"
    assert got[("tr", "mm")]["bucket"] == df.plan.shape_bucket(8 * 24 * 32)


def test_pair_graph_computes_what_the_model_computes():
    ecg = _model()
    nodes = {n.name: n for n in ecg.nodes}
    sub = profiling.pair_graph(ecg, nodes["tr"], nodes["mm"])
    assert [n.op for n in sub.nodes] == ["Transpose", "MatMul"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32, 24)).astype(np.float32)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    (got,) = sub.run_reference(x=x, w=w)
    np.testing.assert_allclose(got, np.transpose(x, (0, 2, 1)) @ w, rtol=1e-5, atol=1e-5)
    # The fused and the apart executables of the pair agree with the reference.
    for fused in (True, False):
        exe = profiling._executable(sub, fused, "scalar", 1)
        (out,) = exe.run([x, w])
        np.testing.assert_allclose(out, got, rtol=1e-5, atol=1e-5)


def test_profile_writes_entries_that_settle_the_planner(tmp_path):
    ecg = _model()
    db = tmp_path / "db.jsonl"
    lines = []
    entries = profiling.profile([("toy", ecg)], db, threads=1, min_seconds=0.02, log=lines.append)
    yellow = profiling.yellow_pairs(ecg)
    assert len(yellow) >= 2
    assert sorted(e["pair"] for e in entries) == sorted(f"{p.name} -> {c.name}" for p, c, _ in yellow)
    assert len(lines) == len(entries)
    for e in entries:
        assert e["target"] == df.plan.profile_target("cpu")
        assert e["fused_ms"] > 0 and e["unfused_ms"] > 0
    assert len(df.plan.read_profile_db(db)) == len(entries)
    # Measured keys now settle their pairs (a decision can change the blocks around later
    # pairs, so each yellow reason is checked against the entry of its own key).
    measured = {(e["producer"], e["consumer"], e["producer_type"], e["consumer_type"],
                 e["bucket"]): e for e in entries}
    plan = df.plan.plan(ecg, profile_db=db)
    settled = 0
    for r in plan.reasons:
        if r.profile_key is None:
            continue
        k = r.profile_key
        e = measured.get((r.producer.op, r.consumer.op, k["producer_type"], k["consumer_type"],
                          k["bucket"]))
        if e is None:
            assert "analytic estimate" in r.why, r.why
            continue
        settled += 1
        assert "profile: fused" in r.why, r.why
        assert r.fused == (e["fused_ms"] < e["unfused_ms"]), (r.why, e)
    assert settled >= 1
    # Without a database the same pairs fall back to the estimate, and say so.
    plan = df.plan.plan(ecg, profile_db="")
    assert any("analytic estimate" in r.why for r in plan.reasons)


def test_default_db_can_be_replaced_or_disabled(monkeypatch, tmp_path):
    monkeypatch.setenv("DNNF_PROFILE_DB", "")
    assert profiling.default_db() is None
    monkeypatch.setenv("DNNF_PROFILE_DB", str(tmp_path / "x.jsonl"))
    assert profiling.default_db() == str(tmp_path / "x.jsonl")
    # A named database that does not exist is a clear error, not a silent estimate.
    with pytest.raises(df.Error, match="x.jsonl"):
        df.plan.plan(_model())
