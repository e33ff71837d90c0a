"""Correctness of the packed GEMM (cpp/codegen/prelude/gemm.h) against NumPy.

One C++ driver reads a list of cases (shape, transposes, strides, epilogue, prologue,
pre-packed B, threads, accumulate, blocking) and their inputs from a file, runs
dnnf::gemm::gemm_f32 / gemm_f32_packed, and writes C back. It is compiled once per dialect
(scalar, AVX2, AVX-512; NEON cross-compiled and run under qemu-aarch64) and checked against
float64 NumPy, including that C's padding columns (ldc > N) are never written.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from dialects import params
from native_toolchain import DRIVER_MAIN_OPEN, PRELUDE, CompiledOnly, Job, build_and_run, dialect_commands
# -O1 as in test_prelude_conv_pool.py: the drivers' compiles were most of this file's time, and
# the kernels hold no optimisation-dependent semantics (no -ffast-math).
COMMON = ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{PRELUDE}"]
SCALAR_FLAGS = ("-mavx2", "-mfma")  # the scalar dialect; ISA flags only let std::fma inline

DRIVER = r"""
#include "gemm.h"
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>
using namespace dnnf;
using namespace dnnf::gemm;

struct Case {
  int M, N, K, ta, tb, ep, pro, packed, threads, accumulate, mc, kc, nc, r_trans;
  long lda, ldb, ldc, ldr;
};
struct Data { const float *A, *B, *bias_col, *bias_row, *R, *scale, *shift; };

template <class Ep, class Pro>
void run(const Case& c, const Data& d, float* C, const Ep& ep, const Pro& pro) {
  const long rs_a = c.ta ? 1 : c.lda, cs_a = c.ta ? c.lda : 1;
  const long rs_b = c.tb ? 1 : c.ldb, cs_b = c.tb ? c.ldb : 1;
  Blocking blk = default_blocking();
  if (c.mc) blk.mc = c.mc;
  if (c.kc) blk.kc = c.kc;
  if (c.nc) {
    blk.nc = c.nc;
    blk.nc_by_kc = false;  // the case's column blocks as given
  }
  Options opt;
  opt.n_threads = c.threads;
  opt.accumulate = c.accumulate != 0;
  opt.blocking = &blk;
  if (c.packed) {
    PackedB pb(d.B, rs_b, cs_b, c.K, c.N, blk.kc);
    gemm_f32_packed(c.M, d.A, rs_a, cs_a, pb.view(), C, c.ldc, ep, pro, opt);
  } else {
    gemm_f32(c.M, c.N, c.K, d.A, rs_a, cs_a, d.B, rs_b, cs_b, C, c.ldc, ep, pro, opt);
  }
}

// Epilogue x prologue pairs instantiated (each pair costs compile time): every epilogue
// with no prologue; the reciprocal prologue with no epilogue; scale-shift with the chain.
template <class Pro>
void dispatch(const Case& c, const Data& d, float* C, const Pro& pro) {
  const long r_rs = c.r_trans ? 1 : c.ldr, r_cs = c.r_trans ? c.ldr : 1;
  EpResidual res{d.R, r_rs, r_cs};
  auto chain = EpChain(EpBiasCol{d.bias_col}, EpGeluErf{}, res);
  if constexpr (std::is_same_v<Pro, ProNone>) {
    switch (c.ep) {
      case 0: return run(c, d, C, EpNone{}, pro);
      case 1: return run(c, d, C, EpBiasCol{d.bias_col}, pro);
      case 2: return run(c, d, C, EpBiasRow{d.bias_row}, pro);
      case 3: return run(c, d, C, EpRelu{}, pro);
      case 4: return run(c, d, C, EpGeluErf{}, pro);
      case 5: return run(c, d, C, EpGeluTanh{}, pro);
      case 6: return run(c, d, C, res, pro);
      case 7: return run(c, d, C, chain, pro);
      case 8: return run(c, d, C, EpChain(EpScale{0.5f}, EpClip{-0.3f, 0.4f}), pro);
      case 9: return run(c, d, C, EpSigmoid{}, pro);
    }
  } else if constexpr (std::is_same_v<Pro, ProScaleShiftK>) {
    if (c.ep == 7) return run(c, d, C, chain, pro);
  } else {
    if (c.ep == 0) return run(c, d, C, EpNone{}, pro);
  }
  std::fprintf(stderr, "case ep=%d pro=%d is not instantiated in the driver\n", c.ep, c.pro);
  std::exit(5);
}

std::vector<float> read_floats(FILE* f, long n) {
  std::vector<float> v(static_cast<size_t>(std::max(n, 1L)));
  if (n > 0 && std::fread(v.data(), 4, n, f) != static_cast<size_t>(n)) std::exit(3);
  return v;
}

""" + DRIVER_MAIN_OPEN + r"""
  int current_threads = 0;
  for (int i = 0; i < n_cases; ++i) {
    int h[14];
    long l[4];
    if (std::fread(h, 4, 14, in) != 14 || std::fread(l, 8, 4, in) != 4) return 4;
    Case c{h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13],
           l[0], l[1], l[2], l[3]};
    auto A = read_floats(in, (c.ta ? c.K : c.M) * c.lda);
    auto B = read_floats(in, (c.tb ? c.N : c.K) * c.ldb);
    auto bias_col = read_floats(in, c.N);
    auto bias_row = read_floats(in, c.M);
    auto R = read_floats(in, (c.r_trans ? c.N : c.M) * c.ldr);
    auto scale = read_floats(in, c.K);
    auto shift = read_floats(in, c.K);
    auto C = read_floats(in, c.M * c.ldc);
    if (c.threads != current_threads) {
      set_num_threads(c.threads);
      current_threads = c.threads;
    }
    Data d{A.data(), B.data(), bias_col.data(), bias_row.data(),
           R.data(), scale.data(), shift.data()};
    if (c.pro == 0) dispatch(c, d, C.data(), ProNone{});
    else if (c.pro == 1) dispatch(c, d, C.data(), ProMap{[](vf x) { return simd::v_rcp(x); }});
    else dispatch(c, d, C.data(), ProScaleShiftK{d.scale, d.shift});
    std::fwrite(C.data(), 4, static_cast<size_t>(c.M) * c.ldc, out);
  }
  std::printf("tile %d %d %d\n", kMR, kNR, kKU);
  // large_alloc.h: a small buffer's and a 5 MiB buffer's offsets from 64 B and 2 MiB, after
  // writing every byte of both (memory usable to its end, freed with std::free).
  unsigned char* small = static_cast<unsigned char*>(alloc_aligned(100));
  unsigned char* big = static_cast<unsigned char*>(alloc_aligned(5u << 20));
  for (size_t i = 0; i < 100; ++i) small[i] = static_cast<unsigned char>(i);
  for (size_t i = 0; i < (5u << 20); ++i) big[i] = static_cast<unsigned char>(i);
  std::printf("alloc %d %d\n", static_cast<int>(reinterpret_cast<uintptr_t>(small) % 64),
              static_cast<int>(reinterpret_cast<uintptr_t>(big) % (2u << 20)));
  std::free(small);
  std::free(big);
  return 0;
}
"""

EP_NAMES = ["none", "bias_col", "bias_row", "relu", "gelu_erf", "gelu_tanh", "residual", "chain",
            "scale_clip", "sigmoid"]
PRO_NAMES = ["none", "rcp", "scale_shift"]


@dataclass
class Case:
    M: int
    N: int
    K: int
    ta: int = 0
    tb: int = 0
    ep: str = "none"
    pro: str = "none"
    packed: int = 0
    threads: int = 1
    accumulate: int = 0
    mc: int = 0
    kc: int = 0
    nc: int = 0
    r_trans: int = 0
    pad: int = 3  # extra elements per row of A, B, C, R (strides != widths)

    @property
    def id(self) -> str:
        s = f"{self.M}x{self.N}x{self.K}"
        for f in ("ta", "tb", "packed", "accumulate", "r_trans"):
            if getattr(self, f):
                s += f"-{f}"
        if self.ep != "none":
            s += f"-ep_{self.ep}"
        if self.pro != "none":
            s += f"-pro_{self.pro}"
        if self.threads != 1:
            s += f"-t{self.threads}"
        if self.mc or self.kc or self.nc:
            s += f"-blk{self.mc},{self.kc},{self.nc}"
        return s


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu_erf(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def build(case: Case, rng) -> tuple[bytes, np.ndarray]:
    """The case's record for the driver and the expected C (float64, M x ldc)."""
    M, N, K, p = case.M, case.N, case.K, case.pad
    u = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float32)  # noqa: E731
    lda = (M if case.ta else K) + p
    ldb = (K if case.tb else N) + p
    ldc, ldr = N + p, (M if case.r_trans else N) + p
    A_store = u(K if case.ta else M, lda)
    B_store = u(N if case.tb else K, ldb)
    A = (A_store[:, :M].T if case.ta else A_store[:, :K]).astype(np.float64)
    B = (B_store[:, :K].T if case.tb else B_store[:, :N]).astype(np.float64)
    bias_col, bias_row = u(N), u(M)
    R_store = u(N if case.r_trans else M, ldr)
    R = (R_store[:, :M].T if case.r_trans else R_store[:, :N]).astype(np.float64)
    scale, shift = u(K), u(K)
    C0 = u(M, ldc)

    if case.pro == "rcp":  # 1/A on A in [1, 3]; 1/0 = inf in the padding would poison C
        A_store += 2
        A = 1 / (A + 2)
    elif case.pro == "scale_shift":
        A = A * scale.astype(np.float64) + shift
    acc = A @ B
    if case.accumulate:
        acc = acc + C0[:, :N]
    ep = case.ep
    if ep == "bias_col":
        acc = acc + bias_col
    elif ep == "bias_row":
        acc = acc + bias_row[:, None]
    elif ep == "relu":
        acc = np.maximum(acc, 0)
    elif ep == "gelu_erf":
        acc = _gelu_erf(acc)
    elif ep == "gelu_tanh":
        acc = _gelu_tanh(acc)
    elif ep == "residual":
        acc = acc + R
    elif ep == "chain":
        acc = _gelu_erf(acc + bias_col) + R
    elif ep == "scale_clip":
        acc = np.clip(acc * 0.5, -0.3, 0.4)
    elif ep == "sigmoid":
        acc = _sigmoid(acc)
    want = C0.astype(np.float64)
    want[:, :N] = acc

    head = np.array([M, N, K, case.ta, case.tb, EP_NAMES.index(ep), PRO_NAMES.index(case.pro),
                     case.packed, case.threads, case.accumulate, case.mc, case.kc, case.nc,
                     case.r_trans], dtype=np.int32)
    strides = np.array([lda, ldb, ldc, ldr], dtype=np.int64)
    rec = b"".join(a.tobytes() for a in (head, strides, A_store, B_store, bias_col, bias_row,
                                          R_store, scale, shift, C0))
    return rec, want


def cases_x86() -> list[Case]:
    cs = []
    # odd shapes, tails of every tile size, K = 1, one element, k-blocks
    for M, N, K in [(1, 1, 1), (7, 13, 5), (33, 65, 17), (1, 100, 1), (50, 1, 30), (15, 47, 1),
                    (29, 33, 64), (3, 200, 7), (100, 70, 300), (64, 96, 600), (2, 3, 0)]:
        cs.append(Case(M, N, K))
    cs += [Case(0, 5, 5), Case(5, 0, 5)]
    # transposes, strides
    for ta, tb in [(1, 0), (0, 1), (1, 1)]:
        cs.append(Case(33, 65, 17, ta=ta, tb=tb))
        cs.append(Case(70, 40, 290, ta=ta, tb=tb, kc=128))
    # every epilogue, on an edge-heavy shape and a multi-k-block one
    for ep in EP_NAMES[1:]:
        cs.append(Case(31, 37, 19, ep=ep))
        cs.append(Case(45, 70, 530, ep=ep, kc=128))
    cs.append(Case(31, 37, 19, ep="residual", r_trans=1))
    cs.append(Case(45, 70, 130, ep="chain", r_trans=1, threads=2))
    # prologues (rcp(0) = inf: padding must be written after them), with transposed A too
    for pro, ep in [("rcp", "none"), ("scale_shift", "chain")]:
        cs.append(Case(31, 37, 19, pro=pro, ep=ep))
        cs.append(Case(45, 70, 290, pro=pro, ta=1, ep=ep, kc=128))
    # accumulate (C += A B), pre-packed B, threads, small blockings (several row blocks,
    # column blocks, shared A)
    cs.append(Case(31, 37, 300, accumulate=1, ep="relu", kc=128))
    for tb in (0, 1):
        cs.append(Case(33, 65, 17, packed=1, tb=tb))
        cs.append(Case(100, 90, 530, packed=1, tb=tb, ep="bias_col", kc=128, threads=2))
    cs.append(Case(1, 130, 40, packed=1, ep="gelu_erf"))
    # pre-packed B over several k- and column blocks, on one thread and split over two
    for threads in (1, 2):
        cs.append(Case(70, 200, 300, packed=1, kc=128, nc=64, threads=threads, ep="bias_col"))
        # few row panels with the machine's own blocking: column steps of a quarter of L2,
        # the next block prefetched (next k-block, next column step, next task's columns)
        cs.append(Case(49, 1100, 600, packed=1, threads=threads, ep="bias_col"))
        # many row panels (BERT's 128 rows: every tile shares the next block's prefetch) over
        # several k-blocks, with the packed B over 2 MiB (large_alloc.h's huge-page path)
        cs.append(Case(130, 800, 700, packed=1, threads=threads, ep="bias_col"))
        # B over half of L2 under few row panels: read once in memory order, each column
        # panel by every row panel in turn (gemm.h), with a 2-row remainder panel, a partial
        # last k-block and column panel, C accumulated into, a residual, a transposed B
        cs.append(Case(30, 1030, 1100, packed=1, threads=threads, ep="residual"))
        cs.append(Case(16, 1030, 1100, packed=1, threads=threads, accumulate=1, ep="relu", tb=1))
    # a B of over 2^20 floats is packed on the pool, in k-blocks x runs of 32 panels: a partial
    # last k-block and a partial last run, read by rows and transposed
    for tb in (0, 1):
        cs.append(Case(5, 1300, 1000, packed=1, kc=128, threads=2, tb=tb))
    for threads in (1, 2):
        cs.append(Case(200, 150, 100, threads=threads))
        cs.append(Case(129, 300, 70, threads=threads, mc=32, nc=64, ep="bias_col"))
        cs.append(Case(16, 500, 33, threads=threads, pro="rcp"))
        cs.append(Case(300, 20, 50, threads=threads, mc=20, ta=1, tb=1))
    # one column block split by rows only on two threads (a 1x1 convolution's few output
    # channels: each task packs its panels or reads A unpacked), over several k-blocks, with
    # a row tail, a residual read where C is written, and three row panels on two threads
    cs.append(Case(196, 96, 576, packed=1, threads=2, ep="bias_col", kc=128))
    cs.append(Case(49, 160, 300, packed=1, threads=2, ep="residual"))
    cs.append(Case(40, 24, 70, packed=1, threads=2, ep="relu"))
    cs.append(Case(45, 50, 530, threads=2, kc=128, ep="chain"))
    # streamed B (one row block, many column blocks: each task packs its own B block)
    for threads in (1, 2):
        cs.append(Case(30, 700, 50, nc=64, threads=threads, ep="chain"))
        cs.append(Case(20, 300, 600, nc=64, kc=128, threads=threads, tb=1, accumulate=1))
    # pre-packed B over 2 MiB whose row blocks the thread count does not divide (7 on AVX-512,
    # 8 elsewhere; 14 or 16 tasks on 3 threads): rows split further until it does
    for threads in (2, 3):
        cs.append(Case(490, 1100, 600, packed=1, mc=70, threads=threads, ep="bias_col"))
    cs.append(Case(2, 3, 0, accumulate=1, ep="bias_col"))
    return cs


def cases_neon() -> list[Case]:
    return [Case(1, 1, 1), Case(7, 13, 5), Case(33, 65, 17, ta=1, tb=1),
            Case(45, 70, 530, ep="chain", kc=128, threads=2), Case(31, 37, 19, pro="rcp"),
            Case(33, 65, 17, packed=1, ep="bias_row")]


@dataclass
class Results:
    cases: list[Case]
    got: list[np.ndarray]
    want: list[np.ndarray]
    stdout: str


def _run_dialect(workdir: Path, isa: str, job: Job, cases: list[Case]) -> Results | CompiledOnly:
    rng = np.random.default_rng(1234)
    recs, wants = zip(*(build(c, rng) for c in cases))
    res = build_and_run(workdir, isa, job, np.int32(len(cases)).tobytes() + b"".join(recs))
    if isinstance(res, CompiledOnly):
        return res
    raw, stdout = res
    data = np.frombuffer(raw, dtype=np.float32)
    got, pos = [], 0
    for c, w in zip(cases, wants):
        n = c.M * (c.N + c.pad)
        got.append(data[pos:pos + n].reshape(c.M, c.N + c.pad))
        pos += n
    assert pos == data.size
    return Results(cases, got, list(wants), stdout)



@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, Results | CompiledOnly | str]:
    d = tmp_path_factory.mktemp("gemm")
    src = d / "driver.cc"
    src.write_text(DRIVER)
    jobs, out = {}, {}
    for isa, cmd in dialect_commands(src, COMMON, SCALAR_FLAGS).items():
        if isinstance(cmd, str):
            out[isa] = cmd
        else:
            jobs[isa] = (cmd, cases_neon() if isa == "neon" else cases_x86())
    with ThreadPoolExecutor(max_workers=4) as ex:
        futs = {isa: ex.submit(_run_dialect, d, isa, *job) for isa, job in jobs.items()}
        for isa, f in futs.items():
            out[isa] = f.result()
    return out


@pytest.mark.parametrize("isa", params(["scalar", "avx2", "avx512", "neon"]))
def test_gemm_matches_numpy(results, isa):
    res = results[isa]
    if isinstance(res, str):
        pytest.skip(res)
    if isinstance(res, CompiledOnly):
        return res.check()
    failures = []
    for c, got, want in zip(res.cases, res.got, res.want):
        if c.M == 0 or c.N == 0:
            continue
        tol = 3e-6 * (1 + math.sqrt(max(c.K, 1))) + 2e-6 * c.accumulate
        err = np.abs(got[:, :c.N].astype(np.float64) - want[:, :c.N])
        bound = tol * (1 + np.abs(want[:, :c.N]))
        if not (err <= bound).all():
            i, j = np.unravel_index(np.argmax(err - bound), err.shape)
            failures.append(f"{c.id}: C[{i},{j}] = {got[i, j]} want {want[i, j]}")
        if not (got[:, c.N:] == want[:, c.N:].astype(np.float32)).all():
            failures.append(f"{c.id}: wrote into C's padding columns")
    assert not failures, "\n".join(failures)


def test_large_buffers_are_aligned(results):
    """alloc_aligned (large_alloc.h, the packed weights' and the arena's memory): 64-byte
    aligned, and a buffer of 2 MiB or more on a 2 MiB boundary (where transparent huge pages
    can back it), every byte writable, on every dialect that ran."""
    ran = {isa: [int(x) for x in r.stdout.split("alloc")[1].split()[:2]]
           for isa, r in results.items() if isinstance(r, Results)}
    assert "scalar" in ran, results
    huge = os.environ.get("DNNF_HUGEPAGES", "1")[:1] != "0"  # DNNF_HUGEPAGES=0: 64 B only
    for isa, (small, big) in ran.items():
        assert small == 0 and (big == 0 if huge else big % 64 == 0), (isa, small, big)


def test_tiles_are_the_documented_ones(results):
    tiles = {isa: r.stdout.split()[1:4] for isa, r in results.items() if isinstance(r, Results)}
    assert "scalar" in tiles and "neon" in tiles, results
    expect = {"scalar": ["4", "4", "4"], "avx2": ["6", "16", "8"], "avx512": ["14", "32", "16"],
              "neon": ["8", "12", "4"]}
    for isa, t in tiles.items():
        assert t == expect[isa], (isa, t)
