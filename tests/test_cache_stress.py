"""The caches under stress (issue 17, part 7), end to end through `dnnfusion.compile` in
separate processes, as users hit them: two processes compiling the same model at once into a
cold cache, a kernel library truncated on disk, a cache directory that cannot be created or
written. Each ends in a correct result or a clear `dnnfusion.Error`, never a crash or a wrong
answer. (The kernel cache's own cases, corrupt entries, races on one source, full disks and unsafe
permissions, are in test_runtime_compiler.py; the import cache's in test_import_cache.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dnnfusion import _core

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

CHILD = textwrap.dedent("""
    import sys, numpy as np, dnnfusion as df
    path = sys.argv[1]
    x = np.linspace(-2, 2, 6 * 40, dtype=np.float32).reshape(6, 40)
    try:
        m = df.compile(path, [x])
    except df.Error as e:
        print("clear error:", type(e).__name__, str(e).splitlines()[0])
        sys.exit(3)
    got = m(x)
    want = df.load(path).run_reference(x=x)[0]
    ok = np.allclose(got, want, rtol=1e-5, atol=1e-6)
    print("correct" if ok else "WRONG", "cache_hit" if m.stats["cache_hit"] else "compiled", m.library_path)
    sys.exit(0 if ok else 1)
""")


@pytest.fixture
def model_path(tmp_path):
    rng = np.random.default_rng(3)
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "b"], ["a"]),
                      h.make_node("Tanh", ["a"], ["t"]), h.make_node("Softmax", ["t"], ["y"], axis=-1)],
                     "stress", [h.make_tensor_value_info("x", T.FLOAT, [6, 40])],
                     [h.make_tensor_value_info("y", T.FLOAT, [6, 24])],
                     [nh.from_array(rng.standard_normal((40, 24)).astype(np.float32), "w"),
                      nh.from_array(rng.standard_normal(24).astype(np.float32), "b")])
    path = tmp_path / "stress.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    return str(path)


def child(path: str, cache: str, **env_vars: str) -> subprocess.Popen:
    env = dict(os.environ, DNNF_CACHE_DIR=cache, **env_vars)
    return subprocess.Popen([sys.executable, "-c", CHILD, path], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p: subprocess.Popen) -> tuple[int, str]:
    out, err = p.communicate(timeout=300)
    return p.returncode, out + err[-2000:]


def test_two_processes_compile_the_same_model_at_once(model_path, tmp_path, own_prelude):
    cache = str(tmp_path / "cache")
    # A compiler that logs its command lines: the precompiled header and each prelude unit are
    # built once, by one of the two (a lock file per entry), the other waits and uses them.
    cxx = _core.find_compiler()["path"]
    log = tmp_path / "cxx.log"
    wrapper = tmp_path / "cxx-log"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = --version ] || echo "$@" >> {log}\nexec {cxx} "$@"\n')
    wrapper.chmod(0o755)
    procs = [child(model_path, cache, DNNF_CXX=str(wrapper)) for _ in range(2)]  # both cold, prelude too
    results = [finish(p) for p in procs]
    for rc, out in results:
        assert rc == 0 and out.startswith("correct"), out
    lines = log.read_text().splitlines()
    headers = [ln for ln in lines if "c++-header" in ln]
    units = [ln.split("tmp.unit.")[1].split(".")[0:3] for ln in lines if " -c " in f" {ln} " and "tmp.unit." in ln]
    assert len(headers) == 1, headers
    assert units and len(units) == len({tuple(u) for u in units}), units
    rc, out = finish(child(model_path, cache, DNNF_CXX=str(wrapper)))  # a third finds what they left
    assert rc == 0 and out.startswith("correct cache_hit"), out


@pytest.mark.parametrize("keep", [0.5, 0.02, 0.0])
def test_a_truncated_kernel_library_is_rebuilt(model_path, tmp_path, keep):
    cache = str(tmp_path / "cache")
    rc, out = finish(child(model_path, cache))
    assert rc == 0 and out.startswith("correct compiled"), out
    lib = out.split()[-1]
    size = os.path.getsize(lib)
    with open(lib, "r+b") as f:  # a disk fault: the file is cut short
        f.truncate(int(size * keep))
    rc, out = finish(child(model_path, cache))
    assert rc == 0 and out.startswith("correct"), out
    # compiled again in place, whole: the same path, past the cut (not byte for byte the same
    # size: two links of one module differed by 8 bytes in a fresh clone, 160600 and 160608)
    assert out.split()[-1] == lib and os.path.getsize(lib) > size // 2, (out, os.path.getsize(lib), size)


@pytest.mark.parametrize("where", ["missing", "read-only", "mode 555"])
def test_a_cache_directory_that_cannot_be_written_is_a_clear_error(model_path, tmp_path, where):
    """A cache directory whose parent cannot hold it (not even root can make a directory under
    /proc/self), an existing directory that takes no new entries (/proc/self itself), and one
    made read-only with chmod (refused to an ordinary user; root writes past its mode, so
    there the compile must simply be correct): a correct result or an Error naming the
    directory, never a crash."""
    if where == "mode 555":
        cache = str(tmp_path / "ro")
        os.mkdir(cache)
        os.chmod(cache, 0o555)
    else:
        cache = {"missing": "/proc/self/no-such-dir/cache", "read-only": "/proc/self"}[where]
    # the directory the error must name: for the missing one, the first that could not be made
    named = "/proc/self/no-such-dir" if where == "missing" else cache
    rc, out = finish(child(model_path, cache))
    assert (rc == 0 and out.startswith("correct")) or (rc == 3 and out.startswith("clear error")), out
    if rc == 3:
        assert named in out, out
    if where == "mode 555":
        assert rc == (0 if os.geteuid() == 0 else 3), out
    else:
        assert rc == 3, out
