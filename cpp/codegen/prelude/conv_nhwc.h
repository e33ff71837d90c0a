// Convolution with the channels last (the internal NhwcConv that the inter-block layout pass,
// rewrite/layout.cc, puts where it pays): x [N, spatial..., C], w in ONNX's layout
// [M, C/group, k...], y [N, spatial out..., M]. ConvShape as in conv.h. The epilogue view is
// y as [N * prod(out), M]: row = output pixel, col = output channel (the GEMM's own view), so
// a per-channel bias is a column broadcast. Paths:
//   depthwise (group == C == M)   vectors along the channels, four output pixels at a time
//                                 with each tap's weight vector loaded once; stride 2 costs
//                                 nothing extra (no deinterleave, unlike NCHW)
//   1x1, stride 1, no padding     one GEMM: A = x as [pixels, C], B = W^T packed once
//   3x3, stride 1, >= 32 channels Winograd F(4x4, 3x3) or F(2x2, 3x3) (conv_winograd.h):
//                                 4x or 2.25x fewer multiply-adds, in 36 or 16 GEMMs
//                                 between cheap transforms (3-D: a 3x3 plane, any depth
//                                 kernel and stride)
//   otherwise (any group)         the direct kernel of conv_direct.h: register tiles of
//                                 pixels x output channels fed straight from x
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "conv.h"
#include "conv_direct.h"
#include "conv_winograd.h"
#include "conv_nhwc_dw.h"

namespace dnnf::conv {

namespace nhwc_detail {

// The depthwise rows [r0, r1) of a 2-D convolution (r = n * OY + oy) with 5x5 windows,
// stride 1 along x, on a plane at most 16 pixels wide (EfficientNet's 14x14 and 7x7 stages):
// each input row a window reads is copied once per task into a ring of zero-padded rows, so
// every output pixel runs the interior kernel (U pixels per weight load) instead of the
// bounds-checked edge loop, which there served 4 of every 7-14 pixels. The padded row spans
// the output rounded up to U pixels; the extra pixels are computed, never stored. Measured
// against the edge loop (2 threads and 1, Zen 4): 0.61-0.94x the time on those shapes, but
// 1.1-1.4x on 3x3 windows, stride 2 and wider planes (the copies and the rounding cost more
// than the edges there), which keep the edge loop.
inline bool depthwise_padded_applies(const window::Geom& g, int C) {
  const int span = (g.k[1] - 1) * g.dil[1] + 1;
  return g.k[0] == 1 && g.in[0] == 1 && g.out[0] == 1 && C % kVecWidth == 0 && g.dil[2] == 1 && span <= 16 &&
         g.k[2] == 5 && g.stride[2] == 1 && g.out[2] <= 16;
}

template <class Ep, class RowDone>
void depthwise_rows_padded(const window::Geom& g, const float* x, const float* wt, int C, long r0, long r1, float* y,
                           const Ep& ep, const RowDone& row_done) {
  constexpr int W = kVecWidth, U = 8;  // depthwise_interior's pixels per step
  const int H = g.in[1], IW = g.in[2], OY = g.out[1], OX = g.out[2];
  const int KY = g.k[1], sy = g.stride[1], dy = g.dil[1], py = g.pad[1];
  const int KX = g.k[2], sx = g.stride[2], px = g.pad[2];
  const int span = (KY - 1) * dy + 1, nvk = C / W;
  const int OXp = (OX + U - 1) / U * U;
  const int PW = (OXp - 1) * sx + KX;                       // padded row, pixels
  const int cols = std::max(0, std::min(IW, PW - px));      // input columns the windows reach
  const long row_floats = static_cast<long>(PW) * C;
  thread_local std::vector<float> ring_buf;
  if (ring_buf.size() < static_cast<size_t>(span * row_floats)) ring_buf.resize(static_cast<size_t>(span * row_floats));
  float* ring = ring_buf.data();
  long held[16];
  std::fill(held, held + span, -1L);
  float* buf = tile_scratch(static_cast<size_t>(OXp) * nvk * W);
  const float* rows[16];
  int tap0[16];
  for (long r = r0; r < r1; ++r) {
    const long n = r / OY;
    const int oy = static_cast<int>(r % OY);
    int nr = 0;
    for (int ky = 0; ky < KY; ++ky) {
      const int iy = oy * sy - py + ky * dy;
      if (iy < 0 || iy >= H) continue;
      const int slot = iy % span;
      float* d = ring + slot * row_floats;
      const long id = n * H + iy;
      if (held[slot] != id) {
        const float* src = x + id * IW * C;
        std::memset(d, 0, sizeof(float) * static_cast<size_t>(px) * C);
        std::memcpy(d + static_cast<long>(px) * C, src, sizeof(float) * static_cast<size_t>(cols) * C);
        const long tail = static_cast<long>(PW - px - cols) * C;
        if (tail > 0) std::memset(d + static_cast<long>(px + cols) * C, 0, sizeof(float) * tail);
        held[slot] = id;
      }
      rows[nr] = d;
      tap0[nr] = ky * KX;
      ++nr;
    }
    depthwise_interior<5, 1>(rows, tap0, nr, wt, C, 0, 0, OXp, buf);  // the shape applies() admits
    const long row0 = r * OX;
    finish_block(ep, buf, nvk, y + row0 * C, C, OX, C, row0, 0);
    row_done(r);
  }
}

// The channel sums of output row r's n pixels (y, C floats apart), stored to sums[0, C).
inline void row_channel_sums(const float* y, int n, int C, float* sums) {
  constexpr int W = kVecWidth;
  for (int c0 = 0; c0 < C; c0 += W) {
    const int nc = std::min(W, C - c0);
    vf acc = simd::v_zero();
    for (int p = 0; p < n; ++p) acc = simd::v_add(acc, gemm::load_lanes(y + static_cast<long>(p) * C + c0, nc));
    gemm::store_lanes(sums + c0, acc, nc);
  }
}

// The depthwise path: rows r = (n * OZ + oz) * OY + oy split into tasks; row_done(r) runs on
// the task's thread once row r is stored.
template <class Ep, class RowDone>
void depthwise_nhwc(const ConvShape& s, const window::Geom& g, const float* x, const float* wt, float* y,
                    const Ep& ep, const RowDone& row_done) {
  const long rows = static_cast<long>(s.N) * g.out[0] * g.out[1];
  const int T = get_num_threads();
  const bool padded = depthwise_padded_applies(g, s.C);
  // Padded rows are copied once per task (plus the window's overlap): fewer, longer tasks.
  const long tasks = std::min<long>(rows, (padded ? 1L : 4L) * T);
  auto task = [&](long r0, long r1) {
    if (padded) {
      depthwise_rows_padded(g, x, wt, s.C, r0, r1, y, ep, row_done);
      return;
    }
    for (long r = r0; r < r1; ++r) {
      const int oy = static_cast<int>(r % g.out[1]), oz = static_cast<int>((r / g.out[1]) % g.out[0]);
      const long n = r / (static_cast<long>(g.out[0]) * g.out[1]);
      if (r + 1 < r1 && depthwise_row_pair(g, x, wt, s.C, n, oz, oy, y, ep)) {  // rows r and r + 1
        row_done(r);
        row_done(++r);
        continue;
      }
      depthwise_row(g, x, wt, s.C, n, oz, oy, y, ep);
      row_done(r);
    }
  };
  if (tasks <= 1) {
    task(0, rows);
    return;
  }
  parallel_for(static_cast<int>(tasks), [&](int t) { task(rows * t / tasks, rows * (t + 1) / tasks); });
}

// A depthwise convolution's output y (shape s, dense) reduced over each image's pixels as its
// rows are stored: run(row_done) runs the convolution, calling row_done(r) once output row r is
// stored (while it is in cache), which takes that row's channel sums; the rows of an image are
// then added in row order, so pooled[n, c] = scale * the sum does not depend on the threads.
template <class Run>
void mean_of_rows(const ConvShape& s, const float* y, float* pooled, float scale, const Run& run) {
  constexpr int W = kVecWidth;
  const window::Geom g = detail::geom(s);
  const long per_image = static_cast<long>(g.out[0]) * g.out[1], OX = g.out[2];
  thread_local std::vector<float> sums;  // [rows, C]; every row is written before it is read
  sums.resize(static_cast<size_t>(s.N * per_image) * s.C);
  float* rs = sums.data();
  run([&](long r) { row_channel_sums(y + r * OX * s.M, static_cast<int>(OX), s.C, rs + r * s.C); });
  for (long n = 0; n < s.N; ++n)
    for (int c0 = 0; c0 < s.C; c0 += W) {
      const int nc = std::min(W, s.C - c0);
      vf acc = simd::v_zero();
      for (long r = n * per_image; r < (n + 1) * per_image; ++r)
        acc = simd::v_add(acc, gemm::load_lanes(rs + r * s.C + c0, nc));
      gemm::store_lanes(pooled + n * s.C + c0, simd::v_mul(acc, simd::v_set1(scale)), nc);
    }
}

// A strided 1x1 convolution's GEMM rows (gemm::ARows): output pixel `row` reads input pixel
// (n, z * sz, y * sy, x * sx), whose C channels are contiguous.
struct StridedRows {
  const float* x;
  window::Geom g;
  long C;
  static void fill(const void* ctx, long row, long k0, int n, float* dst) {
    const StridedRows& r = *static_cast<const StridedRows*>(ctx);
    const window::Geom& g = r.g;
    const long ox = row % g.out[2], oy = (row / g.out[2]) % g.out[1], oz = (row / (static_cast<long>(g.out[2]) * g.out[1])) % g.out[0];
    const long img = row / g.out_plane();
    const long pix = ((img * g.in[0] + oz * g.stride[0]) * g.in[1] + oy * g.stride[1]) * g.in[2] + ox * g.stride[2];
    std::memcpy(dst, r.x + pix * r.C + k0, sizeof(float) * n);
  }
};
}  // namespace nhwc_detail

class PackedNhwcWeights;
namespace nhwc_detail {
// The packing behind PackedNhwcWeights's constructors (segments: the input's channel segments,
// or null), a template of nothing so that its one instance lives in a prelude unit (pack.0,
// prelude_units.h) rather than in every module that packs convolution weights: there it was
// about 2.2 s of ResNet-50's 5.2 s module compile (Zen 3, AVX2, -O3).
template <int I = 0>
void pack_nhwc_weights(PackedNhwcWeights& p, const float* w, const std::vector<int>* segments);
template <int I = 0>
void delete_packed(PackedNhwcWeights* p);
template <int I = 0>
PackedNhwcWeights* new_packed(const ConvShape& s, const float* w, const std::vector<int>* segments);
}  // namespace nhwc_detail

// Weights prepared once for one shape: the depthwise path's [taps, C] copy, W^T [C, M]
// packed as a GEMM B for the pointwise path, or the direct kernel's packing otherwise.
class PackedNhwcWeights {
 public:
  PackedNhwcWeights(const ConvShape& s, const float* w) : s_(s) { nhwc_detail::pack_nhwc_weights<0>(*this, w, nullptr); }
  // For an input in channel segments (`segments`: their channel counts; one group): Winograd
  // where it is chosen (its input transform reads each segment where it lies), else the
  // direct kernel's packing with chunks inside the segments. U-Net's decoder convolutions,
  // each reading the skip and the up-convolution side by side, ran direct at 0.6x
  // Winograd's speed.
  PackedNhwcWeights(const ConvShape& s, const float* w, const std::vector<int>& segments)
      : s_(s), segmented_(true) {
    nhwc_detail::pack_nhwc_weights<0>(*this, w, &segments);
  }
  // 1x1, stride 1, no padding, one group: a plain GEMM over the pixels.
  static bool pointwise_gemm(const ConvShape& s) {
    return s.group == 1 && detail::is_pointwise(detail::geom(s));
  }
  bool fits(const ConvShape& s) const {
    bool same = s.nd == s_.nd && s.C == s_.C && s.M == s_.M && s.group == s_.group && s.planar_x == s_.planar_x;
    for (int i = 0; i < s.nd && same; ++i) same = s.k[i] == s_.k[i];
    return same && any_pointwise(s) == any_pointwise(s_) && (!wino_ || wino::applies(s));
  }
  // The GEMM path's shapes (nhwc_path).
  static bool any_pointwise(const ConvShape& s) {
    return s.group == 1 && !s.planar_x && detail::gemm_pointwise(detail::geom(s), s.C, s.M);
  }
  bool segmented() const { return segmented_; }
  NhwcPath path() const { return path_; }
  const wino::Weights* winograd() const { return wino_.get(); }
  const float* depthwise() const { return depthwise_.data(); }
  const gemm::PackedBView& gemm() const { return gemm_.view(); }
  const DirectWeights& direct() const { return direct_; }

 private:
  ConvShape s_;
  NhwcPath path_ = NhwcPath::Direct;  // the direct kernel's packing for channel segments
  bool segmented_ = false;
  std::vector<float> depthwise_;
  std::unique_ptr<wino::Weights> wino_;
  gemm::PackedB gemm_;
  DirectWeights direct_;
  template <int I>
  friend void nhwc_detail::pack_nhwc_weights(PackedNhwcWeights&, const float*, const std::vector<int>*);
};

// What a module's State holds its packed convolutions in: deleted through the pack unit's one
// instance (delete_packed), not with the members' destructors inlined per convolution (11 KB
// of ResNet-50's module, once per packed convolution in its State's destructor).
template <int I>
void nhwc_detail::delete_packed(PackedNhwcWeights* p) {
  delete p;
}
// And made by it (a module's setup calls this once per packed convolution; the constructor's
// member initialisers and their clean-up on a throw, inlined per call, were 20 KB of
// ResNet-50's setup function).
template <int I>
PackedNhwcWeights* nhwc_detail::new_packed(const ConvShape& s, const float* w, const std::vector<int>* segments) {
  return segments ? new PackedNhwcWeights(s, w, *segments) : new PackedNhwcWeights(s, w);
}
struct PackedNhwcDelete {
  void operator()(PackedNhwcWeights* p) const { nhwc_detail::delete_packed<0>(p); }
};
using PackedNhwcPtr = std::unique_ptr<PackedNhwcWeights, PackedNhwcDelete>;

template <int I>
void nhwc_detail::pack_nhwc_weights(PackedNhwcWeights& p, const float* w, const std::vector<int>* segments) {
  const ConvShape& s = p.s_;
  detail::check(s);
  if (segments) {
    if (s.group != 1) throw std::invalid_argument("conv_nhwc: channel segments need one group");
    p.path_ = segmented_nhwc_path(s);
    if (p.path_ == NhwcPath::Winograd) p.wino_ = std::make_unique<wino::Weights>(s, w);
    else p.direct_ = DirectWeights(s, w, *segments);
    return;
  }
  p.path_ = nhwc_path(s);
  const window::Geom g = detail::geom(s);
  const int taps = g.taps();
  if (s.planar_x && s.group != 1) throw std::invalid_argument("conv_nhwc: a channels-first input needs one group");
  switch (p.path_) {
    case NhwcPath::Winograd: p.wino_ = std::make_unique<wino::Weights>(s, w); break;
    case NhwcPath::Depthwise:
      p.depthwise_.resize(static_cast<size_t>(taps) * s.C);
      for (int c = 0; c < s.C; ++c)
        for (int t = 0; t < taps; ++t) p.depthwise_[static_cast<size_t>(t) * s.C + c] = w[static_cast<long>(c) * taps + t];
      break;
    case NhwcPath::Pointwise: p.gemm_ = gemm::PackedB(w, 1, s.C, s.C, s.M); break;  // B[c, m] = w[m, c]
    case NhwcPath::Direct: p.direct_ = DirectWeights(s, w); break;
  }
}

// The paths as functions of their own (the direct kernel is conv_direct.h's, the pointwise
// GEMM gemm.h's), each instantiated in a prelude unit of its own (prelude_units.h), so that a
// module compiles and links only the paths its convolutions take.
template <class Ep>
void nhwc_winograd_f32(const ConvShape& s, const InputSegments& xs, const wino::Weights& w, float* y, const Ep& ep) {
  const long ldy = s.ldy ? s.ldy : s.M;
  wino::run(s, xs, w, [&](const float* buf, int nvk, int m, long row0) {
    nhwc_detail::finish_block(ep, buf, nvk, y + row0 * ldy, ldy, m, s.M, row0, 0);
  });
}
template <class Ep>
void nhwc_winograd_f32(const ConvShape& s, const float* x, const wino::Weights& w, float* y, const Ep& ep) {
  nhwc_winograd_f32(s, InputSegments{1, {x}, {s.C}}, w, y, ep);
}
template <class Ep>
void nhwc_depthwise_f32(const ConvShape& s, const float* x, const float* wt, float* y, const Ep& ep) {
  if (s.ldy && s.ldy != s.M) throw std::invalid_argument("conv_nhwc: the depthwise path writes a dense output");
  nhwc_detail::depthwise_nhwc(s, detail::geom(s), x, wt, y, ep, [](long) {});
}

// y = conv(x, w) channels last, by the path the weights were packed for, which must be one of
// `Paths` (NhwcPath bits): the code generator names the path nhwc_path gives for the shape, so
// the module holds that path's call only. A path outside the set (the environment changed
// DNNF_WINOGRAD between code generation and run) is an error, not a wrong result.
template <int Paths, class Ep = gemm::EpNone>
void conv_nhwc_paths_f32(const ConvShape& s, const float* x, const PackedNhwcWeights& w, float* y,
                         const Ep& ep = {}) {
  if (!w.fits(s) || w.segmented()) throw std::invalid_argument("conv_nhwc: weights were packed for another shape");
  const long ldy = s.ldy ? s.ldy : s.M;
  if (ldy < s.M) throw std::invalid_argument("conv_nhwc: output pixels closer than the output channels");
  const NhwcPath p = w.path();
  if constexpr ((Paths & static_cast<int>(NhwcPath::Winograd)) != 0) {
    if (p == NhwcPath::Winograd) return nhwc_winograd_f32(s, x, *w.winograd(), y, ep);
  }
  if constexpr ((Paths & static_cast<int>(NhwcPath::Depthwise)) != 0) {
    if (p == NhwcPath::Depthwise) return nhwc_depthwise_f32(s, x, w.depthwise(), y, ep);
  }
  if constexpr ((Paths & static_cast<int>(NhwcPath::Pointwise)) != 0) {
    if (p == NhwcPath::Pointwise) {
      const window::Geom g = detail::geom(s);
      const long pixels = static_cast<long>(s.N) * g.out_plane();
      if (detail::is_pointwise(g))
        return gemm::gemm_f32_src(static_cast<int>(pixels), s.M, s.C, gemm::AView<>{x, s.C, 1}, w.gemm(), y, ldy, ep);
      // Strided: row r of A is output pixel r's input pixel, copied while A is packed.
      const nhwc_detail::StridedRows rows{x, g, s.C};
      return gemm::gemm_f32_src(static_cast<int>(pixels), s.M, s.C, gemm::ARows{&nhwc_detail::StridedRows::fill, &rows},
                                w.gemm(), y, ldy, ep);
    }
  }
  if constexpr ((Paths & static_cast<int>(NhwcPath::Direct)) != 0) {
    if (p == NhwcPath::Direct) return conv_direct_f32(s, x, w.direct(), y, ep);
  }
  throw std::invalid_argument("conv_nhwc: the weights were packed for a path this module was not generated for "
                              "(was DNNF_WINOGRAD changed between compiling and running it?)");
}

template <class Ep = gemm::EpNone>
void conv_nhwc_f32(const ConvShape& s, const float* x, const PackedNhwcWeights& w, float* y,
                   const Ep& ep = {}) {
  conv_nhwc_paths_f32<kAllNhwcPaths>(s, x, w, y, ep);
}

// A depthwise convolution that also reduces its output (after the epilogue) over the pixels
// of each image, a squeeze-and-excitation gate's global pool: pooled[n, c] = scale * the sum
// of y[n, ..., c]. Each output row's channel sums are taken as soon as the row is stored,
// while it is in cache, so the pool costs no pass over y; the rows of an image are then added
// in row order, so the result does not depend on the threads.
template <class Ep = gemm::EpNone>
void conv_nhwc_mean_f32(const ConvShape& s, const float* x, const PackedNhwcWeights& w, float* y, const Ep& ep,
                        float* pooled, float scale) {
  if (!w.fits(s) || w.segmented() || !detail::is_depthwise(s) || s.planar_x || (s.ldy && s.ldy != s.M))
    throw std::invalid_argument("conv_nhwc_mean: only the depthwise path with a dense output reduces its rows");
  const window::Geom g = detail::geom(s);
  nhwc_detail::mean_of_rows(s, y, pooled, scale, [&](const auto& row_done) {
    nhwc_detail::depthwise_nhwc(s, g, x, w.depthwise(), y, ep, row_done);
  });
}

// x as channel segments (a Concat along the channels read in place), weights packed for them
// (Winograd or the direct kernel: segmented_nhwc_path), which must be one of `Paths`.
template <int Paths, class Ep = gemm::EpNone>
void conv_nhwc_paths_f32(const ConvShape& s, const InputSegments& xs, const PackedNhwcWeights& w, float* y,
                         const Ep& ep = {}) {
  if (!w.segmented() || !w.fits(s) || s.planar_x)
    throw std::invalid_argument("conv_nhwc: weights were not packed for these channel segments");
  if constexpr ((Paths & static_cast<int>(NhwcPath::Winograd)) != 0) {
    if (w.path() == NhwcPath::Winograd) return nhwc_winograd_f32(s, xs, *w.winograd(), y, ep);
  }
  if constexpr ((Paths & static_cast<int>(NhwcPath::Direct)) != 0) {
    if (w.path() == NhwcPath::Direct) return conv_direct_f32(s, xs, w.direct(), y, ep);
  }
  throw std::invalid_argument("conv_nhwc: the weights were packed for a path this module was not generated for "
                              "(was DNNF_WINOGRAD changed between compiling and running it?)");
}
template <class Ep = gemm::EpNone>
void conv_nhwc_f32(const ConvShape& s, const InputSegments& xs, const PackedNhwcWeights& w, float* y,
                   const Ep& ep = {}) {
  conv_nhwc_paths_f32<kAllNhwcPaths>(s, xs, w, y, ep);
}

// Weights computed in the same run (e.g. W * s from fold_input_scale): packed per call.
template <class Ep = gemm::EpNone>
void conv_nhwc_f32(const ConvShape& s, const float* x, const float* w, float* y, const Ep& ep = {}) {
  conv_nhwc_f32(s, x, PackedNhwcWeights(s, w), y, ep);
}

}  // namespace dnnf::conv

// The packing's instance in the pack prelude unit (prelude_units.h DNNF_UNIT_pack): declared by
// modules that include this header, defined by the unit, which includes it too.
#undef DNNF_UNIT_PACK_NHWC
#define DNNF_UNIT_PACK_NHWC(D)                                                                   \
  D(void dnnf::conv::nhwc_detail::pack_nhwc_weights<0>(dnnf::conv::PackedNhwcWeights&, const float*, \
                                                       const std::vector<int>*))                   \
  D(void dnnf::conv::nhwc_detail::delete_packed<0>(dnnf::conv::PackedNhwcWeights*))             \
  D(dnnf::conv::PackedNhwcWeights* dnnf::conv::nhwc_detail::new_packed<0>(const dnnf::conv::ConvShape&,   \
                                                                         const float*,                  \
                                                                         const std::vector<int>*))
