// Convolution with the channels last (the internal NhwcConv that the inter-block layout pass,
// rewrite/layout.cc, puts where it pays): x [N, spatial..., C], w in ONNX's layout
// [M, C/group, k...], y [N, spatial out..., M]. ConvShape as in conv.h. The epilogue view is
// y as [N * prod(out), M]: row = output pixel, col = output channel (the GEMM's own view), so
// a per-channel bias is a column broadcast. Paths:
//   depthwise (group == C == M)   vectors along the channels, four output pixels at a time
//                                 with each tap's weight vector loaded once; stride 2 costs
//                                 nothing extra (no deinterleave, unlike NCHW)
//   1x1, stride 1, no padding     one GEMM: A = x as [pixels, C], B = W^T packed once
//   3x3, stride 1, >= 32 channels Winograd F(2x2, 3x3) (conv_winograd.h): 2.25x fewer
//                                 multiply-adds, in 16 GEMMs between cheap transforms
//                                 (3-D: a 3x3 plane, any depth kernel and stride)
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

namespace dnnf::conv {

namespace nhwc_detail {

inline float* tile_scratch(size_t n) {  // per thread, only grows
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Applies the epilogue to a block of finished values, buf [m rows of nvk vectors], and
// stores it to c (ldc) unless the epilogue stores itself: one call of a generated (EpDyn)
// epilogue per block instead of one per vector.
template <class Ep>
void finish_block(const Ep& ep, const float* buf, int nvk, float* c, long ldc, int m, int n, long row0, long col0) {
  constexpr int W = kVecWidth;
  if constexpr (gemm::IsEpDyn<Ep>::value) {
    ep.tile(ep.f, buf, nvk, c, ldc, m, n, false, row0 + ep.r0, col0);
  } else {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j * W < n; ++j) {
        const int nn = std::min(W, n - j * W);
        vf v = simd::v_loadu(buf + (static_cast<long>(i) * nvk + j) * W);
        ep.apply(v, row0 + i, col0 + j * W, nn);
        if constexpr (!gemm::ep_stores<Ep>) gemm::store_lanes(c + i * ldc + j * W, v, nn);
      }
  }
}

// The input rows that output row (image n, oz, oy) reads: for each (kz, ky) tap inside the
// input, the row's pointer and the index of its first tap (kx = 0).
inline void window_rows(const window::Geom& g, const float* x, int C, long n, int oz, int oy,
                        std::vector<const float*>& rows, std::vector<int>& tap0) {
  rows.clear();
  tap0.clear();
  for (int kz = 0; kz < g.k[0]; ++kz) {
    const int iz = oz * g.stride[0] - g.pad[0] + kz * g.dil[0];
    if (iz < 0 || iz >= g.in[0]) continue;
    for (int ky = 0; ky < g.k[1]; ++ky) {
      const int iy = oy * g.stride[1] - g.pad[1] + ky * g.dil[1];
      if (iy < 0 || iy >= g.in[1]) continue;
      rows.push_back(x + ((n * g.in[0] + iz) * static_cast<long>(g.in[1]) + iy) * g.in[2] * C);
      tap0.push_back((kz * g.k[1] + ky) * g.k[2]);
    }
  }
}

// The depthwise interior for a kernel width and stride known at compile time (dilation 1):
// U output pixels per channel vector, and along a row each input vector is loaded once and
// used by every pixel whose window covers it ((U - 1) * SX + KX loads feed U * KX FMAs,
// where the generic loop loads U * KX), with the row's KX weight vectors loaded once. The
// sums go to the row's block buffer like the generic loop's. Returns the first pixel it did
// not compute.
//
// pf[0 .. npf) are the input rows the next output row adds to the window (nullptr: none): the
// part of them under this block's pixels is prefetched a little per channel vector, so that
// a plane larger than the caches (batches) streams from memory while this row computes
// instead of stalling the next one (the access pattern, C-strided pixels over three rows,
// is one the hardware prefetchers follow poorly).
// Where the interior stores: the row's block buffer (finished later by the caller), or, for
// the epilogue the code generator recognises (gemm_kernel.h EpDyn::act), straight to the
// output row with the bias, residual and activation applied in registers: the buffer's trip
// through L1 (evicted by the input by then, on wide channel counts) and the finish pass cost
// a third of a 19x19x512 depthwise.
struct DwOut {
  float* y = nullptr;  // the output row's first pixel (y + row0 * C); null: the buffer
  long row0 = 0;       // the output row's first pixel index (for the residual)
  const float* bias = nullptr;
  const float* res = nullptr;
  long res_ld = 0, r0 = 0;
  int act = 0;
  float lo = 0, hi = 0;
};
template <class Ep>
DwOut dw_out(const Ep& ep, float* y, long row0) {
  if constexpr (gemm::IsEpDyn<Ep>::value && !gemm::ep_stores<Ep>) {
    if (ep.act >= 0 && ep.bias) return {y, row0, ep.bias, ep.res, ep.res_ld, ep.r0, ep.act, ep.lo, ep.hi};
  }
  (void)ep;
  (void)y;
  return {nullptr, row0};
}

// CV channel vectors per step: U * CV sums in registers. CV = 2 where a vector is half a cache
// line (AVX2): both halves of every line the step loads are used while it is in L1. With one
// vector per step, a 512-channel plane puts the 2 KiB-apart pixels of a step in two L1 sets,
// more lines than their ways hold, so the next channel vector fetched the same lines again
// from L2 or L3.
template <int KX, int SX, int U = 8, int CV = 1>
int depthwise_interior(const float* const* rows, const int* tap0, int nr, const float* wt, int C, int px,
                       int ox, int hi, float* buf, const float* const* pf = nullptr, int npf = 0,
                       const float* pf_out = nullptr, const DwOut& out = {}) {
  constexpr int W = kVecWidth, NIN = (U - 1) * SX + KX;
  const int nvk = C / W;
  if (nvk % CV) return ox;
  const long cstep = C;
  // Channel vector cv's share of the `floats` from `base`, in 64-byte lines.
  auto share = [nvk](const float* base, int floats, int cv, auto write) {
    const int lines = floats / 16, per = (lines + nvk - 1) / nvk;
    for (int l = cv * per, le = std::min(l + per, lines); l < le; ++l) __builtin_prefetch(base + l * 16L, decltype(write)::value, 2);
  };
  using Read = std::integral_constant<int, 0>;
  using Write = std::integral_constant<int, 1>;
  for (; ox + U <= hi; ox += U) {
    for (int cv = 0; cv < nvk; cv += CV) {
      const int c0 = cv * W;
      for (int v = 0; v < CV; ++v) {
        for (int q = 0; q < npf; ++q) share(pf[q] + static_cast<long>(ox * SX - px) * C, U * SX * C, cv + v, Read{});
        if (pf_out) share(pf_out + static_cast<long>(ox) * C, U * C, cv + v, Write{});
      }
      vf a[U][CV];
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u)
#pragma GCC unroll 4
        for (int v = 0; v < CV; ++v) a[u][v] = simd::v_zero();
      for (int r = 0; r < nr; ++r) {
        // One pointer stepped C floats per input pixel (not an offset register per pixel: with
        // NIN of them GCC ran out of general registers and spilled them to vector ones).
        const char* xp = reinterpret_cast<const char*>(rows[r] + static_cast<long>(ox * SX - px) * C + c0);
        const char* wp = reinterpret_cast<const char*>(wt + static_cast<long>(tap0[r]) * C + c0);
        const long bstep = cstep * static_cast<long>(sizeof(float));
        vf w[KX][CV];
#pragma GCC unroll 8
        for (int k = 0; k < KX; ++k, wp += bstep)
#pragma GCC unroll 4
          for (int v = 0; v < CV; ++v) w[k][v] = simd::v_loadu(reinterpret_cast<const float*>(wp) + v * W);
#pragma GCC unroll 32
        for (int i = 0; i < NIN; ++i) {
#pragma GCC unroll 4
          for (int v = 0; v < CV; ++v) {
            const vf xv = simd::v_loadu(reinterpret_cast<const float*>(xp) + v * W);
#pragma GCC unroll 8
            for (int u = 0; u < U; ++u) {
              const int k = i - u * SX;
              if (k >= 0 && k < KX) a[u][v] = simd::v_fma(xv, w[k][v], a[u][v]);
            }
          }
          xp += bstep;
          __asm__("" : "+r"(xp));  // keep the step an add on one register
        }
      }
      if (out.y) {
        const vf lo = simd::v_set1(out.lo), hv = simd::v_set1(out.hi);
#pragma GCC unroll 4
        for (int v = 0; v < CV; ++v) {
          const vf b = simd::v_loadu(out.bias + c0 + v * W);
#pragma GCC unroll 8
          for (int u = 0; u < U; ++u) {
            vf r = simd::v_add(a[u][v], b);
            if (out.res) r = simd::v_add(r, simd::v_loadu(out.res + (out.row0 + ox + u + out.r0) * out.res_ld + c0 + v * W));
            if (out.act == 1) r = simd::v_relu(r);
            if (out.act == 2) r = simd::v_min(hv, simd::v_max(lo, r));
            simd::v_storeu(out.y + static_cast<long>(ox + u) * C + c0 + v * W, r);
          }
        }
        continue;
      }
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u)
#pragma GCC unroll 4
        for (int v = 0; v < CV; ++v) simd::v_storeu(buf + (static_cast<long>(ox + u) * nvk + cv + v) * W, a[u][v]);
    }
  }
  return ox;
}

// Whether input pixels `step` floats apart fall in at most two L1 sets (the step a multiple of
// half an L1 way: 2 KiB on a 32 KiB 8-way L1, i.e. 512 channels, or 256 at stride 2), so that
// one step of depthwise_interior's 8 pixels x 3 rows (30 lines) cannot stay in L1 for the next
// channel vector: there, two channel vectors a step (a whole line) instead. Measured (AVX2 Zen
// 3, 1 thread, median of interleaved per-round ratios, benchmarks-style driver): 512ch 19x19
// 0.90x the time, 1024ch 10x10 0.73x, 256ch 38x38 stride 2 0.84x, 512ch 19x19 stride 2 0.65x;
// on other shapes (32-384 and 576-960 channels) it took 1.01-1.24x, so they keep one.
inline bool dw_aliases(long step) {
  static const long half_way = [] {
    long assoc = 8;
#ifdef _SC_LEVEL1_DCACHE_ASSOC
    if (const long a = sysconf(_SC_LEVEL1_DCACHE_ASSOC); a > 0) assoc = a;
#endif
    return std::max<long>(64, gemm::cache_bytes(1) / assoc / 2);
  }();
  return (step * static_cast<long>(sizeof(float))) % half_way == 0;
}

// Depthwise: one output row (image n, oz, oy) over channels [0, C), computed into a
// per-thread block of OX x nvk vectors, then finished in one call. wt is [taps, C];
// rows[0, nr) are the input rows the window of output row (n, oz, oy) reads, each starting at
// its pixel 0 with pixels C floats apart, tap0 their first taps (window_rows); pf[0, npf) the
// rows to prefetch for the next output row.
template <class Ep>
void depthwise_row_at(const window::Geom& g, const float* const* rows, const int* tap0, int nr,
                      const float* const* pf, int npf, const float* wt, int C, long n, int oz, int oy, float* y,
                      const Ep& ep) {
  constexpr int W = kVecWidth, U = 4;  // U output pixels share each weight load
  const int OX = g.out[2], KX = g.k[2], sx = g.stride[2], dx = g.dil[2], px = g.pad[2];
  const int nvk = (C + W - 1) / W;
  // Output columns whose whole window is inside the input row: [lo, hi).
  const long row0 = ((n * g.out[0] + oz) * static_cast<long>(g.out[1]) + oy) * OX;
  int lo = 0, hi = OX;
  while (lo < OX && lo * sx - px < 0) ++lo;
  while (hi > lo && (hi - 1) * sx - px + (KX - 1) * dx >= g.in[2]) --hi;
  float* buf = tile_scratch(static_cast<size_t>(OX) * nvk * W);
  auto out = [&](int ox, int cv) { return buf + (static_cast<long>(ox) * nvk + cv) * W; };
  auto edge = [&](int ox, int cv0) {  // one pixel, bounds-checked, channel vectors from cv0
    const int ix0 = ox * sx - px;
    // Whole vectors: the taps inside the row found once, plain loads (the masked, per-tap
    // checked loop below took 3 of 7 pixels of a 7x7 plane: 960ch 7x7 28 -> 23 us, 576ch 14x14
    // s2 18 -> 14 us, 512ch 19x19 87 -> 80 us; Xeon, AVX-512, 1 thread).
    if (C % W == 0) {
      int ka = 0, kb = KX;
      while (ka < KX && ix0 + ka * dx < 0) ++ka;
      while (kb > ka && ix0 + (kb - 1) * dx >= g.in[2]) --kb;
      for (int cv = cv0; cv * W < C; ++cv) {
        const int c0 = cv * W;
        vf acc = simd::v_zero();
        for (int r = 0; r < nr; ++r) {
          const float* xr = rows[r] + static_cast<long>(ix0) * C + c0;
          const float* wr = wt + static_cast<long>(tap0[r]) * C + c0;
          for (int kx = ka; kx < kb; ++kx)
            acc = simd::v_fma(simd::v_loadu(xr + static_cast<long>(kx) * dx * C),
                              simd::v_loadu(wr + static_cast<long>(kx) * C), acc);
        }
        simd::v_storeu(out(ox, cv), acc);
      }
      return;
    }
    for (int c0 = cv0 * W, cv = cv0; c0 < C; c0 += W, ++cv) {
      const int nc = std::min(W, C - c0);
      vf acc = simd::v_zero();
      for (int r = 0; r < nr; ++r) {
        for (int kx = 0; kx < KX; ++kx) {
          const int ix = ix0 + kx * dx;
          if (ix < 0 || ix >= g.in[2]) continue;
          const vf w = gemm::load_lanes(wt + static_cast<long>(tap0[r] + kx) * C + c0, nc);
          acc = simd::v_fma(gemm::load_lanes(rows[r] + static_cast<long>(ix) * C + c0, nc), w, acc);
        }
      }
      simd::v_storeu(out(ox, cv), acc);
    }
  };
  for (int ox = 0; ox < lo; ++ox) edge(ox, 0);
  int ox = lo;
  // Interior: U pixels at a time, all channel vectors of them before moving on, so the
  // windows they read stay in L1; the channel tail (C % W) goes through edge().
  const int full = C / W;
  const long step = static_cast<long>(sx) * C;
  // The common shapes, specialised (the pixels they leave go through the loop below).
  const DwOut direct = dw_out(ep, y + row0 * C, row0);
  if (full * W == C && dx == 1) {
    auto spec = [&](auto kx, auto sxc) {
      constexpr int KXc = decltype(kx)::value, SXc = decltype(sxc)::value;
      if constexpr (W == 8 && KXc == 3) {  // AVX2: half a line per vector
        if (full % 2 == 0 && dw_aliases(static_cast<long>(SXc) * C)) {
          ox = depthwise_interior<KXc, SXc, 4, 2>(rows, tap0, nr, wt, C, px, lo, hi, buf, pf, npf,
                                                  y + row0 * C, direct);
          return;
        }
      }
      ox = depthwise_interior<KXc, SXc>(rows, tap0, nr, wt, C, px, lo, hi, buf, pf, npf, y + row0 * C,
                                        direct);
    };
    using I1 = std::integral_constant<int, 1>;
    using I2 = std::integral_constant<int, 2>;
    using I3 = std::integral_constant<int, 3>;
    using I5 = std::integral_constant<int, 5>;
    if (KX == 3 && sx == 1) spec(I3{}, I1{});
    else if (KX == 3 && sx == 2) spec(I3{}, I2{});
    else if (KX == 5 && sx == 1) spec(I5{}, I1{});
    else if (KX == 5 && sx == 2) spec(I5{}, I2{});
  }
  const int interior_end = ox;  // pixels [lo, interior_end) went through depthwise_interior
  for (; ox + U <= hi && full > 0; ox += U) {
    for (int cv = 0; cv < full; ++cv) {
      const int c0 = cv * W;
      vf a0 = simd::v_zero(), a1 = a0, a2 = a0, a3 = a0;
      for (int r = 0; r < nr; ++r) {
        const float* xp = rows[r] + static_cast<long>(ox * sx - px) * C + c0;
        const float* wp = wt + static_cast<long>(tap0[r]) * C + c0;
        for (int kx = 0; kx < KX; ++kx, xp += static_cast<long>(dx) * C, wp += C) {
          const vf w = simd::v_loadu(wp);
          a0 = simd::v_fma(simd::v_loadu(xp), w, a0);
          a1 = simd::v_fma(simd::v_loadu(xp + step), w, a1);
          a2 = simd::v_fma(simd::v_loadu(xp + 2 * step), w, a2);
          a3 = simd::v_fma(simd::v_loadu(xp + 3 * step), w, a3);
        }
      }
      simd::v_storeu(out(ox, cv), a0);
      simd::v_storeu(out(ox + 1, cv), a1);
      simd::v_storeu(out(ox + 2, cv), a2);
      simd::v_storeu(out(ox + 3, cv), a3);
    }
    if (full * W < C) {
      for (int u = 0; u < U; ++u) edge(ox + u, full);
    }
  }
  for (; ox < OX; ++ox) edge(ox, 0);
  if (direct.y && interior_end > lo) {  // [lo, interior_end) is stored already
    finish_block(ep, buf, nvk, y + row0 * C, C, lo, C, row0, 0);
    finish_block(ep, buf + static_cast<long>(interior_end) * nvk * W, nvk, y + (row0 + interior_end) * C, C,
                 OX - interior_end, C, row0 + interior_end, 0);
    return;
  }
  finish_block(ep, buf, nvk, y + row0 * C, C, OX, C, row0, 0);
}

// Depthwise: one output row (image n, oz, oy) over channels [0, C), computed into a
// per-thread block of OX x nvk vectors, then finished in one call. wt is [taps, C].
template <class Ep>
void depthwise_row(const window::Geom& g, const float* x, const float* wt, int C, long n, int oz,
                   int oy, float* y, const Ep& ep) {
  thread_local std::vector<const float*> rows;
  thread_local std::vector<int> tap0;
  window_rows(g, x, C, n, oz, oy, rows, tap0);
  // The rows the next output row of this image adds (below the window's last): prefetched.
  const float* pf[4];
  int npf = 0;
  if (oy + 1 < g.out[1] && g.k[0] == 1) {
    const int last = oy * g.stride[1] - g.pad[1] + (g.k[1] - 1) * g.dil[1];
    for (int ky = 0; ky < g.k[1] && npf < 4; ++ky) {
      const int iy = (oy + 1) * g.stride[1] - g.pad[1] + ky * g.dil[1];
      if (iy > last && iy >= 0 && iy < g.in[1])
        pf[npf++] = x + ((n * g.in[0] + oz * g.stride[0] - g.pad[0]) * static_cast<long>(g.in[1]) + iy) * g.in[2] * C;
    }
  }
  depthwise_row_at(g, rows.data(), tap0.data(), static_cast<int>(rows.size()), pf, npf, wt, C, n, oz, oy, y, ep);
}

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
      depthwise_row(g, x, wt, s.C, r / (static_cast<long>(g.out[0]) * g.out[1]), oz, oy, y, ep);
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
}  // namespace nhwc_detail

// Weights prepared once for one shape: the depthwise path's [taps, C] copy, W^T [C, M]
// packed as a GEMM B for the pointwise path, or the direct kernel's packing otherwise.
class PackedNhwcWeights {
 public:
  PackedNhwcWeights(const ConvShape& s, const float* w) : s_(s) {
    detail::check(s);
    const window::Geom g = detail::geom(s);
    const int taps = g.taps();
    if (s.planar_x) {  // a channels-first x: the direct kernel only
      if (s.group != 1) throw std::invalid_argument("conv_nhwc: a channels-first input needs one group");
      direct_ = DirectWeights(s, w);
    } else if (wino::chosen(s)) {
      wino_ = std::make_unique<wino::Weights>(s, w);
    } else if (detail::is_depthwise(s)) {
      depthwise_.resize(static_cast<size_t>(taps) * s.C);
      for (int c = 0; c < s.C; ++c)
        for (int t = 0; t < taps; ++t) depthwise_[static_cast<size_t>(t) * s.C + c] = w[static_cast<long>(c) * taps + t];
    } else if (pointwise_gemm(s)) {
      gemm_ = gemm::PackedB(w, 1, s.C, s.C, s.M);  // B[c, m] = w[m, c]
    } else {
      direct_ = DirectWeights(s, w);
    }
  }
  // For an input in channel segments (`segments`: their channel counts; one group): the
  // direct kernel's packing with chunks inside the segments, whatever the kernel size.
  PackedNhwcWeights(const ConvShape& s, const float* w, const std::vector<int>& segments)
      : s_(s), segmented_(true) {
    detail::check(s);
    if (s.group != 1) throw std::invalid_argument("conv_nhwc: channel segments need one group");
    direct_ = DirectWeights(s, w, segments);
  }
  // 1x1, stride 1, no padding, one group: a plain GEMM over the pixels.
  static bool pointwise_gemm(const ConvShape& s) {
    return s.group == 1 && detail::is_pointwise(detail::geom(s));
  }
  bool fits(const ConvShape& s) const {
    bool same = s.nd == s_.nd && s.C == s_.C && s.M == s_.M && s.group == s_.group && s.planar_x == s_.planar_x;
    for (int i = 0; i < s.nd && same; ++i) same = s.k[i] == s_.k[i];
    return same && pointwise_gemm(s) == pointwise_gemm(s_) && (!wino_ || wino::applies(s));
  }
  bool segmented() const { return segmented_; }
  const wino::Weights* winograd() const { return wino_.get(); }
  const float* depthwise() const { return depthwise_.data(); }
  const gemm::PackedBView& gemm() const { return gemm_.view(); }
  const DirectWeights& direct() const { return direct_; }

 private:
  ConvShape s_;
  bool segmented_ = false;
  std::vector<float> depthwise_;
  std::unique_ptr<wino::Weights> wino_;
  gemm::PackedB gemm_;
  DirectWeights direct_;
};

template <class Ep = gemm::EpNone>
void conv_nhwc_f32(const ConvShape& s, const float* x, const PackedNhwcWeights& w, float* y,
                   const Ep& ep = {}) {
  if (!w.fits(s) || w.segmented()) throw std::invalid_argument("conv_nhwc: weights were packed for another shape");
  const window::Geom g = detail::geom(s);
  const long pixels = static_cast<long>(s.N) * g.out_plane();
  const long ldy = s.ldy ? s.ldy : s.M;
  if (ldy < s.M) throw std::invalid_argument("conv_nhwc: output pixels closer than the output channels");
  if (s.planar_x) {  // x channels first: the direct kernel gathers its windows (PackedNhwcWeights)
    conv_direct_f32(s, x, w.direct(), y, ep);
    return;
  }
  if (const wino::Weights* ww = w.winograd()) {
    wino::run(s, x, *ww, [&](const float* buf, int nvk, int m, long row0) {
      nhwc_detail::finish_block(ep, buf, nvk, y + row0 * ldy, ldy, m, s.M, row0, 0);
    });
    return;
  }
  if (detail::is_depthwise(s)) {
    if (ldy != s.M) throw std::invalid_argument("conv_nhwc: the depthwise path writes a dense output");
    nhwc_detail::depthwise_nhwc(s, g, x, w.depthwise(), y, ep, [](long) {});
    return;
  }
  if (PackedNhwcWeights::pointwise_gemm(s)) {
    gemm::gemm_f32_src(static_cast<int>(pixels), s.M, s.C, gemm::AView<>{x, s.C, 1}, w.gemm(), y, ldy, ep);
    return;
  }
  conv_direct_f32(s, x, w.direct(), y, ep);
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

// x as channel segments (a Concat along the channels read in place), weights packed for them.
template <class Ep = gemm::EpNone>
void conv_nhwc_f32(const ConvShape& s, const InputSegments& xs, const PackedNhwcWeights& w, float* y,
                   const Ep& ep = {}) {
  if (!w.segmented() || !w.fits(s) || s.planar_x)
    throw std::invalid_argument("conv_nhwc: weights were not packed for these channel segments");
  conv_direct_f32(s, xs, w.direct(), y, ep);
}

// Weights computed in the same run (e.g. W * s from fold_input_scale): packed per call.
template <class Ep = gemm::EpNone>
void conv_nhwc_f32(const ConvShape& s, const float* x, const float* w, float* y, const Ep& ep = {}) {
  conv_nhwc_f32(s, x, PackedNhwcWeights(s, w), y, ep);
}

}  // namespace dnnf::conv
