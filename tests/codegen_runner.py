"""Test helper: lower an ECG with a planner, compile the generated module with the kernel
cache, and run it through its C ABI (codegen.h) with ctypes. The public executor
(dnnfusion.compile) wraps the same ABI; this keeps the code generator's tests independent
of it."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

import dnnfusion as df
from dnnfusion import _core

PRELUDE = Path(__file__).resolve().parents[1] / "cpp" / "codegen" / "prelude"
ISA_FLAGS = {
    "avx512": ["-DDNNF_ISA_AVX512", "-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl",
               "-mfma", "-mprefer-vector-width=512"],
    "avx2": ["-DDNNF_ISA_AVX2", "-mavx2", "-mfma"],
    "scalar": [],
}


def prelude_hash() -> str:
    data = b"".join(p.read_bytes() for p in sorted(PRELUDE.glob("*.h")))
    return _core.sha256_hex(data)[:16]


def generate(ecg, planner: str = "dnnfusion", isa: str = "avx512") -> dict:
    plan = df.plan.plan(ecg, planner=planner)
    return _core.generate_cpu_dict(ecg, plan, isa)


def run(ecg, feeds: dict, planner: str = "dnnfusion", isa: str = "avx512", threads: int = 2):
    """Outputs of the compiled plan, and the generated-module dict."""
    gen = generate(ecg, planner, isa)
    flags = ["-std=c++17", "-O1", "-ffp-contract=off", "-pthread", f"-I{PRELUDE}",
             f"-DDNNF_PRELUDE_HASH={prelude_hash()}", *ISA_FLAGS[isa]]
    lib = ctypes.CDLL(_core.compile_shared(gen["source"], flags, 600).path)
    lib.dnnf_create.restype = ctypes.c_void_p
    by_id = {v.id: v for v in ecg.constants}
    consts = [np.ascontiguousarray(by_id[v].numpy()) for v in gen["constants"]]
    cptrs = (ctypes.c_void_p * max(1, len(consts)))(*[a.ctypes.data for a in consts])
    err = ctypes.create_string_buffer(2000)
    state = lib.dnnf_create(cptrs, err, 2000)
    assert state, err.value.decode()
    try:
        ins = [np.ascontiguousarray(feeds[v.name]) for v in ecg.inputs]
        outs = [np.empty([int(d) for d in v.shape], dtype=df.ecg.numpy_dtype(v.dtype))
                for v in ecg.outputs]
        arena = np.empty(gen["arena_bytes"] + 64, np.uint8)
        base = arena.ctypes.data + (-arena.ctypes.data) % 64
        iptr = (ctypes.c_void_p * max(1, len(ins)))(*[a.ctypes.data for a in ins])
        optr = (ctypes.c_void_p * max(1, len(outs)))(*[a.ctypes.data for a in outs])
        rc = lib.dnnf_run(ctypes.c_void_p(state), iptr, optr, ctypes.c_void_p(base), threads,
                          err, 2000)
        if rc != 0:
            raise RuntimeError(err.value.decode())
    finally:
        lib.dnnf_destroy(ctypes.c_void_p(state))
    return outs, gen


def assert_matches_reference(ecg, feeds, outs, rtol=1e-4, atol=1e-5):
    ref = ecg.run_reference(**feeds)
    for got, want, v in zip(outs, ref, ecg.outputs):
        want = np.asarray(want)
        assert got.shape == want.shape, v.name
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=v.name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=v.name)
