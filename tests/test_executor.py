"""The CPU executor (cpp/runtime/executor.cc) on hand-written sources that implement the
GENERATED-ABI of cpp/codegen/codegen.h, independent of the code generator: constants and
arena reach the code, inputs are checked before any C code sees them, kernel errors, compile
errors and a missing compiler raise the documented exceptions, and the kernel cache is hit
on a second build."""

from __future__ import annotations

import os
import re
import shutil
import threading

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core
from dnnfusion.compiler import prelude_dir

GRAPH = """graph g(%x: f32[2,3]) {
  %two: f32[] = const [2.0]
  %c: f32[3] = const [1.0, 2.0, 3.0]
  %m: f32[2,3] = Mul(%x, %two)
  %y: f32[2,3] = Add(%m, %c)
  return %y
}"""

# y = x * 2 + c, through the arena; x[0] < -1000 is a "kernel error"; `nt` (the thread
# count passed to dnnf_run) is stored where tests can read it back: y[0] when x[0] == 777.
SOURCE = r"""
// TAG
#include <cstdint>
#include <cstdio>
#include "simd.h"  // proves -I<prelude>

struct State { const float* c; const float* two; };

extern "C" __attribute__((visibility("default"))) int dnnf_abi_version(void) { return ABI; }
extern "C" __attribute__((visibility("default"))) void* dnnf_create(const void* const* c, int nt, char* err, int errlen) {
  if (CREATE_FAILS) { std::snprintf(err, errlen, "cannot pack the weights"); return nullptr; }
  return new State{static_cast<const float*>(c[0]), static_cast<const float*>(c[1])};
}
extern "C" __attribute__((visibility("default"))) void dnnf_destroy(void* st) { delete static_cast<State*>(st); }
extern "C" __attribute__((visibility("default"))) int dnnf_run(void* st, const void* const* in, void* const* out, void* arena,
                        int nt, char* err, int errlen) {
  const State* s = static_cast<const State*>(st);
  const float* x = static_cast<const float*>(in[0]);
  float* y = static_cast<float*>(out[0]);
  float* t = static_cast<float*>(arena);
  if (reinterpret_cast<uintptr_t>(arena) % 64 != 0) {
    std::snprintf(err, errlen, "arena is not 64-byte aligned");
    return 2;
  }
  if (x[0] < -1000) { std::snprintf(err, errlen, "index %d out of range", -1); return 1; }
  for (int i = 0; i < 6; ++i) t[i] = x[i] * s->two[0];
  for (int i = 0; i < 6; ++i) y[i] = t[i] + s->c[i % 3] + 0 * dnnf::simd::kVecWidth;
  if (x[0] == 777) y[0] = static_cast<float>(nt);
  return 0;
}
extern "C" __attribute__((visibility("default"))) int dnnf_run_timed(void* st, const void* const* in, void* const* out,
                        void* arena, int nt, double* seconds, char* err, int errlen) {
  int rc = dnnf_run(st, in, out, arena, nt, err, errlen);
  seconds[0] = 0.25;  // this module has no kernels: only the "output copies" slot
  return rc;
}
"""


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """One kernel cache for the module (tests that need a cold compile use their own tag)."""
    saved = {k: os.environ.get(k) for k in ("DNNF_CACHE_DIR", "DNNF_CXX", "CXX", "DNNF_ISA")}
    os.environ["DNNF_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    for k in ("DNNF_CXX", "CXX", "DNNF_ISA"):
        os.environ.pop(k, None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def graph():
    return df.parse(GRAPH)


def source(tag: str = "base", abi: int = 3, create_fails: bool = False) -> str:
    return (SOURCE.replace("TAG", tag).replace("ABI", str(abi))
            .replace("CREATE_FAILS", "true" if create_fails else "false"))


def build(graph, src: str | None = None, **kw):
    consts = {c.name: c.id for c in graph.constants}
    return _core.CpuExecutable.from_source(graph, src or source(), [consts["c"], consts["two"]],
                                           kw.pop("arena_bytes", 24), **kw)


@pytest.fixture(scope="module")
def exe(graph):
    return build(graph)


def expected(x):
    return x * np.float32(2) + np.array([1, 2, 3], np.float32)


def x23(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)


def test_runs_and_matches(exe):
    x = x23()
    (y,) = exe.run([x])
    assert y.dtype == np.float32 and y.shape == (2, 3)
    assert y.flags.c_contiguous and y.flags.writeable and y.ctypes.data % 64 == 0
    np.testing.assert_array_equal(y, expected(x))
    (y2,) = exe.run((x,))
    assert y2.ctypes.data != y.ctypes.data  # fresh outputs every call


def test_non_contiguous_inputs_are_made_contiguous(exe):
    big = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    for x in (big[::2, ::2], np.asfortranarray(x23()), x23()[:, ::-1]):
        assert not x.flags.c_contiguous
        np.testing.assert_array_equal(exe.run([x])[0], expected(np.ascontiguousarray(x)))


@pytest.mark.parametrize("bad, kind", [
    (np.zeros((2, 3), np.int64), "i64[2,3]"),
    (np.zeros((2, 3), np.float64), "f64[2,3]"),
    (np.zeros((2, 3), np.float16), "f16[2,3]"),
])
def test_wrong_dtype(exe, bad, kind):
    with pytest.raises(df.DTypeError, match=rf"input 'x': expected f32\[2,3\], got {re.escape(kind)}"):
        exe.run([bad])


def test_unsupported_and_big_endian_dtypes(exe):
    with pytest.raises(df.DTypeError, match="input 'x'.*unsupported element type"):
        exe.run([np.zeros((2, 3), np.complex64)])
    with pytest.raises(df.DTypeError, match="input 'x' is big-endian"):
        exe.run([np.zeros((2, 3), ">f4")])


@pytest.mark.parametrize("shape", [(3, 2), (2, 3, 1), (6,), (), (2, 4)])
def test_wrong_shape(exe, shape):
    with pytest.raises(df.ShapeError, match=r"input 'x': expected f32\[2,3\], got f32\["):
        exe.run([np.zeros(shape, np.float32)])


def test_wrong_input_count_and_kind(exe):
    with pytest.raises(TypeError, match=r"takes 1 input \(x\), got 2"):
        exe.run([x23(), x23()])
    with pytest.raises(TypeError, match=r"takes 1 input \(x\), got 0"):
        exe.run([])
    with pytest.raises(TypeError, match="input 'x' must be a numpy array, got list"):
        exe.run([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]])


def test_kernel_error_becomes_error(exe):
    x = x23()
    x[0, 0] = -1e6
    with pytest.raises(df.Error, match="the compiled model failed: index -1 out of range"):
        exe.run([x])
    np.testing.assert_array_equal(exe.run([x23()])[0], expected(x23()))  # still usable


def test_create_failure_and_abi_mismatch(graph):
    with pytest.raises(df.Error, match="cannot set up the compiled model: cannot pack the weights"):
        build(graph, source("create-fails", create_fails=True))
    with pytest.raises(df.InternalError, match="ABI version 99"):
        build(graph, source("abi", abi=99))


# Packs four 512x512 3x3 weights (9.4 MB each; Winograd's transform takes 43 MB each while
# packing, on the module's two threads) after the address space was limited to 24 MB more than
# the process holds.
PACKING_OUT_OF_MEMORY = r"""
import resource, numpy as np, dnnfusion as df
from dnnfusion import _core
from dnnfusion.compiler import prelude_dir
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
nodes, inits, x = [], [], "x"
for i in range(4):
    inits.append(numpy_helper.from_array((0.01 * rng.standard_normal((512, 512, 3, 3))).astype(np.float32), f"w{i}"))
    nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"y{i}"], pads=[1, 1, 1, 1]))
    x = f"y{i}"
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512, 8, 8])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 512, 8, 8])], inits)
m = df.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(), threads=2)
graph, generated, isa = m.graph.graph, m.generated, m.stats["isa"]
del m  # its packed weights freed
vm = int(next(ln for ln in open("/proc/self/status") if ln.startswith("VmSize")).split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (24 << 20), resource.RLIM_INFINITY))
try:
    _core.CpuExecutable(graph, generated, isa, 2, str(prelude_dir()))
    print("packed")
except df.Error as e:
    print("error:", e)
"""


def test_weights_that_cannot_be_packed_are_a_clear_error_on_any_thread(tmp_path):
    """dnnf_create packs the weights on the module's pool: an allocation that fails on a worker
    thread is caught there and rethrown by the caller, a clear error, never std::terminate."""
    import subprocess
    import sys

    env = {**os.environ, "MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "65536", "DNNF_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", PACKING_OUT_OF_MEMORY], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]  # std::terminate would end it with SIGABRT
    # std::bad_alloc from the packing, or the pool's thread that could not start: a clear error
    assert r.stdout.startswith("error: cannot set up the compiled model: "), (r.stdout, r.stderr[-2000:])


def test_threads_reach_the_code(graph):
    ex = build(graph, threads=3)
    x = x23()
    x[0, 0] = 777
    assert ex.run([x])[0][0, 0] == 3
    ex.set_num_threads(1)
    assert ex.num_threads == 1
    assert ex.run([x])[0][0, 0] == 1


def test_concurrent_runs_are_serialised(exe):
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for k in range(200):
                x = x23(seed * 1000 + k)
                np.testing.assert_array_equal(exe.run([x])[0], expected(x))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_compile_error_has_diagnostics(graph):
    bad = source("syntax") + "\nint broken( {\n"
    with pytest.raises(df.CompileError, match=r"(?s)error.*broken"):
        build(graph, bad)


def test_no_compiler(graph, monkeypatch, tmp_path):
    monkeypatch.setenv("DNNF_CXX", "/nonexistent/c++")
    with pytest.raises(df.CompileError, match="nonexistent"):
        build(graph, source("no-cxx-explicit"))
    monkeypatch.delenv("DNNF_CXX")
    # An empty PATH means the default one (as for execvp); an empty directory has nothing.
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(df.CompileError, match="no C\\+\\+ compiler found"):
        build(graph, source("no-cxx-path"))


def test_cache_hit_on_second_build(graph):
    first = build(graph, source("cache"))
    assert not first.cached
    second = build(graph, source("cache"))
    assert second.cached and second.library_path == first.library_path
    assert second.compile_seconds < first.compile_seconds
    np.testing.assert_array_equal(second.run([x23()])[0], expected(x23()))


def test_changed_prelude_is_a_different_object(graph, tmp_path):
    prelude = tmp_path / "prelude"
    shutil.copytree(prelude_dir(), prelude)
    a = build(graph, source("prelude"), prelude_dir=str(prelude))
    (prelude / "simd.h").write_text((prelude / "simd.h").read_text() + "\n// changed\n")
    b = build(graph, source("prelude"), prelude_dir=str(prelude))
    assert not b.cached and b.library_path != a.library_path
    assert _core.prelude_hash(str(prelude)) != _core.prelude_hash(prelude_dir())


def test_missing_prelude_and_bad_isa(graph, tmp_path):
    with pytest.raises(df.CompileError, match="has no headers"):
        build(graph, prelude_dir=str(tmp_path))
    with pytest.raises(df.Error, match="unknown instruction set 'mmx'"):
        build(graph, isa="mmx")
    other = "neon" if _core.cpu_features()["isa"] != "neon" else "avx512"
    with pytest.raises(df.Error, match="this CPU lacks"):
        build(graph, isa=other)


def test_isa_flags_select_the_dialect():
    assert _core.isa_flags("scalar") == []
    f = _core.cpu_features()
    if f["avx2"] and f["fma"]:
        assert _core.isa_flags("avx2")[0] == "-DDNNF_ISA_AVX2"
    if f["avx512f"]:
        assert _core.isa_flags("avx512")[0] == "-DDNNF_ISA_AVX512"


def test_prelude_dir_is_found():
    d = prelude_dir()
    assert os.path.isfile(os.path.join(d, "simd.h")) and os.path.isfile(os.path.join(d, "gemm.h"))



def test_opt_level_override(graph, monkeypatch):
    monkeypatch.setenv("DNNF_OPT_LEVEL", "fast")
    with pytest.raises(df.Error, match="DNNF_OPT_LEVEL must be 0, 1, 2 or 3"):
        build(graph)
    monkeypatch.setenv("DNNF_OPT_LEVEL", "1")
    x = x23(3)
    np.testing.assert_array_equal(build(graph).run([x])[0], expected(x))


def test_modules_keep_their_prelude_statics_private(exe):
    # The prelude's function-local statics (GEMM blocking, thread pool, scratch) differ per
    # ISA; with g++'s default STB_GNU_UNIQUE binding, every module loaded into a process
    # shared the first one's (an AVX2 module's GEMM blocking overran an AVX-512 module's
    # packing buffers). Modules export the five ABI functions and bind nothing uniquely.
    import subprocess

    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not found")
    out = subprocess.run([nm, "-D", "--defined-only", exe.library_path], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    kinds = {line.split()[-1]: line.split()[-2] for line in out if len(line.split()) >= 3}
    for fn in ("dnnf_abi_version", "dnnf_create", "dnnf_destroy", "dnnf_run", "dnnf_run_timed"):
        assert kinds.get(fn) == "T", (fn, kinds.get(fn))
    unique = [line for line in out if line.split()[-2:-1] == ["u"]]
    assert not unique, unique
