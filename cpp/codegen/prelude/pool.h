// Pooling anchors (paper §4.4, Many-to-Many anchors): MaxPool and AveragePool on the window
// engine (window.h) and the global pools, each with the fused epilogue.
//
// Shapes follow ONNX: N x C x spatial (1 to 3 dims), NCHW-contiguous. `out` already reflects
// ceil_mode and auto_pad (the caller computes it as dnnfusion/_ref_nn.py's Window does); a
// window that reaches past the padded input simply reads padding there. Epilogue views (the
// contract in gemm_kernel.h):
//   max_pool_f32, avg_pool_f32                 [N * C, prod(out)]   row = n * C + c
//   global_avg_pool_f32, global_max_pool_f32   [N, C]               so an SE block's
//                                              following ops are vectorized over channels
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "gemm_kernel.h"
#include "parallel.h"
#include "simd.h"
#include "window.h"

namespace dnnf::pool {

using gemm::EpNone;
using gemm::load_lanes;
using gemm::store_lanes;
using simd::kVecWidth;
using simd::vf;

// nd spatial dims are used (unused entries: 1 for sizes, 0 for pads). pad_end only matters
// to the divisor of avg_pool_f32 with count_include_pad (the end padding counts, an
// overhang of ceil_mode beyond it does not).
struct PoolShape {
  int nd;
  int N, C;
  int in[3], out[3], k[3], stride[3], dil[3], pad_begin[3], pad_end[3];
  bool count_include_pad;
};

namespace detail {

inline window::Geom geom(const PoolShape& s) {
  return window::make_geom(s.nd, s.in, s.out, s.k, s.stride, s.dil, s.pad_begin);
}

// The average's divisor, separable over dims: count[i][o] = taps of dim i that land in the
// counted region (the input, plus the explicit pads with count_include_pad); at least 1.
struct PostAvg {
  const float* cz;
  const float* cy;
  const float* cx;
  vf apply(vf v, int oz, int oy, int ox, int n) const {
    using namespace simd;
    vf c = v_mul(v_set1(cz[oz] * cy[oy]), load_lanes(cx + ox, n));
    return v_div(v, v_max(c, v_set1(1.0f)));
  }
};
inline std::vector<float> tap_counts(const PoolShape& s, const window::Geom& g, int i) {
  const int j = i - (3 - s.nd);  // the caller's dim, < 0 for the leading dims of the geometry
  std::vector<float> c(static_cast<size_t>(g.out[i]) + kVecWidth, 1.0f);
  if (j < 0) return c;
  const int lo = s.count_include_pad ? -s.pad_begin[j] : 0;
  const int hi = s.count_include_pad ? s.in[j] + s.pad_end[j] : s.in[j];
  for (int o = 0; o < g.out[i]; ++o) {
    int n = 0;
    for (int t = 0; t < g.k[i]; ++t) {
      const int pos = o * g.stride[i] + t * g.dil[i] - g.pad[i];
      n += pos >= lo && pos < hi;
    }
    c[o] = static_cast<float>(n);
  }
  return c;
}

// Global pools: one task per image and block of channels; a channel's spatial run is
// reduced with four vector accumulators, then the block's results go through the epilogue
// as vectors of channels.
template <bool kMax, class Ep>
void global_pool(int N, int C, long spatial, const float* x, float* y, const Ep& ep) {
  using namespace simd;
  constexpr int W = kVecWidth;
  if (N <= 0 || C <= 0) return;
  const float id = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  auto op = [](vf a, vf b) { return kMax ? v_max(b, a) : v_add(a, b); };
  const long per = std::min<long>(C, (1L << 15) / std::max(1L, spatial));  // channels a task
  const int cb = std::max(W, static_cast<int>(per) / W * W);
  const int blocks = (C + cb - 1) / cb;
  auto task = [&](int t) {
    const int n = t / blocks, c0 = (t % blocks) * cb, c1 = std::min(C, c0 + cb);
    float* yr = y + static_cast<long>(n) * C;
    for (int c = c0; c < c1; ++c) {
      const float* p = x + (static_cast<long>(n) * C + c) * spatial;
      vf a0 = v_set1(id), a1 = a0, a2 = a0, a3 = a0;
      long i = 0;
      for (; i + 4 * W <= spatial; i += 4 * W) {
        a0 = op(a0, v_loadu(p + i));
        a1 = op(a1, v_loadu(p + i + W));
        a2 = op(a2, v_loadu(p + i + 2 * W));
        a3 = op(a3, v_loadu(p + i + 3 * W));
      }
      for (; i < spatial; i += W) {
        const int k = static_cast<int>(std::min<long>(W, spatial - i));
        a0 = op(a0, v_select(vm_first(k), v_load_tail(p + i, k), v_set1(id)));
      }
      vf a = op(op(a0, a1), op(a2, a3));
      yr[c] = kMax ? v_reduce_max(a) : v_reduce_add(a) / static_cast<float>(spatial);
    }
    for (int c = c0; c < c1; c += W) {
      const int k = std::min(W, c1 - c);
      vf v = load_lanes(yr + c, k);
      if constexpr (!std::is_same_v<Ep, EpNone>) ep.apply(v, n, c, k);
      if constexpr (!gemm::ep_stores<Ep>) store_lanes(yr + c, v, k);
    }
  };
  // A read-once reduction is cheap per float: below ~0.5 MB, waking the pool costs more.
  const long work = static_cast<long>(N) * C * std::max(1L, spatial);
  if (work < (1L << 17) || N * blocks == 1) {
    for (int t = 0; t < N * blocks; ++t) task(t);
  } else {
    parallel_for(N * blocks, task);
  }
}

}  // namespace detail

// MaxPool (ONNX): a window's maximum over its in-bounds taps; -inf when it has none.
template <class Ep = EpNone>
void max_pool_f32(const PoolShape& s, const float* x, float* y, const Ep& ep = {}) {
  window::run(detail::geom(s), static_cast<long>(s.N) * s.C, x, nullptr, 1, y, window::OpMax{},
              window::PostNone{}, ep);
}

// AveragePool (ONNX): the sum over the window divided by the number of counted taps
// (in-bounds ones; with count_include_pad also the explicit padding).
template <class Ep = EpNone>
void avg_pool_f32(const PoolShape& s, const float* x, float* y, const Ep& ep = {}) {
  const window::Geom g = detail::geom(s);
  const std::vector<float> cz = detail::tap_counts(s, g, 0), cy = detail::tap_counts(s, g, 1),
                           cx = detail::tap_counts(s, g, 2);
  window::run(g, static_cast<long>(s.N) * s.C, x, nullptr, 1, y, window::OpSum{},
              detail::PostAvg{cz.data(), cy.data(), cx.data()}, ep);
}

// GlobalAveragePool / GlobalMaxPool over x [N, C, spatial] into y [N, C].
template <class Ep = EpNone>
void global_avg_pool_f32(int N, int C, long spatial, const float* x, float* y, const Ep& ep = {}) {
  detail::global_pool<false>(N, C, spatial, x, y, ep);
}
template <class Ep = EpNone>
void global_max_pool_f32(int N, int C, long spatial, const float* x, float* y, const Ep& ep = {}) {
  detail::global_pool<true>(N, C, spatial, x, y, ep);
}

// MaxPool by windows, one output at a time, in any element type: the values (y, unless null)
// and/or the Indices output (idx, unless null) [N, C, out...]: the flat input index
// (n * C + c) * prod(in) + position of the window's first maximum (a later tap wins only if
// strictly greater, so a NaN found first stays), the position row-major over the spatial dims,
// or column-major with column_major (ONNX storage_order = 1); padding taps never count, and a
// window without an in-bounds tap is the type's lowest value (-inf in floating point).
template <class T>
void max_pool_scalar(const PoolShape& s, const T* x, T* y, int64_t* idx, bool column_major) {
  const window::Geom g = detail::geom(s);
  const long in_plane = g.in_plane(), out_plane = g.out_plane();
  // Strides of the flat spatial index along (depth, height, width) of the geometry.
  long st[3] = {static_cast<long>(g.in[1]) * g.in[2], g.in[2], 1};
  if (column_major) {  // only the caller's nd dims exist; the geometry's leading dims are 1
    const int lead = 3 - s.nd;
    long acc = 1;
    for (int i = lead; i < 3; ++i) {
      st[i] = acc;
      acc *= g.in[i];
    }
  }
  constexpr T none = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                          : std::numeric_limits<T>::lowest();
  const long planes = static_cast<long>(s.N) * s.C;
  auto run = [&](long p0, long p1) {
    for (long p = p0; p < p1; ++p) {
      const T* xp = x + p * in_plane;
      for (int oz = 0; oz < g.out[0]; ++oz)
        for (int oy = 0; oy < g.out[1]; ++oy)
          for (int ox = 0; ox < g.out[2]; ++ox) {
            bool seen = false;
            T best = none;
            long at = 0;
            for (int kz = 0; kz < g.k[0]; ++kz) {
              const int iz = oz * g.stride[0] + kz * g.dil[0] - g.pad[0];
              if (iz < 0 || iz >= g.in[0]) continue;
              for (int ky = 0; ky < g.k[1]; ++ky) {
                const int iy = oy * g.stride[1] + ky * g.dil[1] - g.pad[1];
                if (iy < 0 || iy >= g.in[1]) continue;
                for (int kx = 0; kx < g.k[2]; ++kx) {
                  const int ix = ox * g.stride[2] + kx * g.dil[2] - g.pad[2];
                  if (ix < 0 || ix >= g.in[2]) continue;
                  const T v = xp[(static_cast<long>(iz) * g.in[1] + iy) * g.in[2] + ix];
                  if (!seen || v > best) {
                    best = v;
                    at = iz * st[0] + iy * st[1] + ix * st[2];
                    seen = true;
                  }
                }
              }
            }
            const long o = p * out_plane + (static_cast<long>(oz) * g.out[1] + oy) * g.out[2] + ox;
            if (y) y[o] = best;
            if (idx) idx[o] = p * in_plane + at;
          }
    }
  };
  const long tasks = std::min<long>(planes, 4L * get_num_threads());
  if (tasks <= 1 || planes * out_plane * g.taps() < 32768) return run(0, planes);
  parallel_for(static_cast<int>(tasks), [&](int t) { run(planes * t / tasks, planes * (t + 1) / tasks); });
}

// The Indices of a float MaxPool whose values max_pool_f32 computes (with its epilogue).
inline void max_pool_indices(const PoolShape& s, const float* x, int64_t* idx, bool column_major) {
  max_pool_scalar<float>(s, x, nullptr, idx, column_major);
}

}  // namespace dnnf::pool
