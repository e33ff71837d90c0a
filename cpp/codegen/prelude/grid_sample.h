// GridSample (Many-to-Many, an irregular anchor: which input elements an output reads is the
// grid's data), matching the NumPy oracle (_ref_grid.grid_sample).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cg_support.h"
#include "rowops.h"

namespace dnnf::irr {

using gemm::EpNone;
using rowops::detail::parallel_rows;
using simd::vf;

// ---- GridSample ----------------------------------------------------------------------------
// y [N, C, *out] = x [N, C, *in] (nd = 1 to 3 spatial axes, contiguous) sampled at grid
// [N, *out, nd] (normalized to [-1, 1], the innermost axis first), as the NumPy oracle
// (_ref_grid.grid_sample) defines it: per axis the coordinate is denormalized in float (as
// PyTorch and the ONNX reference), rounded half to even for nearest, brought inside the
// borders (border: clamped to [0, D-1], except for cubic, whose taps are clamped instead, as
// PyTorch and ONNX Runtime do; reflection: reflected at them), then 1, 2 or 4 taps per axis
// (nearest, linear, Keys' cubic with a = -0.75) are read, a tap outside x reading 0 (zeros),
// the edge (border) or its reflection. A NaN coordinate gives NaN; an infinite one 0 (zeros),
// the edge (border), NaN (reflection). Each point's taps are computed once and applied to
// every channel; points are split into tasks.
enum GridMode : int { kGridLinear = 0, kGridNearest = 1, kGridCubic = 2 };
enum GridPad : int { kGridZeros = 0, kGridBorder = 1, kGridReflection = 2 };

namespace detail {
// x reflected at lo and hi (as often as it takes) into [lo, hi]; NaN if x is not finite.
inline double grid_reflect(double x, double lo, double hi) {
  if (!std::isfinite(x)) return std::numeric_limits<double>::quiet_NaN();
  const double rng = hi - lo;
  if (!(rng > 0)) return lo;
  if (x < lo) {
    const double b = std::fmod(lo - x, 2 * rng);
    return b < rng ? lo + b : hi - (b - rng);
  }
  if (x > hi) {
    const double b = std::fmod(x - hi, 2 * rng);
    return b < rng ? hi - b : lo + (b - rng);
  }
  return x;
}

// One axis of a point: up to 4 taps, each an offset into the axis (in elements of the
// flattened plane: index * stride) or -1 where it reads zero, and its weight.
struct GridAxisTaps {
  int n = 1;
  long off[4] = {0, 0, 0, 0};
  float w[4] = {1, 0, 0, 0};
};

// The taps of coordinate v (normalized) along an axis of size d; false if the point is NaN.
inline bool grid_axis_taps(float v, long d, long stride, int mode, int pad, bool align, GridAxisTaps* t) {
  float x = align ? (v + 1.0f) / 2.0f * static_cast<float>(d - 1)
                  : ((v + 1.0f) * static_cast<float>(d) - 1.0f) / 2.0f;
  const double lo = align ? 0.0 : -0.5, hi = align ? d - 1.0 : d - 0.5;
  if (mode == kGridNearest) x = std::nearbyint(x);
  if (x < lo || x > hi) {
    if (pad == kGridBorder && mode != kGridCubic) x = std::min(std::max(x, 0.0f), static_cast<float>(d - 1));
    if (pad == kGridReflection) x = static_cast<float>(grid_reflect(x, lo, hi));
  }
  // cubic with border: past 3 pixels out every tap is the edge pixel (an infinite x too)
  if (pad == kGridBorder && mode == kGridCubic) x = std::min(std::max(x, -4.0f), static_cast<float>(d + 3));
  if (std::isnan(x)) return false;
  const bool inf = std::isinf(x);  // zeros padding only: every tap outside
  double base;
  if (mode == kGridNearest) {
    t->n = 1;
    t->w[0] = 1.0f;
    base = std::trunc(static_cast<double>(x));
  } else {
    base = std::floor(static_cast<double>(x));
    const float f = inf ? 0.0f : x - static_cast<float>(base);
    if (mode == kGridLinear) {
      t->n = 2;
      t->w[0] = 1.0f - f;
      t->w[1] = f;
    } else {
      t->n = 4;
      const float a = -0.75f, u = f + 1.0f, r = 1.0f - f, q = 2.0f - f;
      t->w[0] = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a;
      t->w[1] = ((a + 2) * f - (a + 3)) * f * f + 1.0f;
      t->w[2] = ((a + 2) * r - (a + 3)) * r * r + 1.0f;
      t->w[3] = ((a * q - 5 * a) * q + 8 * a) * q - 4 * a;
      base -= 1;
    }
  }
  for (int k = 0; k < t->n; ++k) {
    // Far outside, every tap reads zero or the edge: clamp before converting to an integer.
    const double i = std::min(std::max(base + k, -8.0), static_cast<double>(d) + 8.0);
    long j = static_cast<long>(i);
    if (pad == kGridZeros) {
      if (inf || j < 0 || j >= d) j = -1;
    } else if (pad == kGridBorder) {
      j = std::min(std::max(j, 0L), d - 1);
    } else {
      j = static_cast<long>(std::trunc(grid_reflect(static_cast<double>(base + k), lo, hi)));
      j = std::min(std::max(j, 0L), d - 1);
    }
    t->off[k] = j < 0 ? -1 : j * stride;
  }
  return true;
}
}  // namespace detail

namespace detail {
// The sum over one point's taps, axis 0 outermost (acc += w0 * (sum over axis 1 ...)), each
// tap reading r[offset]; the taps of axes past nd are one of weight 1 at offset 0, so every
// number of axes sums in this order. Checked: a tap with offset -1 reads zero (skipped).
template <bool kChecked, int kTaps0, int kTaps1, int kTaps2>
inline float grid_point_sum(const float* r, const GridAxisTaps& a, const GridAxisTaps& b, const GridAxisTaps& e) {
  float acc = 0.0f;
  for (int i = 0; i < kTaps0; ++i) {
    if (kChecked && a.off[i] < 0) continue;
    float acc1 = 0.0f;
    for (int j = 0; j < kTaps1; ++j) {
      if (kChecked && b.off[j] < 0) continue;
      float acc2 = 0.0f;
      const float* q = r + a.off[i] + b.off[j];
      for (int k = 0; k < kTaps2; ++k)
        if (!kChecked || e.off[k] >= 0) acc2 += e.w[k] * q[e.off[k]];
      acc1 += b.w[j] * acc2;
    }
    acc += a.w[i] * acc1;
  }
  return acc;
}

// The taps of a block of points (GridPlan::make), then applied channel by channel
// (GridPlan::apply): one channel's plane stays in cache while all the block's points read it
// (a random grid reads all of it), and the plan is read once per channel. Points whose taps
// all read x (the interior, nearly all) take the sum unrolled for the mode's tap counts; the
// others (a tap outside, kind 1) the checked one; NaN points (kind 2) give NaN. 2-D linear and
// nearest without reflection (make_2d), the common cases, and nearest elsewhere keep their
// taps as arrays instead (int32 offsets, validity; the weights per axis), read with gathers.
struct GridPlan {
  std::vector<GridAxisTaps> taps;   // [points][3]
  std::vector<unsigned char> kind;  // 0: every tap reads x, 1: some read zero, 2: NaN
  std::vector<int32_t> off4;        // 2-D linear: [4][points]
  std::vector<uint8_t> valid4;      // 2-D linear: bit t set where tap t reads x
  std::vector<int32_t> off1;        // nearest: the tap's offset, -1 where it reads zero
  std::vector<float> w4;            // 2-D linear: [4][points] (axis 0's two weights, axis 1's)
  long np = 0;

  void make(const float* grid, long p0, long count, long nd, const long* din, int mode, int pad, bool align,
            bool nearest) {
    np = count;
    off4.clear(), w4.clear(), valid4.clear(), off1.clear();  // (the plan is reused across calls)
    if (nearest) off1.resize(static_cast<size_t>(count));
    taps.resize(static_cast<size_t>(count * 3));
    kind.resize(static_cast<size_t>(count));
    parallel_rows(count, 64, [&](long lo, long hi) {
      for (long p = lo; p < hi; ++p) {
        const float* g = grid + (p0 + p) * nd;
        bool ok = true;
        long stride = 1;
        GridAxisTaps* t = &taps[static_cast<size_t>(p * 3)];
        for (long k = nd - 1; k >= 0; --k) {  // g[0] is the innermost axis (nd - 1)
          ok = grid_axis_taps(g[nd - 1 - k], din[k], stride, mode, pad, align, &t[k]) && ok;
          stride *= din[k];
        }
        for (long k = nd; k < 3; ++k) t[k] = GridAxisTaps{};
        bool inside = true;
        for (long k = 0; k < nd && ok; ++k)
          for (int i = 0; i < t[k].n; ++i) inside = inside && t[k].off[i] >= 0;
        kind[static_cast<size_t>(p)] = !ok ? 2 : inside ? 0 : 1;
        if (nearest)
          off1[static_cast<size_t>(p)] = ok && inside ? static_cast<int32_t>(t[0].off[0] + t[1].off[0] + t[2].off[0]) : -1;
      }
    });
  }

  // make() for 2-D linear or nearest with zeros or border padding, the coordinates a vector of
  // points at a time (grid_axis_taps's arithmetic, lane by lane), then the offsets and the
  // taps' validity per point. Fills only what apply() reads on these paths: kind, and off4 /
  // w4 / valid4 (linear) or off1 (nearest).
  void make_2d(const float* grid, long p0, long count, long H, long W, bool linear, bool border, bool align) {
    np = count;
    taps.clear(), off4.clear(), w4.clear(), valid4.clear(), off1.clear();  // (reused across calls)
    kind.resize(static_cast<size_t>(count));
    if (linear) {
      off4.resize(static_cast<size_t>(4 * count)), w4.resize(static_cast<size_t>(4 * count));
      valid4.resize(static_cast<size_t>(count));
    } else {
      off1.resize(static_cast<size_t>(count));
    }
    parallel_rows((count + 255) / 256, 256 * 24, [&](long lo, long hi) {
      constexpr int kV = simd::kVecWidth;
      alignas(64) float gx[256], gy[256], bx[256], by[256], fx[256], fy[256], bad[256];
      for (long blk = lo; blk < hi; ++blk) {
        const long q0 = blk * 256, nq = std::min(256L, count - q0);
        const float* g = grid + (p0 + q0) * 2;
        for (long i = 0; i < nq; ++i) gx[i] = g[2 * i], gy[i] = g[2 * i + 1];
        for (long i = nq; i < (nq + kV - 1) / kV * kV; ++i) gx[i] = gy[i] = 0.0f;
        auto axis = [&](const float* v, float* base, float* frac, float* nan, long d, bool first) {
          const vf one = simd::v_set1(1.0f), half = simd::v_set1(0.5f), zero = simd::v_zero();
          const vf dm1 = simd::v_set1(static_cast<float>(d - 1)), df = simd::v_set1(static_cast<float>(d));
          const vf lo_b = simd::v_set1(align ? 0.0f : -0.5f), hi_b = simd::v_set1(align ? d - 1.0f : d - 0.5f);
          const vf cmin = simd::v_set1(-8.0f), cmax = simd::v_set1(static_cast<float>(d + 8));
          for (long i = 0; i < nq; i += kV) {
            const vf n = simd::v_load(v + i);
            vf x = align ? simd::v_mul(simd::v_mul(simd::v_add(n, one), half), dm1)
                         : simd::v_mul(simd::v_sub(simd::v_mul(simd::v_add(n, one), df), one), half);
            if (!linear) x = simd::v_round(x);
            if (border) {
              const vf c = simd::v_min(simd::v_max(x, zero), dm1);  // (taken only outside [lo, hi])
              x = simd::v_select(simd::v_cmp_lt(x, lo_b), c, x);
              x = simd::v_select(simd::v_cmp_gt(x, hi_b), c, x);
            }
            const simd::vm isnan = simd::v_cmp_ne(x, x);
            const vf b = linear ? simd::v_floor(x) : x;
            vf f = simd::v_sub(x, b);  // inf - inf: NaN, made 0 below
            f = simd::v_select(simd::v_cmp_ne(f, f), zero, f);
            // far outside, every tap reads zero or the edge (an infinite x too)
            const vf bc = simd::v_select(isnan, zero, simd::v_min(simd::v_max(b, cmin), cmax));
            simd::v_store(base + i, bc);
            simd::v_store(frac + i, f);
            const vf flag = simd::v_select(isnan, one, zero);
            simd::v_store(nan + i, first ? flag : simd::v_max(simd::v_load(nan + i), flag));
          }
        };
        axis(gy, by, fy, bad, H, true);  // grid[..., 1] is y (axis 0, H)
        axis(gx, bx, fx, bad, W, false);
        for (long i = 0; i < nq; ++i) {
          const long p = q0 + i;
          const bool isnan = bad[i] != 0.0f;
          kind[static_cast<size_t>(p)] = isnan ? 2 : 0;
          const long jy = static_cast<long>(by[i]), jx = static_cast<long>(bx[i]);
          if (linear) {
            uint8_t bits = 0;
            for (int a = 0; a < 2; ++a)
              for (int b = 0; b < 2; ++b) {
                long ry = jy + a, rx = jx + b;
                bool in = !isnan;
                if (border) {
                  ry = std::min(std::max(ry, 0L), H - 1), rx = std::min(std::max(rx, 0L), W - 1);
                } else {
                  in = in && ry >= 0 && ry < H && rx >= 0 && rx < W;
                }
                off4[static_cast<size_t>((a * 2 + b) * count + p)] = in ? static_cast<int32_t>(ry * W + rx) : 0;
                bits = static_cast<uint8_t>(bits | (in ? 1 << (a * 2 + b) : 0));
              }
            valid4[static_cast<size_t>(p)] = bits;
            w4[static_cast<size_t>(p)] = 1.0f - fy[i], w4[static_cast<size_t>(count + p)] = fy[i];
            w4[static_cast<size_t>(2 * count + p)] = 1.0f - fx[i], w4[static_cast<size_t>(3 * count + p)] = fx[i];
          } else {
            long ry = jy, rx = jx;
            bool in = !isnan;
            if (border) {
              ry = std::min(std::max(ry, 0L), H - 1), rx = std::min(std::max(rx, 0L), W - 1);
            } else {
              in = in && ry >= 0 && ry < H && rx >= 0 && rx < W;
            }
            off1[static_cast<size_t>(p)] = in ? static_cast<int32_t>(ry * W + rx) : -1;
          }
        }
      }
    });
  }

  // y[lo, hi) of one channel (xc its plane) from points [lo, hi) of the plan
  template <int kT0, int kT1, int kT2>
  void apply(const float* xc, float* yc, long lo, long hi) const {
    if constexpr (kT0 == 1 && kT1 == 1 && kT2 == 1) {
      if (!off1.empty()) {  // nearest: x at the offset, 0 at -1 (a masked lane), then the NaNs
        const int32_t* o = off1.data();
        long p = lo;
#if defined(DNNF_ISA_AVX512)
        for (; p + 16 <= hi; p += 16) {
          const __m512i i = _mm512_loadu_si512(o + p);
          const __mmask16 m = _mm512_cmpge_epi32_mask(i, _mm512_setzero_si512());
          _mm512_storeu_ps(yc + p, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, i, xc, 4));
        }
#elif defined(DNNF_ISA_AVX2)
        for (; p + 8 <= hi; p += 8) {
          const __m256i i = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o + p));
          const __m256 m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(-1)));
          _mm256_storeu_ps(yc + p, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xc, i, m, 4));
        }
#endif
        for (; p < hi; ++p) yc[p] = o[p] >= 0 ? xc[o[p]] : 0.0f;
        for (long q = lo; q < hi; ++q)
          if (kind[static_cast<size_t>(q)] == 2) yc[q] = std::numeric_limits<float>::quiet_NaN();
        return;
      }
    }
    if constexpr (kT0 == 2 && kT1 == 2 && kT2 == 1) {
      if (!off4.empty()) {
        const int32_t *o0 = off4.data(), *o1 = o0 + np, *o2 = o1 + np, *o3 = o2 + np;
        const float *wa0 = w4.data(), *wa1 = wa0 + np, *wb0 = wa1 + np, *wb1 = wb0 + np;
        // a tap outside reads 0 (a masked lane: x is not read, so 0 * inf never happens); the
        // NaN points are put right after
        const uint8_t* vb = valid4.data();
        bool any_nan = false;
        long p = lo;
#if defined(DNNF_ISA_AVX512) || defined(DNNF_ISA_AVX2)
        // a vector of points at a time, the taps gathered (GCC's generic tuning does not
        // vectorize the loop below with gathers)
#if defined(DNNF_ISA_AVX512)
        constexpr long kW = 16;
        __m512i bits = _mm512_setzero_si512();
        auto gather = [&](const int32_t* o, int t) {
          const __mmask16 m = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(1 << t));
          return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, _mm512_loadu_si512(o), xc, 4);
        };
        auto read_bits = [&](long q) { bits = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(vb + q))); };
        auto load = [](const float* v) { return _mm512_loadu_ps(v); };
        auto mul = [](__m512 a, __m512 b) { return _mm512_mul_ps(a, b); };
        auto add = [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); };
        auto store = [](float* d, __m512 v) { _mm512_storeu_ps(d, v); };
#else
        constexpr long kW = 8;
        __m256i bits = _mm256_setzero_si256();
        auto gather = [&](const int32_t* o, int t) {
          const __m256i b = _mm256_and_si256(bits, _mm256_set1_epi32(1 << t));
          const __m256 m = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, _mm256_set1_epi32(1 << t)));
          return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o)), m, 4);
        };
        auto read_bits = [&](long q) {
          bits = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(vb + q)));
        };
        auto load = [](const float* v) { return _mm256_loadu_ps(v); };
        auto mul = [](__m256 a, __m256 b) { return _mm256_mul_ps(a, b); };
        auto add = [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); };
        auto store = [](float* d, __m256 v) { _mm256_storeu_ps(d, v); };
#endif
        for (; p + kW <= hi; p += kW) {
          read_bits(p);
          const auto b0 = load(wb0 + p), b1 = load(wb1 + p);
          const auto r0 = add(mul(b0, gather(o0 + p, 0)), mul(b1, gather(o1 + p, 1)));
          const auto r1 = add(mul(b0, gather(o2 + p, 2)), mul(b1, gather(o3 + p, 3)));
          store(yc + p, add(mul(load(wa0 + p), r0), mul(load(wa1 + p), r1)));
        }
#endif
        for (; p < hi; ++p) {
          const uint8_t b = vb[p];
          auto at = [&](const int32_t* o, int t) { return (b >> t) & 1 ? xc[o[p]] : 0.0f; };
          const float r0 = wb0[p] * at(o0, 0) + wb1[p] * at(o1, 1);
          const float r1 = wb0[p] * at(o2, 2) + wb1[p] * at(o3, 3);
          yc[p] = wa0[p] * r0 + wa1[p] * r1;
        }
        for (long q = lo; q < hi; ++q) any_nan = any_nan || kind[static_cast<size_t>(q)] == 2;
        if (any_nan)
          for (long q = lo; q < hi; ++q)
            if (kind[static_cast<size_t>(q)] == 2) yc[q] = std::numeric_limits<float>::quiet_NaN();
        return;
      }
    }
    for (long p = lo; p < hi; ++p) {
      const GridAxisTaps* t = &taps[static_cast<size_t>(p * 3)];
      const unsigned char k = kind[static_cast<size_t>(p)];
      yc[p] = k == 0   ? grid_point_sum<false, kT0, kT1, kT2>(xc, t[0], t[1], t[2])
              : k == 1 ? grid_point_sum<true, kT0, kT1, kT2>(xc, t[0], t[1], t[2])
                       : std::numeric_limits<float>::quiet_NaN();
    }
  }
};
}  // namespace detail

template <class Ep = EpNone>
void grid_sample_f32(long N, long C, long nd, long d0, long d1, long d2, long o0, long o1, long o2,
                     const float* x, const float* grid, int mode, int pad, bool align, float* y,
                     const Ep& ep = {}) {
  const long din[3] = {d0, d1, d2}, dout[3] = {o0, o1, o2};
  long plane = 1, points = 1;
  for (long k = 0; k < nd; ++k) plane *= din[k], points *= dout[k];
  if (N <= 0 || C <= 0 || points <= 0) return;
  const int per_axis = mode == kGridNearest ? 1 : mode == kGridLinear ? 2 : 4;
  long taps_per_point = 1;
  for (long k = 0; k < nd; ++k) taps_per_point *= per_axis;
  const bool small = plane < (1L << 31);  // offsets in int32
  const bool nearest = mode == kGridNearest && small;
  const bool fast2d = nd == 2 && small && (mode == kGridLinear || nearest) && pad != kGridReflection;
  // the sum, its tap counts as template arguments
  auto apply = [&](const float* xc, float* yc, long lo, long hi, const detail::GridPlan& pl) {
    const int which = mode * 3 + static_cast<int>(nd - 1);
    switch (which) {
      case 0: pl.apply<2, 1, 1>(xc, yc, lo, hi); break;
      case 1: pl.apply<2, 2, 1>(xc, yc, lo, hi); break;
      case 2: pl.apply<2, 2, 2>(xc, yc, lo, hi); break;
      case 6: pl.apply<4, 1, 1>(xc, yc, lo, hi); break;
      case 7: pl.apply<4, 4, 1>(xc, yc, lo, hi); break;
      case 8: pl.apply<4, 4, 4>(xc, yc, lo, hi); break;
      default: pl.apply<1, 1, 1>(xc, yc, lo, hi); break;  // nearest
    }
  };
  // Plans of at most kBlock points (a few MB); each channel's pass over a block in pieces of
  // kPiece points, so that a few channels still give every thread work.
  constexpr long kBlock = 1L << 15, kPiece = 2048;
  thread_local detail::GridPlan local;  // the calling thread's, reused across calls
  detail::GridPlan& plan = local;       // (a thread_local named in the workers would be theirs)
  for (long n = 0; n < N; ++n) {
    for (long b0 = 0; b0 < points; b0 += kBlock) {
      const long nb = std::min(kBlock, points - b0), pieces = (nb + kPiece - 1) / kPiece;
      if (fast2d)
        plan.make_2d(grid + n * points * nd, b0, nb, d0, d1, mode == kGridLinear, pad == kGridBorder, align);
      else
        plan.make(grid + n * points * nd, b0, nb, nd, din, mode, pad, align, nearest);
      parallel_rows(C * pieces, kPiece * taps_per_point * 2, [&](long lo, long hi) {
        for (long u = lo; u < hi; ++u) {
          const long c = u / pieces, q = u % pieces;
          apply(x + (n * C + c) * plane, y + (n * C + c) * points + b0, q * kPiece, std::min(nb, (q + 1) * kPiece),
                plan);
        }
      });
    }
  }
  const long last = nd > 0 ? dout[nd - 1] : 1;
  rowops::detail::epilogue_pass(y, N * C * points / last, last, ep);
}

}  // namespace dnnf::irr
