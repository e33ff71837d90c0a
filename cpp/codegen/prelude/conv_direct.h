// Direct convolution channels last (paper §4.4, Many-to-Many anchors): the dense path of
// NhwcConv, computed straight from x with no im2col and no packing of the input.
//
// The output, viewed as [pixels, M] (pixels flat over images and the output volume), is cut
// into tiles of MR consecutive pixels x NR output channels, the GEMM micro-kernel's register
// tile (gemm_kernel.h). A tile accumulates over the taps and the input channels of its
// group: row i broadcasts x[pixel i's input under tap t][c] and multiplies NR weights. Each
// (tap, row) has its own pointer, so tiles may wrap across output rows and images, and a tap
// that falls in the padding points at a row of zeros: one kernel serves every stride,
// dilation, padding and plane size, and every tile is full except the very last.
//
// Measured against the im2col + GEMM path it replaces (3x3 convs, VGG/ResNet planes, Zen 5,
// 2 threads, GFLOP/s): 64ch 224x224 371 -> 440, 256ch 56x56 450 -> 512, 512ch 28x28
// 438 -> 515, 512ch 14x14 487 -> 540; the copies into im2col and into packed A were the
// difference. Weights are packed once: [group][m-block][chunk][tap][c][NR], zero-padded to
// NR columns; a chunk splits the input channels so that one m-block's weights stay in L2.
//
// The input may come in channel segments (InputSegments: a Concat along the channels that
// the convolution reads in place, paper §4.3's fused Concat -> Conv): chunks then never
// straddle two segments, and each chunk's rows point into its segment, whose pixel stride is
// the segment's channel count. No concatenated copy is written.
#pragma once

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "conv.h"

namespace dnnf::conv {

// x given as up to 8 channel segments: channels [start_s, start_s + c[s]) of pixel p are at
// x[s] + p * c[s]. One segment {x, C} is a plain channels-last tensor.
struct InputSegments {
  int n;
  const float* x[8];
  int c[8];
};

namespace direct {

using gemm::kMR;
using gemm::kNR;
using gemm::kNV;
using simd::kVecWidth;
using simd::vf;

// C[0..m, 0..n) (+)= sum over taps t < ntap, channels k < cc of a[t][i][k] * b[tap[t]][k][j]
// with a[t][i] = rows[t * kMR + i]; on the last chunk the epilogue runs before the store
// (the [pixels, M] view: row0 = first pixel, col0 = first channel).
// `next`: a range of weights (the next m-block's) to bring into L2 while this tile computes,
// spread over its k-steps (see conv_direct_f32 and gemm::BAhead).
using gemm::BAhead;
template <class Ep>
inline void tile(const float* const* rows, const int* tap, int ntap, int cc, const float* __restrict b,
                 float* c, long ldc, int m, int n, bool load_c, bool last, const Ep& ep, long row0,
                 long col0, long pf = 0, BAhead next = {}) {
  using namespace simd;
  vf acc[kMR][kNV];
  gemm::zero_tile(acc);
  // `next` a few lines per k-step (at most 4), covered by the last tap. The k-loop comes twice
  // so that the loop without it keeps its registers (a pointer per pixel row already).
  const int per_k = next.per(static_cast<long>(ntap) * cc, 0, 4);
  for (int t = 0; t < ntap; ++t) {
    const float* a[kMR];
#pragma GCC unroll 32
    for (int i = 0; i < kMR; ++i) a[i] = rows[t * kMR + i];
    const float* bp = b + static_cast<long>(tap[t]) * cc * kNR;
    if (pf) {
      for (int i = 0; i < kMR; ++i)
        for (int k = 0; k < cc; k += 16) __builtin_prefetch(a[i] + pf + k, 0, 2);
    }
    if (next.lines > 0) {
#pragma GCC unroll 4
      for (int k = 0; k < cc; ++k) {
        gemm::k_step(acc, bp + k * kNR, [&](int i) { return a[i][k]; });
        next.issue(per_k);
      }
      continue;
    }
#pragma GCC unroll 4
    for (int k = 0; k < cc; ++k) gemm::k_step(acc, bp + k * kNR, [&](int i) { return a[i][k]; });
  }
  gemm::finish_tile<kMR, kNV>(acc, c, ldc, m, n, load_c, last, ep, row0, col0);
}

// The same for MR pixels of one output row (the first m of them stored), their windows read
// from x or from a copy with the padding as zeros, with the
// input's step from one output pixel to the next (PS = x stride * C floats) known at compile
// time: row i of tap row t reads base[t] + i * PS + k, so every broadcast is an immediate
// offset from one pointer per tap row. tile() keeps a pointer per pixel row (14 on AVX-512,
// more than there are general-purpose registers) set up per tile; on the stems (3 channels,
// runs of KW * 3 floats per tap row) that setup cost as much as the FMAs. Measured (Xeon,
// AVX-512, 1 thread, GFLOP/s): MobileNet's 3->32 3x3 s2 224 85 -> 116, ResNet's 3->64 7x7 s2
// 125 -> 142, VGG's 3->64 3x3 224 99 -> 130; AVX2 60 -> 78, 99 -> 106, 68 -> 80; 8 channels
// 134 -> 153. GCC's predictive commoning (-O3) keeps the overlapping loads of consecutive
// k-steps (a[i * PS + k + PS] is row i + 1's a[.. + k]) in stack slots, which made it slower
// than tile(): it is switched off here.
#if defined(__GNUC__) && !defined(__clang__)
#define DNNF_NO_PREDICTIVE_COMMONING gnu::optimize("no-predictive-commoning"),
#else
#define DNNF_NO_PREDICTIVE_COMMONING
#endif
template <int PS, class Ep>
[[DNNF_NO_PREDICTIVE_COMMONING gnu::noinline]] void tile_fixed(const float* const* base, int ntap, int cc,
                                                               const float* __restrict b, float* c, long ldc, int m,
                                                               int n, const Ep& ep, long row0, long col0) {
  using namespace simd;
  vf acc[kMR][kNV];
  gemm::zero_tile(acc);
  for (int t = 0; t < ntap; ++t) {
    const float* a = base[t];
    const float* bp = b + static_cast<long>(t) * cc * kNR;
#pragma GCC unroll 1
    for (int k = 0; k < cc; ++k) gemm::k_step(acc, bp + k * kNR, [&](int i) { return a[i * PS + k]; });
  }
  gemm::finish_tile<kMR, kNV>(acc, c, ldc, m, n, false, true, ep, row0, col0);
}

// PS values with a tile_fixed instance: stride 1 or 2 over 1 to 4 channels.
inline bool fixed_stride(int ps) { return ps == 1 || ps == 2 || ps == 3 || ps == 4 || ps == 6 || ps == 8; }
template <class Ep>
inline void tile_fixed_any(int ps, const float* const* base, int ntap, int cc, const float* b, float* c, long ldc,
                           int m, int n, const Ep& ep, long row0, long col0) {
  switch (ps) {
    case 1: return tile_fixed<1>(base, ntap, cc, b, c, ldc, m, n, ep, row0, col0);
    case 2: return tile_fixed<2>(base, ntap, cc, b, c, ldc, m, n, ep, row0, col0);
    case 3: return tile_fixed<3>(base, ntap, cc, b, c, ldc, m, n, ep, row0, col0);
    case 4: return tile_fixed<4>(base, ntap, cc, b, c, ldc, m, n, ep, row0, col0);
    case 6: return tile_fixed<6>(base, ntap, cc, b, c, ldc, m, n, ep, row0, col0);
    default: return tile_fixed<8>(base, ntap, cc, b, c, ldc, m, n, ep, row0, col0);
  }
}

// A channels-first x's input rows (ConvShape::planar_x) staged channels last, with zeros for
// the padding columns on both sides, each row once while a task's runs use it: every run of
// output pixels then reads its tap rows in place, as the fixed-stride kernel reads a
// channels-last x. Gathered per run instead (each tile's tap rows from the planes, the
// padding filled), a 300x300 3-channel stem spent more on gathering than on its FMAs.
class PlanarRows {
 public:
  // planes: tap rows a run reads at most; lo: padding columns before column 0; width: columns
  // in all, padding included.
  void reset(int planes, int C, int lo, int width) {
    C_ = C, lo_ = lo, slots_ = 2 * planes, row_ = static_cast<long>(width) * C;
    buf_.resize(static_cast<size_t>(slots_ + 1) * row_);
    std::fill(buf_.begin() + slots_ * row_, buf_.end(), 0.0f);  // the last: a row of zeros
    key_.assign(static_cast<size_t>(slots_), -1);
    used_.assign(static_cast<size_t>(slots_), 0);
    stamp_ = 0, next_ = 0;
  }
  // A new run: the rows it is given (row()) stay put until the next.
  void begin() { ++stamp_; }
  // Row `key` (-1: one in the padding, all zeros) whose channel c is the w floats at
  // src + c * plane, staged where it is not held yet. Slots are reused round robin, never one
  // given to this run (2 per tap row: there is always one free).
  const float* row(long key, const float* src, long plane, int w) {
    if (key < 0) return buf_.data() + slots_ * row_;
    for (int i = 0; i < slots_; ++i)
      if (key_[i] == key) {
        used_[i] = stamp_;
        return buf_.data() + i * row_;
      }
    while (used_[next_] == stamp_) next_ = (next_ + 1) % slots_;
    const int i = next_;
    next_ = (next_ + 1) % slots_;
    key_[i] = key, used_[i] = stamp_;
    float* d = buf_.data() + i * row_;
    std::fill(d, d + static_cast<long>(lo_) * C_, 0.0f);
    float* dm = d + static_cast<long>(lo_) * C_;
    switch (C_) {  // a stem's few channels interleaved with the count known (vectorized)
      case 1: std::copy(src, src + w, dm); break;
      case 2: interleave<2>(src, plane, w, dm); break;
      case 3: interleave<3>(src, plane, w, dm); break;
      case 4: interleave<4>(src, plane, w, dm); break;
      default:
        for (int c = 0; c < C_; ++c)
          for (int q = 0; q < w; ++q) dm[static_cast<long>(q) * C_ + c] = src[c * plane + q];
    }
    std::fill(d + static_cast<long>(lo_ + w) * C_, d + row_, 0.0f);
    return d;
  }

 private:
  template <int C>
  static void interleave(const float* src, long plane, int w, float* d) {
    for (int q = 0; q < w; ++q)
      for (int c = 0; c < C; ++c) d[static_cast<long>(q) * C + c] = src[c * plane + q];
  }
  std::vector<float> buf_;
  std::vector<long> key_;
  std::vector<unsigned> used_;
  long row_ = 0;
  int C_ = 0, lo_ = 0, slots_ = 0, next_ = 0;
  unsigned stamp_ = 0;
};

// Input channels per chunk: all of the group's unless one m-block's weights (taps x Cg x NR
// floats) would pass 3/4 of this machine's L2, where they stay beside the input rows.
inline int chunk_channels(int taps, int Cg) {
  const long per_channel = static_cast<long>(taps) * kNR * 4, budget = detail::l2_bytes() * 3 / 4;
  const int chunks = static_cast<int>(std::max<long>(1, (per_channel * Cg + budget - 1) / budget));
  return (Cg + chunks - 1) / chunks;
}

}  // namespace direct

// Weights packed for the direct kernel, and a row of zeros for the taps in the padding.
class DirectWeights {
 public:
  DirectWeights() = default;
  // `segments`: the channel counts of the input's segments (empty: one segment); a chunk
  // never straddles two.
  DirectWeights(const ConvShape& s, const float* w, const std::vector<int>& segments = {}) {
    const window::Geom g = detail::geom(s);
    const int taps = g.taps();
    Cg_ = s.C / s.group;
    Mg_ = s.M / s.group;
    groups_ = s.group;
    const int cc = direct::chunk_channels(taps, Cg_);
    int seg0 = 0;
    for (int sc : segments.empty() ? std::vector<int>{Cg_} : segments) {
      if (sc <= 0 || seg0 + sc > Cg_) throw std::invalid_argument("conv_direct: channel segments exceed the input's");
      for (int c0 = 0; c0 < sc; c0 += cc) chunks_.push_back({seg0 + c0, std::min(cc, sc - c0)});
      seg0 += sc;
    }
    if (seg0 != Cg_) throw std::invalid_argument("conv_direct: channel segments do not cover the input's");
    int widest = 1;
    for (const auto& ch : chunks_) widest = std::max(widest, ch.second);
    widest_ = widest;
    mblocks_ = (Mg_ + direct::kNR - 1) / direct::kNR;
    per_block_ = static_cast<size_t>(taps) * Cg_ * direct::kNR;
    const size_t total = per_block_ * mblocks_ * s.group;
    data_.reset(gemm::detail::alloc_floats(std::max<size_t>(1, total)));  // 64-byte aligned rows
    std::fill(data_.get(), data_.get() + total, 0.0f);
    zeros_.assign(static_cast<size_t>(widest) * g.k[2], 0.0f);
    for (int gi = 0; gi < s.group; ++gi)
      for (int mb = 0; mb < mblocks_; ++mb)
        for (const auto& [c0, cn] : chunks_) {
          float* d = block(gi, mb, c0);
          for (int j = 0; j < direct::kNR && mb * direct::kNR + j < Mg_; ++j) {
            const float* wm = w + (static_cast<long>(gi) * Mg_ + mb * direct::kNR + j) * Cg_ * taps;
            for (int t = 0; t < taps; ++t)
              for (int k = 0; k < cn; ++k)
                d[(static_cast<size_t>(t) * cn + k) * direct::kNR + j] = wm[static_cast<long>(c0 + k) * taps + t];
          }
        }
  }
  // Group gi, m-block mb, the chunk starting at input channel c0: [taps][cn][NR] (chunks lie
  // one after another, so the chunk at c0 starts c0 * taps * NR floats into the m-block).
  const float* block(int gi, int mb, int c0) const {
    return data_.get() + (static_cast<size_t>(gi) * mblocks_ + mb) * per_block_ +
           static_cast<size_t>(c0) * (per_block_ / Cg_);
  }
  // The chunks of a group's input channels: (first channel, channels), in order.
  const std::vector<std::pair<int, int>>& chunks() const { return chunks_; }
  int mblocks() const { return mblocks_; }
  int widest_chunk() const { return widest_; }
  const float* zeros() const { return zeros_.data(); }
  // One past the last packed weight.
  const float* end() const { return data_.get() + per_block_ * mblocks_ * groups_; }
  // Floats from an m-block's chunk to the same chunk of the next m-block.
  size_t per_block() const { return per_block_; }

 private:
  float* block(int gi, int mb, int c0) { return const_cast<float*>(std::as_const(*this).block(gi, mb, c0)); }
  int Cg_ = 0, Mg_ = 0, mblocks_ = 0, widest_ = 1, groups_ = 0;
  std::vector<std::pair<int, int>> chunks_;
  size_t per_block_ = 0;
  gemm::detail::Buffer data_;
  std::vector<float> zeros_;
};

// y [N, out..., M] = ep(conv(x [N, in..., C], w)) for any group, stride, dilation and padding;
// x in channel segments (one group) when w was packed for them.
// Whether a channels-first x (ConvShape::planar_x) is read in place: the fixed-stride kernel
// over one chunk of all channels, every tile's window gathered from the planes.
inline bool planar_in_place(const ConvShape& s, const DirectWeights& w) {
  const window::Geom g = detail::geom(s);
  return s.group == 1 && w.chunks().size() == 1 && g.dil[2] == 1 && g.k[0] * g.k[1] <= 64 &&
         direct::fixed_stride(g.stride[2] * s.C);
}

template <class Ep>
void conv_direct_f32(const ConvShape& s, const InputSegments& xs, const DirectWeights& w, float* y, const Ep& ep) {
  using direct::kMR;
  using direct::kNR;
  const window::Geom g = detail::geom(s);
  const int M = s.M, G = s.group, Cg = s.C / G, Mg = M / G, taps = g.taps();
  const long ldy = s.ldy ? s.ldy : M;  // floats between output pixels
  if (xs.n < 1 || xs.n > 8 || (xs.n > 1 && G != 1)) throw std::invalid_argument("conv_direct: bad input segments");
  const long pixels = static_cast<long>(s.N) * g.out_plane();
  const bool planar = s.planar_x != 0;
  if (planar && (xs.n != 1 || !planar_in_place(s, w))) {
    // Not a shape the planar gather serves (the code generator asks for it only where it
    // does, but the chunking depends on this CPU's L2): x transposed channels last first.
    const long plane = static_cast<long>(g.in[0]) * g.in[1] * g.in[2];
    float* xt = gemm::detail::scratch(5, static_cast<size_t>(s.N) * plane * s.C);
    for (long n = 0; n < s.N; ++n)
      for (int c = 0; c < s.C; ++c)
        for (long q = 0; q < plane; ++q) xt[(n * plane + q) * s.C + c] = xs.x[0][(n * s.C + c) * plane + q];
    ConvShape dense = s;
    dense.planar_x = 0;
    conv_direct_f32(dense, InputSegments{1, {xt}, {s.C}}, w, y, ep);
    return;
  }
  if constexpr (gemm::IsEpDyn<Ep>::value) {
    // y in place of the epilogue's residual, over several chunks (whose partial sums would
    // overwrite the residual before the last chunk's epilogue reads it): computed aside, copied.
    if (w.chunks().size() > 1 && ep.res_is(y, ldy)) {
      float* aside = gemm::detail::scratch(4, static_cast<size_t>(pixels) * M);
      ConvShape dense = s;
      dense.ldy = 0;
      conv_direct_f32(dense, xs, w, aside, ep);
      for (long p = 0; p < pixels; ++p) std::copy(aside + p * M, aside + (p + 1) * M, y + p * ldy);
      return;
    }
  }
  const long tiles = (pixels + kMR - 1) / kMR;
  const int T = get_num_threads();
  // A task owns a band of m-blocks and a run of tiles. Each tile's rows are set up once and
  // run through every m-block of the band while they are in L1 (the weights of a band's
  // chunk stay in L2): with one m-block per task, a tile's input was fetched again for each.
  const long l2 = detail::l2_bytes();
  const long band_bytes = static_cast<long>(taps) * w.widest_chunk() * kNR * 4;
  // With few tiles (small planes) the input stays in cache anyway, and one m-block per task
  // gives the threads equal shares.
  const int nb_max = tiles < 8L * T ? 1 : static_cast<int>(std::clamp<long>(l2 / 2 / std::max(1L, band_bytes), 1, w.mblocks()));
  const int bands = (w.mblocks() + nb_max - 1) / nb_max, nb = (w.mblocks() + bands - 1) / bands;
  const long blocks = static_cast<long>(G) * bands;
  // Tasks: blocks x runs of tiles, about 4 per thread.
  const long per = std::max<long>(1, std::min<long>(tiles, (tiles * blocks + 4L * T - 1) / (4L * T)));
  const long runs = (tiles + per - 1) / per;
  // When the taps of one output pixel lie further apart than L2 holds (3-D taps across
  // frames), a tile's rows come from DRAM or L3 as many concurrent short streams that the
  // hardware prefetcher does not follow: prefetch the next tile's rows (MR pixels on) while
  // this tile computes. Measured (2 threads, Zen 4): a (7,1,1) stride-2 conv 64ch 112x112
  // 101 -> 151 GFLOP/s; a 2-D 3x3, whose taps were just read by the rows above, lost 4%.
  const long span = ((static_cast<long>(g.k[0] - 1) * g.dil[0] * g.in[1] + static_cast<long>(g.k[1] - 1) * g.dil[1]) *
                         g.in[2] + static_cast<long>(g.k[2] - 1) * g.dil[2]) * s.C * 4;
  const bool prefetch = span > l2 && !planar;
  // With few tiles per m-block (small planes, many channels: ResNet's last stage), each
  // m-block's weights are read from DRAM by the run's first tile and from L2 by the rest;
  // the next m-block's (the next task's, on this thread) are prefetched into L2 during the
  // run, so that their transfer overlaps this block's FMAs instead of following them.
  // Measured (Xeon, AVX-512, weights cold: 12 copies cycled), 3x3 512->512 on 7x7 1 thread
  // 2.63 -> 1.86 ms, 2 threads 1.25 -> 0.94; 1x1 s2 1024->2048 from 14x14 2.26 -> 1.70 ms.
  const bool stream_b = nb == 1 && tiles < 8L * T;
  auto task = [&](long tsk) {
    const int blk = static_cast<int>(tsk % blocks);
    const int gi = blk / bands, mb0 = blk % bands * nb, mb1 = std::min(w.mblocks(), mb0 + nb);
    const long t0 = tsk / blocks * per, t1 = std::min(tiles, t0 + per);
    thread_local std::vector<const float*> rows;
    rows.resize(static_cast<size_t>(taps) * kMR);
    thread_local std::vector<int> tap;
    tap.resize(static_cast<size_t>(taps));
    thread_local direct::PlanarRows prows;
    if (planar)  // columns from -pad to the last a run's kMR pixels reach (those past a row computed)
      prows.reset(g.k[0] * g.k[1], s.C, g.pad[2],
                  g.pad[2] + std::max(g.in[2], (g.out[2] + kMR - 2) * g.stride[2] - g.pad[2] + g.k[2]));
    int si = 0, s0 = 0;  // the segment holding the chunk, and its first channel
    for (const auto& [c0, cn] : w.chunks()) {
      while (si + 1 < xs.n && c0 >= s0 + xs.c[si]) s0 += xs.c[si++];
      // The chunk's pointer, pixel stride and first channel within its segment.
      const float* x = xs.x[si];
      const int C = xs.c[si];
      const long cfirst = xs.n == 1 ? gi * Cg + c0 : c0 - s0;
      const long pf = prefetch ? static_cast<long>(kMR) * g.stride[2] * C : 0;
      const bool first = c0 == 0, last = c0 + cn == Cg;
      // The fixed-stride kernel: one chunk of all C channels, no x dilation, 64 tap rows at most.
      const bool fixed = first && last && cn == C && g.dil[2] == 1 && g.k[0] * g.k[1] <= 64 &&
                         direct::fixed_stride(g.stride[2] * C) && xs.n == 1 && G == 1;
      for (long ti = t0; ti < t1; ++ti) {
        const long p0 = ti * kMR;
        const int m = static_cast<int>(std::min<long>(kMR, pixels - p0));
        if (fixed) {
          // The tile's pixels as runs within one output row (a tile wraps at a row's end, the
          // last one may be short), each run one call of the fixed-stride kernel storing its
          // pixels: a whole tile inside the input reads x in place; any other run reads a copy
          // of each tap row's span of input pixels, zeros for the padding. Run generically
          // (tile(): a tap at a time over C channels, a pointer per pixel) the border tiles
          // took half of a stem's time for a quarter of its tiles.
          for (int done = 0; done < m;) {
            const long p = p0 + done, plane = g.out_plane(), nimg = p / plane, r = p - nimg * plane;
            const int x0 = static_cast<int>(r % g.out[2]), y0 = static_cast<int>((r / g.out[2]) % g.out[1]);
            const int z0 = static_cast<int>(r / (static_cast<long>(g.out[2]) * g.out[1]));
            const int len = std::min(m - done, g.out[2] - x0);
            const int iz = z0 * g.stride[0] - g.pad[0], iy = y0 * g.stride[1] - g.pad[1];
            const int ix = x0 * g.stride[2] - g.pad[2];
            const bool x_in = ix >= 0 && (x0 + kMR - 1) * g.stride[2] - g.pad[2] + g.k[2] <= g.in[2];
            const bool zy_in = iz >= 0 && iz + (g.k[0] - 1) * g.dil[0] < g.in[0] && iy >= 0 &&
                               iy + (g.k[1] - 1) * g.dil[1] < g.in[1];
            const float* base[64];
            int nt = 0;
            if (planar) {
              const long plane = static_cast<long>(g.in[0]) * g.in[1] * g.in[2];
              prows.begin();
              for (int kz = 0; kz < g.k[0]; ++kz)
                for (int ky = 0; ky < g.k[1]; ++ky) {
                  const int zz = iz + kz * g.dil[0], yy = iy + ky * g.dil[1];
                  const bool in = zz >= 0 && zz < g.in[0] && yy >= 0 && yy < g.in[1];
                  const long r = (static_cast<long>(zz) * g.in[1] + yy) * g.in[2];
                  base[nt++] = prows.row(in ? (nimg * g.in[0] + zz) * g.in[1] + yy : -1, x + nimg * C * plane + r,
                                         plane, g.in[2]) + static_cast<long>(ix + g.pad[2]) * C;
                }
            } else if (len == kMR && x_in && zy_in) {
              const float* o = x + ((nimg * g.in[0] + iz) * static_cast<long>(g.in[1]) * g.in[2] +
                                    static_cast<long>(iy) * g.in[2] + ix) * C + cfirst;
              for (int kz = 0; kz < g.k[0]; ++kz)
                for (int ky = 0; ky < g.k[1]; ++ky)
                  base[nt++] = o + (static_cast<long>(kz) * g.dil[0] * g.in[1] + static_cast<long>(ky) * g.dil[1]) *
                                       g.in[2] * C;
            } else {  // the span of MR pixels' windows (those past len are computed, not stored)
              const int span = (kMR - 1) * g.stride[2] + g.k[2];
              const long row = static_cast<long>(span) * C;
              thread_local std::vector<float> staged;
              staged.resize(static_cast<size_t>(g.k[0]) * g.k[1] * row);
              for (int kz = 0; kz < g.k[0]; ++kz)
                for (int ky = 0; ky < g.k[1]; ++ky) {
                  float* d = staged.data() + nt * row;
                  base[nt++] = d;
                  const int zz = iz + kz * g.dil[0], yy = iy + ky * g.dil[1];
                  const int lo = std::max(0, -ix), hi = std::min(span, g.in[2] - ix);  // pixels inside
                  if (zz < 0 || zz >= g.in[0] || yy < 0 || yy >= g.in[1] || hi <= lo) {
                    std::fill(d, d + row, 0.0f);
                    continue;
                  }
                  std::fill(d, d + static_cast<long>(lo) * C, 0.0f);
                  const float* src = x + ((nimg * g.in[0] + zz) * static_cast<long>(g.in[1]) * g.in[2] +
                                          static_cast<long>(yy) * g.in[2] + ix + lo) * C + cfirst;
                  std::copy(src, src + static_cast<long>(hi - lo) * C, d + static_cast<long>(lo) * C);
                  std::fill(d + static_cast<long>(hi) * C, d + row, 0.0f);
                }
            }
            for (int mb = mb0; mb < mb1; ++mb) {
              const int m0 = gi * Mg + mb * kNR, n = std::min(kNR, Mg - mb * kNR);
              direct::tile_fixed_any(g.stride[2] * C, base, nt, g.k[2] * cn, w.block(gi, mb, c0), y + p * ldy + m0,
                                     ldy, len, n, ep, p, m0);
            }
            done += len;
          }
          continue;
        }
        // Each row's window origin; rows past m repeat the last pixel (computed, not stored).
        long org[kMR];  // offsets into x (of a tap at the origin, which may lie in the padding)
        int oz[kMR], oy[kMR], ox[kMR];
        bool inside = true;
        {
          const long plane = g.out_plane();
          long nimg = p0 / plane, r = p0 % plane;
          int x0 = static_cast<int>(r % g.out[2]), y0 = static_cast<int>((r / g.out[2]) % g.out[1]);
          int z0 = static_cast<int>(r / (static_cast<long>(g.out[2]) * g.out[1]));
          for (int i = 0; i < kMR; ++i) {
            oz[i] = z0 * g.stride[0] - g.pad[0];
            oy[i] = y0 * g.stride[1] - g.pad[1];
            ox[i] = x0 * g.stride[2] - g.pad[2];
            org[i] = ((nimg * g.in[0] + oz[i]) * static_cast<long>(g.in[1]) * g.in[2] +
                          static_cast<long>(oy[i]) * g.in[2] + ox[i]) * C + cfirst;
            inside = inside && oz[i] >= 0 && oz[i] + (g.k[0] - 1) * g.dil[0] < g.in[0] && oy[i] >= 0 &&
                     oy[i] + (g.k[1] - 1) * g.dil[1] < g.in[1] && ox[i] >= 0 &&
                     ox[i] + (g.k[2] - 1) * g.dil[2] < g.in[2];
            if (i + 1 < m && ++x0 == g.out[2]) {
              x0 = 0;
              if (++y0 == g.out[1]) {
                y0 = 0;
                if (++z0 == g.out[0]) {
                  z0 = 0;
                  ++nimg;
                }
              }
            }
          }
        }
        // With every row's kx taps inside the input, no x dilation, one group and one chunk,
        // the KW taps of each (kz, ky) read one contiguous run of KW * C floats (the weights'
        // [tap][c] rows are laid out the same way), so they run as one segment: fewer pointer
        // setups, and a stem on 3 channels gets runs of 3 * KW instead of 3.
        bool xin = g.dil[2] == 1 && cn == C && g.k[2] > 1;
        for (int i = 0; i < kMR && xin; ++i) xin = ox[i] >= 0 && ox[i] + g.k[2] - 1 < g.in[2];
        const int kw = xin ? g.k[2] : 1, seg = kw * cn;
        int nt = 0;
        for (int t = 0; t < taps; t += kw) {
          const int kx = t % g.k[2], ky = (t / g.k[2]) % g.k[1], kz = t / (g.k[2] * g.k[1]);
          const int dz = kz * g.dil[0], dy = ky * g.dil[1], dx = kx * g.dil[2];
          const long off = ((static_cast<long>(dz) * g.in[1] + dy) * g.in[2] + dx) * C;
          const float** r = rows.data() + static_cast<size_t>(nt) * kMR;
          bool any = inside;
          for (int i = 0; i < kMR; ++i) {
            const bool in = inside || (oz[i] + dz >= 0 && oz[i] + dz < g.in[0] && oy[i] + dy >= 0 &&
                                       oy[i] + dy < g.in[1] && ox[i] + dx >= 0 && ox[i] + dx < g.in[2]);
            r[i] = in ? x + (org[i] + off) : w.zeros();
            any = any || in;
          }
          if (any) tap[nt++] = t / kw;  // a tap wholly in the padding adds nothing
        }
        for (int mb = mb0; mb < mb1; ++mb) {
          const int m0 = gi * Mg + mb * kNR, n = std::min(kNR, Mg - mb * kNR);
          direct::BAhead next;
          if (stream_b && mb + 1 == mb1) {  // this tile's share of the next m-block's chunk
            const float* nb0 = w.block(gi, mb, c0) + w.per_block();
            if (nb0 < w.end())
              next = direct::BAhead{reinterpret_cast<const char*>(nb0), static_cast<long>(taps) * cn * kNR * 4 / 64}
                         .share(ti - t0, t1 - t0);
          }
          direct::tile(rows.data(), tap.data(), nt, seg, w.block(gi, mb, c0), y + p0 * ldy + m0, ldy, m, n, !first,
                       last, ep, p0, m0, mb == mb0 ? pf : 0, next);
        }
      }
    }
  };
  const long tasks = blocks * runs;
  if (T <= 1 || tasks <= 1) {
    for (long t = 0; t < tasks; ++t) task(t);
  } else {
    parallel_for(static_cast<int>(tasks), [&](int t) { task(t); });
  }
}

template <class Ep>
void conv_direct_f32(const ConvShape& s, const float* x, const DirectWeights& w, float* y, const Ep& ep) {
  conv_direct_f32(s, InputSegments{1, {x}, {s.C}}, w, y, ep);
}

}  // namespace dnnf::conv
