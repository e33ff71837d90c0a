// Row anchors (paper §4.4, Many-to-Many anchors): Softmax, LogSoftmax, LayerNormalization,
// InstanceNormalization and CumSum over one axis, with the fused epilogue. Reductions and
// ArgMax/ArgMin are in reduce.h, which builds on the helpers here.
//
// Shapes come canonicalised as [outer, axis, inner] (the caller multiplies dims together).
// Epilogue views (the contract in gemm_kernel.h; flat output index = row * C + col):
//   softmax, log_softmax, cumsum  [outer, axis] when inner == 1, else [outer * axis, inner]
//   layer_norm                    [outer, norm]
//   instance_norm                 [N * C, spatial]
// Statistics run in f32 with several vector accumulators (the NumPy oracle uses f64); every
// row is read at most three times, and a row is small enough to stay in L1 between passes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "gemm_kernel.h"
#include "parallel.h"
#include "simd.h"

namespace dnnf::rowops {

using gemm::EpNone;
using gemm::load_lanes;
using gemm::store_lanes;
using simd::kVecWidth;
using simd::vf;
using simd::vm;

namespace detail {

// Splits rows [0, n) into tasks of roughly kGrain element operations; small problems run
// inline on the caller (a pool wake-up costs more than a few thousand floats of work).
inline constexpr long kGrain = 1L << 15;
template <class F>
void parallel_rows(long n, long cost_per_row, F&& fn) {
  if (n <= 0) return;
  const long total = n * std::max(cost_per_row, 1L);
  long tasks = std::min(n, std::max(1L, total / kGrain));
  if (tasks > 1) tasks = std::min<long>(tasks, 8L * get_num_threads());
  if (tasks <= 1) {
    fn(0L, n);
    return;
  }
  parallel_for(static_cast<int>(tasks), [&](int t) { fn(n * t / tasks, n * (t + 1) / tasks); });
}

// Hands a final output vector to the epilogue, then stores it (unless the epilogue stores).
template <class Ep>
inline void emit(float* p, vf v, long row, long col, int n, const Ep& ep) {
  if constexpr (!std::is_same_v<Ep, EpNone>) {
    ep.apply(v, static_cast<int>(row), static_cast<int>(col), n);
  }
  if constexpr (!gemm::ep_stores<Ep>) store_lanes(p, v, n);
}

// Runs the epilogue over y viewed as [R, C] after a kernel stored its final values there
// (used where values are produced in an order that does not suit vectors).
template <class Ep>
void epilogue_pass(float* y, long R, long C, const Ep& ep) {
  if constexpr (!std::is_same_v<Ep, EpNone>) {
    parallel_rows(R, C, [&](long lo, long hi) {
      for (long r = lo; r < hi; ++r) {
        float* p = y + r * C;
        for (long c = 0; c < C; c += kVecWidth) {
          const int n = static_cast<int>(std::min<long>(kVecWidth, C - c));
          emit(p + c, load_lanes(p + c, n), r, c, n, ep);
        }
      }
    });
  }
}

// Lanes past n hold `fill` (the identity of a reduction).
inline vf load_fill(const float* p, long n, float fill) {
  if (n >= kVecWidth) return simd::v_loadu(p);
  const int k = static_cast<int>(n);
  return simd::v_select(simd::vm_first(k), simd::v_load_tail(p, k), simd::v_set1(fill));
}

inline float row_max(const float* x, long n) {
  using namespace simd;
  constexpr int W = kVecWidth;
  const float lo = -std::numeric_limits<float>::infinity();
  vf m0 = v_set1(lo), m1 = m0;
  long i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    m0 = v_max(m0, v_loadu(x + i));
    m1 = v_max(m1, v_loadu(x + i + W));
  }
  for (; i < n; i += W) m0 = v_max(m0, load_fill(x + i, n - i, lo));
  return v_reduce_max(v_max(m0, m1));
}

inline float row_sum(const float* x, long n) {
  using namespace simd;
  constexpr int W = kVecWidth;
  vf s0 = v_zero(), s1 = v_zero(), s2 = v_zero(), s3 = v_zero();
  long i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    s0 = v_add(s0, v_loadu(x + i));
    s1 = v_add(s1, v_loadu(x + i + W));
    s2 = v_add(s2, v_loadu(x + i + 2 * W));
    s3 = v_add(s3, v_loadu(x + i + 3 * W));
  }
  for (; i < n; i += W) s0 = v_add(s0, load_fill(x + i, n - i, 0.0f));
  return v_reduce_add(v_add(v_add(s0, s1), v_add(s2, s3)));
}

// Mean, then the variance around it (two passes over an L1-resident row: the one-pass
// E[x^2] - E[x]^2 cancels catastrophically when |mean| >> std).
inline void row_moments(const float* x, long n, float eps, float* mean, float* inv_std) {
  using namespace simd;
  constexpr int W = kVecWidth;
  const float m = row_sum(x, n) / static_cast<float>(n);
  const vf mv = v_set1(m);
  vf s0 = v_zero(), s1 = v_zero();
  long i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    vf d0 = v_sub(v_loadu(x + i), mv), d1 = v_sub(v_loadu(x + i + W), mv);
    s0 = v_fma(d0, d0, s0);
    s1 = v_fma(d1, d1, s1);
  }
  for (; i < n; i += W) {
    vf d = v_sub(load_fill(x + i, n - i, m), mv);  // the fill lanes give d = 0
    s0 = v_fma(d, d, s0);
  }
  const float var = v_reduce_add(v_add(s0, s1)) / static_cast<float>(n);
  *mean = m;
  *inv_std = 1.0f / std::sqrt(var + eps);
}

}  // namespace detail

// ---- Softmax / LogSoftmax (ONNX opset 13: along one axis) ---------------------------------
namespace detail {

// One row of the common case (inner == 1): max; exp(x - max) and its sum (softmax keeps the
// exponentials in y); then scale, or subtract the log of the sum.
template <bool kLog, class Ep>
void softmax_row(const float* x, float* y, long n, long row, const Ep& ep) {
  using namespace simd;
  constexpr int W = kVecWidth;
  const float m = row_max(x, n);
  const vf mv = v_set1(m);
  vf s0 = v_zero(), s1 = v_zero();
  long i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    vf e0 = v_exp(v_sub(v_loadu(x + i), mv)), e1 = v_exp(v_sub(v_loadu(x + i + W), mv));
    if constexpr (!kLog) {
      v_storeu(y + i, e0);
      v_storeu(y + i + W, e1);
    }
    s0 = v_add(s0, e0);
    s1 = v_add(s1, e1);
  }
  for (; i < n; i += W) {
    const int k = static_cast<int>(std::min<long>(W, n - i));
    vf e = v_exp(v_sub(load_lanes(x + i, k), mv));
    if constexpr (!kLog) store_lanes(y + i, e, k);
    s0 = v_add(s0, v_select(vm_first(k), e, v_zero()));
  }
  const float s = v_reduce_add(v_add(s0, s1));
  const vf f = v_set1(kLog ? std::log(s) : 1.0f / s);
  for (i = 0; i < n; i += W) {
    const int k = static_cast<int>(std::min<long>(W, n - i));
    vf v = kLog ? v_sub(v_sub(load_lanes(x + i, k), mv), f) : v_mul(load_lanes(y + i, k), f);
    emit(y + i, v, row, i, k, ep);
  }
}

// inner > 1: vectors run across inner, a block of kBlock columns at a time with its running
// max and sum in an L1 buffer; each pass walks down the axis.
template <bool kLog, class Ep>
void softmax_cols(long outer, long axis, long inner, const float* x, float* y, const Ep& ep) {
  using namespace simd;
  constexpr int W = kVecWidth;
  constexpr long kBlock = 16 * W;
  const long blocks = (inner + kBlock - 1) / kBlock;
  parallel_rows(outer * blocks, axis * kBlock * 3, [&](long lo, long hi) {
    alignas(64) float mx[kBlock], sm[kBlock];
    for (long u = lo; u < hi; ++u) {
      const long o = u / blocks, j0 = (u % blocks) * kBlock;
      const long nb = std::min(kBlock, inner - j0);
      const float* xb = x + o * axis * inner + j0;
      float* yb = y + o * axis * inner + j0;
      for (long j = 0; j < nb; j += W) {
        const int k = static_cast<int>(std::min<long>(W, nb - j));
        vf m = load_lanes(xb + j, k);
        for (long a = 1; a < axis; ++a) m = v_max(m, load_lanes(xb + a * inner + j, k));
        v_store(mx + j, m);
        v_store(sm + j, v_zero());
      }
      for (long a = 0; a < axis; ++a) {
        for (long j = 0; j < nb; j += W) {
          const int k = static_cast<int>(std::min<long>(W, nb - j));
          vf e = v_exp(v_sub(load_lanes(xb + a * inner + j, k), v_load(mx + j)));
          if constexpr (!kLog) store_lanes(yb + a * inner + j, e, k);
          v_store(sm + j, v_add(v_load(sm + j), e));
        }
      }
      for (long j = 0; j < nb; j += W) {
        vf s = v_load(sm + j);
        v_store(sm + j, kLog ? v_log(s) : v_rcp(s));
      }
      for (long a = 0; a < axis; ++a) {
        for (long j = 0; j < nb; j += W) {
          const int k = static_cast<int>(std::min<long>(W, nb - j));
          const long off = a * inner + j;
          vf v = kLog ? v_sub(v_sub(load_lanes(xb + off, k), v_load(mx + j)), v_load(sm + j))
                      : v_mul(load_lanes(yb + off, k), v_load(sm + j));
          emit(yb + off, v, o * axis + a, j0 + j, k, ep);
        }
      }
    }
  });
}

template <bool kLog, class Ep>
void softmax_any(long outer, long axis, long inner, const float* x, float* y, const Ep& ep) {
  if (outer <= 0 || axis <= 0 || inner <= 0) return;
  if (inner == 1) {
    parallel_rows(outer, axis * 3, [&](long lo, long hi) {
      for (long r = lo; r < hi; ++r) softmax_row<kLog>(x + r * axis, y + r * axis, axis, r, ep);
    });
  } else {
    softmax_cols<kLog>(outer, axis, inner, x, y, ep);
  }
}

}  // namespace detail

template <class Ep = EpNone>
void softmax_f32(long outer, long axis, long inner, const float* x, float* y, const Ep& ep = {}) {
  detail::softmax_any<false>(outer, axis, inner, x, y, ep);
}

template <class Ep = EpNone>
void log_softmax_f32(long outer, long axis, long inner, const float* x, float* y,
                     const Ep& ep = {}) {
  detail::softmax_any<true>(outer, axis, inner, x, y, ep);
}

// Softmax / LogSoftmax in float64 (ONNX Runtime has double kernels): each line of x [outer,
// axis, inner] along the axis in double, std::exp and std::log; no epilogue (f32 only).
template <bool kLog, class Ep = EpNone>
void softmax_f64(long outer, long axis, long inner, const double* x, double* y, const Ep& = {}) {
  static_assert(std::is_same_v<Ep, EpNone>, "float64 Softmax takes no epilogue");
  if (outer <= 0 || axis <= 0 || inner <= 0) return;
  detail::parallel_rows(outer * inner, axis * 3, [&](long lo, long hi) {
    for (long r = lo; r < hi; ++r) {
      const long base = (r / inner) * axis * inner + r % inner;
      double m = -std::numeric_limits<double>::infinity(), s = 0.0;
      for (long t = 0; t < axis; ++t) m = std::max(m, x[base + t * inner]);
      for (long t = 0; t < axis; ++t) s += std::exp(x[base + t * inner] - m);
      const double ls = std::log(s);
      for (long t = 0; t < axis; ++t) {
        const double d = x[base + t * inner] - m;
        y[base + t * inner] = kLog ? d - ls : std::exp(d) / s;
      }
    }
  });
}

// ---- LayerNormalization / InstanceNormalization ---------------------------------------------
// ONNX LayerNormalization with the normalised axes [axis, rank) flattened to `norm`. scale
// and bias (nullable) hold `norm` elements: where the model broadcasts a smaller scale or bias
// over the normalised axes, the caller expands it first. mean_out / inv_std_out (nullable)
// receive one f32 per row (the optional outputs, stash_type float32).
template <class Ep = EpNone>
void layer_norm_f32(long outer, long norm, const float* x, const float* scale, const float* bias,
                    float eps, float* y, float* mean_out, float* inv_std_out, const Ep& ep = {}) {
  using namespace simd;
  constexpr int W = kVecWidth;
  if (outer <= 0) return;
  detail::parallel_rows(outer, norm * 3, [&](long lo, long hi) {
    for (long r = lo; r < hi; ++r) {
      const float* xr = x + r * norm;
      float* yr = y + r * norm;
      float mean, inv;
      detail::row_moments(xr, norm, eps, &mean, &inv);
      if (mean_out) mean_out[r] = mean;
      if (inv_std_out) inv_std_out[r] = inv;
      const vf mv = v_set1(mean), iv = v_set1(inv);
      for (long i = 0; i < norm; i += W) {
        const int k = static_cast<int>(std::min<long>(W, norm - i));
        vf v = v_mul(v_sub(load_lanes(xr + i, k), mv), iv);
        if (scale) v = v_mul(v, load_lanes(scale + i, k));
        if (bias) v = v_add(v, load_lanes(bias + i, k));
        detail::emit(yr + i, v, r, i, k, ep);
      }
    }
  });
}

// ONNX InstanceNormalization: x is [N, C, spatial...] with the spatial dims flattened; scale
// and bias have C elements.
template <class Ep = EpNone>
void instance_norm_f32(long N, long C, long spatial, const float* x, const float* scale,
                       const float* bias, float eps, float* y, const Ep& ep = {}) {
  using namespace simd;
  constexpr int W = kVecWidth;
  detail::parallel_rows(N * C, spatial * 3, [&](long lo, long hi) {
    for (long r = lo; r < hi; ++r) {
      const float* xr = x + r * spatial;
      float* yr = y + r * spatial;
      float mean, inv;
      detail::row_moments(xr, spatial, eps, &mean, &inv);
      const long c = r % C;
      const vf mv = v_set1(mean), a = v_set1(inv * scale[c]), b = v_set1(bias[c]);
      for (long i = 0; i < spatial; i += W) {
        const int k = static_cast<int>(std::min<long>(W, spatial - i));
        detail::emit(yr + i, v_fma(v_sub(load_lanes(xr + i, k), mv), a, b), r, i, k, ep);
      }
    }
  });
}

// ---- CumSum -------------------------------------------------------------------------------
// ONNX CumSum along the axis; `exclusive` shifts in a zero, `reverse` sums from the end.
template <class Ep = EpNone>
void cumsum_f32(long outer, long axis, long inner, const float* x, float* y, bool exclusive,
                bool reverse, const Ep& ep = {}) {
  using namespace simd;
  constexpr int W = kVecWidth;
  if (outer <= 0 || axis <= 0 || inner <= 0) return;
  if (inner == 1) {  // a serial scan per row, then the epilogue on vectors of the L1-hot row
    detail::parallel_rows(outer, axis * 2, [&](long lo, long hi) {
      for (long r = lo; r < hi; ++r) {
        const float* xr = x + r * axis;
        float* yr = y + r * axis;
        float s = 0.0f;
        for (long t = 0; t < axis; ++t) {
          const long a = reverse ? axis - 1 - t : t;
          const float v = xr[a];
          if (exclusive) {
            yr[a] = s;
            s += v;
          } else {
            s += v;
            yr[a] = s;
          }
        }
        if constexpr (!std::is_same_v<Ep, EpNone>) {
          for (long i = 0; i < axis; i += W) {
            const int k = static_cast<int>(std::min<long>(W, axis - i));
            detail::emit(yr + i, load_lanes(yr + i, k), r, i, k, ep);
          }
        }
      }
    });
    return;
  }
  const long blocks = (inner + W - 1) / W;
  detail::parallel_rows(outer * blocks, axis, [&](long lo, long hi) {
    for (long u = lo; u < hi; ++u) {
      const long o = u / blocks, j = (u % blocks) * W;
      const int k = static_cast<int>(std::min<long>(W, inner - j));
      vf s = v_zero();
      for (long t = 0; t < axis; ++t) {
        const long a = reverse ? axis - 1 - t : t;
        const long off = (o * axis + a) * inner + j;
        vf v = load_lanes(x + off, k), out;
        if (exclusive) {
          out = s;
          s = v_add(s, v);
        } else {
          s = v_add(s, v);
          out = s;
        }
        detail::emit(y + off, out, o * axis + a, j, k, ep);
      }
    }
  });
}

// CumSum of the other element types ONNX allows (int32, int64, uint32, uint64, f64): a serial
// scan per (outer, inner) row, integers wrapping modulo 2^bits (as ONNX Runtime's do). No
// epilogue: code generation keeps non-f32 anchors' consumers out of the anchor.
template <class T, class Ep>
void cumsum_any(long outer, long axis, long inner, const T* x, T* y, bool exclusive, bool reverse, const Ep&,
                bool prod = false) {
  static_assert(std::is_same_v<Ep, EpNone>, "CumSum on non-f32 takes no epilogue");
  // Integers wrap (computed unsigned); a product starts from 1.
  using A = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, std::common_type<T>>::type;
  if (outer <= 0 || axis <= 0 || inner <= 0) return;
  detail::parallel_rows(outer * inner, axis, [&](long lo, long hi) {
    for (long r = lo; r < hi; ++r) {
      const long base = (r / inner) * axis * inner + r % inner;
      A s = prod ? 1 : 0;
      for (long t = 0; t < axis; ++t) {
        const long at = base + (reverse ? axis - 1 - t : t) * inner;
        const A v = static_cast<A>(x[at]);
        if (exclusive) y[at] = static_cast<T>(s);
        if constexpr (std::is_integral_v<A>) {  // in 64 bits: a narrow product never overflows int
          const unsigned long long w = s, u = v;
          s = static_cast<A>(prod ? w * u : w + u);
        } else {
          s = prod ? s * v : s + v;
        }
        if (!exclusive) y[at] = static_cast<T>(s);
      }
    }
  });
}

// CumProd: the scan of cumsum_any with products (every element type, no epilogue).
template <class T, class Ep>
void cumprod_any(long outer, long axis, long inner, const T* x, T* y, bool exclusive, bool reverse, const Ep& ep) {
  cumsum_any(outer, axis, inner, x, y, exclusive, reverse, ep, true);
}

}  // namespace dnnf::rowops
