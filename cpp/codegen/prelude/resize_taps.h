// Resize's per-axis taps (pure C++, no SIMD): for each output index of an axis, the input
// indices and weights, built exactly as the oracle (_ref_nn.resize) builds its interpolation
// matrix. Shared by the CPU kernel (resize.h) and the OpenCL renderer, which bakes the tables
// into its program. Also `rounded`, which irregular.h's kernels use.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace dnnf::irr {

namespace taps_detail {
// Rounds a product to float before it meets an addition: keeps the compiler from fusing
// a * b + c into an FMA, where results must reproduce the oracle's float32 arithmetic.
inline float rounded(float v) {
  volatile float t = v;
  return t;
}
inline double rounded(double v) {
  volatile double t = v;
  return t;
}
}  // namespace taps_detail

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

using taps_detail::rounded;

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

}  // namespace detail

}  // namespace dnnf::irr
