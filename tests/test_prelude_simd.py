"""Tests of the SIMD vocabulary (cpp/codegen/prelude/simd_*.h), the names generated kernels
are written in (paper §4.4).

One C++ driver runs every vocabulary function over the same inputs, once per dialect
(scalar, AVX2, AVX-512 on this machine; NEON cross-compiled and run under qemu-aarch64).
For each dialect we check:

1. every function against NumPy (bit-exact where IEEE fixes the answer, within an ulp bound
   for the transcendental functions, a relative bound for the composite activations);
2. every elementwise function bit for bit against the scalar twin (they share one algorithm,
   simd_math_body.h, and the driver is built with -ffp-contract=off);
3. tails: for every array length 0..3*W+1, results equal the full-array ones, nothing past
   the end is written, and nothing past the end is read (the input ends at a PROT_NONE page);
   v_load_tail zero-fills; vm_first sets the first n lanes; reductions handle tails.
"""

from __future__ import annotations

import math
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest

from dialects import params
from native_toolchain import PRELUDE, CompiledOnly, dialect_commands

COMMON = ["-std=c++17", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", f"-I{PRELUDE}"]
WIDTH = {"scalar": 1, "avx2": 8, "avx512": 16, "neon": 4}

# --------------------------------------------------------------------------------------------
# The driver. Ops are one table of captureless lambdas (name, vector expression); inputs are
# x, y, z (f32) and c (bytes, for masks). Output records are announced on stdout as
# "name L count" and written to the binary output file in the same order.
# --------------------------------------------------------------------------------------------
DRIVER = r"""
#include "simd.h"
#include <sys/mman.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>
using namespace dnnf::simd;
constexpr int W = kVecWidth;

struct Op { const char* name; vf (*f)(vf x, vf y, vf z, vm c); };
inline vf b2f(vm m) { return v_select(m, v_set1(1.0f), v_zero()); }
#define OP(name, expr) \
  {name, [](vf x, vf y, vf z, vm c) -> vf { (void)x; (void)y; (void)z; (void)c; return expr; }}
const Op kOps[] = {
  OP("copy", x), OP("neg", v_neg(x)), OP("abs", v_abs(x)), OP("sqrt", v_sqrt(x)),
  OP("rcp", v_rcp(x)), OP("rsqrt", v_rsqrt(x)), OP("floor", v_floor(x)), OP("ceil", v_ceil(x)),
  OP("round", v_round(x)),
  OP("add", v_add(x, y)), OP("sub", v_sub(x, y)), OP("mul", v_mul(x, y)), OP("div", v_div(x, y)),
  OP("max", v_max(x, y)), OP("min", v_min(x, y)),
  OP("fma", v_fma(x, y, z)), OP("fnma", v_fnma(x, y, z)),
  OP("cmp_eq", b2f(v_cmp_eq(x, y))), OP("cmp_ne", b2f(v_cmp_ne(x, y))),
  OP("cmp_lt", b2f(v_cmp_lt(x, y))), OP("cmp_le", b2f(v_cmp_le(x, y))),
  OP("cmp_gt", b2f(v_cmp_gt(x, y))), OP("cmp_ge", b2f(v_cmp_ge(x, y))),
  OP("mask_and", b2f(vm_and(v_cmp_lt(x, y), c))), OP("mask_or", b2f(vm_or(v_cmp_lt(x, y), c))),
  OP("mask_not", b2f(vm_not(v_cmp_lt(x, y)))),
  OP("where", v_select(c, x, y)),
  OP("exp", v_exp(x)), OP("expm1", v_expm1(x)), OP("log", v_log(x)), OP("log1p", v_log1p(x)),
  OP("tanh", v_tanh(x)), OP("sigmoid", v_sigmoid(x)), OP("erf", v_erf(x)), OP("erfc", v_erfc(x)),
  OP("pow", v_pow(x, y)),
  OP("relu", v_relu(x)), OP("leaky_relu", v_leaky_relu(x, 0.1f)), OP("elu", v_elu(x, 1.5f)),
  OP("clip", v_clip(x, -1.0f, 2.0f)), OP("hard_sigmoid", v_hard_sigmoid(x, 0.2f, 0.5f)),
  OP("hard_swish", v_hard_swish(x)), OP("softplus", v_softplus(x)), OP("mish", v_mish(x)),
  OP("gelu_erf", v_gelu_erf(x)), OP("gelu_tanh", v_gelu_tanh(x)),
};

FILE* g_out;
void emit(const char* kind, const char* name, int L, const float* p, int count) {
  std::printf("%s %s %d %d\n", kind, name, L, count);
  std::fwrite(p, 4, count, g_out);
}

// Full vectors, then one tail; aligned flavour on the aligned full arrays.
template <bool kAligned>
void apply(const Op& op, const float* x, const float* y, const float* z, const uint8_t* c,
           float* out, int L) {
  int i = 0;
  for (; i + W <= L; i += W) {
    vf r = kAligned ? op.f(v_load(x + i), v_load(y + i), v_load(z + i), vm_load_u8(c + i))
                    : op.f(v_loadu(x + i), v_loadu(y + i), v_loadu(z + i), vm_load_u8(c + i));
    if (kAligned) v_store(out + i, r); else v_storeu(out + i, r);
  }
  if (i < L) {
    int n = L - i;
    v_store_tail(out + i, op.f(v_load_tail(x + i, n), v_load_tail(y + i, n),
                               v_load_tail(z + i, n), vm_load_u8_tail(c + i, n)), n);
  }
}

// A buffer whose last byte is followed by a PROT_NONE page: reading past it faults.
struct Fence {
  char* base; size_t size;
  explicit Fence(size_t bytes) {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size = (bytes + page - 1) / page * page;
    base = static_cast<char*>(mmap(nullptr, size + page, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED || mprotect(base + size, page, PROT_NONE) != 0) std::abort();
  }
  template <class T> T* place(const T* src, int n) {
    T* p = reinterpret_cast<T*>(base + size) - n;
    std::memcpy(p, src, sizeof(T) * n);
    return p;
  }
};

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  FILE* in = std::fopen(argv[1], "rb");
  int N = 0;
  if (!in || std::fread(&N, 4, 1, in) != 1) return 3;
  auto alloc = [&](size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); };
  float* x = static_cast<float*>(alloc(4 * N));
  float* y = static_cast<float*>(alloc(4 * N));
  float* z = static_cast<float*>(alloc(4 * N));
  uint8_t* c = static_cast<uint8_t*>(alloc(N));
  float* out = static_cast<float*>(alloc(4 * N));
  if (std::fread(x, 4, N, in) != size_t(N) || std::fread(y, 4, N, in) != size_t(N) ||
      std::fread(z, 4, N, in) != size_t(N) || std::fread(c, 1, N, in) != size_t(N)) return 4;
  g_out = std::fopen(argv[2], "wb");
  std::printf("width %d %d\n", W, kVecWidth);

  // 1. every op over the whole (aligned) arrays
  for (const Op& op : kOps) {
    apply<true>(op, x, y, z, c, out, N);
    emit("full", op.name, N, out, N);
  }
  // 2. tails: lengths 0..3W+1, inputs fenced, output followed by sentinels
  Fence fx(4 * N), fy(4 * N), fz(4 * N), fc(N);
  const float sentinel = 12345.0f;
  std::vector<float> buf;
  for (const Op& op : kOps) {
    for (int L = 0; L <= 3 * W + 1; ++L) {
      buf.assign(L + 2 * W, sentinel);
      apply<false>(op, fx.place(x, L), fy.place(y, L), fz.place(z, L), fc.place(c, L),
                   buf.data(), L);
      emit("tail", op.name, L, buf.data(), L + 2 * W);
    }
  }
  // 3. v_load_tail zero-fills, vm_first(n) has n true lanes
  for (int n = 0; n <= W; ++n) {
    std::vector<float> b(W, sentinel);
    v_storeu(b.data(), v_load_tail(fz.place(z, n), n));
    emit("tail", "load_tail", n, b.data(), W);
    v_storeu(b.data(), b2f(vm_first(n)));
    emit("tail", "vm_first", n, b.data(), W);
  }
  // 4. reductions over z[:L] (finite), masked tails with the identity
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<int> lengths;
  for (int L = 0; L <= 3 * W + 1; ++L) lengths.push_back(L);
  lengths.push_back(N);
  for (int L : lengths) {
    const float* p = fz.place(z, L);
    vf s = v_zero(), hi = v_set1(-inf), lo = v_set1(inf);
    int i = 0;
    for (; i + W <= L; i += W) {
      vf v = v_loadu(p + i);
      s = v_add(s, v); hi = v_max(hi, v); lo = v_min(lo, v);
    }
    if (i < L) {
      int n = L - i;
      vm m = vm_first(n);
      vf v = v_load_tail(p + i, n);
      s = v_add(s, v);
      hi = v_max(hi, v_select(m, v, v_set1(-inf)));
      lo = v_min(lo, v_select(m, v, v_set1(inf)));
    }
    float r[3] = {v_reduce_add(s), v_reduce_max(hi), v_reduce_min(lo)};
    emit("tail", "reduce", L, r, 3);
  }
  std::fclose(g_out);
  for (void* p : {static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(z),
                  static_cast<void*>(c), static_cast<void*>(out)}) std::free(p);
  return 0;
}
"""


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------
def make_inputs(seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    f32 = np.finfo(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40,
                        f32.tiny, -f32.tiny, f32.max, -f32.max, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0,
                        -3.0, 0.625, -0.625, 0.875, -0.875, 88.72, 88.73, 89.0, -87.3,
                        -103.9, -104.0, -110.0, 10.0, 10.5, -10.5, 1e-8, -1e-8, 1e-20,
                        0.70710677, 1.4142135, 2.5, -2.5, 0.5000001, 1e30, -1e30],
                       dtype=np.float32)
    parts = [special,
             rng.standard_normal(3000) * 0.1, rng.standard_normal(3000) * 3,
             rng.uniform(-110, 110, 3000),
             np.sign(rng.standard_normal(3000)) * 10.0 ** rng.uniform(-40, 38, 3000),
             rng.uniform(0.5, 2.0, 2000), rng.uniform(-1e-3, 1e-3, 1000)]
    x = np.concatenate(parts).astype(np.float32)
    n = x.size
    y = np.concatenate([rng.permutation(x)[: n // 2],
                        rng.integers(-4, 5, n - n // 2).astype(np.float32)]).astype(np.float32)
    y[rng.integers(0, n, n // 8)] = x[rng.integers(0, n, n // 8)]  # some equal pairs
    z = (rng.standard_normal(n) * 10).astype(np.float32)
    c = (rng.random(n) < 0.5).astype(np.uint8) * rng.integers(1, 256, n).astype(np.uint8)
    return x, y, z, c


@dataclass
class Run:
    width: int
    full: dict[str, np.ndarray]
    tails: dict[tuple[str, int], np.ndarray]


def parse(stdout: str, raw: bytes) -> Run:
    data = np.frombuffer(raw, dtype=np.float32)
    lines = stdout.split("\n")
    width = int(lines[0].split()[1])
    full, tails, pos = {}, {}, 0
    for line in lines[1:]:
        if not line:
            continue
        kind, name, L, count = line.split()
        rec = data[pos:pos + int(count)]
        pos += int(count)
        if kind == "full":
            full[name] = rec
        else:
            tails[(name, int(L))] = rec
    assert pos == data.size
    return Run(width, full, tails)


def _compile(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{r.stderr[-4000:]}")




@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run | str]:
    """Compile the driver once per dialect (in parallel), run it; a str value is a skip reason."""
    d = tmp_path_factory.mktemp("simd")
    src = d / "driver.cc"
    src.write_text(DRIVER)
    x, y, z, c = make_inputs()
    inp = d / "in.bin"
    with open(inp, "wb") as f:
        f.write(np.int32(x.size).tobytes() + x.tobytes() + y.tobytes() + z.tobytes() + c.tobytes())

    jobs: dict[str, list[str]] = {}
    runners: dict[str, list[str]] = {}
    result: dict[str, Run | CompiledOnly | str] = {}
    for isa, job in dialect_commands(src, COMMON).items():
        if isinstance(job, str):
            result[isa] = job
        else:
            jobs[isa] = [*job.cmd, "-o", str(d / isa)]
            if job.run:
                runners[isa] = job.runner
            else:
                result[isa] = CompiledOnly(isa, d / isa, job.lacks)
    with ThreadPoolExecutor(max_workers=4) as ex:
        for f in [ex.submit(_compile, cmd) for cmd in jobs.values()]:
            f.result()
    for isa in runners:
        cmd = [*runners[isa], str(d / isa), str(inp), str(d / f"{isa}.out")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{isa} driver failed ({r.returncode}): {r.stderr[-2000:]}"
        result[isa] = parse(r.stdout, (d / f"{isa}.out").read_bytes())
    result["_inputs"] = (x, y, z, c)  # type: ignore[assignment]
    return result


def get(runs, isa: str) -> Run | None:
    """The dialect's run, or None when it was compiled only (checked here)."""
    r = runs[isa]
    if isinstance(r, str):
        pytest.skip(r)
    if isinstance(r, CompiledOnly):
        r.check()
        return None
    return r


# --------------------------------------------------------------------------------------------
# NumPy references
# --------------------------------------------------------------------------------------------
def _ulps(got: np.ndarray, ref64: np.ndarray) -> np.ndarray:
    """|got - ref| in units of the float32 spacing at ref (NaN/inf handled by the caller)."""
    ref32 = ref64.astype(np.float32)
    sp = np.spacing(np.abs(ref32)).astype(np.float64)
    sp[sp == 0] = np.float64(np.spacing(np.float32(0)))
    return np.abs(got.astype(np.float64) - ref64) / sp


def _vec(fn):
    return np.vectorize(fn, otypes=[np.float64])


_erf = _vec(math.erf)
_erfc = _vec(math.erfc)


def _f64(*a):
    return [np.asarray(v, dtype=np.float64) for v in a]


def _x86max(a, b):
    return np.where(a > b, a, b)


def _x86min(a, b):
    return np.where(a < b, a, b)


def _fma(a, b, c):
    a, b, c = _f64(a, b, c)
    return a * b + c  # the float64 product of two float32 is exact


def _pow_ref(a, b):
    a, b = _f64(a, b)
    return np.power(a, b)


def _gelu_tanh_ref(x):
    (x,) = _f64(x)
    y = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    return x / (1 + np.exp(-2 * y))


# name -> (reference, check); check is "exact" (bitwise equal to the float32 reference),
# ("ulp", bound) or ("rel", rtol, atol) against a float64 reference.
F = np.float32
REFS = {
    "copy": (lambda x, y, z, c: x, "exact"),
    "neg": (lambda x, y, z, c: -x, "exact"),
    "abs": (lambda x, y, z, c: np.abs(x), "exact"),
    "sqrt": (lambda x, y, z, c: np.sqrt(x), "exact"),
    "rcp": (lambda x, y, z, c: F(1) / x, "exact"),
    "rsqrt": (lambda x, y, z, c: F(1) / np.sqrt(x), "exact"),
    "floor": (lambda x, y, z, c: np.floor(x), "exact"),
    "ceil": (lambda x, y, z, c: np.ceil(x), "exact"),
    "round": (lambda x, y, z, c: np.rint(x), "exact"),
    "add": (lambda x, y, z, c: x + y, "exact"),
    "sub": (lambda x, y, z, c: x - y, "exact"),
    "mul": (lambda x, y, z, c: x * y, "exact"),
    "div": (lambda x, y, z, c: x / y, "exact"),
    "max": (lambda x, y, z, c: _x86max(x, y), "exact"),
    "min": (lambda x, y, z, c: _x86min(x, y), "exact"),
    "fma": (lambda x, y, z, c: _fma(x, y, z), ("ulp", 0.5001)),
    "fnma": (lambda x, y, z, c: _fma(-x, y, z), ("ulp", 0.5001)),
    "cmp_eq": (lambda x, y, z, c: (x == y).astype(F), "exact"),
    "cmp_ne": (lambda x, y, z, c: (x != y).astype(F), "exact"),
    "cmp_lt": (lambda x, y, z, c: (x < y).astype(F), "exact"),
    "cmp_le": (lambda x, y, z, c: (x <= y).astype(F), "exact"),
    "cmp_gt": (lambda x, y, z, c: (x > y).astype(F), "exact"),
    "cmp_ge": (lambda x, y, z, c: (x >= y).astype(F), "exact"),
    "mask_and": (lambda x, y, z, c: ((x < y) & (c != 0)).astype(F), "exact"),
    "mask_or": (lambda x, y, z, c: ((x < y) | (c != 0)).astype(F), "exact"),
    "mask_not": (lambda x, y, z, c: (~(x < y)).astype(F), "exact"),
    "where": (lambda x, y, z, c: np.where(c != 0, x, y), "exact"),
    "exp": (lambda x, y, z, c: np.exp(_f64(x)[0]), ("ulp", 1.5)),
    "expm1": (lambda x, y, z, c: np.expm1(_f64(x)[0]), ("ulp", 3)),
    "log": (lambda x, y, z, c: np.log(_f64(x)[0]), ("ulp", 1.5)),
    "log1p": (lambda x, y, z, c: np.log1p(_f64(x)[0]), ("ulp", 2)),
    "tanh": (lambda x, y, z, c: np.tanh(_f64(x)[0]), ("ulp", 2.5)),
    "sigmoid": (lambda x, y, z, c: 1 / (1 + np.exp(-_f64(x)[0])), ("ulp", 2.5)),
    "erf": (lambda x, y, z, c: _erf(_f64(x)[0]), ("ulp", 2.5)),
    "erfc": (lambda x, y, z, c: _erfc(_f64(x)[0]), ("rel", 1e-6, 2e-37)),  # 0 beyond x = 9.1
    "pow": (lambda x, y, z, c: _pow_ref(x, y), "pow"),
    "relu": (lambda x, y, z, c: _x86max(F(0), x), "exact"),
    "leaky_relu": (lambda x, y, z, c: np.where(x < 0, x * F(0.1), x), "exact"),
    "elu": (lambda x, y, z, c: np.where(x < 0, 1.5 * np.expm1(_f64(x)[0]), x),
            ("rel", 3e-7, 1e-37)),
    "clip": (lambda x, y, z, c: _x86min(F(2), _x86max(F(-1), x)), "exact"),
    "hard_sigmoid": (lambda x, y, z, c: np.clip(_fma(x, F(0.2), F(0.5)), 0, 1), ("ulp", 0.5001)),
    "hard_swish": (lambda x, y, z, c: _f64(x)[0] * np.clip(_fma(x, F(1 / 6), F(0.5)), 0, 1),
                   ("rel", 2e-7, 1e-37)),
    "softplus": (lambda x, y, z, c: np.logaddexp(0, _f64(x)[0]), ("rel", 3e-7, 1e-37)),
    # softplus(x < -87.33) is flushed to 0, and mish multiplies that by |x| <= 104
    "mish": (lambda x, y, z, c: _f64(x)[0] * np.tanh(np.logaddexp(0, _f64(x)[0])),
             ("rel", 5e-7, 2e-36)),
    # In the tails the rounding of the argument (x / sqrt 2, or y) is amplified by the
    # function's condition number (about x^2, |2y|); PyTorch's float32 kernels share it.
    "gelu_erf": (lambda x, y, z, c: 0.5 * _f64(x)[0] * _erfc(-_f64(x)[0] / math.sqrt(2)),
                 ("rel", lambda x: 3e-7 * (1 + x * x), 2e-36)),
    "gelu_tanh": (lambda x, y, z, c: _gelu_tanh_ref(x),
                  ("rel", lambda x: 3e-7 * (2 + 1.6 * np.abs(x + 0.044715 * x ** 3)), 1e-37)),
}


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal values, or both NaN (bit patterns of NaN may differ)."""
    return (a == b) | (np.isnan(a) & np.isnan(b))


def _where(inputs, got, want, i) -> str:
    return f"x={inputs[0][i]} y={inputs[1][i]} got={got[i]} want={want[i]}"


def check_against_numpy(name: str, got: np.ndarray, inputs) -> str | None:
    ref_fn, check = REFS[name]
    with np.errstate(all="ignore"):
        ref = np.asarray(ref_fn(*inputs))
        if check == "exact":
            ref32 = ref.astype(np.float32)
            bad = ~_same(got, ref32)
            if bad.any():
                i = np.flatnonzero(bad)[:5]
                return f"{name}: {bad.sum()} mismatches, e.g. {_where(inputs, got, ref32, i)}"
            return None
        ref = ref.astype(np.float64)
        nan_ref, nan_got = np.isnan(ref), np.isnan(got)
        if (nan_ref != nan_got).any():
            i = np.flatnonzero(nan_ref != nan_got)[:5]
            return f"{name}: NaN mismatch at {_where(inputs, got, ref, i)}"
        ok = ~nan_ref
        ref32 = ref.astype(np.float32)
        inf = np.isinf(ref32) & ok
        if (got[inf] != ref32[inf]).any():
            i = np.flatnonzero(inf)[got[inf] != ref32[inf]][:5]
            return f"{name}: inf mismatch at {_where(inputs, got, ref, i)}"
        ok &= ~inf
        # v_exp (and so everything built on it) flushes results below 2^-126 to zero rather
        # than pay for subnormal arithmetic (see simd_math_body.h).
        tiny = ok & (np.abs(ref) < np.finfo(np.float32).tiny)
        if (np.abs(got[tiny].astype(np.float64) - ref[tiny]) > np.finfo(np.float32).tiny).any():
            i = np.flatnonzero(tiny)[np.abs(got[tiny] - ref[tiny]) > np.finfo(np.float32).tiny][:5]
            return f"{name}: subnormal-range result off at {_where(inputs, got, ref, i)}"
        ok &= ~tiny
        if check == "pow":
            x64, y64 = _f64(inputs[0], inputs[1])
            tol = 2e-7 * (2 + np.abs(y64 * np.log(np.abs(x64))))
            err = np.abs(got.astype(np.float64) - ref) / np.maximum(np.abs(ref), 1e-37)
            bad = ok & ~(err <= tol)
        elif check[0] == "ulp":
            err = _ulps(got, ref)
            bad = ok & ~(err <= check[1])
        else:
            _, rtol, atol = check
            if callable(rtol):
                rtol = rtol(_f64(inputs[0])[0])
            err = np.abs(got.astype(np.float64) - ref)
            bad = ok & ~(err <= atol + rtol * np.abs(ref))
        if bad.any():
            i = np.flatnonzero(bad)[:5]
            return (f"{name}: {bad.sum()} out of tolerance {check}, e.g. "
                    f"{_where(inputs, got, ref, i)}")
    return None


ISAS = params(["scalar", "avx2", "avx512", "neon"])


@pytest.mark.parametrize("isa", ISAS)
def test_width(runs, isa):
    run = get(runs, isa)
    if run is None:
        return
    assert run.width == WIDTH[isa]


@pytest.mark.parametrize("isa", ISAS)
def test_against_numpy(runs, isa):
    run = get(runs, isa)
    if run is None:
        return
    inputs = runs["_inputs"]
    assert set(run.full) == set(REFS), "every driver op needs a NumPy reference"
    errors = [e for name in REFS if (e := check_against_numpy(name, run.full[name], inputs))]
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("isa", params(["avx2", "avx512", "neon"]))
def test_bit_exact_with_scalar_twin(runs, isa):
    run, ref = get(runs, isa), get(runs, "scalar")
    if run is None:
        return
    bad = [name for name in REFS if not _same(run.full[name], ref.full[name]).all()]
    assert not bad, f"{isa} differs from the scalar twin in: {bad}"


@pytest.mark.parametrize("isa", ISAS)
def test_tails(runs, isa):
    run = get(runs, isa)
    if run is None:
        return
    w = run.width
    sentinel = np.float32(12345.0)
    for name in REFS:
        for L in range(3 * w + 2):
            rec = run.tails[(name, L)]
            assert _same(rec[:L], run.full[name][:L]).all(), f"{name} L={L}: values"
            assert (rec[L:] == sentinel).all(), f"{name} L={L}: wrote past the end"


@pytest.mark.parametrize("isa", ISAS)
def test_load_tail_and_first_n(runs, isa):
    run = get(runs, isa)
    if run is None:
        return
    w = run.width
    z = runs["_inputs"][2]
    for n in range(w + 1):
        lt = run.tails[("load_tail", n)]
        assert (lt[:n] == z[:n]).all() and (lt[n:] == 0).all(), f"load_tail n={n}: {lt}"
        fm = run.tails[("vm_first", n)]
        assert (fm[:n] == 1).all() and (fm[n:] == 0).all(), f"vm_first n={n}: {fm}"


@pytest.mark.parametrize("isa", ISAS)
def test_reductions(runs, isa):
    run = get(runs, isa)
    if run is None:
        return
    w = run.width
    z = runs["_inputs"][2].astype(np.float64)
    for L in [*range(3 * w + 2), z.size]:
        s, hi, lo = run.tails[("reduce", L)]
        part = z[:L]
        assert s == pytest.approx(part.sum(), rel=1e-5, abs=1e-3 * (1 + np.abs(part).sum()) * 1e-3)
        assert hi == (part.max() if L else -np.inf)
        assert lo == (part.min() if L else np.inf)
