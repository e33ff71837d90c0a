"""Yellow pairs measured on the machine: `dnnfusion profile` and compile(profile="auto") cut a
pair's candidate blocks out of a model, compile them fused and apart, time them, and the
measurements (with their noise: a tie is decided for fusion) settle the planner's decision for
their key; compile caches them per CPU and ISA and says in explain() where each came from."""

from __future__ import annotations

import json

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


def test_candidate_is_the_blocks_as_generated_not_a_two_op_cut_out():
    ecg = _model()
    nodes = {n.name: n for n in ecg.nodes}
    fp = df.plan.plan(ecg, profile_db="")
    # The candidate holds both blocks around the pair whole: for mm -> relu that is the
    # MatMul's block with its epilogue, and the Transpose's block (one block when fused).
    sub = profiling.candidate(ecg, fp, nodes["tr"], nodes["mm"])
    names = {n.name for n in sub.nodes}
    want = {n.name for n in fp.block_of("tr").nodes} | {n.name for n in fp.block_of("mm").nodes}
    assert names == want and {"tr", "mm", "relu"} <= names
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32, 24)).astype(np.float32)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    feeds = {v.name: {"x": x, "w": w}[v.name] for v in sub.inputs}
    got = sub.run_reference(**feeds)
    full = dict(zip([v.name for v in ecg.graph.values], [None] * len(ecg.graph.values)))
    assert full  # the candidate's outputs are what the rest of the model reads
    want_r = np.maximum(np.transpose(x, (0, 2, 1)) @ w, 0)
    np.testing.assert_allclose(got[0].reshape(want_r.shape), want_r, rtol=1e-5, atol=1e-5)
    # Forced each way, the planner gives two different plans, and both compile and agree
    # with the reference.
    key = dict(fp.reasons[[(r.producer.name, r.consumer.name) for r in fp.reasons]
                          .index(("tr", "mm"))].profile_key)
    entry = profiling.measure_candidate(ecg, fp, nodes["tr"], nodes["mm"], key, dbs=[],
                                        isa="scalar", threads=1, min_seconds=0.01)
    assert "1 vs 2 kernels" in entry["how"], entry["how"]
    assert entry["fused_ms"] > 0 and entry["unfused_ms"] > 0 and entry["noise_ms"] > 0


def test_time_pair_noise_is_a_tie_for_the_same_code():
    class Sleeper:
        def run(self, feeds):
            s = sum(range(2000))
            return s
    # The same code timed twice differs by less than twice its noise: the noise is about two
    # standard errors of the difference, so one bound of it fails by chance about one run in
    # twenty (a README run here: 0.99652 us apart, noise 0.98609; on a busy 2-vCPU VM a
    # neighbour's burst inside one timing made it 1.41 us apart against 0.43 us noise);
    # measure() adds a self-vs-self timing on top for the decisions it makes. So: three tries,
    # one of which must hold. An estimate that understates the noise fails all three.
    gaps = []
    for _ in range(3):
        t = profiling.time_pair([Sleeper(), Sleeper()], [], min_seconds=0.01, min_blocks=6)
        assert t.runs >= 6
        gaps.append((abs(t.a_ms - t.b_ms), 2 * t.noise_ms))
        if gaps[-1][0] <= gaps[-1][1]:
            break
    assert any(gap <= bound for gap, bound in gaps), gaps


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
    plan = df.plan.plan(ecg, profile_db=db, threads=1)  # the thread count they were measured at
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
        assert r.fused == (e["fused_ms"] - e["unfused_ms"] <= e["noise_ms"]), (r.why, e)
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


def _entry(fused, unfused, noise=None):
    e = {"target": df.plan.profile_target("cpu"), "producer": "Transpose", "consumer": "MatMul",
         "producer_type": "Shuffle", "consumer_type": "Many-to-Many",
         "bucket": df.plan.shape_bucket(8 * 24 * 32), "fused_ms": fused, "unfused_ms": unfused}
    if noise is not None:
        e["noise_ms"] = noise
    return e


def _tr_mm(plan):
    (r,) = [r for r in plan.reasons if (r.producer.name, r.consumer.name) == ("tr", "mm")]
    return r


@pytest.mark.parametrize("fused,unfused,noise,fuse,says", [
    (1.0, 1.2, 0.0, True, "< unfused"),
    (1.2, 1.0, 0.0, False, "keep apart"),
    (1.01, 1.0, 0.02, True, "a tie, decided for fewer passes"),
    (1.05, 1.0, 0.02, False, "keep apart"),
])
def test_noise_makes_a_tie_and_a_tie_fuses(tmp_path, fused, unfused, noise, fuse, says):
    db = tmp_path / "db.jsonl"
    df.plan.write_profile_db(db, [_entry(fused, unfused, noise)], merge=False)
    assert df.plan.read_profile_db(db)[0].get("noise_ms", 0.0) == noise
    r = _tr_mm(df.plan.plan(_model(), profile_db=db))
    assert r.fused is fuse and says in r.why, r.why
    assert f"[{db}]" in r.why  # where the measurement came from


def test_later_databases_replace_earlier_entries(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    df.plan.write_profile_db(a, [_entry(1.0, 2.0)], merge=False)
    df.plan.write_profile_db(b, [_entry(2.0, 1.0)], merge=False)
    assert _tr_mm(df.plan.plan(_model(), profile_db=[a, b])).fused is False
    assert _tr_mm(df.plan.plan(_model(), profile_db=[b, a])).fused is True


def test_an_entry_settles_only_its_thread_count(tmp_path):
    """Which of two kernels wins depends on the threads they run on: an entry measured at 2
    threads settles a plan for 2 threads, not one for 1 (the estimate then, saying why); an
    entry that records no thread count applies at any, and one measured at the plan's count
    wins over it."""
    db = tmp_path / "db.jsonl"
    df.plan.write_profile_db(db, [dict(_entry(1.0, 2.0), threads=2)], merge=False)
    assert df.plan.read_profile_db(db)[0]["threads"] == 2
    assert '"threads": 2' in db.read_text()
    at2 = _tr_mm(df.plan.plan(_model(), profile_db=db, threads=2))
    assert at2.fused is True and "profile: fused 1.0000 ms < unfused 2.0000 ms" in at2.why, at2.why
    at1 = _tr_mm(df.plan.plan(_model(), profile_db=db, threads=1))
    assert "no profile entry at 1 thread (measured at 2 only); analytic estimate" in at1.why, at1.why
    assert profiling.yellow_pairs(_model(), df.plan.plan(_model(), profile_db=db, threads=1))
    # No thread count: any; the entry at the plan's own count is preferred to it.
    df.plan.write_profile_db(db, [_entry(2.0, 1.0)], merge=True)
    assert len(df.plan.read_profile_db(db)) == 2  # another key, not a replacement
    assert _tr_mm(df.plan.plan(_model(), profile_db=db, threads=1)).fused is False
    assert _tr_mm(df.plan.plan(_model(), profile_db=db, threads=2)).fused is True
    with pytest.raises(ValueError, match="threads"):
        df.plan.plan(_model(), profile_db=db, threads=0)


def test_compile_measures_per_thread_count(monkeypatch, tmp_path):
    """compile(profile="auto") records the threads its candidates ran on; a compile for
    another thread count finds the pairs unsettled (and measures them for its own)."""
    m1 = _auto(monkeypatch, tmp_path, profile_seconds=60)
    assert m1.stats["profile"]["measured"] >= 1
    entries = df.plan.read_profile_db(profiling.machine_db("scalar"))
    assert entries and {e["threads"] for e in entries} == {1}
    m2 = df.compile(_model(), threads=2, isa="scalar", profile="auto", profile_seconds=0)
    p2 = m2.stats["profile"]
    assert p2["cached"] == 0 and p2["estimated"] >= 1, p2
    assert "(measured at 1 only)" in m2.explain()
    m3 = df.compile(_model(), threads=2, isa="scalar", profile="auto", profile_seconds=60)
    assert m3.stats["profile"]["measured"] >= 1
    assert {e["threads"] for e in df.plan.read_profile_db(profiling.machine_db("scalar"))} == {1, 2}


@pytest.mark.parametrize("bad", ['"noise_ms": -1', '"noise_ms": "x"', '"how": 3', '"threads": -1',
                                 '"threads": 1.5'])
def test_malformed_optional_fields_name_the_line(tmp_path, bad):
    db = tmp_path / "db.jsonl"
    df.plan.write_profile_db(db, [_entry(1.0, 2.0)], merge=False)
    line = db.read_text().strip()
    db.write_text(line + "\n" + line[:-1] + ", " + bad + "}\n")
    with pytest.raises(df.ModelFormatError, match="line 2"):
        df.plan.plan(_model(), profile_db=db)


def _auto(monkeypatch, tmp_path, **kw):
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DNNF_PROFILE_DB", "")
    return df.compile(_model(), threads=1, isa="scalar", profile="auto", **kw)


def test_compile_auto_measures_caches_and_says_so(monkeypatch, tmp_path):
    x = np.random.default_rng(1).standard_normal((8, 32, 24)).astype(np.float32)
    w = np.random.default_rng(2).standard_normal((32, 16)).astype(np.float32)
    m = _auto(monkeypatch, tmp_path, profile_seconds=60)
    p = m.stats["profile"]
    db = profiling.machine_db("scalar")
    assert p["mode"] == "auto" and p["db"] == str(db) and db.is_file()
    assert p["measured"] >= 1 and p["estimated"] == 0 and p["failed"] == []
    entries = df.plan.read_profile_db(db)
    assert {e["target"] for e in entries} == {df.plan.profile_target("cpu")}
    assert all("scalar, 1 threads" in e["how"] for e in entries)
    text = m.explain()
    assert "measured while compiling; cached in " + str(db) in text
    assert "analytic estimate" not in text
    np.testing.assert_allclose(m.run(x, w)[0], _model().run_reference(x=x, w=w)[0],
                               rtol=1e-4, atol=1e-4)
    # A second compile measures nothing: every yellow pair is settled by the cache.
    m2 = _auto(monkeypatch, tmp_path, profile_seconds=60)
    p2 = m2.stats["profile"]
    assert p2["measured"] == 0 and p2["cached"] >= 1 and p2["estimated"] == 0
    assert "measured by an earlier compile on this machine" in m2.explain()
    assert [len(b.nodes) for b in m2.plan.blocks] == [len(b.nodes) for b in m.plan.blocks]
    # Another ISA is another machine database.
    assert profiling.machine_db("avx2") != db


def test_compile_auto_with_no_budget_estimates_and_says_why(monkeypatch, tmp_path):
    m = _auto(monkeypatch, tmp_path, profile_seconds=0)
    p = m.stats["profile"]
    assert p["measured"] == 0 and p["estimated"] >= 1
    assert not profiling.machine_db("scalar").exists()
    assert "not measured: compile's profiling budget of 0 s was spent" in m.explain()


def test_compile_auto_skips_a_measurement_that_would_pass_the_budget(monkeypatch, tmp_path):
    """A candidate is measured only when one run of it says the measurement ends within the
    budget (at batch 8 one run can take a second and a measurement makes dozens): here every
    measurement is made to look that long, so nothing is measured and explain() says why."""
    monkeypatch.setattr(profiling, "_RUNS_PER_MEASURE", 10**9)
    m = _auto(monkeypatch, tmp_path, profile_seconds=60)
    p = m.stats["profile"]
    assert p["measured"] == 0 and p["estimated"] >= 1 and p["over_budget"] >= 1, p
    assert p["seconds"] < 60
    assert "would pass compile's profiling budget of 60 s" in m.explain()
    assert not profiling.machine_db("scalar").exists()


def _prelude_counts_as_the_candidates(monkeypatch):
    """The fresh cache's precompiled header and prelude units counted as the first candidate's
    own build (seconds), as if the model's own compile did not need them. The cache builds them
    (not the session's shared prelude: conftest's own_prelude)."""
    monkeypatch.delenv("DNNF_PRELUDE_CACHE_DIR", raising=False)
    monkeypatch.setattr(profiling._core, "prelude_build_seconds", lambda: 0.0)


def test_a_built_candidate_is_measured_past_the_budget_when_that_is_cheap(monkeypatch, tmp_path):
    """The first candidate is built whatever the budget (no build time to go by yet). When its
    build took seconds and measuring it takes a fraction of that, it is measured although the
    10 ms budget has passed, and cached: a compile used to spend the build and then estimate
    anyway. Nothing else is built."""
    _prelude_counts_as_the_candidates(monkeypatch)
    m = _auto(monkeypatch, tmp_path, profile_seconds=0.01)
    p = m.stats["profile"]
    assert p["measured"] == 1 and p["estimated"] >= 1 and p["failed"] == [], p
    assert len(df.plan.read_profile_db(profiling.machine_db("scalar"))) == 1
    assert "measured while compiling" in m.explain() and "budget of 0.01 s was spent" in m.explain()


def test_prelude_seconds_are_not_charged_to_the_budget(monkeypatch, tmp_path):
    """The header and units a fresh cache builds while a candidate compiles are the model's
    (its own compile needs them): their seconds move the deadline and are taken off the
    candidate's build (so they do not make a measurement past the budget look cheap: U-Net's
    cold compile spent 4.6 s so). Here every look at the prelude counter finds another minute
    built: a 10 ms budget then measures every key, and stats say how much was prelude."""
    calls = iter(range(0, 10**6, 60))
    monkeypatch.setattr(profiling._core, "prelude_build_seconds", lambda: float(next(calls)))
    m = _auto(monkeypatch, tmp_path, profile_seconds=0.01)
    p = m.stats["profile"]
    assert p["measured_keys"] >= 2 and p["estimated"] == 0 and p["failed"] == [], p
    assert p["prelude_seconds"] >= 60


def test_compiling_again_with_no_larger_budget_measures_nothing_more(monkeypatch, tmp_path):
    """What a compile's budget left unmeasured is recorded: compiling the same model again
    with the same budget measures nothing (a warm compile: the same plan, the cached kernels,
    explain() says why), a larger budget measures the rest, and a damaged record only costs
    a measurement."""
    _prelude_counts_as_the_candidates(monkeypatch)  # the first compile measures one key
    m = _auto(monkeypatch, tmp_path, profile_seconds=0.01)
    p = m.stats["profile"]
    assert p["measured_keys"] == 1 and p["estimated"] >= 1 and p["budget_spent_earlier"] is None, p
    record = profiling.spent_path("scalar")
    assert record.is_file() and record.parent == profiling.machine_db("scalar").parent
    m2 = _auto(monkeypatch, tmp_path, profile_seconds=0.01)
    p2 = m2.stats["profile"]
    assert p2["measured_keys"] == 0 and p2["estimated"] == p["estimated"] and p2["budget_spent_earlier"] == 0.01
    assert p2["seconds"] == 0.0 and m2.stats["cache_hit"], p2
    assert [len(b.nodes) for b in m2.plan.blocks] == [len(b.nodes) for b in m.plan.blocks]
    assert "not measured: an earlier compile of this model on this machine spent its profiling budget " \
           "of 0.01 s" in m2.explain()
    record.write_text('{"truncated')
    assert profiling._read_spent(record) == {}
    m3 = _auto(monkeypatch, tmp_path, profile_seconds=0.01)
    assert m3.stats["profile"]["budget_spent_earlier"] is None  # not trusted: profiled again
    if m3.stats["profile"]["estimated"]:  # left keys again: recorded again, readable
        assert list(json.loads(record.read_text()).values()) == [0.01]
    m4 = _auto(monkeypatch, tmp_path, profile_seconds=60)
    assert m4.stats["profile"]["estimated"] == 0 and m4.stats["profile"]["budget_spent_earlier"] is None


@pytest.mark.parametrize("runs_s,build_s,pays", [(0.0, 0.2, False), (0.0, 1.0, True), (0.5, 1.0, False),
                                                 (0.5, 2.0, True)])
def test_late_measure_pays_only_against_a_long_build(runs_s, build_s, pays):
    assert profiling.late_measure_pays(runs_s, build_s, min_seconds=0.2) is pays


def test_compile_auto_skips_a_build_that_would_pass_the_budget(monkeypatch, tmp_path):
    """A candidate is built only when the last candidate's build time says the build ends
    within the budget (a batch-8 candidate took 11 s to build, unbounded before): here every
    build is made to look as if it took a minute, so after the first nothing is built."""
    real = profiling.measure_candidate

    def slow_builds(*args, built=None, **kw):
        out = real(*args, built=built, **kw)
        if built is not None:
            built[-1] = 60.0
        return out

    monkeypatch.setattr(profiling, "measure_candidate", slow_builds)
    m = _auto(monkeypatch, tmp_path, profile_seconds=30)
    p = m.stats["profile"]
    assert p["measured"] == 1 and p["over_budget"] >= 1 and p["seconds"] < 30, p
    assert "(not measured: building its candidate (about 60 s, as the last one took) would pass " \
           "compile's profiling budget of 30 s" in m.explain()


def test_compile_profile_off_reads_and_writes_no_machine_database(monkeypatch, tmp_path):
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DNNF_PROFILE_DB", "")
    m = df.compile(_model(), threads=1, isa="scalar", profile="off")
    assert m.stats["profile"]["mode"] == "off" and m.stats["profile"]["measured"] == 0
    assert not profiling.machine_db("scalar").exists()
    assert "analytic estimate" in m.explain() and "budget" not in m.explain()


@pytest.mark.parametrize("kw,match", [
    ({"profile": "always"}, "unknown profile mode"),
    ({"profile_seconds": -1}, "profile_seconds"),
    ({"profile_seconds": float("nan")}, "profile_seconds"),
])
def test_bad_profile_options_are_clear_errors(kw, match):
    with pytest.raises(df.Error, match=match):
        df.compile(_model(), threads=1, isa="scalar", **kw)


def test_bad_profile_seconds_in_the_environment(monkeypatch):
    monkeypatch.setenv("DNNF_PROFILE_SECONDS", "soon")
    with pytest.raises(df.Error, match="DNNF_PROFILE_SECONDS"):
        df.compile(_model(), threads=1, isa="scalar", profile="auto")


def test_a_candidate_that_fails_keeps_the_estimate(monkeypatch, tmp_path):
    """Measuring is an optimisation: a candidate that cannot be built or run leaves its pair
    to the estimate, says why in stats, and the compile still succeeds."""
    def broken(*a, **k):
        raise ValueError("no such luck")
    monkeypatch.setattr(profiling, "measure_candidate", broken)
    m = _auto(monkeypatch, tmp_path, profile_seconds=60)
    p = m.stats["profile"]
    assert p["measured"] == 0 and p["estimated"] >= 1
    assert p["failed"] and all("ValueError: no such luck" in f for f in p["failed"])
    assert not profiling.machine_db("scalar").exists()
    assert "not measured: its candidate failed to build or run" in m.explain()


def test_keys_that_decide_the_most_data_are_measured_first():
    """compile's budget goes first to the keys that settle the most bytes: a key shared by
    four pairs of 2^16 elements before one pair of 2^17, that before one of 2^16."""
    from types import SimpleNamespace as NS

    def pair(op, bucket):
        return (NS(op=op), NS(op="MatMul"), {"producer_type": "Shuffle", "consumer_type": "Many-to-Many",
                                               "bucket": bucket})
    pairs = [pair("Transpose", "2^17"), pair("Reshape", "2^16"), *[pair("Relu", "2^16 w14 k64 c384 s1")] * 4,
             pair("Flatten", "?")]
    order = [p.op for p, _, _ in df.profiling._by_size(pairs)]
    assert order == ["Relu", "Transpose", "Reshape", "Flatten"], order
