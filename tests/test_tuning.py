"""What the generated kernels derive from this machine (dnnfusion/tuning.py): read from the
prelude by a compiled probe, checked against the OS's cache sizes and the blocking rules the
prelude documents (cpp/codegen/prelude/gemm.h), in every dialect this CPU runs."""

import os
import subprocess
import sys

import pytest

from dialects import runnable
from dnnfusion import tuning


@pytest.mark.parametrize("isa", runnable())
def test_blocking_follows_this_machines_caches(isa):
    t = tuning.machine_tuning(isa)
    assert t["isa"] == isa
    for name, key in (("SC_LEVEL1_DCACHE_SIZE", "l1d_bytes"), ("SC_LEVEL2_CACHE_SIZE", "l2_bytes")):
        if os.sysconf_names.get(name) is not None and os.sysconf(name) > 0:
            assert t[key] == os.sysconf(name), (name, t)
    # The register tile is whole vectors; the packed layouts' k-chunk divides the k-block.
    assert t["nr"] % t["vector_floats"] == 0 and t["mr"] >= 1 and t["kc"] % t["ku"] == 0
    assert t["nc_by_kc"] == 1 and t["nc"] % t["nr"] == 0
    # An A micro-panel (MR x kc floats) in at most 60% of L1, within one k-chunk of it; a kc x nc
    # block of packed B in at most half of L2 (one NR-column panel at least).
    assert t["mr"] * t["kc"] * 4 <= 0.6 * t["l1d_bytes"] < t["mr"] * (t["kc"] + t["ku"]) * 4
    assert t["kc"] * t["nc"] * 4 <= t["l2_bytes"] / 2 or t["nc"] == t["nr"]
    assert t["kc"] * (t["nc"] + t["nr"]) * 4 > t["l2_bytes"] / 2
    # A shorter k-block gets wider column blocks.
    assert t["nc_for_k64"] >= t["nc"]
    # The planner's bound for expansions computed inside a depthwise conv: twice the L2.
    if "DNNF_EXPAND_MIN_BYTES" not in os.environ:
        assert t["expand_min_bytes"] == 2 * t["l2_bytes"], t
    # Winograd F(4x4) from the smallest plane whose 4x4 tiles give each thread MR of them
    if "DNNF_WINOGRAD_TILE" not in os.environ:
        side = t["winograd_f4_min_side"]
        need = t["threads"] * t["mr"]
        assert ((side + 3) // 4) ** 2 >= need > ((side + 2) // 4) ** 2 or (side == 8 and 4 >= need), t


def test_environment_overrides_reach_the_kernels(monkeypatch):
    isa = runnable()[-1]
    monkeypatch.setenv("DNNF_GEMM_BLOCKING", "48,256,96")
    monkeypatch.setenv("DNNF_NUM_THREADS", "3")
    monkeypatch.setenv("DNNF_EXPAND_MIN_BYTES", "12345")
    monkeypatch.setenv("DNNF_WINOGRAD_TILE", "2")
    t = tuning.machine_tuning(isa)
    assert (t["mc"], t["nc_by_kc"], t["threads"], t["expand_min_bytes"]) == (48, 0, 3, 12345)
    assert t["winograd_f4_min_side"] == 0 and "F(2x2) only" in "\n".join(tuning.describe(t))
    assert t["kc"] == 256 // t["ku"] * t["ku"] and t["nc"] == max(t["nr"], 96 // t["nr"] * t["nr"])
    assert "fixed by $DNNF_GEMM_BLOCKING" in "\n".join(tuning.describe(t))


def test_info_machine_prints_the_kernels_tuning(tmp_path):
    env = dict(os.environ, DNNF_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "dnnfusion", "info", "--machine"], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    t = tuning.machine_tuning()
    lines = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln and not ln.startswith(" ")}
    assert f"register tile {t['mr']} x {t['nr']} floats" in lines["gemm"], r.stdout
    assert f"kc {t['kc']} " in r.stdout and "at most" in lines["conv"], r.stdout
    assert f"when larger than {t['expand_min_bytes'] >> 10} KiB" in r.stdout, r.stdout
    # the read-once weights (A in a quarter of this machine's L2) and the strided 1x1 GEMM (half of it)
    half = f"{t['l2_bytes'] >> 11} KiB or more (half of L2)"
    rows = t["l2_bytes"] // 16 // t["kc"] // t["mr"] * t["mr"]
    assert r.stdout.count(half) == 1 and f"most {rows} rows a task" in r.stdout, r.stdout
    assert "read once, in memory order" in r.stdout, r.stdout
