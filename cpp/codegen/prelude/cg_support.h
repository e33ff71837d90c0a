// Small helpers that generated kernels call (paper §4.4): tail-aware vector loads and
// stores, gathers and scatters for composed index maps that are not contiguous, lane-wise
// fallbacks for functions outside the SIMD vocabulary, integer arithmetic with ONNX
// semantics, and the parallel loop over rows of a pointwise loop nest.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

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
      vf v = simd::v_load(tile + (i * nvk + j) * W);
      if (load_c) v = simd::v_add(v, gemm::load_lanes(cr + j * W, nn));
      f(v, row0 + i, col0 + static_cast<long>(j) * W, nn);
      if constexpr (!S) gemm::store_lanes(cr + j * W, v, nn);
    }
  }
}
template <bool S, class F>
void ep_run(const void* fp, const float* src, float* dst, int n, long row, long col0) {
  const F& f = *static_cast<const F*>(fp);
  for (int j = 0; j < n; j += W) {
    const int nn = std::min(n - j, W);
    vf v = gemm::load_lanes(src + j, nn);
    f(v, row, col0 + j, nn);
    if constexpr (!S) gemm::store_lanes(dst + j, v, nn);
  }
}
}  // namespace detail
template <bool S, class F>
inline gemm::EpDyn<S> make_ep(const F& f, long r0 = 0) {
  return {&detail::ep_vec<F>, &detail::ep_tile<S, F>, &detail::ep_run<S, F>, &f, r0};
}

// Batched MatMul: run the batches in parallel (each GEMM on one thread) when there are
// enough of them, else one after the other with the threads inside each GEMM.
inline bool batch_parallel(long batch, double flops_per_batch) {
  const int T = get_num_threads();
  if (T <= 1 || batch < T) return false;
  return batch % T == 0 || batch >= 4L * T || flops_per_batch < 4e6;
}

}  // namespace dnnf::cg
