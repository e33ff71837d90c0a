// Small helpers that generated kernels call (paper §4.4): tail-aware vector loads and
// stores, gathers and scatters for composed index maps that are not contiguous, lane-wise
// fallbacks for functions outside the SIMD vocabulary, integer arithmetic with ONNX
// semantics, and the parallel loop over rows of a pointwise loop nest.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gemm_kernel.h"
#include "parallel.h"
#include "simd.h"
#include "simd_scalar.h"

namespace dnnf::cg {

using vf = simd::vf;
constexpr int W = simd::kVecWidth;

// A user-visible failure inside a kernel (e.g. an index out of range); dnnf_run reports it.
struct KernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] inline void index_error(const char* op, long index, long size) {
  throw KernelError(std::string(op) + ": index " + std::to_string(index) +
                    " is out of range for an axis of size " + std::to_string(size));
}
// Wraps a negative index and checks the range, like ONNX Gather/GatherElements.
inline long wrap_index(long i, long size, const char* op) {
  long k = i < 0 ? i + size : i;
  if (k < 0 || k >= size) index_error(op, i, size);
  return k;
}

inline vf ld(const float* p, int n) { return n == W ? simd::v_loadu(p) : simd::v_load_tail(p, n); }
inline void st(float* p, vf v, int n) {
  if (n == W) {
    simd::v_storeu(p, v);
  } else {
    simd::v_store_tail(p, v, n);
  }
}
// f(j) for lanes j = j0 .. j0 + n.
template <class F>
inline vf gather(long j0, int n, F f) {
  alignas(64) float t[W];
  for (int l = 0; l < n; ++l) t[l] = f(j0 + l);
  return simd::v_load_tail(t, n);
}
template <class F>
inline void scatter(long j0, int n, vf v, F f) {
  alignas(64) float t[W];
  simd::v_store_tail(t, v, n);
  for (int l = 0; l < n; ++l) f(j0 + l, t[l]);
}
template <class F>
inline vf map1(vf a, F f) {
  alignas(64) float x[W];
  simd::v_storeu(x, a);
  for (int l = 0; l < W; ++l) x[l] = f(x[l]);
  return simd::v_loadu(x);
}
template <class F>
inline vf map2(vf a, vf b, F f) {
  alignas(64) float x[W], y[W];
  simd::v_storeu(x, a);
  simd::v_storeu(y, b);
  for (int l = 0; l < W; ++l) x[l] = f(x[l], y[l]);
  return simd::v_loadu(x);
}

// BitCast: the bits of `f` as a To of the same width.
template <class To, class From>
inline To bit_cast(From f) {
  static_assert(sizeof(To) == sizeof(From), "BitCast between types of different widths");
  To t;
  std::memcpy(&t, &f, sizeof t);
  return t;
}

// QuantizeLinear: x / s (a division: x * (1 / s) moves ties), rounded half to even, plus the
// zero point, saturated to T. NaN gives T's lowest, as ONNX Runtime's vector path does (MAXPS
// keeps its second operand). Clamping after rounding is clamping before: the bounds are integers.
template <class T, class Z>
inline T quantize(float x, float s, Z zp) {
  float r = std::nearbyint(x / s) + static_cast<float>(zp);
  const float lo = static_cast<float>(std::numeric_limits<T>::lowest());
  const float hi = static_cast<float>(std::numeric_limits<T>::max());
  r = r > lo ? r : lo;
  r = r < hi ? r : hi;
  return static_cast<T>(r);
}
// DequantizeLinear: (x - zp) exactly (int64), then one float multiply, as ONNX Runtime.
template <class T, class X, class Z>
inline T dequantize(X x, float s, Z zp) {
  return static_cast<T>(static_cast<float>(static_cast<int64_t>(x) - static_cast<int64_t>(zp)) * s);
}

// Integer Div truncates toward zero; x / 0 gives 0 (the reference's choice, not a trap).
template <class T>
inline T idiv(T a, T b) { return b == 0 ? T(0) : static_cast<T>(a / b); }
// Mod with fmod=0: the result takes the divisor's sign (Python); x mod 0 gives 0.
template <class T>
inline T imod(T a, T b) {
  if (b == 0) return T(0);
  T r = static_cast<T>(a % b);
  if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
  return r;
}
template <class T>
inline T ifmod(T a, T b) { return b == 0 ? T(0) : static_cast<T>(a % b); }
template <class T>
inline T fmod_py(T a, T b) {
  T r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <class T>
inline T ipow(T a, T b) {
  T r = 1;
  for (; b > 0; --b) r = static_cast<T>(r * a);
  return r;
}

// Runs f(r0, r1) over [0, rows) in chunks on the pool; small loops stay on this thread
// (a fork-join costs a few microseconds).
template <class F>
inline void par_rows(long rows, long work_per_row, F f) {
  const int T = get_num_threads();
  if (T <= 1 || rows <= 1 || rows * work_per_row < 32768) {
    f(0L, rows);
    return;
  }
  const long chunks = std::min<long>(rows, 4L * T);
  parallel_for(static_cast<int>(chunks), [&](int c) {
    long r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    if (r1 > r0) f(r0, r1);
  });
}

// transpose() of a dim of 2-4 moved last (an image's channels at a layout border: NCHW ->
// NHWC on RGB): per index of the dims before it, [c, rest] -> [rest, c] with c known at
// compile time, which compilers turn into vector loads and shuffles (3x224x224: 79 -> 14 us,
// Xeon, 1 thread; transpose's tiles moved a 3-row tile element by element).
template <int C, class T>
void interleave_few(const T* __restrict x, T* __restrict y, long outer, long rest) {
  par_rows(outer * ((rest + 4095) / 4096), 4096 * C, [&](long t0, long t1) {
    const long per = (rest + 4095) / 4096;
    for (long t = t0; t < t1; ++t) {
      const long o = t / per, p0 = t % per * 4096, p1 = std::min(rest, p0 + 4096);
      const T* xo = x + o * C * rest;
      T* yo = y + o * C * rest;
      for (long p = p0; p < p1; ++p)
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) yo[p * C + c] = xo[c * rest + p];
    }
  });
}
// y = x transposed by perm (x row-major with dims d, rank r <= 8, r >= 2), for a
// materialised Transpose that moves x's innermost dim (a layout border such as NCHW ->
// NHWC): element-wise, its loop would gather along the vector. Instead 2-D tiles of the two
// dims innermost in x and in y, so reads and writes both run along memory within a tile.
template <class T>
void transpose(const T* x, T* y, int r, const long* d, const int* perm) {
  {  // perm = (0 .. k-1, k+1 .. r-1, k) with d[k] in 2..4: interleave_few
    const int k = perm[r - 1];
    bool moves_one = d[k] >= 2 && d[k] <= 4 && k < r - 1;
    for (int i = 0, src = 0; i < r - 1 && moves_one; ++i, ++src) {
      if (src == k) ++src;
      moves_one = perm[i] == src;
    }
    if (moves_one) {
      long outer = 1, rest = 1;
      for (int i = 0; i < k; ++i) outer *= d[i];
      for (int i = k + 1; i < r; ++i) rest *= d[i];
      if (d[k] == 2) return interleave_few<2>(x, y, outer, rest);
      if (d[k] == 3) return interleave_few<3>(x, y, outer, rest);
      return interleave_few<4>(x, y, outer, rest);
    }
  }
  long xs[8], od[8], ys[8];
  xs[r - 1] = 1;
  for (int k = r - 2; k >= 0; --k) xs[k] = xs[k + 1] * d[k + 1];
  for (int k = 0; k < r; ++k) od[k] = d[perm[k]];
  ys[r - 1] = 1;
  for (int k = r - 2; k >= 0; --k) ys[k] = ys[k + 1] * od[k + 1];
  int a = 0;  // the output dim that is x's innermost
  while (perm[a] != r - 1) ++a;
  const long na = od[a], nb = od[r - 1], xb_stride = xs[perm[r - 1]], ya_stride = ys[a];
  long outer = 1;
  for (int k = 0; k < r - 1; ++k)
    if (k != a) outer *= od[k];
  constexpr long B = 32;
  const long ta = (na + B - 1) / B, tb = (nb + B - 1) / B;
  auto tile = [&](long t) {
    long o = t / (ta * tb), ia = (t / tb) % ta * B, ib = t % tb * B;
    long xo = 0, yo = 0;  // the outer index's offsets, last output dims first
    for (int k = r - 2; k >= 0; --k) {
      if (k == a) continue;
      const long i = o % od[k];
      o /= od[k];
      xo += i * xs[perm[k]];
      yo += i * ys[k];
    }
    const long ea = std::min(na, ia + B), eb = std::min(nb, ib + B);
    for (long i = ia; i < ea; ++i) {
      T* yr = y + yo + i * ya_stride;
      const T* xr = x + xo + i;
      for (long j = ib; j < eb; ++j) yr[j] = xr[j * xb_stride];
    }
  };
  const long tiles = outer * ta * tb;
  par_rows(tiles, B * B, [&](long t0, long t1) {
    for (long t = t0; t < t1; ++t) tile(t);
  });
}

}  // namespace dnnf::cg

namespace dnnf::cg {

// An epilogue made of a generated lambda f(v, row, col, n), type-erased (gemm_kernel.h's
// EpDyn) so that anchor kernels are instantiated once per module; r0 offsets the row (the
// batch of a batched MatMul).
namespace detail {
template <class F>
void ep_vec(const void* f, vf& v, long row, long col, int n) {
  (*static_cast<const F*>(f))(v, row, col, n);
}
template <bool S, class F>
void ep_tile(const void* fp, const float* tile, int nvk, float* c, long ldc, int m, int n,
             bool load_c, long row0, long col0) {
  const F& f = *static_cast<const F*>(fp);
  for (int i = 0; i < m; ++i) {
    float* cr = c + i * ldc;
    for (int j = 0; j < nvk && j * W < n; ++j) {
      const int nn = std::min(n - j * W, W);
      vf v = gemm::load_lanes(tile + (i * nvk + j) * W, nn);  // any alignment (apply_run's rows)
      if (load_c) v = simd::v_add(v, gemm::load_lanes(cr + j * W, nn));
      f(v, row0 + i, col0 + static_cast<long>(j) * W, nn);
      if constexpr (!S) gemm::store_lanes(cr + j * W, v, nn);
    }
  }
}
// A fused GEMM prologue: the generated lambda f(v, row, k, n) sets v to A[row, k .. k + n)
// (n live lanes); k steps by whole vectors from k0, a multiple of the vector width.
template <class F>
void pro_fill(const void* fp, long row, long k0, int n, float* dst) {
  const F& f = *static_cast<const F*>(fp);
  for (int k = 0; k < n; k += W) {
    const int nn = std::min(n - k, W);
    vf v = simd::v_zero();
    f(v, row, k0 + k, nn);
    simd::v_storeu(dst + k, v);
  }
}
// The same for a prologue computed one element at a time: f(v, row, k) with float& v.
template <class F>
void pro_fill_scalar(const void* fp, long row, long k0, int n, float* dst) {
  const F& f = *static_cast<const F*>(fp);
  for (int k = 0; k < n; ++k) {
    float v = 0.0f;
    f(v, row, k0 + k);
    dst[k] = v;
  }
}
}  // namespace detail
// The prologue as gemm.h's ARows source of A (the lambda must outlive the call).
template <class F>
inline gemm::ARows make_pro(const F& f) {
  return {&detail::pro_fill<F>, &f};
}
template <class F>
inline gemm::ARows make_pro_scalar(const F& f) {
  return {&detail::pro_fill_scalar<F>, &f};
}
template <bool S, class F>
inline gemm::EpDyn<S> make_ep(const F& f, long r0 = 0) {
  return {&detail::ep_vec<F>, &detail::ep_tile<S, F>, &f, r0};
}

// The same for an epilogue the generator recognised as v = act(v + bias[col] + res[row *
// res_ld + col]) (gemm_kernel.h EpDyn::act; null parts absent): kernels that know the form
// apply it in registers, the others call f, which computes the same.
template <class F>
inline gemm::EpDyn<false> make_ep_affine(const F& f, long r0, const float* bias, const float* res, long res_ld,
                                         int act, float lo, float hi) {
  gemm::EpDyn<false> e = make_ep<false>(f, r0);
  e.bias = bias;
  e.res = res;
  e.res_ld = res_ld;
  e.act = act;
  e.lo = lo;
  e.hi = hi;
  return e;
}

// Batched MatMul: run the batches in parallel (each GEMM on one thread) when there are
// enough of them, else one after the other with the threads inside each GEMM.
inline bool batch_parallel(long batch, double flops_per_batch) {
  const int T = get_num_threads();
  if (T <= 1 || batch < T) return false;
  return batch % T == 0 || batch >= 4L * T || flops_per_batch < 4e6;
}

// MatMul in float64 or a 32/64-bit integer type (GemmCall::dtype): C[M, N] = A[M, K] B[K, N],
// A and B strided, C dense. Each row of C is summed in k order, in the type itself; integers
// wrap around as two's complement (in the unsigned type: signed overflow is undefined), like
// NumPy and ONNX Runtime. A plain loop: models rarely compute these in bulk.
template <class T>
void matmul_any(long M, long N, long K, const T* a, long rs_a, long cs_a, const T* b, long rs_b, long cs_b,
                T* c) {
  using A = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, std::common_type<T>>::type;
  par_rows(M, N * std::max(K, 1L), [&](long r0, long r1) {
    for (long i = r0; i < r1; ++i) {
      A* row = reinterpret_cast<A*>(c + i * N);
      for (long j = 0; j < N; ++j) row[j] = 0;
      for (long k = 0; k < K; ++k) {
        const A x = static_cast<A>(a[i * rs_a + k * cs_a]);
        const T* bk = b + k * rs_b;
        for (long j = 0; j < N; ++j) row[j] += x * static_cast<A>(bk[j * cs_b]);
      }
    }
  });
}

}  // namespace dnnf::cg
