// ONNX Resize (opset 19 attributes) as an anchor with a fused epilogue (paper §4.4). Each
// axis gets a table of taps (input index, weight) per output index, built exactly as the
// oracle (_ref_nn.resize) builds its interpolation matrix: source coordinates in float32 in
// onnxruntime's order of operations, weights in double. Output = sum over the taps of every
// axis of the weight products times the input.
//
// The caller resolves scales/sizes, axes and keep_aspect_ratio_policy (as _resize_targets
// does) into, per axis: the output length and the scale (double: antialias uses it unrounded,
// coordinates use it as float32). An axis with out == in, scale == 1 and no crop is skipped.
// roi (nullable; only read for tf_crop_and_resize) is [starts..., ends...] over all rank axes;
// axes outside the model's `axes` attribute get start 0, end 1 (an identity crop).
//
// Fast path: every axis but the last two is skipped (NCHW/NHWC images): per output row, the
// input rows its vertical taps need are interpolated horizontally once into a small cache
// (upsampling reuses each for several output rows), then combined with vectors. Otherwise a
// scalar loop over the outputs. Epilogue view: [prod(out dims but the last), out last dim].
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "irregular.h"

namespace dnnf::irr {

enum class ResizeMode { Nearest, Linear, Cubic };
enum class ResizeCoord {
  HalfPixel, PytorchHalfPixel, HalfPixelSymmetric, AlignCorners, Asymmetric, TfCropAndResize
};
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeAttrs {  // the ONNX attributes, with ONNX's defaults
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoord coord = ResizeCoord::HalfPixel;
  NearestMode nearest = NearestMode::RoundPreferFloor;
  float cubic_coeff_a = -0.75f;
  bool exclude_outside = false;
  bool antialias = false;  // linear and cubic only
  float extrapolation_value = 0.0f;
};

namespace detail {

struct ResizeAxis {
  bool identity = true;
  long taps = 1;
  std::vector<long> idx;   // [out][taps], clamped to [0, in)
  std::vector<float> w;    // [out][taps]
  std::vector<float> out;  // [out]: 1 where tf_crop_and_resize samples outside the input
  bool any_outside = false;
};

// x_original of output index o (the oracle's _source_coords, float32 arithmetic).
inline double source_coord(ResizeCoord m, long o, long in_len, long out_len, double scale_d,
                           float roi0, float roi1) {
  const float x = static_cast<float>(o), s = static_cast<float>(scale_d), half = 0.5f;
  const float n_in = static_cast<float>(in_len), n_out = static_cast<float>(out_len);
  float r = 0.0f;
  switch (m) {
    case ResizeCoord::HalfPixel: r = (x + half) / s - half; break;
    case ResizeCoord::PytorchHalfPixel: r = out_len > 1 ? (x + half) / s - half : 0.0f; break;
    case ResizeCoord::HalfPixelSymmetric: {
      const float offset = rounded(n_in / 2.0f * (1.0f - n_out / (s * n_in)));
      r = offset + (x + half) / s - half;
      break;
    }
    case ResizeCoord::AlignCorners:
      r = out_len > 1 ? x * (n_in - 1.0f) / (n_out - 1.0f) : 0.0f;
      break;
    case ResizeCoord::Asymmetric: r = x / s; break;
    case ResizeCoord::TfCropAndResize:
      r = out_len > 1
              ? rounded(roi0 * (n_in - 1.0f)) + x * (roi1 - roi0) * (n_in - 1.0f) / (n_out - 1.0f)
              : half * (roi0 + roi1) * (n_in - 1.0f);
      break;
  }
  return r;
}

inline double resize_kernel(const ResizeAttrs& p, double t) {
  t = std::fabs(t);
  if (p.mode == ResizeMode::Linear) return std::min(std::max(1.0 - t, 0.0), 1.0);
  const double a = p.cubic_coeff_a;
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0.0;
}

inline ResizeAxis resize_axis(const ResizeAttrs& p, long in_len, long out_len, double scale,
                              const float* roi, int axis, int rank) {
  ResizeAxis t;
  const bool crop = p.coord == ResizeCoord::TfCropAndResize && roi;
  t.identity = out_len == in_len && scale == 1.0 && !crop;
  if (in_len <= 0 && out_len > 0) throw std::invalid_argument("Resize: empty input axis");
  if (t.identity) {
    t.idx.resize(out_len), t.w.assign(out_len, 1.0f), t.out.assign(out_len, 0.0f);
    for (long o = 0; o < out_len; ++o) t.idx[o] = o;
    return t;
  }
  const float r0 = roi ? roi[axis] : 0.0f, r1 = roi ? roi[axis + rank] : 1.0f;
  long start = 0;
  double s = 1.0, radius = p.mode == ResizeMode::Cubic ? 2.0 : 1.0;
  if (p.mode != ResizeMode::Nearest) {
    s = p.antialias ? std::min(scale, 1.0) : 1.0;  // the filter is stretched by 1/s
    start = static_cast<long>(std::floor(-radius / s)) + 1;
    t.taps = 2 - 2 * start;
  }
  t.idx.resize(out_len * t.taps), t.w.resize(out_len * t.taps), t.out.assign(out_len, 0.0f);
  std::vector<double> c(t.taps);
  for (long o = 0; o < out_len; ++o) {
    const double xo = source_coord(p.coord, o, in_len, out_len, scale, r0, r1);
    if (p.coord == ResizeCoord::TfCropAndResize && (xo < 0 || xo > in_len - 1)) {
      t.out[o] = 1.0f;
      t.any_outside = true;
    }
    long* idx = t.idx.data() + o * t.taps;
    if (p.mode == ResizeMode::Nearest) {
      double v = xo;
      if (xo != std::floor(xo)) {
        switch (p.nearest) {
          case NearestMode::RoundPreferFloor: v = std::ceil(xo - 0.5); break;
          case NearestMode::RoundPreferCeil: v = std::floor(xo + 0.5); break;
          case NearestMode::Floor: v = std::floor(xo); break;
          case NearestMode::Ceil: v = std::ceil(xo); break;
        }
      }
      idx[0] = static_cast<long>(v);
      c[0] = 1.0;
    } else {  // taps base + start .. base - start + 1, ratio = xo - base in (0, 1]
      const double base = std::ceil(xo) - 1, ratio = xo - base;
      double sum = 0.0;
      for (long k = 0; k < t.taps; ++k) {
        idx[k] = static_cast<long>(base) + start + k;
        c[k] = resize_kernel(p, (static_cast<double>(start + k) - ratio) * s);
        sum += c[k];
      }
      if (p.antialias) {
        for (long k = 0; k < t.taps; ++k) c[k] /= sum;
      }
    }
    if (p.exclude_outside) {
      double total = 0.0;
      for (long k = 0; k < t.taps; ++k) {
        if (idx[k] < 0 || idx[k] >= in_len) c[k] = 0.0;
        total += c[k];
      }
      for (long k = 0; k < t.taps; ++k) c[k] /= total == 0.0 ? 1.0 : total;
    }
    for (long k = 0; k < t.taps; ++k) {
      idx[k] = std::min(std::max(idx[k], 0L), in_len - 1);
      t.w[o * t.taps + k] = static_cast<float>(c[k]);
    }
  }
  return t;
}

// The image fast path: planes [P, Hin, Win] -> [P, Hout, Wout].
template <class Ep>
void resize_2d(long P, long Hin, long Win, long Hout, long Wout, const ResizeAxis& ay,
               const ResizeAxis& ax, float ev, const float* x, float* y, const Ep& ep) {
  using namespace simd;
  constexpr int Wv = kVecWidth;
  constexpr long kRows = 16;  // output rows per task: long enough for the row cache to pay
  const long blocks = (Hout + kRows - 1) / kRows, Ty = ay.taps, Tx = ax.taps;
  const long slots = Ty + 2;
  parallel_rows(P * blocks, kRows * Wout * (Ty + Tx), [&](long lo, long hi) {
    std::vector<float> cache(ax.identity ? 0 : static_cast<size_t>(slots * Wout));
    std::vector<long> key(static_cast<size_t>(slots), -1);
    std::vector<const float*> h(static_cast<size_t>(Ty));
    std::vector<char> pinned(static_cast<size_t>(slots));
    long cached_plane = -1;
    for (long u = lo; u < hi; ++u) {
      const long pl = u / blocks, oy0 = (u % blocks) * kRows, oy1 = std::min(Hout, oy0 + kRows);
      const float* xp = x + pl * Hin * Win;
      if (pl != cached_plane) {  // cached rows belong to one plane
        std::fill(key.begin(), key.end(), -1);
        cached_plane = pl;
      }
      for (long oy = oy0; oy < oy1; ++oy) {
        float* yr = y + (pl * Hout + oy) * Wout;
        const long row = pl * Hout + oy;
        if (ay.out[oy] != 0.0f) {
          for (long ox = 0; ox < Wout; ox += Wv) {
            const int n = static_cast<int>(std::min<long>(Wv, Wout - ox));
            emit(yr + ox, v_set1(ev), row, ox, n, ep);
          }
          continue;
        }
        std::fill(pinned.begin(), pinned.end(), 0);
        for (long t = 0; t < Ty; ++t) {  // the horizontally interpolated input rows
          const long iy = ay.idx[oy * Ty + t];
          if (ax.identity) {
            h[t] = xp + iy * Win;
            continue;
          }
          long s = std::find(key.begin(), key.end(), iy) - key.begin();
          if (s == slots) {  // evict the lowest unpinned row (rows are visited in order)
            s = -1;
            for (long q = 0; q < slots; ++q) {
              if (!pinned[q] && (s < 0 || key[q] < key[s])) s = q;
            }
            key[s] = iy;
            float* hr = cache.data() + s * Wout;
            const float* xr = xp + iy * Win;
            const long* ix = ax.idx.data();
            const float* wx = ax.w.data();
            if (Tx == 1) {  // nearest (the weight is 1, or 0 under exclude_outside)
              for (long ox = 0; ox < Wout; ++ox) hr[ox] = wx[ox] * xr[ix[ox]];
            } else if (Tx == 2) {  // linear
              for (long ox = 0; ox < Wout; ++ox) {
                hr[ox] = wx[2 * ox] * xr[ix[2 * ox]] + wx[2 * ox + 1] * xr[ix[2 * ox + 1]];
              }
            } else {
              for (long ox = 0; ox < Wout; ++ox) {
                float acc = wx[ox * Tx] * xr[ix[ox * Tx]];
                for (long k = 1; k < Tx; ++k) acc += wx[ox * Tx + k] * xr[ix[ox * Tx + k]];
                hr[ox] = acc;
              }
            }
          }
          pinned[s] = 1;
          h[t] = cache.data() + s * Wout;
        }
        const float* wy = ay.w.data() + oy * Ty;
        for (long ox = 0; ox < Wout; ox += Wv) {
          const int n = static_cast<int>(std::min<long>(Wv, Wout - ox));
          vf v = v_mul(v_set1(wy[0]), load_lanes(h[0] + ox, n));
          for (long t = 1; t < Ty; ++t) v = v_fma(v_set1(wy[t]), load_lanes(h[t] + ox, n), v);
          if (ax.any_outside) {
            v = v_select(v_cmp_ne(load_lanes(ax.out.data() + ox, n), v_zero()), v_set1(ev), v);
          }
          emit(yr + ox, v, row, ox, n, ep);
        }
      }
    }
  });
}

}  // namespace detail

// x has in_shape, y has out_shape (rank <= 8); scales[a] as described above.
template <class Ep = EpNone>
void resize_f32(int rank, const long* in_shape, const long* out_shape, const double* scales,
                const float* roi, const ResizeAttrs& attrs, const float* x, float* y,
                const Ep& ep = {}) {
  if (rank < 0 || rank > 8) throw std::invalid_argument("Resize: rank must be 0..8");
  if (attrs.antialias && attrs.mode == ResizeMode::Nearest) {
    throw std::invalid_argument("Resize: antialias needs mode linear or cubic");
  }
  long out_n = 1;
  for (int a = 0; a < rank; ++a) out_n *= out_shape[a];
  if (out_n == 0) return;
  if (rank == 0) {
    emit(y, load_lanes(x, 1), 0, 0, 1, ep);
    return;
  }
  std::vector<detail::ResizeAxis> ax(rank);
  bool lead_identity = true;
  for (int a = 0; a < rank; ++a) {
    ax[a] = detail::resize_axis(attrs, in_shape[a], out_shape[a], scales[a], roi, a, rank);
    if (a < rank - 2) lead_identity = lead_identity && ax[a].identity;
  }
  const float ev = attrs.extrapolation_value;
  if (lead_identity) {
    if (rank == 1) {
      detail::ResizeAxis one = detail::resize_axis(attrs, 1, 1, 1.0, nullptr, 0, 1);
      return detail::resize_2d(1, 1, in_shape[0], 1, out_shape[0], one, ax[0], ev, x, y, ep);
    }
    long P = 1;
    for (int a = 0; a < rank - 2; ++a) P *= in_shape[a];
    return detail::resize_2d(P, in_shape[rank - 2], in_shape[rank - 1], out_shape[rank - 2],
                             out_shape[rank - 1], ax[rank - 2], ax[rank - 1], ev, x, y, ep);
  }
  // General: for every output, the sum over all tap combinations (scalar).
  long in_stride[8], o_idx[8] = {}, combos = 1;
  for (long a = rank - 1, s = 1; a >= 0; --a) in_stride[a] = s, s *= in_shape[a];
  for (int a = 0; a < rank; ++a) combos *= ax[a].taps;
  for (long e = 0; e < out_n; ++e) {
    bool outside = false;
    for (int a = 0; a < rank; ++a) outside = outside || ax[a].out[o_idx[a]] != 0.0f;
    float acc = 0.0f;
    if (!outside) {
      long t_idx[8] = {};
      for (long c = 0; c < combos; ++c) {
        float w = 1.0f;
        long off = 0;
        for (int a = 0; a < rank; ++a) {
          const long k = o_idx[a] * ax[a].taps + t_idx[a];
          w *= ax[a].w[k];
          off += ax[a].idx[k] * in_stride[a];
        }
        acc += w * x[off];
        for (int a = rank - 1; a >= 0 && ++t_idx[a] == ax[a].taps; --a) t_idx[a] = 0;
      }
    }
    y[e] = outside ? ev : acc;
    for (int a = rank - 1; a >= 0 && ++o_idx[a] == out_shape[a]; --a) o_idx[a] = 0;
  }
  rowops::detail::epilogue_pass(y, out_n / out_shape[rank - 1], out_shape[rank - 1], ep);
}

}  // namespace dnnf::irr
