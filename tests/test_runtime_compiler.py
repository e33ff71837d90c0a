"""Compile-and-cache of generated kernels (cpp/runtime/compiler.cc): a kernel compiles, loads
and computes what NumPy computes; the cache is keyed by source, compiler and flags, written
atomically, safe under concurrent compiles, and refuses directories that are not the
user's own; compiler errors, timeouts and missing symbols raise CompileError."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pathlib
import stat
import textwrap

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

# A tiny kernel with the signature Library.call_f32_unary calls.
KERNEL = """
#include <cstdint>
extern "C" void square_plus_one(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i] + 1.0f;
}
"""


def kernel(tag: str) -> str:
    """KERNEL with a comment, so each test owns its cache entry."""
    return f"// {tag}\n{KERNEL}"


def expected(x: np.ndarray) -> np.ndarray:
    return x * x + np.float32(1)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch, own_prelude):
    """Every test gets its own cache directory (precompiled headers in it) and the default
    compiler search."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DNNF_CACHE_DIR", str(cache))
    for var in ("DNNF_CXX", "CXX", "DNNF_ISA", "DNNF_COMPILE_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    return cache


def run(lib, n: int = 37) -> None:
    x = np.linspace(-3, 3, n, dtype=np.float32)
    y = np.zeros_like(x)
    lib.call_f32_unary("square_plus_one", x, y)
    # With -mfma the compiler may contract x*x+1 into one rounding: 1 ulp from NumPy.
    np.testing.assert_allclose(y, expected(x), rtol=2e-7, atol=0)


def test_compile_call_and_cache_hit(private_cache):
    lib = _core.compile_shared(kernel("hit"), ["-O2"])
    assert not lib.cached
    assert os.path.dirname(lib.path) == str(private_cache / "kernels")
    run(lib)
    again = _core.compile_shared(kernel("hit"), ["-O2"])
    assert again.cached and again.path == lib.path
    run(again)
    # The cache holds the object and its source under one key, and no temporaries.
    key = os.path.basename(lib.path)[:-3]
    assert len(key) == 64
    assert sorted(os.listdir(private_cache / "kernels")) == [key + ".cc", key + ".so"]
    assert stat.S_IMODE(os.stat(private_cache / "kernels").st_mode) == 0o700


def test_key_depends_on_flags_and_source():
    a = _core.compile_shared(kernel("key"), ["-O2"])
    b = _core.compile_shared(kernel("key"), ["-O1"])
    c = _core.compile_shared(kernel("key2"), ["-O2"])
    assert not b.cached and not c.cached
    assert len({a.path, b.path, c.path}) == 3
    run(b)


def test_key_depends_on_compiler(tmp_path, monkeypatch):
    # A wrapper that reports another version is another compiler, hence another entry.
    cxx = _core.find_compiler()["path"]
    wrapper = tmp_path / "wrapped-cxx"
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "wrapper 1.0"; fi\nexec {cxx} "$@"\n')
    wrapper.chmod(0o755)
    plain = _core.compile_shared(kernel("compiler"), [])
    monkeypatch.setenv("DNNF_CXX", str(wrapper))
    assert _core.find_compiler()["path"] == str(wrapper)
    wrapped = _core.compile_shared(kernel("compiler"), [])
    assert not wrapped.cached and wrapped.path != plain.path
    run(wrapped)


def test_compile_error_has_diagnostics_and_kept_source():
    bad = "extern \"C\" void broken(const float* x, float* y, long n) { y[0] = x[0] +; }\n"
    with pytest.raises(df.CompileError) as info:
        _core.compile_shared(bad, [])
    msg = str(info.value)
    assert "failed" in msg and "error" in msg and "expected" in msg  # the compiler's own words
    kept = msg.split("source kept at ")[1].split()[0].rstrip(";")
    assert kept.endswith(".cc") and open(kept).read() == bad
    assert kept in msg.split("\n", 2)[2]  # diagnostics name the kept file, not a temporary
    assert not [f for f in os.listdir(os.path.dirname(kept)) if f.startswith("tmp.") or f.endswith(".so")]


def test_long_diagnostics_are_truncated():
    bad = "\n".join(f"int f{i}() {{ return undefined_{i}; }}" for i in range(300))
    with pytest.raises(df.CompileError, match="more bytes of compiler output") as info:
        _core.compile_shared(bad, [])
    assert len(str(info.value)) < 6000


@pytest.mark.parametrize("shift", [0, 1])
def test_diagnostics_are_cut_between_characters(shift):
    # Lines echoed in the diagnostics are all two-byte characters, so one of the two shifts
    # puts the 4000-byte cut inside one: still a CompileError whose text decodes.
    bad = "\n".join(f"int f{i}() {{ return {'x' * shift}undefined_{i} + \"{'é' * 40}\"; }}" for i in range(200))
    with pytest.raises(df.CompileError, match="more bytes of compiler output") as info:
        _core.compile_shared(bad, [])
    assert "é" in str(info.value)


def test_missing_symbol():
    lib = _core.compile_shared(kernel("symbols"), [])
    assert lib.has_symbol("square_plus_one") and not lib.has_symbol("nope")
    assert lib.symbol_address("square_plus_one") != 0
    with pytest.raises(df.CompileError, match="no symbol 'nope'"):
        lib.symbol_address("nope")
    x = np.ones(4, np.float32)
    with pytest.raises(df.CompileError, match="no symbol"):
        lib.call_f32_unary("nope", x, x.copy())
    with pytest.raises(TypeError):
        lib.call_f32_unary("square_plus_one", x, np.zeros(4, np.float64))
    with pytest.raises(ValueError):
        lib.call_f32_unary("square_plus_one", x, np.zeros(5, np.float32))


def test_no_compiler(monkeypatch):
    monkeypatch.setenv("DNNF_CXX", "/nonexistent")
    with pytest.raises(df.CompileError, match=r"no C\+\+ compiler found.*'/nonexistent' was not found"):
        _core.find_compiler()
    with pytest.raises(df.CompileError, match=r"no C\+\+ compiler"):
        _core.compile_shared(kernel("none"), [])


def test_broken_cxx_falls_through_to_path(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    assert os.path.basename(_core.find_compiler()["path"]) in ("c++", "g++", "clang++")


def test_timeout(tmp_path, monkeypatch):
    slow = tmp_path / "slow-cxx"
    slow.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "slow 1.0"; exit 0; fi\nsleep 30\n')
    slow.chmod(0o755)
    monkeypatch.setenv("DNNF_CXX", str(slow))
    with pytest.raises(df.CompileError, match="timed out after 0.5 s"):
        _core.compile_shared(kernel("slow"), [], timeout_s=0.5)
    monkeypatch.setenv("DNNF_COMPILE_TIMEOUT", "0.3")
    with pytest.raises(df.CompileError, match="timed out.*DNNF_COMPILE_TIMEOUT"):
        _core.compile_shared(kernel("slow"), [])


def test_corrupt_cache_entry_is_rebuilt():
    lib = _core.compile_shared(kernel("corrupt"), [])
    path = lib.path
    del lib  # unload, so the next dlopen reads the file again
    with open(path, "wb") as f:
        f.write(b"not an ELF file")
    again = _core.compile_shared(kernel("corrupt"), [])
    assert not again.cached and again.path == path
    run(again)


# ---- The cache directory must be the user's own ---------------------------------------
def test_world_writable_cache_dir_is_rejected(private_cache):
    private_cache.mkdir()
    private_cache.chmod(0o777)
    with pytest.raises(df.CompileError, match="world-writable"):
        _core.compile_shared(kernel("ww"), [])
    private_cache.chmod(0o1777)  # sticky, like /tmp: others cannot replace our entries
    assert _core.kernel_cache_dir() == str(private_cache / "kernels")


def test_group_writable_kernels_dir_is_rejected(private_cache):
    (private_cache / "kernels").mkdir(parents=True)
    (private_cache / "kernels").chmod(0o770)
    with pytest.raises(df.CompileError, match="writable by its group"):
        _core.kernel_cache_dir()
    (private_cache / "kernels").chmod(0o755)  # readable by others is fine
    assert _core.kernel_cache_dir() == str(private_cache / "kernels")


def test_symlinked_kernels_dir_is_rejected(private_cache, tmp_path):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    private_cache.mkdir()
    (private_cache / "kernels").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(df.CompileError, match="not a directory"):
        _core.kernel_cache_dir()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
@pytest.mark.parametrize("which", ["kernels", "parent"])
def test_cache_dir_owned_by_another_user_is_rejected(private_cache, which):
    (private_cache / "kernels").mkdir(parents=True, mode=0o700)
    os.chown(private_cache / "kernels" if which == "kernels" else private_cache, 65534, 65534)
    with pytest.raises(df.CompileError, match="owned by uid 65534, not by you"):
        _core.compile_shared(kernel("owner"), [])


def test_cache_dir_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("DNNF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _core.kernel_cache_dir() == str(tmp_path / "xdg" / "dnnfusion" / "kernels")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _core.kernel_cache_dir() == str(tmp_path / "home" / ".cache" / "dnnfusion" / "kernels")
    assert stat.S_IMODE(os.stat(tmp_path / "home" / ".cache" / "dnnfusion").st_mode) == 0o700


# ---- Concurrent compiles -----------------------------------------------------------------
def _compile_in_child(cache: str, source: str, barrier) -> tuple[str, bool, bool]:
    os.environ["DNNF_CACHE_DIR"] = cache
    from dnnfusion import _core as core

    barrier.wait(timeout=60)  # start both compiles at once
    lib = core.compile_shared(source, ["-O2"])
    x = np.arange(100, dtype=np.float32)
    y = np.empty_like(x)
    lib.call_f32_unary("square_plus_one", x, y)
    return lib.path, lib.cached, bool(np.array_equal(y, x * x + 1))


def test_concurrent_compiles_of_one_source(private_cache):
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter, as a second user process
    with ctx.Manager() as manager:
        barrier = manager.Barrier(2)
        with ctx.Pool(2) as pool:
            jobs = [pool.apply_async(_compile_in_child, (str(private_cache), kernel("race"), barrier))
                    for _ in range(2)]
            results = [j.get(timeout=120) for j in jobs]
    (path_a, _, ok_a), (path_b, _, ok_b) = results
    assert ok_a and ok_b and path_a == path_b
    entries = os.listdir(private_cache / "kernels")
    assert sorted(entries) == sorted({os.path.basename(path_a), os.path.basename(path_a)[:-3] + ".cc"})
    assert _core.compile_shared(kernel("race"), ["-O2"]).cached


# ---- precompiled headers ------------------------------------------------------------------
PCH_HEADER = """#pragma once
#include <cstdint>
#include <vector>
inline float dnnf_test_square(float x) { return x * x; }
"""
PCH_KERNEL = """#include "common.h"
extern "C" void square_plus_one(const float* x, float* y, int64_t n) {
  std::vector<float> t(x, x + n);
  for (int64_t i = 0; i < n; ++i) y[i] = dnnf_test_square(t[i]) + 1.0f;
}
"""


def _pch_setup(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "common.h").write_text(PCH_HEADER)
    return str(inc / "common.h"), ["-O1", f"-I{inc}"]


def _pch_dirs(cache) -> list[str]:
    return [d for d in os.listdir(cache / "kernels") if d.startswith("pch-")]


def _gcc() -> bool:
    """The runtime precompiles headers for GCC only; with clang none is built (checked below)."""
    return "clang" not in _core.find_compiler()["version"]


def test_a_precompiled_header_is_built_once_and_used(private_cache, tmp_path, monkeypatch):
    cxx = _core.find_compiler()["path"]
    header, flags = _pch_setup(tmp_path)
    if not _gcc():
        run(_core.compile_shared(PCH_KERNEL, flags, pch_header=header))
        assert not _pch_dirs(private_cache)
        return
    # A compiler wrapper that asks GCC which headers it read (-H): '!' marks a usable .gch.
    log = tmp_path / "h.log"
    wrapper = tmp_path / "cxx-H"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = --version ] && exec {cxx} "$@"\nexec {cxx} "$@" -H 2>>{log}\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("DNNF_CXX", str(wrapper))
    lib = _core.compile_shared(f"// 1\n{PCH_KERNEL}", flags, pch_header=header)
    run(lib)
    pch = _pch_dirs(private_cache)
    assert len(pch) == 1 and os.listdir(private_cache / "kernels" / pch[0]) == ["common.h.gch"]
    used = [ln for ln in log.read_text().splitlines() if ln.startswith("! ")]
    assert used and used[-1].endswith("common.h.gch"), log.read_text()[-2000:]
    # A second module with the same flags reuses it; other flags get their own.
    run(_core.compile_shared(f"// 2\n{PCH_KERNEL}", flags, pch_header=header))
    run(_core.compile_shared(f"// 3\n{PCH_KERNEL}", flags[1:] + ["-O2"], pch_header=header))
    assert len(_pch_dirs(private_cache)) == 2
    assert sum(ln.startswith("! ") for ln in log.read_text().splitlines()) == 3


def test_no_precompiled_header_with_dnnf_pch_0(private_cache, tmp_path, monkeypatch):
    header, flags = _pch_setup(tmp_path)
    monkeypatch.setenv("DNNF_PCH", "0")
    run(_core.compile_shared(PCH_KERNEL, flags, pch_header=header))
    assert not _pch_dirs(private_cache)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_precompiled_header_costs_time_not_correctness(private_cache, tmp_path, damage):
    header, flags = _pch_setup(tmp_path)
    run(_core.compile_shared(f"// a\n{PCH_KERNEL}", flags, pch_header=header))
    if not _gcc():
        assert not _pch_dirs(private_cache)
        return
    (d,) = _pch_dirs(private_cache)
    gch = private_cache / "kernels" / d / "common.h.gch"
    data = gch.read_bytes()
    gch.write_bytes(b"not a precompiled header" * 4 if damage == "garbage" else data[: len(data) // 3])
    run(_core.compile_shared(f"// b\n{PCH_KERNEL}", flags, pch_header=header))


def test_a_header_that_does_not_compile_alone_is_not_an_error(private_cache, tmp_path):
    header, flags = _pch_setup(tmp_path)
    pathlib.Path(header).write_text(PCH_HEADER + "this is not C++;\n")
    with pytest.raises(df.CompileError, match="this is not C"):  # the module's own compile reports it
        _core.compile_shared(PCH_KERNEL, flags, pch_header=header)
    assert not _pch_dirs(private_cache)


def test_kernel_caches_share_one_precompiled_header_through_dnnf_prelude_cache_dir(private_cache, tmp_path,
                                                                                 monkeypatch):
    """$DNNF_PRELUDE_CACHE_DIR holds the precompiled header (and the prelude units, built by the
    same code path) for every kernel cache: a second cache builds none of its own."""
    header, flags = _pch_setup(tmp_path)
    shared = tmp_path / "prelude"
    monkeypatch.setenv("DNNF_PRELUDE_CACHE_DIR", str(shared))
    assert _core.prelude_cache_dir() == str(shared) and shared.is_dir()
    assert oct(shared.stat().st_mode & 0o777) == oct(0o700)
    run(_core.compile_shared(f"// 1\n{PCH_KERNEL}", flags, pch_header=header))
    built = _core.prelude_build_seconds()
    assert not _pch_dirs(private_cache)
    if not _gcc():
        return
    assert len([d for d in os.listdir(shared) if d.startswith("pch-")]) == 1
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path / "second"))
    lib = _core.compile_shared(f"// 2\n{PCH_KERNEL}", flags, pch_header=header)
    run(lib)
    assert lib.path.startswith(str(tmp_path / "second" / "kernels"))
    assert _core.prelude_build_seconds() == built  # nothing built for the second cache
    assert not _pch_dirs(tmp_path / "second")


def test_a_bad_dnnf_prelude_cache_dir_is_a_clear_error(private_cache, tmp_path, monkeypatch):
    header, flags = _pch_setup(tmp_path)
    monkeypatch.setenv("DNNF_PRELUDE_CACHE_DIR", "relative/prelude")
    with pytest.raises(df.CompileError, match="DNNF_PRELUDE_CACHE_DIR must be an absolute path"):
        _core.compile_shared(PCH_KERNEL, flags, pch_header=header)
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o775)
    loose.chmod(0o775)
    monkeypatch.setenv("DNNF_PRELUDE_CACHE_DIR", str(loose))
    with pytest.raises(df.CompileError, match="writable by its group.*set DNNF_PRELUDE_CACHE_DIR"):
        _core.compile_shared(PCH_KERNEL, flags, pch_header=header)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("DNNF_PRELUDE_CACHE_DIR", str(tmp_path / "file"))
    with pytest.raises(df.CompileError, match="file"):
        _core.compile_shared(PCH_KERNEL, flags, pch_header=header)
    monkeypatch.setenv("DNNF_PRELUDE_CACHE_DIR", str(tmp_path / "ok"))  # a module without a header: not read
    run(_core.compile_shared(PCH_KERNEL.replace('#include "common.h"', "#include <cstdint>\n#include <vector>\n"
                                                "inline float dnnf_test_square(float x) { return x * x; }"), flags))
    assert not (tmp_path / "ok").exists()


# ---- CPU features and SHA-256 -------------------------------------------------------------
def test_cpu_features_compile_and_run():
    f = _core.cpu_features()
    assert f["isa"] in ("avx512", "avx2", "neon", "scalar")
    if f["isa"] == "avx512":
        assert f["flags"] == ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mfma",
                              "-mprefer-vector-width=512"]
        assert f["avx2"] and f["fma"]
    if f["isa"] == "avx2":
        assert f["flags"] == ["-mavx2", "-mfma"]
    # The flags produce code this CPU runs.
    run(_core.compile_shared(kernel("isa"), ["-O3"] + f["flags"]), n=1003)


def test_isa_can_be_lowered_not_raised(monkeypatch):
    best = _core.cpu_features()["isa"]
    monkeypatch.setenv("DNNF_ISA", "scalar")
    assert _core.cpu_features()["isa"] == "scalar" and _core.cpu_features()["flags"] == []
    if best == "avx512":
        monkeypatch.setenv("DNNF_ISA", "avx2")
        assert _core.cpu_features()["flags"] == ["-mavx2", "-mfma"]
    higher = {"scalar": "avx2", "avx2": "avx512", "avx512": "neon", "neon": "avx2"}[best]
    monkeypatch.setenv("DNNF_ISA", higher)
    with pytest.raises(df.Error, match="lacks"):
        _core.cpu_features()
    monkeypatch.setenv("DNNF_ISA", "sse9")
    with pytest.raises(df.Error, match="not an instruction set"):
        _core.cpu_features()


def test_one_isa_table_gives_every_flag():
    """cpp/target/isa.h is the only place flags are spelled: cpu_features, isa_flags and the
    compile-only path all give the table's, and an unknown name lists the table's names."""
    table = {row["name"]: row for row in _core.isas()}
    assert list(table) == ["scalar", "avx2", "avx512", "neon"]
    assert [table[n]["lanes"] for n in table] == [1, 8, 16, 4]
    for name, row in table.items():
        assert row["flags"][:1] == ([f"-D{row['macro']}"] if row["macro"] else []), name
    f = _core.cpu_features()
    assert f["flags"] == [a for a in table[f["isa"]]["flags"] if not a.startswith("-D")]
    assert _core.isa_flags(f["isa"]) == table[f["isa"]]["flags"]
    assert table[f["isa"]]["hardware"]
    lacking = [n for n, row in table.items() if not row["hardware"]]
    for name in lacking:
        with pytest.raises(df.Error, match=f"'{name}' needs .*which this CPU lacks"):
            _core.isa_flags(name)
    with pytest.raises(df.Error, match="expected scalar, avx2, avx512, neon"):
        _core.isa_flags("sse9")


@pytest.mark.parametrize("n", [0, 3, 55, 56, 63, 64, 65, 119, 1000])
def test_sha256_matches_hashlib(n):
    data = bytes((i * 7 + 3) % 256 for i in range(n))
    assert _core.sha256_hex(data) == hashlib.sha256(data).hexdigest()


_FULL_DISK = """
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (__LIMIT__, __LIMIT__))
import numpy as np
import dnnfusion as df
from onnx import helper as h, TensorProto as T
g = h.make_graph([h.make_node("Tanh", ["x"], ["y"])], "t", [h.make_tensor_value_info("x", T.FLOAT, [3, 50])],
                 [h.make_tensor_value_info("y", T.FLOAT, [3, 50])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
x = np.linspace(-2, 2, 150, dtype=np.float32).reshape(3, 50)
try:
    got = df.compile(m.SerializeToString(), threads=1)(x)
    print("CORRECT" if np.allclose(got, np.tanh(x), atol=1e-6) else "WRONG")
except df.Error as e:
    print("CLEAR", type(e).__name__)
"""


@pytest.mark.parametrize("limit", [4096, 1 << 26])
def test_a_full_disk_gives_a_clear_error_or_a_correct_result(tmp_path, limit):
    """The cache directory's disk is full (RLIMIT_FSIZE in a child: every write past the limit
    fails): the compile ends in a CompileError, never a crash or a wrong answer; with room,
    the same child computes the right result."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _FULL_DISK.replace("__LIMIT__", str(limit))], capture_output=True,
                       text=True, env={**os.environ, "DNNF_CACHE_DIR": str(tmp_path)}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == ("CLEAR CompileError" if limit == 4096 else "CORRECT"), (r.stdout, r.stderr[-2000:])


def test_sanitize_without_the_asan_runtime_is_a_clear_error(monkeypatch):
    """DNNF_SANITIZE=1 compiles generated code with ASan, which only loads into a process whose
    ASan runtime came first: outside .ci/sanitize's preload that is a CompileError saying so,
    before any compiling (under the preload, .ci/sanitize runs the same code sanitized)."""
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        lib = _core.compile_shared(kernel("sanitized"), [])  # the sanitized run: it loads
        assert lib.path.endswith(".so")
        return
    monkeypatch.setenv("DNNF_SANITIZE", "1")
    with pytest.raises(df.CompileError, match=r"needs the ASan runtime loaded first: run under LD_PRELOAD"):
        _core.compile_shared(kernel("sanitized"), [])
