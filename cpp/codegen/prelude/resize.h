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
#include "resize_taps.h"

namespace dnnf::irr {

namespace detail {

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
