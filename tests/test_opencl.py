"""The OpenCL target (issue 15): generated OpenCL C run on an OpenCL device (PoCL's CPU device
in CI; `DNNF_OPENCL_DEVICE` picks another) against the NumPy reference, under two planners,
for every lowering construct of test_codegen and every reduced zoo model against PyTorch; the
counts, the profile, and the errors (no library, no platform, no matching device, a program
that does not build, a buffer over the device's allocation limit, an operator the target does
not run yet)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import dnnfusion as df
from dnnfusion import _core

onnx = pytest.importorskip("onnx")
from onnx import helper as h  # noqa: E402

from codegen_runner import assert_matches_reference  # noqa: E402
from test_codegen import CASES, CHANNELS_FIRST, f32, model  # noqa: E402
from test_views import CASES as VIEW_CASES  # noqa: E402

@pytest.fixture(scope="module")
def device():
    try:
        devices = _core.opencl_devices()
    except df.Error as e:
        pytest.skip(f"no OpenCL device: {e}")
    return next(d for d in devices if d["selected"])


def run_opencl(ecg, feeds, planner):
    gen = _core.generate_opencl(ecg, df.plan.plan(ecg, planner=planner, target="opencl"))
    exe = _core.OpenclExecutable(gen)
    return exe.run([feeds[v.name] for v in ecg.inputs]), gen


@pytest.mark.parametrize("planner", ["dnnfusion", "none"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_codegen_case_on_opencl(device, case, planner):
    ecg, feeds = CHANNELS_FIRST.get(case, CASES[case])()
    outs, gen = run_opencl(ecg, feeds, planner)
    assert_matches_reference(ecg, feeds, outs, atol=1e-4)
    assert "__kernel void k" in gen.source
    assert len(gen.launches) == sum(k["passes"] for k in gen.kernels) >= len(gen.kernels)
    assert gen.counts["passes"] >= len(gen.launches)


@pytest.mark.parametrize("case", sorted(VIEW_CASES))
def test_views_on_opencl(device, case):
    """GEMM operands read in place through strides, on the OpenCL target too."""
    ecg, feeds = VIEW_CASES[case]()
    outs, gen = run_opencl(ecg, feeds, "dnnfusion")
    assert_matches_reference(ecg, feeds, outs)
    assert not any(s.startswith("transpose") for k in gen.kernels for s in k["stages"])


def test_compile_target_opencl(device):
    x = f32(3, 40)
    ecg, feeds = model([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "b"], ["a"]),
                        h.make_node("Relu", ["a"], ["r"]), h.make_node("Softmax", ["r"], ["y"], axis=-1)],
                       {"x": x}, ["y"], [("w", f32(40, 24)), ("b", f32(24))])
    m = df.compile(ecg, target="opencl")
    got = m(x)
    np.testing.assert_allclose(got, ecg.run_reference(x=x)[0], rtol=1e-5, atol=1e-6)
    s = m.stats
    assert s["target"] == "opencl" and s["device"] == device["name"] and s["passes"] == 2  # gemm+epilogue, softmax
    prof = m.profile(x, repeat=2, warmup=1)
    assert len(prof.rows) == len(m.kernels) + 1 and all(r["ms"] >= 0 for r in prof.rows)
    assert "__kernel" in m.source()


# PoCL's optimiser is most of this sweep's time on a cold cache (MobileNetV2 on a 2-vCPU VM:
# 57 s with the default options, 17 s with -cl-opt-disable), and what the kernels compute does
# not depend on it (the C++ node cases build at DNNF_OPT_LEVEL=1 for the same reason). So the
# sweep builds without optimisation, except for a transformer and a CNN, which check the
# optimised build too; every other OpenCL test builds with the default options.
OPTIMISED_ZOO = {"tinybert", "mobilenetv2"}


@pytest.mark.parametrize("name", sorted(__import__("dnnfusion.zoo.registry", fromlist=["x"]).list()))
def test_zoo_reduced_on_opencl_matches_torch(device, name, monkeypatch):
    from dnnfusion.zoo import compiled_check as cc

    if name not in OPTIMISED_ZOO:
        monkeypatch.setenv("DNNF_OPENCL_BUILD_OPTIONS", "-cl-opt-disable")
    path, inputs, ref_torch, _ = cc.references(name, True)
    m = df.compile(path, inputs, target="opencl")
    assert cc._rel_err(m.run(*inputs), ref_torch) <= 1e-3


def _in_child(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_no_opencl_library_is_a_clear_error(device):
    r = _in_child("import dnnfusion as df\n"
                  "try:\n    df._core.opencl_devices()\nexcept df.Error as e:\n    print('ERR', e)\n",
                  DNNF_OPENCL_LIBRARY="/nonexistent/libOpenCL.so")
    assert "ERR no OpenCL library could be loaded" in r.stdout and "pocl-opencl-icd" in r.stdout, r


def test_no_opencl_platform_is_a_clear_error(device, tmp_path):
    r = _in_child("import dnnfusion as df\n"
                  "try:\n    df._core.opencl_devices()\nexcept df.Error as e:\n    print('ERR', e)\n",
                  OCL_ICD_VENDORS=str(tmp_path))  # the ICD loader finds no driver there
    assert "ERR no OpenCL platform is installed" in r.stdout and "pocl-opencl-icd" in r.stdout, r


def test_program_that_does_not_build_names_its_kernel_and_shows_the_log(device, monkeypatch):
    """A build failure is a CompileError with the device, the kernel at the first error and the
    compiler's log; here the user's DNNF_OPENCL_BUILD_OPTIONS break every kernel's parameter list."""
    ecg, feeds = model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Softmax", ["r"], ["y"], axis=-1)],
                       {"x": f32(4, 70)}, ["y"])
    monkeypatch.setenv("DNNF_OPENCL_BUILD_OPTIONS", "-Ddnnf_scratch=)")
    with pytest.raises(df.CompileError) as e:
        df.compile(ecg, target="opencl")
    text = str(e.value)
    assert f"building the generated program on {device['name']} failed (CL_BUILD_PROGRAM_FAILURE)" in text, text
    assert " in kernel k0_0 (line " in text and "the build log:\n" in text and "error" in text.split("log:")[1], text
    monkeypatch.setenv("DNNF_OPENCL_BUILD_OPTIONS", "-cl-mad-enable")  # options that build
    np.testing.assert_allclose(df.compile(ecg, target="opencl").run(feeds["x"])[0], ecg.run_reference(**feeds)[0],
                               rtol=1e-4, atol=1e-6)


def test_buffer_over_the_allocation_limit_is_a_clear_error(device):
    """A tensor larger than the device's largest allocation is refused before anything runs, with
    its size and the limit (POCL_MEMORY_LIMIT=1 makes PoCL's limit 256 MiB; on another device its
    own limit is used)."""
    r = _in_child(
        "import numpy as np, dnnfusion as df, sys\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "from onnx import helper as h\n"
        "from test_codegen import f32, model\n"
        "d = next(x for x in df._core.opencl_devices() if x['selected'])\n"
        "n = d['max_alloc_bytes'] // 4 + 1024\n"
        "ecg, _ = model([h.make_node('Expand', ['x', 's'], ['y'])], {'x': f32(1)}, ['y'],\n"
        "               [('s', np.array([n], np.int64))])\n"
        "try:\n    df.compile(ecg, target='opencl')\nexcept df.Error as e:\n    print('ERR', e, d['max_alloc_bytes'])\n",
        POCL_MEMORY_LIMIT="1")
    assert "ERR OpenCL: " in r.stdout and "more than the device's largest allocation" in r.stdout, r
    limit = int(r.stdout.split()[-1])
    assert f"needs {(limit // 4 + 1024) * 4} bytes" in r.stdout and f"({limit} bytes on " in r.stdout, r


def test_device_that_matches_nothing_lists_the_devices(device, monkeypatch):
    monkeypatch.setenv("DNNF_OPENCL_DEVICE", "no-such-device")
    ecg, feeds = model([h.make_node("Relu", ["x"], ["y"])], {"x": f32(4)}, ["y"])
    with pytest.raises(df.Error, match="(?s)no OpenCL device matches 'no-such-device'.*" + device["index"]):
        df.compile(ecg, target="opencl")
    monkeypatch.setenv("DNNF_OPENCL_DEVICE", device["name"][:6].upper())  # by part of the name
    assert df.compile(ecg, target="opencl").stats["device"] == device["name"]


def test_cli_lists_devices(device):
    r = subprocess.run([sys.executable, "-m", "dnnfusion", "info", "--devices"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and device["name"] in r.stdout and "*" in r.stdout, r


def test_programs_are_cached_on_disk_and_a_corrupt_entry_is_rebuilt(device, tmp_path, monkeypatch):
    monkeypatch.setenv("DNNF_CACHE_DIR", str(tmp_path))
    x = f32(5, 17)
    ecg, _ = model([h.make_node("Tanh", ["x"], ["t"]), h.make_node("Softmax", ["t"], ["y"], axis=-1)], {"x": x}, ["y"])
    want = ecg.run_reference(x=x)[0]
    first = df.compile(ecg, target="opencl")
    assert not first.stats["cache_hit"]
    (entry,) = list((tmp_path / "kernels").glob("ocl-*.bin"))
    again = df.compile(ecg, target="opencl")
    assert again.stats["cache_hit"]
    np.testing.assert_allclose(again(x), want, rtol=1e-5, atol=1e-6)
    entry.write_bytes(b"\0garbage" * 16)  # a corrupt binary: rebuilt from source, then cached again
    rebuilt = df.compile(ecg, target="opencl")
    assert not rebuilt.stats["cache_hit"]
    np.testing.assert_allclose(rebuilt(x), want, rtol=1e-5, atol=1e-6)
    assert df.compile(ecg, target="opencl").stats["cache_hit"]
