// Irregular anchors (paper §4.4, Many-to-Many anchors whose access pattern is data-dependent):
// TopK, GatherElements, NonMaxSuppression and RoiAlign, matching the NumPy oracle
// (dnnfusion/reference.py, _ref_nn.py) including its tie-breaking. Resize is in resize.h,
// GridSample in grid_sample.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cg_support.h"
#include "nms.h"
#include "resize_taps.h"
#include "rowops.h"

namespace dnnf::irr {

using gemm::EpNone;
using gemm::load_lanes;
using rowops::detail::emit;
using rowops::detail::parallel_rows;
using simd::kVecWidth;
using simd::vf;

namespace detail {
using taps_detail::rounded;
}  // namespace detail

// ---- TopK ---------------------------------------------------------------------------------
// values / indices are [outer, k, inner]. Order: largest (or smallest) first, equal values by
// lower index; NaN counts as larger than every number (first when largest, last otherwise),
// as NumPy's sort puts it. The result is always sorted, which `sorted = 0` also allows.
// T: float, or any integer type (no NaN: the comparisons below are then plain ones).
template <class T>
void topk(long outer, long axis, long inner, long k, bool largest, bool sorted, const T* x, T* values,
          int64_t* indices) {
  (void)sorted;
  if (k < 0 || k > axis) {
    throw std::invalid_argument("TopK: k = " + std::to_string(k) + " is outside [0, " +
                                std::to_string(axis) + "]");
  }
  if (k == 0 || outer <= 0 || inner <= 0) return;
  struct Item {
    T v;
    int64_t i;
  };
  auto before = [largest](const Item& a, const Item& b) {
    const bool an = a.v != a.v, bn = b.v != b.v;
    if (an != bn) return largest ? an : bn;
    if (!an && a.v != b.v) return largest ? a.v > b.v : a.v < b.v;
    return a.i < b.i;  // a strict total order: the selection is deterministic
  };
  parallel_rows(outer * inner, axis * 4, [&](long lo, long hi) {
    std::vector<Item> items(static_cast<size_t>(axis));
    for (long u = lo; u < hi; ++u) {
      const long o = u / inner, j = u % inner;
      const T* p = x + o * axis * inner + j;
      for (long a = 0; a < axis; ++a) items[a] = {p[a * inner], a};
      if (k == axis) {
        std::sort(items.begin(), items.end(), before);
      } else if (k * 8 < axis) {
        std::partial_sort(items.begin(), items.begin() + k, items.end(), before);
      } else {
        std::nth_element(items.begin(), items.begin() + (k - 1), items.end(), before);
        std::sort(items.begin(), items.begin() + (k - 1), before);
      }
      for (long t = 0; t < k; ++t) {
        values[(o * k + t) * inner + j] = items[t].v;
        indices[(o * k + t) * inner + j] = items[t].i;
      }
    }
  });
}

// ---- GatherElements -----------------------------------------------------------------------
// y[i...] = data[i... with i_axis replaced by index[i...]]; y has the index's shape, whose
// dims may be smaller than data's off the axis (ONNX). Negative indices count from the end;
// others throw std::out_of_range. T is any element type, I is int32_t or int64_t.
template <class T, class I>
void gather_elements(int rank, const long* data_shape, const long* index_shape, int axis,
                     const T* data, const I* index, T* y) {
  if (rank < 1 || rank > 8 || axis < 0 || axis >= rank) {
    throw std::invalid_argument("GatherElements: bad rank or axis");
  }
  long d_stride[8], n = 1;
  for (long a = rank - 1, s = 1; a >= 0; --a) {
    d_stride[a] = s;
    s *= data_shape[a];
  }
  for (int a = 0; a < rank; ++a) {
    if (a != axis && index_shape[a] > data_shape[a]) {
      throw std::invalid_argument("GatherElements: the index is longer than the data on axis " +
                                  std::to_string(a));
    }
    n *= index_shape[a];
  }
  const long len = data_shape[axis];
  auto wrap = [&](long v) {
    const long w = v < 0 ? v + len : v;
    if (w < 0 || w >= len) {
      throw std::out_of_range("GatherElements: index " + std::to_string(v) +
                              " is out of range for axis " + std::to_string(axis) +
                              " of size " + std::to_string(len));
    }
    return w;
  };
  long idx[8] = {};
  for (long e = 0; e < n; ++e) {  // odometer over the index's shape
    long off = 0;
    for (int a = 0; a < rank; ++a) off += (a == axis ? wrap(index[e]) : idx[a]) * d_stride[a];
    y[e] = data[off];
    for (int a = rank - 1; a >= 0 && ++idx[a] == index_shape[a]; --a) idx[a] = 0;
  }
}

// ---- RoiAlign (opset 16) ------------------------------------------------------------------
// x [N, C, H, W], rois [num, 4] as (x1, y1, x2, y2), batch_indices [num] -> y [num, C, oh,
// ow]. half_pixel = coordinate_transformation_mode "half_pixel" (else "output_half_pixel",
// which also forces malformed ROIs to 1x1); max_mode = mode "max", which follows onnxruntime
// (and the oracle): the maximum of the weighted corner terms, not of interpolated values.
// Sample coordinates and weights are computed in double, as the oracle does; accumulation is
// f32. Epilogue view [num * C * oh, ow].
namespace detail {

struct RoiTaps {  // per (bin, sample) along one axis: neighbour indices and weights
  std::vector<long> lo, hi;
  std::vector<float> wlo, whi;
};

// The oracle's _roi_samples: samples outside [-1, limit] get weight 0; clamped at the edge.
inline void roi_taps(double start, double size, long pooled, long grid, long limit, RoiTaps* t) {
  const size_t n = static_cast<size_t>(pooled * grid);
  t->lo.resize(n), t->hi.resize(n), t->wlo.resize(n), t->whi.resize(n);
  const double bin = size / static_cast<double>(pooled);
  for (long p = 0; p < pooled; ++p) {
    for (long g = 0; g < grid; ++g) {
      double pos = start + rounded(static_cast<double>(p) * bin) +
                   (static_cast<double>(g) + 0.5) * bin / static_cast<double>(grid);
      const double valid = (pos >= -1.0 && pos <= static_cast<double>(limit)) ? 1.0 : 0.0;
      pos = std::max(pos, 0.0);
      long lo = static_cast<long>(std::floor(pos)), hi = lo + 1;
      if (lo >= limit - 1) {
        lo = hi = limit - 1;
        pos = static_cast<double>(lo);
      }
      const double frac = pos - static_cast<double>(lo);
      const size_t k = static_cast<size_t>(p * grid + g);
      t->lo[k] = lo, t->hi[k] = hi;
      t->wlo[k] = static_cast<float>((1.0 - frac) * valid);
      t->whi[k] = static_cast<float>(frac * valid);
    }
  }
}

}  // namespace detail

// x is read through strides (elements): pixel (b, c, h, w) at x[b*sn + c*sc + h*sh + w*sw],
// so a channels-last feature map (sc == 1) is read in place, without the transpose back to
// channels first. The sample taps depend on the RoI only and are computed once per RoI.
// Channels last (mode avg), each tap is a run of C contiguous floats: a bin's samples
// accumulate as vectors over the channels into a [oh * ow, C] tile, then stored channels first.
// Either way every output is the oracle's sum, in its order.
template <class Ep = EpNone>
void roi_align_f32(long N, long C, long H, long W, const float* x, long num_rois,
                   const float* rois, const int64_t* batch_indices, long out_h, long out_w,
                   long sampling_ratio, float spatial_scale, bool half_pixel, bool max_mode,
                   long sn, long sc, long sh, long sw, float* y, const Ep& ep = {}) {
  for (long r = 0; r < num_rois; ++r) {
    if (batch_indices[r] < 0 || batch_indices[r] >= N) {
      throw std::out_of_range("RoiAlign: batch index " + std::to_string(batch_indices[r]) +
                              " is out of range for a batch of " + std::to_string(N));
    }
  }
  const double offset = half_pixel ? 0.5 : 0.0;
  const long bins = out_h * out_w;
  // The RoI's sample grid and taps along each axis.
  struct Roi {
    long gh, gw;
    float count;
  };
  auto setup = [&](long r, detail::RoiTaps* ty, detail::RoiTaps* tx) {
    const float* roi = rois + r * 4;
    const double ss = spatial_scale;
    using detail::rounded;
    const double x1 = rounded(roi[0] * ss) - offset, y1 = rounded(roi[1] * ss) - offset;
    double rw = rounded(roi[2] * ss) - offset - x1, rh = rounded(roi[3] * ss) - offset - y1;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    Roi g;
    g.gh = std::max(0L, sampling_ratio > 0 ? sampling_ratio : static_cast<long>(std::ceil(rh / out_h)));
    g.gw = std::max(0L, sampling_ratio > 0 ? sampling_ratio : static_cast<long>(std::ceil(rw / out_w)));
    detail::roi_taps(y1, rh, out_h, g.gh, H, ty);
    detail::roi_taps(x1, rw, out_w, g.gw, W, tx);
    g.count = static_cast<float>(std::max(g.gh * g.gw, 1L));
    return g;
  };
  if (sc == 1 && C >= kVecWidth && !max_mode) {  // max mode keeps the scalar NaN order
    parallel_rows(num_rois, bins * C * 16, [&](long lo, long hi) {
      detail::RoiTaps ty, tx;
      thread_local std::vector<float> tile;
      tile.resize(static_cast<size_t>(bins * C));
      for (long r = lo; r < hi; ++r) {
        const Roi g = setup(r, &ty, &tx);
        const float* img = x + batch_indices[r] * sn;
        for (long ph = 0; ph < out_h; ++ph) {
          for (long pw = 0; pw < out_w; ++pw) {
            float* t = tile.data() + (ph * out_w + pw) * C;
            for (long c0 = 0; c0 < C; c0 += kVecWidth) {
              const int n = static_cast<int>(std::min<long>(kVecWidth, C - c0));
              vf acc = simd::v_zero();
              for (long gy = 0; gy < g.gh; ++gy) {
                const size_t ky = static_cast<size_t>(ph * g.gh + gy);
                const float* rlo = img + ty.lo[ky] * sh + c0;
                const float* rhi = img + ty.hi[ky] * sh + c0;
                for (long gx = 0; gx < g.gw; ++gx) {
                  const size_t kx = static_cast<size_t>(pw * g.gw + gx);
                  const vf t0 = simd::v_mul(simd::v_set1(ty.wlo[ky] * tx.wlo[kx]), load_lanes(rlo + tx.lo[kx] * sw, n));
                  const vf t1 = simd::v_mul(simd::v_set1(ty.wlo[ky] * tx.whi[kx]), load_lanes(rlo + tx.hi[kx] * sw, n));
                  const vf t2 = simd::v_mul(simd::v_set1(ty.whi[ky] * tx.wlo[kx]), load_lanes(rhi + tx.lo[kx] * sw, n));
                  const vf t3 = simd::v_mul(simd::v_set1(ty.whi[ky] * tx.whi[kx]), load_lanes(rhi + tx.hi[kx] * sw, n));
                  acc = simd::v_add(acc, simd::v_add(simd::v_add(t0, t1), simd::v_add(t2, t3)));
                }
              }
              gemm::store_lanes(t + c0, simd::v_div(acc, simd::v_set1(g.count)), n);
            }
          }
        }
        float* yo = y + r * C * bins;  // [C, bins] from the [bins, C] tile
        for (long c = 0; c < C; ++c)
          for (long b = 0; b < bins; ++b) yo[c * bins + b] = tile[static_cast<size_t>(b * C + c)];
      }
    });
  } else {
    parallel_rows(num_rois, bins * C * 16, [&](long lo, long hi) {
      detail::RoiTaps ty, tx;
      for (long r = lo; r < hi; ++r) {
        const Roi g = setup(r, &ty, &tx);
        for (long ch = 0; ch < C; ++ch) {
          const float* img = x + batch_indices[r] * sn + ch * sc;
          float* yo = y + (r * C + ch) * bins;
          for (long ph = 0; ph < out_h; ++ph) {
            for (long pw = 0; pw < out_w; ++pw) {
              float acc = max_mode && g.gh * g.gw > 0 ? -std::numeric_limits<float>::infinity() : 0.0f;
              for (long gy = 0; gy < g.gh; ++gy) {
                const size_t ky = static_cast<size_t>(ph * g.gh + gy);
                const float* rlo = img + ty.lo[ky] * sh;
                const float* rhi = img + ty.hi[ky] * sh;
                for (long gx = 0; gx < g.gw; ++gx) {
                  const size_t kx = static_cast<size_t>(pw * g.gw + gx);
                  const float t0 = ty.wlo[ky] * tx.wlo[kx] * rlo[tx.lo[kx] * sw];
                  const float t1 = ty.wlo[ky] * tx.whi[kx] * rlo[tx.hi[kx] * sw];
                  const float t2 = ty.whi[ky] * tx.wlo[kx] * rhi[tx.lo[kx] * sw];
                  const float t3 = ty.whi[ky] * tx.whi[kx] * rhi[tx.hi[kx] * sw];
                  if (max_mode) {
                    acc = std::max({acc, t0, t1, t2, t3});
                  } else {
                    acc += (t0 + t1) + (t2 + t3);
                  }
                }
              }
              yo[ph * out_w + pw] = max_mode ? acc : acc / g.count;
            }
          }
        }
      }
    });
  }
  rowops::detail::epilogue_pass(y, num_rois * C * out_h, out_w, ep);
}

// ---- ScatterElements, ScatterND ---------------------------------------------------------------
// y = data, then each update combined into the element its indices name, in row-major order of
// the updates (with reduction None the last duplicate wins, as the NumPy oracle's loop). An
// index may be negative (counted from the end of its axis); one out of range is an error.
// T: any element type; I: int32_t or int64_t.
enum ScatterReduction : int { kScatterNone, kScatterAdd, kScatterMul, kScatterMax, kScatterMin };

namespace detail {
template <class T>
inline void scatter_combine(T& y, T u, int red) {
  switch (red) {
    case kScatterAdd: y = static_cast<T>(y + u); break;
    case kScatterMul: y = static_cast<T>(y * u); break;
    case kScatterMax: if (u != u || u > y) y = u; break;  // NaN wins, as np.maximum
    case kScatterMin: if (u != u || u < y) y = u; break;
    default: y = u;
  }
}
template <class T>
inline void scatter_copy(const T* data, long n, T* y) {
  if (y == data || n <= 0) return;
  parallel_rows(n, 1, [&](long lo, long hi) { std::copy(data + lo, data + hi, y + lo); });
}
}  // namespace detail

// ScatterND: m index tuples of k coordinates (axes of sizes dims[0..k), strides strides[0..k)),
// each naming a slice of s contiguous elements; updates [m, s].
template <class T, class I>
void scatter_nd(long m, long k, long s, const long* dims, const long* strides, const T* data, long n,
                const I* indices, const T* updates, T* y, int red) {
  detail::scatter_copy(data, n, y);
  for (long i = 0; i < m; ++i) {
    long off = 0;
    for (long c = 0; c < k; ++c)
      off += cg::wrap_index(static_cast<long>(indices[i * k + c]), dims[c], "ScatterND") * strides[c];
    for (long j = 0; j < s; ++j) detail::scatter_combine(y[off + j], updates[i * s + j], red);
  }
}

// ScatterElements: updates (and indices) of shape udims[0..rank), data's strides dstrides; the
// axis coordinate of update u is indices[u], of an axis of size axis_size. Indices wrap and are
// range-checked as Gather's (cg::wrap_index).
template <class T, class I>
void scatter_elements(long rank, const long* udims, const long* dstrides, long axis, long axis_size, const T* data,
                      long n, const I* indices, const T* updates, T* y, int red) {
  detail::scatter_copy(data, n, y);
  long total = 1;
  for (long d = 0; d < rank; ++d) total *= udims[d];
  for (long u = 0; u < total; ++u) {
    long rest = u, off = 0;
    for (long d = rank - 1; d >= 0; --d) {
      const long c = rest % udims[d];
      rest /= udims[d];
      off += (d == axis ? cg::wrap_index(static_cast<long>(indices[u]), axis_size, "ScatterElements") : c) * dstrides[d];
    }
    detail::scatter_combine(y[off], updates[u], red);
  }
}

}  // namespace dnnf::irr
