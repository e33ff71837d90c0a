// Sliding-window engine shared by depthwise convolution (conv.h) and pooling (pool.h): the
// direct kernels of the Many-to-Many anchors that are not GEMMs (paper §4.4).
//
// The Window Engine note. One channel plane at a time is copied into a padded scratch volume
// (fill 0 for sums, -inf for max), so every tap of every output reads in bounds and no edge
// case remains. Each padded row is stored split by width phase (sx = width stride): phase p
// holds columns p, p + sx, p + 2 sx, ..., so that for every tap the outputs of a row read
// one contiguous run (no strided loads exist in the vocabulary; with sx = 1 it is the plain
// padded row). Outputs are then produced a "line" at a time, vectorized along the width:
//   t[q] = op over taps of src[q + off[tap]],  q in [0, len)
// With height stride 1 a line is a band of output rows laid out with the padded row pitch
// (q = (oy - oy0) * pitch + ox): each tap is one shifted load, and the columns between rows
// are computed and dropped. Otherwise a line is one output row. Finally each output row
// goes through post (e.g. the average's divisor), the fused epilogue (view [planes,
// prod(out)]) and the store.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

#include "conv_shape.h"
#include "gemm_kernel.h"
#include "large_alloc.h"
#include "parallel.h"
#include "simd.h"

namespace dnnf::window {

using gemm::load_lanes;
using gemm::store_lanes;
using simd::kVecWidth;
using simd::vf;


// Reduction ops over the taps. first/step see one input vector x and the tap's weight w;
// combine merges two partial results.
struct OpWeightedSum {  // depthwise convolution
  static constexpr bool kWeighted = true;
  static constexpr float kFill = 0.0f;
  vf first(vf x, vf w) const { return simd::v_mul(x, w); }
  vf step(vf acc, vf x, vf w) const { return simd::v_fma(x, w, acc); }
  vf combine(vf a, vf b) const { return simd::v_add(a, b); }
};
struct OpSum {  // average pooling (post divides)
  static constexpr bool kWeighted = false;
  static constexpr float kFill = 0.0f;
  vf first(vf x, vf) const { return x; }
  vf step(vf acc, vf x, vf) const { return simd::v_add(acc, x); }
  vf combine(vf a, vf b) const { return simd::v_add(a, b); }
};
struct OpMax {  // max pooling; a NaN already in acc stays (x is the first operand)
  static constexpr bool kWeighted = false;
  static constexpr float kFill = -__builtin_inff();
  vf first(vf x, vf) const { return x; }
  vf step(vf acc, vf x, vf) const { return simd::v_max(x, acc); }
  vf combine(vf a, vf b) const { return simd::v_max(b, a); }
};

namespace detail {

// t[q] for q in [0, len). Four independent accumulators hide the FMA latency: four vectors
// at a time while at least three are left, then one vector at a time with the taps dealt
// round-robin to four partial results (short rows, e.g. 7 or 14 wide, would otherwise be
// one latency-bound chain per vector). Reads and writes up to kSlack floats past a line.
inline constexpr int kSlack = 4 * kVecWidth;
template <int NT, class Op>
void line(const float* src, const long* off, int ntaps, const float* wt, float* t, int len,
          const Op& op) {
  using namespace simd;
  constexpr int W = kVecWidth;
  const int nt = NT > 0 ? NT : ntaps;
  vf wv[NT > 0 ? NT : 1];
  if constexpr (NT > 0) {
    for (int i = 0; i < NT; ++i) wv[i] = Op::kWeighted ? v_set1(wt[i]) : v_zero();
  }
  auto weight = [&](int i) {
    if constexpr (NT > 0) return wv[i];
    return Op::kWeighted ? v_set1(wt[i]) : v_zero();
  };
  int q = 0;
  for (; q + 2 * W < len; q += 4 * W) {
    const float* s = src + q;
    vf w0 = weight(0);
    vf a0 = op.first(v_loadu(s + off[0]), w0), a1 = op.first(v_loadu(s + off[0] + W), w0);
    vf a2 = op.first(v_loadu(s + off[0] + 2 * W), w0);
    vf a3 = op.first(v_loadu(s + off[0] + 3 * W), w0);
#pragma GCC unroll 25
    for (int i = 1; i < nt; ++i) {
      const float* p = s + off[i];
      vf w = weight(i);
      a0 = op.step(a0, v_loadu(p), w);
      a1 = op.step(a1, v_loadu(p + W), w);
      a2 = op.step(a2, v_loadu(p + 2 * W), w);
      a3 = op.step(a3, v_loadu(p + 3 * W), w);
    }
    v_storeu(t + q, a0);
    v_storeu(t + q + W, a1);
    v_storeu(t + q + 2 * W, a2);
    v_storeu(t + q + 3 * W, a3);
  }
  for (; q < len; q += W) {
    const float* s = src + q;
    vf a = op.first(v_loadu(s + off[0]), weight(0));
    if (nt >= 4) {
      vf a1 = op.first(v_loadu(s + off[1]), weight(1));
      vf a2 = op.first(v_loadu(s + off[2]), weight(2));
      vf a3 = op.first(v_loadu(s + off[3]), weight(3));
      int i = 4;
#pragma GCC unroll 6
      for (; i + 4 <= nt; i += 4) {
        a = op.step(a, v_loadu(s + off[i]), weight(i));
        a1 = op.step(a1, v_loadu(s + off[i + 1]), weight(i + 1));
        a2 = op.step(a2, v_loadu(s + off[i + 2]), weight(i + 2));
        a3 = op.step(a3, v_loadu(s + off[i + 3]), weight(i + 3));
      }
      for (; i < nt; ++i) a = op.step(a, v_loadu(s + off[i]), weight(i));
      a = op.combine(op.combine(a, a1), op.combine(a2, a3));
    } else {
      for (int i = 1; i < nt; ++i) a = op.step(a, v_loadu(s + off[i]), weight(i));
    }
    v_storeu(t + q, a);
  }
}

// Valid range [lo, hi) of o with 0 <= o * s + b < n (s > 0), clamped to [0, count).
inline void valid_range(int b, int s, int n, int count, int* lo, int* hi) {
  *lo = b >= 0 ? 0 : (-b + s - 1) / s;
  *hi = n - 1 - b >= 0 ? (n - 1 - b) / s + 1 : 0;
  *lo = std::min(*lo, count);
  *hi = std::max(*lo, std::min(*hi, count));
}

// Short-row fill and copy in vectors: padded rows are tens of floats, where the calls to
// memset/memmove behind std::fill/std::copy cost more than the data.
inline void fill_n(float* d, int n, vf f) {
  int j = 0;
  for (; j + kVecWidth <= n; j += kVecWidth) simd::v_storeu(d + j, f);
  if (j < n) simd::v_store_tail(d + j, f, n - j);
}
inline void copy_n(float* __restrict d, const float* __restrict s, int n) {
  int j = 0;
  for (; j + kVecWidth <= n; j += kVecWidth) simd::v_storeu(d + j, simd::v_loadu(s + j));
  if (j < n) simd::v_store_tail(d + j, simd::v_load_tail(s + j, n - j), n - j);
}

// Copies one input plane into the padded volume xp, each row split into sx phases of wq
// floats. Only the input's own positions are written: the padding around them is the same
// for every plane, so the caller fills the whole volume (plus kSlack floats of overrun for
// the last block of a line) once per task.
inline void pad_plane(const Geom& g, const float* x, float* xp, int wq) {
  const int Hp = g.padded[1], sx = g.stride[2], pitch = sx * wq;
  // Phase p, index j holds padded column j * sx + p = input column j * sx + p - pad; the
  // input covers [j0, j1), computed before the rows (a division per row would cost more
  // than the copy). Strides above 8 recompute it per row.
  constexpr int kPhases = 8;
  int j0[kPhases], j1[kPhases];
  for (int p = 0; p < std::min(sx, kPhases); ++p)
    valid_range(p - g.pad[2], sx, g.in[2], wq, &j0[p], &j1[p]);
  const int z0 = std::max(0, g.pad[0]), z1 = std::min(g.padded[0], g.pad[0] + g.in[0]);
  const int y0 = std::max(0, g.pad[1]), y1 = std::min(Hp, g.pad[1] + g.in[1]);
  for (int z = z0; z < z1; ++z) {
    for (int y = y0; y < y1; ++y) {
      float* d = xp + (static_cast<long>(z) * Hp + y) * pitch;
      const float* s = x + (static_cast<long>(z - g.pad[0]) * g.in[1] + y - g.pad[1]) * g.in[2];
      if (sx == 1) {
        copy_n(d + j0[0], s + j0[0] - g.pad[2], j1[0] - j0[0]);
        continue;
      }
      for (int p = 0; p < sx; ++p, d += wq) {
        const int b = p - g.pad[2];
        int lo = 0, hi = 0;
        if (p < kPhases) {
          lo = j0[p];
          hi = j1[p];
        } else {
          valid_range(b, sx, g.in[2], wq, &lo, &hi);
        }
        if (sx == 2) {  // a constant stride lets the compiler vectorize the split
          float* __restrict dd = d;
          for (int j = lo; j < hi; ++j) dd[j] = s[2 * j + b];
        } else {
          for (int j = lo; j < hi; ++j) d[j] = s[j * sx + b];
        }
      }
    }
  }
}

// Per-thread scratch that only grows (slot 0: padded volume, 1: line).
inline float* scratch(int slot, size_t n) {
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<float, FreeDeleter> buf;
    size_t cap = 0;
  };
  thread_local Slot slots[2];
  Slot& s = slots[slot];
  if (s.cap < n) {
    size_t cap = std::max(n, s.cap + s.cap / 2);
    s.buf.reset(static_cast<float*>(alloc_aligned(cap * sizeof(float))));
    s.cap = cap;
  }
  return s.buf.get();
}

inline constexpr int kBandFloats = 4096;  // one line's outputs: 16 KB, stays in L1
inline constexpr long kGrain = 1L << 15;  // work per task (taps x outputs)

}  // namespace detail

// Identity post-processing; the average pool passes its divisor instead.
struct PostNone {
  vf apply(vf v, int, int, int, int) const { return v; }
};

// Runs op over planes [0, n_planes) of x (each g.in_plane() floats) into y (each
// g.out_plane() floats); plane p's tap weights (when Op::kWeighted) are wt + p % w_period *
// taps. The epilogue sees y as [n_planes, out_plane]: row = plane, col = flat output index.
template <class Op, class Post = PostNone, class Ep = gemm::EpNone>
void run(const Geom& g, long n_planes, const float* x, const float* wt, long w_period, float* y,
         const Op& op, const Post& post, const Ep& ep) {
  using namespace simd;
  constexpr int W = kVecWidth;
  const int Hp = g.padded[1], Wp = g.padded[2], OZ = g.out[0], OY = g.out[1], OX = g.out[2];
  const int ntaps = g.taps();
  if (n_planes <= 0 || g.out_plane() <= 0) return;
  const int sx = g.stride[2], wq = (Wp + sx - 1) / sx, pitch = sx * wq;
  // Tap offsets relative to the line's first input, in weight order (kz, ky, kx).
  std::unique_ptr<long[]> off(new long[ntaps]);
  for (int kz = 0, i = 0; kz < g.k[0]; ++kz)
    for (int ky = 0; ky < g.k[1]; ++ky)
      for (int kx = 0; kx < g.k[2]; ++kx, ++i) {
        const int cx = kx * g.dil[2];
        const long row = static_cast<long>(kz) * g.dil[0] * Hp + static_cast<long>(ky) * g.dil[1];
        off[i] = row * pitch + static_cast<long>(cx % sx) * wq + cx / sx;
      }
  const bool band = g.stride[1] == 1;
  const int band_rows = band ? std::max(1, std::min(OY, detail::kBandFloats / pitch)) : 1;
  const int line_cap = (band_rows - 1) * pitch + OX;
  const long volume = static_cast<long>(g.padded[0]) * Hp * pitch;

  auto do_planes = [&](long p0, long p1) {
    float* xp = detail::scratch(0, static_cast<size_t>(volume) + detail::kSlack);
    float* t = detail::scratch(1, static_cast<size_t>(line_cap) + detail::kSlack);
    detail::fill_n(xp, static_cast<int>(volume) + detail::kSlack, v_set1(Op::kFill));
    for (long p = p0; p < p1; ++p) {
      detail::pad_plane(g, x + p * g.in_plane(), xp, wq);
      const float* w = Op::kWeighted ? wt + (p % w_period) * ntaps : nullptr;
      float* yp = y + p * g.out_plane();
      for (int oz = 0; oz < OZ; ++oz) {
        for (int oy0 = 0; oy0 < OY; oy0 += band_rows) {
          const int rows = std::min(band_rows, OY - oy0);
          const int len = (rows - 1) * pitch + OX;
          const float* src = xp + (static_cast<long>(oz) * g.stride[0] * Hp +
                                   static_cast<long>(oy0) * g.stride[1]) * pitch;
          switch (ntaps) {  // the common windows get unrolled, register-held weights
            case 4: detail::line<4>(src, off.get(), ntaps, w, t, len, op); break;
            case 9: detail::line<9>(src, off.get(), ntaps, w, t, len, op); break;
            case 25: detail::line<25>(src, off.get(), ntaps, w, t, len, op); break;
            default: detail::line<0>(src, off.get(), ntaps, w, t, len, op);
          }
          for (int r = 0; r < rows; ++r) {
            const int oy = oy0 + r;
            const float* row = t + static_cast<long>(r) * pitch;
            const long col0 = (static_cast<long>(oz) * OY + oy) * OX;
            if constexpr (gemm::IsEpDyn<Ep>::value && std::is_same_v<Post, PostNone>) {
              ep.apply_run(row, yp + col0, OX, p, col0);  // one call per row, not per vector
              continue;
            }
            for (int ox = 0; ox < OX; ox += W) {
              const int n = std::min(W, OX - ox);
              vf v = post.apply(load_lanes(row + ox, n), oz, oy, ox, n);
              if constexpr (!std::is_same_v<Ep, gemm::EpNone>) {
                ep.apply(v, static_cast<int>(p), static_cast<int>(col0 + ox), n);
              }
              if constexpr (!gemm::ep_stores<Ep>) store_lanes(yp + col0 + ox, v, n);
            }
          }
        }
      }
    }
  };
  const long cost = std::max(1L, g.out_plane() * ntaps);
  long tasks = std::min(n_planes, std::max(1L, n_planes * cost / detail::kGrain));
  if (tasks > 1) tasks = std::min<long>(tasks, 8L * get_num_threads());
  if (tasks <= 1) {
    do_planes(0, n_planes);
  } else {
    parallel_for(static_cast<int>(tasks), [&](int i) {
      do_planes(n_planes * i / tasks, n_planes * (i + 1) / tasks);
    });
  }
}

}  // namespace dnnf::window
