// A depthwise convolution that computes its own input from the 1x1 convolution making it (an
// inverted residual's expansion), rows at a time into a ring that stays in cache: the kernel
// the planner's expansions call (plan/expanded_by_anchor.cc, codegen/expand_rows.cc). Kept
// apart from conv_nhwc.h, whose depthwise row code it runs on the ring's rows.
#pragma once
#include "conv_nhwc.h"

namespace dnnf::conv {

// Whether conv_nhwc_expand_f32 runs sp (pointwise) then sd (depthwise) as one call: sp 1x1,
// stride 1, no padding, one group, 2-D; sd depthwise over sp's output channels, 2-D, at most
// 16 rows of window; both channels last with dense outputs.
inline bool expand_applies(const ConvShape& sp, const ConvShape& sd) {
  const window::Geom g = detail::geom(sd);
  return sp.nd == 2 && sd.nd == 2 && PackedNhwcWeights::pointwise_gemm(sp) && detail::is_depthwise(sd) &&
         sd.C == sp.M && sd.N == sp.N && !sp.planar_x && !sd.planar_x && (sp.ldy == 0 || sp.ldy == sp.M) &&
         (sd.ldy == 0 || sd.ldy == sd.M) && g.k[0] == 1 && (g.k[1] - 1) * g.dil[1] + 1 <= 16;
}

// A depthwise convolution whose input it computes itself, rows at a time, from a pointwise
// one (an inverted residual's expansion, MobileNetV2 and EfficientNet: 1x1 conv + activation,
// then the depthwise conv). The expanded tensor never goes to memory: each task keeps the
// window's input rows (KY of them, dilated span; four for two 3x3 output rows at once) in a
// ring of that many rows, and an output row computes the rows it needs that the ring lacks
// with a one-thread GEMM of IW pixels by the expansion's channels, epilogue `epp` applied (its
// rows numbered as in the whole tensor). At 112x112 with 96 channels the expanded tensor is
// 4.8 MB written and read back; the ring is 3 x 43 KB, in L2. The rows where two tasks meet
// are computed by both (span - stride of every task's first rows), so there are as few tasks
// as threads.
namespace nhwc_detail {

// An epilogue whose rows are numbered from `rows` on (a part of a larger output).
template <class Ep>
Ep rows_from(const Ep& ep, long rows) {
  if constexpr (gemm::IsEpDyn<Ep>::value) {
    return ep.shifted(rows);
  } else {
    static_assert(std::is_same_v<Ep, gemm::EpNone>, "rows_from: an epilogue that may read its row");
    (void)rows;
    return ep;
  }
}

template <class EpP, class EpD, class RowDone>
void expand_depthwise(const ConvShape& sp, const float* x, const PackedNhwcWeights& wp, const EpP& epp,
                      const ConvShape& sd, const PackedNhwcWeights& wd, float* y, const EpD& epd,
                      const RowDone& row_done) {
  if constexpr (gemm::ep_stores<EpP>)
    throw std::invalid_argument("conv_nhwc_expand: the pointwise epilogue must leave its store to the GEMM");
  const window::Geom gp = detail::geom(sp), g = detail::geom(sd);
  bool ok = expand_applies(sp, sd) && wp.fits(sp) && !wp.segmented() && wd.fits(sd) && !wd.segmented();
  for (int i = 0; ok && i < 3; ++i) ok = gp.out[i] == g.in[i];
  if (!ok) throw std::invalid_argument("conv_nhwc_expand: not a 1x1 convolution feeding a 2-D depthwise one");
  const int H = g.in[1], IW = g.in[2], C = sd.C, K = sp.C, OY = g.out[1], OX = g.out[2];
  const int span = (g.k[1] - 1) * g.dil[1] + 1;
  // The shapes depthwise_rows_padded takes (5x5, stride 1, narrow planes) get zero-padded ring
  // rows and run its interior kernel over every pixel: the GEMM writes each row's pixels after
  // px zero pixels, and the margins stay zero.
  constexpr int U = 8;
  const int OXp = (OX + U - 1) / U * U, px = g.pad[2];
  const int PW = (OXp - 1) * g.stride[2] + g.k[2];
  const bool padded = depthwise_padded_applies(g, C) && px + IW <= PW;
  const int lead = padded ? px : 0;
  const long rows = static_cast<long>(sd.N) * OY, row_floats = static_cast<long>(padded ? PW : IW) * C;
  const long tasks = std::min<long>(rows, get_num_threads());
  // Two output rows at a time where depthwise_row_pair_at applies (3x3 stride 1, AVX-512): the
  // ring holds the four input rows a pair reads. MobileNetV2 with every expansion fused: its
  // expansion kernels 0.91x the time of one row at a time at 1 thread, 0.94x at 2, against
  // its other kernels (Xeon; benchmarks/README, "Row pairs in the expansion kernel").
  const bool pairs = !padded && span == 3 && depthwise_pair_applies(g, C, g.pad[1]);
  const int nring = pairs ? 4 : span;
  auto task = [&](long r0, long r1) {
    thread_local std::vector<float> ring_buf;
    if (ring_buf.size() < static_cast<size_t>(nring * row_floats)) ring_buf.resize(static_cast<size_t>(nring * row_floats));
    float* ring = ring_buf.data();
    if (padded)
      for (int k = 0; k < span; ++k) {
        float* d = ring + k * row_floats;
        std::fill(d, d + static_cast<long>(px) * C, 0.0f);
        std::fill(d + static_cast<long>(px + IW) * C, d + row_floats, 0.0f);
      }
    float* buf = padded ? tile_scratch(static_cast<size_t>(OXp) * C) : nullptr;
    long held[16];
    std::fill(held, held + nring, -1L);
    const float* in_rows[16];
    int tap0[16];
    gemm::Options one;
    one.n_threads = 1;
    one.b_in_l2 = true;  // the same 1x1 weights for every expanded row
    auto expanded = [&](long n, int iy) {  // input row iy of image n, computed into the ring if it is not there
      const int slot = iy % nring;
      float* d = ring + slot * row_floats;
      const long id = n * H + iy;  // the expanded row, as a row of the [N * H, IW] pixels
      if (held[slot] != id) {
        gemm::gemm_f32_src(IW, C, K, gemm::AView<>{x + id * IW * K, K, 1}, wp.gemm(), d + static_cast<long>(lead) * C,
                           C, rows_from(epp, id * IW), one);
        held[slot] = id;
      }
      return static_cast<const float*>(d);
    };
    for (long r = r0; r < r1; ++r) {
      const long n = r / OY;
      const int oy = static_cast<int>(r % OY);
      if (pairs && r + 1 < r1 && depthwise_pair_applies(g, C, oy) && dw_out(epd, y, 0).y) {  // rows r and r + 1
        const int iy0 = oy - g.pad[1];
        const float* quad[4] = {expanded(n, iy0), expanded(n, iy0 + 1), expanded(n, iy0 + 2), expanded(n, iy0 + 3)};
        if (depthwise_row_pair_at(g, quad, nullptr, 0, wd.depthwise(), C, n, 0, oy, y, epd)) {
          row_done(r);
          row_done(++r);
          continue;
        }
      }
      int nr = 0;
      for (int ky = 0; ky < g.k[1]; ++ky) {
        const int iy = oy * g.stride[1] - g.pad[1] + ky * g.dil[1];
        if (iy < 0 || iy >= H) continue;
        in_rows[nr] = expanded(n, iy);
        tap0[nr] = ky * g.k[2];
        ++nr;
      }
      if (padded) {
        depthwise_interior<5, 1>(in_rows, tap0, nr, wd.depthwise(), C, 0, 0, OXp, buf);
        const long row0 = r * OX;
        finish_block(epd, buf, C / kVecWidth, y + row0 * C, C, OX, C, row0, 0);
      } else {
        depthwise_row_at(g, in_rows, tap0, nr, nullptr, 0, wd.depthwise(), C, n, 0, oy, y, epd);
      }
      row_done(r);
    }
  };
  if (tasks <= 1) {
    task(0, rows);
    return;
  }
  parallel_for(static_cast<int>(tasks), [&](int t) { task(rows * t / tasks, rows * (t + 1) / tasks); });
}
}  // namespace nhwc_detail

template <class EpP, class EpD>
void conv_nhwc_expand_f32(const ConvShape& sp, const float* x, const PackedNhwcWeights& wp, const EpP& epp,
                          const ConvShape& sd, const PackedNhwcWeights& wd, float* y, const EpD& epd) {
  nhwc_detail::expand_depthwise(sp, x, wp, epp, sd, wd, y, epd, [](long) {});
}

// The same, also taking the spatial mean of its output as conv_nhwc_mean_f32 does.
template <class EpP, class EpD>
void conv_nhwc_expand_mean_f32(const ConvShape& sp, const float* x, const PackedNhwcWeights& wp, const EpP& epp,
                               const ConvShape& sd, const PackedNhwcWeights& wd, float* y, const EpD& epd,
                               float* pooled, float scale) {
  nhwc_detail::mean_of_rows(sd, y, pooled, scale, [&](const auto& row_done) {
    nhwc_detail::expand_depthwise(sp, x, wp, epp, sd, wd, y, epd, row_done);
  });
}

}  // namespace dnnf::conv

// The expansion kernels' instances in the nhwc prelude unit (prelude_units.h, DNNF_UNIT_nhwc):
// declared by modules that include this header, defined by the unit, which includes it too.
#undef DNNF_UNIT_NHWC_EXPAND
#define DNNF_UNIT_NHWC_EXPAND(EP, D)                                                                 \
  D(void dnnf::conv::conv_nhwc_expand_f32<EP, EP>(const dnnf::conv::ConvShape&, const float*,           \
                                                  const dnnf::conv::PackedNhwcWeights&, const EP&,      \
                                                  const dnnf::conv::ConvShape&,                         \
                                                  const dnnf::conv::PackedNhwcWeights&, float*, const EP&)) \
  D(void dnnf::conv::conv_nhwc_expand_mean_f32<EP, EP>(const dnnf::conv::ConvShape&, const float*,      \
                                                       const dnnf::conv::PackedNhwcWeights&, const EP&, \
                                                       const dnnf::conv::ConvShape&,                    \
                                                       const dnnf::conv::PackedNhwcWeights&, float*,    \
                                                       const EP&, float*, float))
