// MaxPool and AveragePool with the channels last (the internal NhwcMaxPool / NhwcAveragePool
// that the inter-block layout pass, rewrite/layout.cc, puts inside channels-last regions so a
// pool does not split one): x [N, spatial..., C], y [N, spatial out..., C], PoolShape as in
// pool.h. Vectors run along the channels, so every tap is a plain vector load at any stride.
// The epilogue view is NhwcConv's, y as [N * prod(out), C]: one call per output row.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "conv_nhwc.h"
#include "pool.h"

namespace dnnf::pool {

namespace nhwc_detail {

// One output row (image n, oz, oy) of channel vectors into buf [OX][nvk * W], then the
// epilogue over the row.
template <bool kMax, class Ep>
void pool_row(const PoolShape& s, const window::Geom& g, const float* x, long n, int oz, int oy,
              const std::vector<float>* counts, float* y, const Ep& ep) {
  using namespace simd;
  constexpr int W = kVecWidth;
  const int C = s.C, OX = g.out[2], nvk = (C + W - 1) / W;
  thread_local std::vector<const float*> rows;  // the input rows this output row reads
  thread_local std::vector<int> tap0;
  conv::nhwc_detail::window_rows(g, x, C, n, oz, oy, rows, tap0);
  float* buf = conv::nhwc_detail::tile_scratch(static_cast<size_t>(OX) * nvk * W);
  const vf fill = v_set1(kMax ? -std::numeric_limits<float>::infinity() : 0.0f);
  const bool full = C % W == 0;
  for (int ox = 0; ox < OX; ++ox) {
    const int ix0 = ox * g.stride[2] - g.pad[2];
    const float div = kMax ? 1.0f
                           : std::max(1.0f, counts[0][static_cast<size_t>(oz)] * counts[1][static_cast<size_t>(oy)] *
                                                counts[2][static_cast<size_t>(ox)]);
    // Whole channel vectors and the whole x window inside the input: plain loads, no bounds
    // checks, no masks (ResNet-50's 3x3 s2 pool, 64 channels 112 -> 56: 221 -> 157 us, Xeon, 1 thread).
    if (full && ix0 >= 0 && ix0 + (g.k[2] - 1) * g.dil[2] < g.in[2]) {
      const long dxs = static_cast<long>(g.dil[2]) * C;
      for (int cv = 0; cv < nvk; ++cv) {
        vf acc = fill;
        for (const float* r : rows) {
          const float* p = r + static_cast<long>(ix0) * C + cv * W;
          for (int kx = 0; kx < g.k[2]; ++kx, p += dxs) acc = kMax ? v_max(acc, v_loadu(p)) : v_add(acc, v_loadu(p));
        }
        if (!kMax) acc = v_div(acc, v_set1(div));
        v_storeu(buf + (static_cast<long>(ox) * nvk + cv) * W, acc);
      }
      continue;
    }
    for (int cv = 0; cv < nvk; ++cv) {
      const int c0 = cv * W, nc = std::min(W, C - c0);
      vf acc = fill;
      for (const float* r : rows) {
        for (int kx = 0; kx < g.k[2]; ++kx) {
          const int ix = ix0 + kx * g.dil[2];
          if (ix < 0 || ix >= g.in[2]) continue;
          const vf v = gemm::load_lanes(r + static_cast<long>(ix) * C + c0, nc);
          acc = kMax ? v_max(acc, v) : v_add(acc, v);
        }
      }
      if (!kMax) acc = v_div(acc, v_set1(div));
      v_storeu(buf + (static_cast<long>(ox) * nvk + cv) * W, acc);
    }
  }
  const long row0 = ((n * g.out[0] + oz) * static_cast<long>(g.out[1]) + oy) * OX;
  conv::nhwc_detail::finish_block(ep, buf, nvk, y + row0 * C, C, OX, C, row0, 0);
}

template <bool kMax, class Ep>
void pool_nhwc(const PoolShape& s, const float* x, float* y, const Ep& ep) {
  const window::Geom g = detail::geom(s);
  std::vector<float> counts[3];
  if (!kMax)
    for (int i = 0; i < 3; ++i) counts[i] = detail::tap_counts(s, g, i);
  const long rows = static_cast<long>(s.N) * g.out[0] * g.out[1];
  auto run = [&](long r) {
    const int oy = static_cast<int>(r % g.out[1]), oz = static_cast<int>((r / g.out[1]) % g.out[0]);
    pool_row<kMax>(s, g, x, r / (static_cast<long>(g.out[0]) * g.out[1]), oz, oy, counts, y, ep);
  };
  const long tasks = std::min<long>(rows, 4L * get_num_threads());
  if (tasks <= 1) {
    for (long r = 0; r < rows; ++r) run(r);
    return;
  }
  parallel_for(static_cast<int>(tasks), [&](int t) {
    for (long r = rows * t / tasks; r < rows * (t + 1) / tasks; ++r) run(r);
  });
}

}  // namespace nhwc_detail

template <class Ep = EpNone>
void max_pool_nhwc_f32(const PoolShape& s, const float* x, float* y, const Ep& ep = {}) {
  nhwc_detail::pool_nhwc<true>(s, x, y, ep);
}
template <class Ep = EpNone>
void avg_pool_nhwc_f32(const PoolShape& s, const float* x, float* y, const Ep& ep = {}) {
  nhwc_detail::pool_nhwc<false>(s, x, y, ep);
}

}  // namespace dnnf::pool
