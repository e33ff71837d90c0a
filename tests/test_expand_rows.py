"""A pointwise convolution computed by the depthwise convolution it feeds (an inverted
residual's expansion; cpp/plan/expanded_by_anchor.cc, cpp/codegen/expand_rows.cc, conv_nhwc.h
conv_nhwc_expand_f32): the depthwise kernel computes each input row it needs with a GEMM over
that row into a ring of rows in cache, so the expanded tensor is never stored. Counted from the
generated code, checked against the NumPy reference at 1, 2 and 3 threads (the rows where
tasks meet are computed by both); the cases it must leave alone keep two stages. Whether an
expansion pays is measured on the machine (a yellow pair keyed by its shape, settled by the
profiling database); without a measurement, expanded tensors that the caches hold are left apart
(plan.h expand_min_bytes: twice the L2). These small cases lower that bound with
$DNNF_EXPAND_MIN_BYTES, which decides every expansion; tests check the bound and the database."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import dnnfusion as df

onnx = pytest.importorskip("onnx")
from onnx import helper as h  # noqa: E402

from codegen_runner import assert_matches_reference, run  # noqa: E402
from test_codegen import model  # noqa: E402

FUSED = "its input rows computed in it by"


@pytest.fixture(autouse=True)
def _any_size(monkeypatch):
    monkeypatch.setenv("DNNF_EXPAND_MIN_BYTES", "0")


def stages(gen):
    return [s for k in gen["kernels"] for s in k["stages"]]


def _inverted_residual(name, n=1, cin=8, cexp=24, hw=(9, 12), k=3, stride=1, dil=1, bias=True, act="Clip",
                       se=False, extra_reader=False):
    """1x1 expansion (+ bias, + act) -> depthwise k x k (+ bias, + Clip) -> 1x1 projection,
    channels last; the data drawn from a generator seeded by the case's name."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    x = f(n, 3, *hw)
    # a stem, so that the expansion reads a channels-last tensor as in a network (the model's
    # channels-first input would be read by the 1x1 in place, which the ring does not take)
    nodes = [h.make_node("Conv", ["x", "ws"], ["s"], kernel_shape=[3, 3], pads=[1] * 4),
             h.make_node("Relu", ["s"], ["sr"]),
             h.make_node("Conv", ["sr", "we", "be"] if bias else ["sr", "we"], ["e"])]
    consts = [("ws", f(cin, 3, 3, 3) * 0.5), ("we", f(cexp, cin, 1, 1) * 0.5), ("be", f(cexp)), ("wd", f(cexp, 1, k, k) * 0.5), ("bd", f(cexp)),
              ("wp", f(6, cexp, 1, 1) * 0.3), ("lo", np.array(0, np.float32)), ("hi", np.array(6, np.float32))]
    if act == "Clip":
        nodes.append(h.make_node("Clip", ["e", "lo", "hi"], ["ea"]))
    elif act == "Swish":
        nodes += [h.make_node("Sigmoid", ["e"], ["es"]), h.make_node("Mul", ["e", "es"], ["ea"])]
    else:
        nodes.append(h.make_node("Identity", ["e"], ["ea"]))
    pad = dil * (k - 1) // 2
    nodes += [h.make_node("Conv", ["ea", "wd", "bd"], ["d"], group=cexp, kernel_shape=[k, k], strides=[stride] * 2,
                          dilations=[dil] * 2, pads=[pad] * 4),
              h.make_node("Clip", ["d", "lo", "hi"], ["da"])]
    outs = ["y"]
    if se:  # the squeeze-and-excitation pool, which the depthwise kernel also takes
        nodes += [h.make_node("GlobalAveragePool", ["da"], ["p"]), h.make_node("Mul", ["da", "p"], ["dg"]),
                  h.make_node("Conv", ["dg", "wp"], ["y"])]
    else:
        nodes.append(h.make_node("Conv", ["da", "wp"], ["y"]))
    if extra_reader:
        outs.append("ea")
    ecg, feeds = model(nodes, {"x": x}, outs, consts)
    return df.rewrite.select_layout(ecg, "nhwc")[0], feeds


CASES = {
    "3x3 s1": {},
    "3x3 s2": {"stride": 2, "hw": (11, 16)},
    "5x5 s1 odd width": {"k": 5, "hw": (10, 13)},
    "5x5 s2, 2 images": {"k": 5, "stride": 2, "n": 2, "hw": (12, 17)},
    "dilation 2": {"dil": 2, "hw": (10, 11)},
    "channel tail": {"cexp": 20, "cin": 5},
    "no bias, no activation": {"bias": False, "act": None},
    "swish": {"act": "Swish"},
    "with the gate's pool": {"act": "Swish", "se": True, "n": 2},
    # 5x5, stride 1, at most 16 pixels wide, channels in whole vectors: zero-padded ring rows
    # (depthwise_rows_padded's interior kernel over every pixel)
    "5x5 s1 padded rows, pool": {"k": 5, "cexp": 32, "hw": (9, 14), "act": "Swish", "se": True, "n": 2},
    # 3x3, stride 1, channels in whole vectors: two output rows at once from a ring of four
    # input rows on AVX-512 (depthwise_row_pair_at); odd row counts leave a row to do alone,
    # and 2 or 3 tasks start pairs on odd rows
    "3x3 s1 row pairs, 2 images": {"cexp": 32, "n": 2, "hw": (7, 20)},
    "3x3 s1 row pairs, pool": {"cexp": 48, "hw": (10, 9), "act": "Swish", "se": True, "n": 2},
}


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_expansion_runs_in_the_depthwise_kernel(case, threads):
    ecg, feeds = _inverted_residual(case, **CASES[case])
    outs, gen = run(ecg, feeds, planner="dnnfusion", threads=threads)
    assert_matches_reference(ecg, feeds, outs, rtol=1e-4, atol=1e-4)
    st = stages(gen)
    fused = [s for s in st if FUSED in s]
    assert len(fused) == 1 and fused[0].startswith("NhwcConv k"), st
    assert ("+mean of its pixels" in fused[0]) == CASES[case].get("se", False), st
    # one stage less than the same plan with the switch off; the expanded tensor not written
    assert gen["counts"]["passes"] == len(st)


def test_the_expanded_tensor_is_neither_a_pass_nor_bytes(monkeypatch):
    """DNNF_EXPAND_ROWS=0 (for comparisons) keeps the plan and runs the expansion as a stage of
    the same kernel: one pass more, and the expanded tensor's bytes written."""
    ecg, feeds = _inverted_residual("switch")
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    monkeypatch.setenv("DNNF_EXPAND_ROWS", "0")
    outs0, gen0 = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs0, rtol=1e-4, atol=1e-4)
    assert not any(FUSED in s for s in stages(gen0))
    assert gen0["counts"]["kernels"] == gen["counts"]["kernels"]
    assert gen0["counts"]["passes"] == gen["counts"]["passes"] + 1
    expanded = 1 * 24 * 9 * 12 * 4
    assert gen0["counts"]["intermediate_bytes_written"] - gen["counts"]["intermediate_bytes_written"] == expanded
    plan = df.plan.plan(ecg, planner="dnnfusion")
    assert "computes the rows of its input from" in plan.explain()


@pytest.mark.parametrize("what", ["narrow plane", "expansion also an output", "dense 3x3 after it", "opencl"])
def test_what_the_kernel_does_not_take_stays_apart(what):
    """Planes narrower than 8 pixels (a GEMM of too few rows), an expanded tensor read
    elsewhere, a dense convolution after the 1x1, and OpenCL plans (no such kernel there) keep
    the two convolutions apart."""
    kw = {"narrow plane": {"hw": (9, 7)}, "expansion also an output": {"extra_reader": True}}.get(what, {})
    ecg, feeds = _inverted_residual(what, **kw)
    if what == "dense 3x3 after it":  # the same graph with a one-group 3x3
        ecg, feeds = _dense_after()
    if what == "opencl":
        cpu = df.plan.plan(ecg, planner="dnnfusion")
        ocl = df.plan.plan(ecg, planner="dnnfusion", target="opencl")
        assert len(ocl.blocks) == len(cpu.blocks) + 1
        assert "computes the rows of its input" not in ocl.explain()
        return
    outs, gen = run(ecg, feeds, planner="dnnfusion")
    assert_matches_reference(ecg, feeds, outs, rtol=1e-4, atol=1e-4)
    assert not any(FUSED in s for s in stages(gen)), stages(gen)
    assert "computes the rows of its input" not in df.plan.plan(ecg, planner="dnnfusion").explain()


def test_expanded_tensors_the_caches_hold_stay_apart(monkeypatch):
    """The bound is on the expanded tensor's bytes (here 1 x 9 x 12 x 24 floats): at it, apart;
    one byte under it, fused. By default it is twice the L2 that sysconf reports."""
    ecg, _ = _inverted_residual("bound")
    expanded = 9 * 12 * 24 * 4
    for bound, fused in ((expanded, False), (expanded - 1, True)):
        monkeypatch.setenv("DNNF_EXPAND_MIN_BYTES", str(bound))
        assert ("computes the rows of its input" in df.plan.plan(ecg, planner="dnnfusion").explain()) == fused
    monkeypatch.delenv("DNNF_EXPAND_MIN_BYTES")
    # a plane larger than the default bound: fused. The bound as the core reads it (twice
    # the L2 that sysconf reports): Python's os.sysconf may not know SC_LEVEL2_CACHE_SIZE (a
    # 2 MiB-L2 Xeon, where a 1 MiB guess made a plane too small to fuse)
    from dnnfusion import _core
    cexp = (_core.expand_min_bytes() // (56 * 56 * 4) // 8 + 1) * 8
    big, _ = _inverted_residual("big", cin=8, cexp=cexp, hw=(56, 56))
    assert "computes the rows of its input" in df.plan.plan(big, planner="dnnfusion").explain()


def _dense_after():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 8, 9, 12)).astype(np.float32)
    ecg, feeds = model([h.make_node("Relu", ["x"], ["xr"]), h.make_node("Conv", ["xr", "we"], ["e"]),
                        h.make_node("Relu", ["e"], ["ea"]),
                        h.make_node("Conv", ["ea", "wd"], ["y"], kernel_shape=[3, 3], pads=[1] * 4)],
                       {"x": x}, ["y"], [("we", rng.standard_normal((16, 8, 1, 1)).astype(np.float32)),
                                         ("wd", rng.standard_normal((16, 16, 3, 3)).astype(np.float32))])
    return df.rewrite.select_layout(ecg, "nhwc")[0], feeds


def _expansion(plan):
    (r,) = [r for r in plan.reasons if r.profile_key is not None and " w" in r.profile_key["bucket"]]
    return r


def test_the_profiling_database_decides_an_expansion(monkeypatch, tmp_path):
    """Whether the expansion pays depends on the machine, so without $DNNF_EXPAND_MIN_BYTES it
    is a yellow pair keyed by its shape (the expanded tensor's size bucket, row width, the 1x1's
    channels, the depthwise stride): a measurement decides by the faster median; a difference
    within the noise says nothing, and the size rule, the estimate, decides it as it decides
    pairs with no measurement; the variable overrides both."""
    monkeypatch.delenv("DNNF_EXPAND_MIN_BYTES")
    ecg, _ = _inverted_residual("profiled")  # 9 x 12 x 24 floats: under any L2, so the estimate keeps it apart
    plan = df.plan.plan(ecg, planner="dnnfusion", profile_db="")
    r = _expansion(plan)
    assert not r.fused and "analytic estimate: the expanded tensor's 10368 B <=" in r.why, r.why
    k = r.profile_key
    assert k["bucket"] == f"{df.plan.shape_bucket(9 * 12 * 24)} w12 k8 c24 s1", k
    assert (r.producer.op, r.consumer.op, k["producer_type"], k["consumer_type"]) == \
        ("Clip", "NhwcConv", "Many-to-Many", "Many-to-Many")
    # what profile="auto" measures: the pairs its estimate settled, this one among them
    assert (r.producer.name, r.consumer.name, k) in [(p.name, c.name, kk) for p, c, kk in df.profiling.yellow_pairs(ecg, plan)]
    db = tmp_path / "db.jsonl"
    entry = {"target": df.plan.profile_target("cpu"), "producer": "Clip", "consumer": "NhwcConv", **k}
    for fused_ms, unfused_ms, noise, fuse in ((1.0, 2.0, 0.0, True), (2.0, 1.0, 0.0, False),
                                              (1.01, 1.0, 0.5, False), (1.0, 1.01, 0.5, False)):
        df.plan.write_profile_db(db, [dict(entry, fused_ms=fused_ms, unfused_ms=unfused_ms, noise_ms=noise)], merge=False)
        p = df.plan.plan(ecg, planner="dnnfusion", profile_db=db)
        r = _expansion(p)
        assert r.fused is fuse and f"[{db}]" in r.why, r.why
        assert ("a tie, so the estimate decides: the expanded tensor's 10368 B <=" in r.why) is (noise > 0), r.why
        assert ("kernel computes the rows of its input" in p.explain()) is fuse
        assert len(p.blocks) == len(plan.blocks) - fuse
    # an expanded tensor larger than twice any L2 (200 x 200 x 64 floats): the estimate fuses,
    # and so does a tie, whichever median is lower
    big, _ = _inverted_residual("profiled big", hw=(200, 200), cexp=64)
    r = _expansion(df.plan.plan(big, planner="dnnfusion", profile_db=""))
    assert r.fused and "analytic estimate: the expanded tensor's 10240000 B >" in r.why, r.why
    kb = dict(entry, **r.profile_key)
    for fused_ms, unfused_ms in ((1.01, 1.0), (1.0, 1.01), (1.5, 1.0)):
        df.plan.write_profile_db(db, [dict(kb, fused_ms=fused_ms, unfused_ms=unfused_ms, noise_ms=0.1)], merge=False)
        r = _expansion(df.plan.plan(big, planner="dnnfusion", profile_db=db))
        assert r.fused is (fused_ms - unfused_ms <= 0.1) and ("a tie" in r.why) is (abs(fused_ms - unfused_ms) <= 0.1), r.why
    # the variable decides, over the database's "fuse" (the last entry written)
    monkeypatch.setenv("DNNF_EXPAND_MIN_BYTES", str(1 << 30))
    rs = [r for r in df.plan.plan(ecg, planner="dnnfusion", profile_db=db).reasons
          if "DNNF_EXPAND_MIN_BYTES decides" in r.why]
    assert len(rs) == 1 and not rs[0].fused and rs[0].profile_key is None, [r.why for r in rs]


def test_an_expansion_is_measured_as_the_code_it_becomes(monkeypatch, tmp_path):
    """profile="auto"'s measurement of the pair: the depthwise kernel with the expansion in it
    against the two kernels, and the plan follows the faster one."""
    monkeypatch.delenv("DNNF_EXPAND_MIN_BYTES")
    ecg, _ = _inverted_residual("measured", hw=(12, 16))
    plan = df.plan.plan(ecg, planner="dnnfusion", profile_db="")
    ((p, c, key),) = [t for t in df.profiling.yellow_pairs(ecg, plan) if " w" in t[2]["bucket"]]
    e = df.profiling.measure_candidate(ecg, plan, p, c, key, dbs=[], isa="scalar", threads=1, min_seconds=0.02)
    assert (e["producer"], e["consumer"], e["bucket"]) == ("Clip", "NhwcConv", key["bucket"]), e
    assert "1 vs 2 kernels" in e["how"] and e["fused_ms"] > 0 and e["unfused_ms"] > 0, e
    db = tmp_path / "db.jsonl"
    df.plan.write_profile_db(db, [e], merge=False)
    # the entry is for 1 thread (a plan for another count takes no 1-thread measurement); a
    # difference within the noise it measured is left to the estimate, which keeps this one apart
    r = _expansion(df.plan.plan(ecg, planner="dnnfusion", profile_db=db, threads=1))
    tie = abs(e["fused_ms"] - e["unfused_ms"]) <= e["noise_ms"]
    assert r.fused is (not tie and e["fused_ms"] < e["unfused_ms"]) and ("a tie" in r.why) is tie, (r.why, e)
