// Convolution anchors (paper §4.4, Many-to-Many anchors): Conv as an implicit GEMM, depthwise
// Conv on the direct window engine, ConvTranspose as GEMM + col2im; all with the fused epilogue.
//
// Layouts are ONNX's: x [N, C, spatial...] (1 to 3 spatial dims), Conv weights
// [M, C/group, k...], ConvTranspose weights [C, M/group, k...]; `out` already reflects pads,
// auto_pad, ceil rules and output_padding. Bias is not an input: it comes as an epilogue.
// The epilogue view (gemm_kernel.h's contract) is y as [N * M, prod(out)]: row = n * M + m,
// col = flat output spatial index. Paths of conv_f32, chosen per call:
//   depthwise (group == C == M)   window.h, vectorized along the output width
//   1x1, stride 1, no padding     GEMM on x viewed as [C/group, HW] (a strided B, no copy)
//   otherwise                     per (image, group) GEMM W_g[M/g, K] x im2col[K, OHW],
//                                 K = C/g * prod(k); the im2col rows are produced while B is
//                                 packed (Im2col below), so the matrix never exists whole;
//                                 a width stride first splits x by phase (split_phases)
//   small output planes           pixel-major: Y^T[OHW, M/g] = im2col^T[OHW, K] x W_g^T, the
//                                 layout of an NHWC convolution, then one transposing pass
//                                 applies the epilogue and stores NCHW (pixel_major below)
// Batches and groups with at least 2 GEMMs per thread run one single-threaded GEMM per task;
// otherwise each GEMM uses the whole pool. PackedConvWeights packs W once per group.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "gemm.h"
#include "parallel.h"
#include "simd.h"
#include "window.h"

namespace dnnf::conv {

using gemm::EpNone;
using simd::kVecWidth;
using simd::vf;


namespace detail {

inline long l2_bytes() { return gemm::cache_bytes(2); }

inline void check(const ConvShape& s) {
  if (s.group <= 0 || s.C % s.group || s.M % s.group || s.nd < 1 || s.nd > 3)
    throw std::invalid_argument("conv: channels must divide into groups, 1 to 3 spatial dims");
}

using window::detail::valid_range;

// Strided convs first split each input row by width phase, xs[row][p][j] = x[row][j*sx + p]
// (Wq = ceil(IX / sx) floats a phase), so every im2col row segment below is one contiguous
// copy: a scalar pass over the input instead of a strided gather per (tap, output), i.e.
// prod(k) / prod(stride) times fewer scalar moves (12x for a 7x7 stride-2 stem).
inline void split_phases(const window::Geom& g, const float* x, long rows, float* xs) {
  const int IX = g.in[2], sx = g.stride[2], wq = (IX + sx - 1) / sx;
  for (long r = 0; r < rows; ++r) {
    const float* src = x + r * IX;
    float* d = xs + r * sx * wq;
    for (int p = 0; p < sx; ++p, d += wq) {
      const int n = (IX - p + sx - 1) / sx;
      if (sx == 2) {  // a constant stride lets the compiler vectorize the deinterleave
        for (int j = 0; j < n; ++j) d[j] = src[2 * j + p];
      } else {
        for (int j = 0; j < n; ++j) d[j] = src[j * sx + p];
      }
      std::fill(d + n, d + wq, 0.0f);
    }
  }
}

// B = im2col of one image and group, produced row by row for gemm::BRows: row k = (c, kz,
// ky, kx), column j = flat output position; taps that fall in the padding read 0. x is the
// group's input, width-phase split (split_phases) when the width stride is above 1.
struct Im2col {
  const float* x;
  window::Geom g;
  void row(int k, int j0, int n, float* dst) const {
    const int kk = g.taps(), r = k % kk;
    const int kx = r % g.k[2], ky = (r / g.k[2]) % g.k[1], kz = r / (g.k[2] * g.k[1]);
    const int OX = g.out[2], OY = g.out[1], IX = g.in[2], sx = g.stride[2];
    const long pitch = sx == 1 ? IX : static_cast<long>(sx) * ((IX + sx - 1) / sx);
    const float* xc = x + static_cast<long>(k / kk) * g.in[0] * g.in[1] * pitch;
    int ox = j0 % OX, oy = (j0 / OX) % OY, oz = j0 / (OX * OY);
    // Input column of output ox is ox * sx + bx, in phase px at index ox + jx.
    const int bx = kx * g.dil[2] - g.pad[2];
    const int px = ((bx % sx) + sx) % sx, jx = (bx - px) / sx;
    const long phase = sx == 1 ? 0 : static_cast<long>(px) * (pitch / sx);
    int lo, hi;  // the output columns whose tap kx lands inside the input row
    valid_range(bx, sx, IX, OX, &lo, &hi);
    while (n > 0) {
      const int seg = std::min(n, OX - ox);
      const int iz = oz * g.stride[0] + kz * g.dil[0] - g.pad[0];
      const int iy = oy * g.stride[1] + ky * g.dil[1] - g.pad[1];
      if (iz < 0 || iz >= g.in[0] || iy < 0 || iy >= g.in[1]) {
        std::fill(dst, dst + seg, 0.0f);
      } else {
        const float* xr = xc + (static_cast<long>(iz) * g.in[1] + iy) * pitch + phase + jx;
        const int a = std::clamp(lo, ox, ox + seg), b = std::clamp(hi, a, ox + seg);
        std::fill(dst, dst + (a - ox), 0.0f);
        std::memcpy(dst + (a - ox), xr + a, sizeof(float) * (b - a));
        std::fill(dst + (b - ox), dst + seg, 0.0f);
      }
      dst += seg;
      n -= seg;
      ox = 0;
      if (++oy == OY) {
        oy = 0;
        ++oz;
      }
    }
  }
};

inline float* phase_scratch(size_t n) {  // per thread, only grows
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// The epilogue of one (image, group) GEMM sees rows shifted to the whole output's rows.
template <class Ep>
struct EpRowOffset {
  static constexpr bool kStores = gemm::ep_stores<Ep>;
  const Ep& ep;
  int off;
  void apply(vf& v, int row, int col, int n) const { ep.apply(v, row + off, col, n); }
};
template <class Ep, class F>
void with_offset(const Ep& ep, int off, F&& f) {
  if constexpr (std::is_same_v<Ep, EpNone>) {
    f(ep);  // keeps the micro-kernel's plain store path
  } else if constexpr (gemm::IsEpDyn<Ep>::value) {
    f(ep.shifted(off));  // keeps the micro-kernel's one call per tile
  } else {
    f(EpRowOffset<Ep>{ep, off});
  }
}

// Pixel-major (NHWC-style) GEMM for small output planes. The channel-major GEMM puts the
// output plane on the vector (NR) side: a 7x7 plane is 49 of 64 columns (77% of the FMAs
// useful). Swapping the roles puts the pixels on the MR side (49 of 56 rows) and the output
// channels on the vector side. The price is a transpose of im2col (K x OHW moves), packing
// it as A, and a transpose of the result (M x OHW), and it scales worse on two threads
// (fewer row panels). Measured on AVX-512 (ms, 1 / 2 threads, channel-major -> pixel-major):
//   1x1 512->2048, 7x7            0.754 -> 0.620 / 0.431 -> 0.395
//   1x1 stride 2 1024->2048, 14x14 1.739 -> 1.424 / 1.005 -> 0.921
//   3x3 512->512, 7x7             2.004 -> 1.640 / 1.063 -> 1.199   (loses on 2 threads)
//   1x1 2048->512, 7x7            0.785 -> 0.676 / 0.416 -> 0.467   (loses on 2 threads)
//   3x3 256->256, 14x14           1.517 -> 1.845 / 1.053 -> 1.139   (loses)
// so it is taken only where it won on both: planes of at most 64 pixels, K >= 512,
// M/g >= 1024, and a tile fill at least 10% better.
inline double tile_fill(long rows, long cols, long mr, long nr) {
  return static_cast<double>(rows) / gemm::round_up(static_cast<int>(rows), static_cast<int>(mr)) *
         static_cast<double>(cols) / gemm::round_up(static_cast<int>(cols), static_cast<int>(nr));
}
inline bool pixel_major(const ConvShape& s) {
#ifdef DNNF_CONV_PIXEL_MAJOR  // 0 or 1 forces the choice (benchmarks only)
  if (!is_depthwise(s)) return DNNF_CONV_PIXEL_MAJOR;
#endif
  if (is_depthwise(s)) return false;
  const window::Geom g = geom(s);
  const long OHW = g.out_plane(), Mg = s.M / s.group, K = s.C / s.group * g.taps();
  const double pm = tile_fill(OHW, Mg, gemm::kMR, gemm::kNR), cm = tile_fill(Mg, OHW, gemm::kMR, gemm::kNR);
  if (OHW < gemm::kNR && Mg >= gemm::kNR && pm > 1.2 * cm) return true;  // TINYPLANE
  if (Mg < 1024 || K < 512 || OHW > 64) return false;
  return pm > 1.10 * cm;
}

// Per-thread buffers of the pixel-major path that only grow (0: im2col^T, 1: Y^T).
inline float* pm_scratch(int slot, size_t n) {
  thread_local std::vector<float> buf[2];
  if (buf[slot].size() < n) buf[slot].resize(n);
  return buf[slot].data();
}

// colT[i, k] = im2col[k, i] for one (image, group): rows of im2col (or of x, for a 1x1
// stride-1 conv) are produced 16 at a time and written transposed.
template <class RowOf>
void transpose_rows(int K, long OHW, const RowOf& row_of, float* colT, bool parallel) {
  constexpr int KB = 16;
  const int chunks = (K + KB - 1) / KB;
  auto chunk = [&](int c) {
    alignas(64) float tmp[KB][64];
    const int k0 = c * KB, kn = std::min(KB, K - k0);
    for (long i0 = 0; i0 < OHW; i0 += 64) {
      const int n = static_cast<int>(std::min<long>(64, OHW - i0));
      for (int r = 0; r < kn; ++r) row_of(k0 + r, i0, n, tmp[r]);
      for (int i = 0; i < n; ++i) {
        float* d = colT + (i0 + i) * K + k0;
        for (int r = 0; r < kn; ++r) d[r] = tmp[r][i];
      }
    }
  };
  if (parallel && chunks > 1) {
    parallel_for(chunks, chunk);
  } else {
    for (int c = 0; c < chunks; ++c) chunk(c);
  }
}

// Small output planes (x not phase-split): each (pixel, tap)'s input offset, -1 in the padding,
// computed once, so that im2col is one load per element. The generic Im2col rows cost more
// than the GEMM itself on planes of 2x2 to 8x8 (a few elements per row).
inline const int* small_plane_offsets(const window::Geom& g) {
  const int taps = g.taps();
  thread_local std::vector<int> offsets;
  offsets.resize(static_cast<size_t>(g.out_plane()) * taps);
  int* off = offsets.data();
  for (int o0 = 0, i = 0; o0 < g.out[0]; ++o0)
    for (int o1 = 0; o1 < g.out[1]; ++o1)
      for (int o2 = 0; o2 < g.out[2]; ++o2, ++i)
        for (int k0 = 0, t = 0; k0 < g.k[0]; ++k0)
          for (int k1 = 0; k1 < g.k[1]; ++k1)
            for (int k2 = 0; k2 < g.k[2]; ++k2, ++t) {
              const int a = o0 * g.stride[0] - g.pad[0] + k0 * g.dil[0];
              const int b = o1 * g.stride[1] - g.pad[1] + k1 * g.dil[1];
              const int c = o2 * g.stride[2] - g.pad[2] + k2 * g.dil[2];
              const bool in = a >= 0 && a < g.in[0] && b >= 0 && b < g.in[1] && c >= 0 && c < g.in[2];
              off[i * taps + t] = in ? (a * g.in[1] + b) * g.in[2] + c : -1;
            }
  return off;
}
constexpr long kSmallPlane = 64;  // output pixels up to which im2col goes through the offsets

// im2col^T [OHW, K] (the pixel-major GEMM's A), a row per pixel.
inline void small_plane_colT(const window::Geom& g, int Cg, const float* xg, float* colT, bool parallel) {
  const int taps = g.taps(), K = Cg * taps;
  const long OHW = g.out_plane(), plane = g.in_plane();
  const int* off = small_plane_offsets(g);
  auto pixel = [&](int i) {
    float* d = colT + static_cast<long>(i) * K;
    const int* oi = off + static_cast<long>(i) * taps;
    for (int c = 0; c < Cg; ++c, d += taps) {
      const float* xc = xg + c * plane;
      for (int t = 0; t < taps; ++t) d[t] = oi[t] >= 0 ? xc[oi[t]] : 0.0f;
    }
  };
  if (parallel && OHW > 1 && OHW * K > 32768) {
    parallel_for(static_cast<int>(OHW), pixel);
  } else {
    for (int i = 0; i < OHW; ++i) pixel(i);
  }
}

// im2col [K, OHW] (the channel-major GEMM's B), a row per (channel, tap).
inline void small_plane_col(const window::Geom& g, int Cg, const float* xg, float* col) {
  const int taps = g.taps();
  const long OHW = g.out_plane(), plane = g.in_plane();
  const int* off = small_plane_offsets(g);
  for (int c = 0; c < Cg; ++c) {
    const float* xc = xg + c * plane;
    for (int t = 0; t < taps; ++t) {
      float* d = col + (static_cast<long>(c) * taps + t) * OHW;
      for (long i = 0; i < OHW; ++i) {
        const int o = off[i * taps + t];
        d[i] = o >= 0 ? xc[o] : 0.0f;
      }
    }
  }
}

// y[m, i] = ep(yT[i, m]) over rows [0, Mg) (ep sees the rows of this group's block).
template <class Ep>
void untranspose_store(const float* yT, long OHW, int Mg, float* y, const Ep& ep, bool parallel) {
  constexpr int W = kVecWidth, RB = 16;
  const int blocks = (Mg + RB - 1) / RB;
  auto block = [&](int b) {
    alignas(64) float tile[RB][W];
    const int m0 = b * RB, mn = std::min(RB, Mg - m0);
    for (long i0 = 0; i0 < OHW; i0 += W) {
      const int n = static_cast<int>(std::min<long>(W, OHW - i0));
      for (int i = 0; i < n; ++i) {
        const float* src = yT + (i0 + i) * Mg + m0;
        for (int r = 0; r < mn; ++r) tile[r][i] = src[r];
      }
      for (int r = 0; r < mn; ++r) {
        vf v = gemm::load_lanes(tile[r], n);
        ep.apply(v, m0 + r, static_cast<int>(i0), n);
        if constexpr (!gemm::ep_stores<Ep>) gemm::store_lanes(y + (m0 + r) * OHW + i0, v, n);
      }
    }
  };
  if (parallel && blocks > 1) {
    parallel_for(blocks, block);
  } else {
    for (int b = 0; b < blocks; ++b) block(b);
  }
}

// The pixel-major path of one (image, group): xg is the group's input, phase-split when the
// width stride is above 1 (as Im2col expects), wT the group's weights packed as
// B = W_g^T [K, Mg].
template <class Ep>
void conv_pixel_major(const window::Geom& g, int Cg, int Mg, const float* xg,
                      const gemm::PackedBView& wT, float* yg, const Ep& ep, bool single) {
  const int K = Cg * g.taps();
  const long OHW = g.out_plane();
  float* colT = pm_scratch(0, static_cast<size_t>(OHW) * K);
  float* yT = pm_scratch(1, static_cast<size_t>(OHW) * Mg);
  if (is_pointwise(g)) {
    transpose_rows(K, OHW, [&](int k, long i0, int n, float* d) {
      std::memcpy(d, xg + k * OHW + i0, sizeof(float) * n);
    }, colT, !single);
  } else if (g.stride[2] == 1 && OHW <= kSmallPlane) {
    small_plane_colT(g, Cg, xg, colT, !single);
  } else {
    const Im2col im{xg, g};
    transpose_rows(K, OHW, [&](int k, long i0, int n, float* d) {
      im.row(k, static_cast<int>(i0), n, d);
    }, colT, !single);
  }
  gemm::Options opt;
  opt.n_threads = single ? 1 : 0;
  gemm::gemm_f32_src(static_cast<int>(OHW), Mg, K, gemm::AView<>{colT, K, 1}, wT, yT, Mg,
                     EpNone{}, opt);
  untranspose_store(yT, OHW, Mg, yg, ep, !single);
}

// The GEMM path; a_of(g) gives group g's A source (strided weights or pre-packed); wT_of(g)
// group g's weights packed for the pixel-major path, or nullptr to stay channel-major.
template <class AOf, class WTOf, class Ep>
void conv_gemm(const ConvShape& s, const float* x, const AOf& a_of, const WTOf& wT_of, float* y,
               const Ep& ep) {
  const window::Geom g = geom(s);
  const int G = s.group, Cg = s.C / G, Mg = s.M / G;
  const int K = Cg * g.taps(), OHW = static_cast<int>(g.out_plane());
  const bool pointwise = is_pointwise(g);
  const int jobs = s.N * G, T = get_num_threads();
  // Many small GEMMs (batches, grouped convs): one per task, each single-threaded.
  const bool outer = T > 1 && jobs >= 2 * T;
  gemm::Options opt;
  opt.n_threads = outer ? 1 : 0;
  auto job = [&](int j) {
    const int n = j / G, gi = j % G;
    const long row0 = static_cast<long>(n) * s.M + static_cast<long>(gi) * Mg;
    const float* xg = x + (static_cast<long>(n) * s.C + static_cast<long>(gi) * Cg) * g.in_plane();
    float* yg = y + row0 * OHW;
    with_offset(ep, static_cast<int>(row0), [&](const auto& e) {
      if (const gemm::PackedBView* wT = wT_of(gi)) {
        if (!pointwise && g.stride[2] > 1) {
          const long rows = static_cast<long>(Cg) * g.in[0] * g.in[1];
          const int sx = g.stride[2], wq = (g.in[2] + sx - 1) / sx;
          float* xs = phase_scratch(static_cast<size_t>(rows) * sx * wq);
          split_phases(g, xg, rows, xs);
          xg = xs;
        }
        conv_pixel_major(g, Cg, Mg, xg, *wT, yg, e, outer);
      } else if (pointwise) {
        gemm::gemm_f32_src(Mg, OHW, K, a_of(gi), gemm::BView{xg, OHW, 1}, yg, OHW, e, opt);
      } else if (g.stride[2] == 1 && OHW <= kSmallPlane) {
        float* col = pm_scratch(0, static_cast<size_t>(K) * OHW);
        small_plane_col(g, Cg, xg, col);
        gemm::gemm_f32_src(Mg, OHW, K, a_of(gi), gemm::BView{col, OHW, 1}, yg, OHW, e, opt);
      } else {
        if (g.stride[2] > 1) {
          const long rows = static_cast<long>(Cg) * g.in[0] * g.in[1];
          const int sx = g.stride[2], wq = (g.in[2] + sx - 1) / sx;
          float* xs = phase_scratch(static_cast<size_t>(rows) * sx * wq);
          const long tasks = outer ? 1 : std::min<long>(rows, 4L * T);
          parallel_for(static_cast<int>(tasks), [&](int t) {
            const long r0 = rows * t / tasks, r1 = rows * (t + 1) / tasks;
            split_phases(g, xg + r0 * g.in[2], r1 - r0, xs + r0 * sx * wq);
          });
          xg = xs;
        }
        const Im2col im{xg, g};
        gemm::gemm_f32_src(Mg, OHW, K, a_of(gi), gemm::BRows<Im2col>{im}, yg, OHW, e, opt);
      }
    });
  };
  if (outer) {
    parallel_for(jobs, job);
  } else {
    for (int j = 0; j < jobs; ++j) job(j);
  }
}

// Runs the epilogue over y viewed as [R, C] (values already stored).
template <class Ep>
void epilogue_pass(float* y, long R, long C, const Ep& ep) {
  if constexpr (!std::is_same_v<Ep, EpNone>) {
    auto rows = [&](long lo, long hi) {
      for (long r = lo; r < hi; ++r) {
        for (long c = 0; c < C; c += kVecWidth) {
          const int n = static_cast<int>(std::min<long>(kVecWidth, C - c));
          vf v = gemm::load_lanes(y + r * C + c, n);
          ep.apply(v, static_cast<int>(r), static_cast<int>(c), n);
          if constexpr (!gemm::ep_stores<Ep>) gemm::store_lanes(y + r * C + c, v, n);
        }
      }
    };
    const long tasks = std::min<long>(R, std::max(1L, R * C >> 15));
    if (tasks <= 1) return rows(0, R);
    parallel_for(static_cast<int>(tasks), [&](int t) { rows(R * t / tasks, R * (t + 1) / tasks); });
  }
}

}  // namespace detail

// Conv (no bias): y = ep(conv(x, w)).
template <class Ep = EpNone>
void conv_f32(const ConvShape& s, const float* x, const float* w, float* y, const Ep& ep = {}) {
  detail::check(s);
  const window::Geom g = detail::geom(s);
  if (detail::is_depthwise(s)) {
    window::run(g, static_cast<long>(s.N) * s.C, x, w, s.C, y, window::OpWeightedSum{},
                window::PostNone{}, ep);
    return;
  }
  const int Mg = s.M / s.group, K = s.C / s.group * g.taps();
  auto a_of = [&](int gi) {
    return gemm::AView<>{w + static_cast<long>(gi) * Mg * K, K, 1};
  };
  detail::conv_gemm(s, x, a_of, [](int) -> const gemm::PackedBView* { return nullptr; }, y, ep);
}

// Conv weights prepared once for one shape: the GEMM path's A packed per group (the packing
// and its zero padding then never run per call); the depthwise path keeps a plain copy.
class PackedConvWeights {
 public:
  PackedConvWeights(const ConvShape& s, const float* w) : s_(s) {
    detail::check(s);
    const int Mg = s.M / s.group, K = s.C / s.group * detail::geom(s).taps();
    if (detail::is_depthwise(s)) {
      plain_.assign(w, w + static_cast<long>(s.M) * K);
      return;
    }
    if (detail::pixel_major(s)) {  // B = W_g^T: element (k, m) at w_g[m * K + k]
      for (int gi = 0; gi < s.group; ++gi)
        transposed_.emplace_back(w + static_cast<long>(gi) * Mg * K, 1, K, K, Mg);
      return;
    }
    for (int gi = 0; gi < s.group; ++gi)
      groups_.emplace_back(w + static_cast<long>(gi) * Mg * K, K, 1, Mg, K);
  }
  // Whether s is the shape these weights were packed for (spatial sizes may differ, as long
  // as they keep the same GEMM orientation).
  bool fits(const ConvShape& s) const {
    bool same = s.nd == s_.nd && s.C == s_.C && s.M == s_.M && s.group == s_.group &&
                detail::pixel_major(s) == !transposed_.empty();
    for (int i = 0; i < s.nd && same; ++i) same = s.k[i] == s_.k[i];
    return same;
  }
  // Group g's W_g^T packed as a GEMM B, when the shape runs pixel-major; else nullptr.
  const gemm::PackedBView* transposed(int g) const {
    return transposed_.empty() ? nullptr : &transposed_[static_cast<size_t>(g)].view();
  }
  const float* plain() const { return plain_.data(); }
  const gemm::PackedAView& group(int g) const { return groups_[static_cast<size_t>(g)].view(); }

 private:
  ConvShape s_;
  std::vector<float> plain_;
  std::vector<gemm::PackedA> groups_;
  std::vector<gemm::PackedB> transposed_;
};

// What a module's State holds its packed NCHW convolutions in, made and deleted by the pack
// prelude unit's one instance of each (prelude_units.h DNNF_UNIT_pack) rather than by the
// constructor and destructors inlined into every module that packs them (11 KB and 0.5 s of
// a module's -O3 compile, Zen 3).
namespace detail {
template <int I = 0>
PackedConvWeights* new_packed_conv(const ConvShape& s, const float* w) {
  return new PackedConvWeights(s, w);
}
template <int I = 0>
void delete_packed_conv(PackedConvWeights* p) {
  delete p;
}
}  // namespace detail
struct PackedConvDelete {
  void operator()(PackedConvWeights* p) const { detail::delete_packed_conv<0>(p); }
};
using PackedConvPtr = std::unique_ptr<PackedConvWeights, PackedConvDelete>;

template <class Ep = EpNone>
void conv_f32(const ConvShape& s, const float* x, const PackedConvWeights& w, float* y,
              const Ep& ep = {}) {
  if (!w.fits(s)) throw std::invalid_argument("conv: weights were packed for another shape");
  if (detail::is_depthwise(s)) return conv_f32(s, x, w.plain(), y, ep);
  // group(gi) is only asked for when transposed(gi) is nullptr (channel-major weights).
  detail::conv_gemm(s, x, [&](int gi) { return w.group(gi); },
                    [&](int gi) { return w.transposed(gi); }, y, ep);
}

// ConvTranspose (no bias): in = input spatial, out = output spatial, C = input channels,
// M = output channels. Per (image, group): col[(m, tap), i] = W_g^T x_g by GEMM, then col2im
// adds col into y at o = i * stride + tap * dil - pad_begin; the epilogue runs last.
template <class Ep = EpNone>
void conv_transpose_f32(const ConvShape& s, const float* x, const float* w, float* y,
                        const Ep& ep = {}) {
  detail::check(s);
  // The geometry of the forward conv from y back to x: in/out swapped, same taps.
  const window::Geom g = window::make_geom(s.nd, s.out, s.in, s.k, s.stride, s.dil, s.pad_begin);
  const int G = s.group, Cg = s.C / G, Mg = s.M / G, KK = g.taps();
  const int rows = Mg * KK;  // of col
  const long IHW = g.out_plane(), OHW = g.in_plane();
  // Columns (input positions) per chunk, bounding col at ~8 MB.
  const int nj = static_cast<int>(std::max<long>(
      gemm::kNR, std::min<long>(IHW, (2L << 20) / std::max(1, rows) / gemm::kNR * gemm::kNR)));
  std::vector<float> col(static_cast<size_t>(rows) * nj);
  std::fill(y, y + static_cast<long>(s.N) * s.M * OHW, 0.0f);
  for (int n = 0; n < s.N; ++n) {
    for (int gi = 0; gi < G; ++gi) {
      const float* xg = x + (static_cast<long>(n) * s.C + static_cast<long>(gi) * Cg) * IHW;
      const float* wg = w + static_cast<long>(gi) * Cg * rows;
      float* yg = y + (static_cast<long>(n) * s.M + static_cast<long>(gi) * Mg) * OHW;
      for (long j0 = 0; j0 < IHW; j0 += nj) {
        const int cols = static_cast<int>(std::min<long>(nj, IHW - j0));
        gemm::gemm_f32(rows, cols, Cg, wg, 1, rows, xg + j0, IHW, 1, col.data(), cols);
        // col2im, one output channel per task (no two tasks write the same plane).
        parallel_for(Mg, [&](int m) {
          for (int t = 0; t < KK; ++t) {
            const int kx = t % g.k[2], ky = (t / g.k[2]) % g.k[1], kz = t / (g.k[2] * g.k[1]);
            const float* c = col.data() + (static_cast<long>(m) * KK + t) * cols;
            float* ym = yg + static_cast<long>(m) * OHW;
            int lo, hi;  // input columns ix whose output ox lies inside y
            detail::valid_range(kx * g.dil[2] - g.pad[2], g.stride[2], g.in[2], g.out[2], &lo, &hi);
            const int bx = kx * g.dil[2] - g.pad[2], sx = g.stride[2];
            for (long j = j0; j < j0 + cols;) {  // one input row segment at a time
              const int ix = static_cast<int>(j % g.out[2]);
              const long rowj = j / g.out[2];
              const int iy = static_cast<int>(rowj % g.out[1]);
              const int iz = static_cast<int>(rowj / g.out[1]);
              const int seg = static_cast<int>(std::min<long>(g.out[2] - ix, j0 + cols - j));
              const int oz = iz * g.stride[0] + kz * g.dil[0] - g.pad[0];
              const int oy = iy * g.stride[1] + ky * g.dil[1] - g.pad[1];
              if (oz >= 0 && oz < g.in[0] && oy >= 0 && oy < g.in[1]) {
                float* yr = ym + (static_cast<long>(oz) * g.in[1] + oy) * g.in[2];
                const float* cr = c + (j - j0) - ix;  // indexed by ix
                const int a = std::clamp(lo, ix, ix + seg), b = std::clamp(hi, a, ix + seg);
                for (int i = a; i < b; ++i) yr[i * sx + bx] += cr[i];
              }
              j += seg;
            }
          }
        });
      }
    }
  }
  detail::epilogue_pass(y, static_cast<long>(s.N) * s.M, OHW, ep);
}

}  // namespace dnnf::conv
