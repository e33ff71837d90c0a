// The depthwise path of conv_nhwc.h (group == C == M, channels last): the per-thread block
// helpers every NHWC path shares (tile_scratch, finish_block), the interior kernels that keep
// a window's input vectors in registers, and one output row (depthwise_row) or two at once
// (depthwise_row_pair). conv_nhwc.h splits the rows among threads.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "conv.h"

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
            if (out.act == 3) r = simd::v_mul(r, simd::v_sigmoid(r));
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
                      const Ep& ep, int done_end = -1) {
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
  int ox = std::max(lo, done_end);  // [lo, done_end): computed and stored already (depthwise_row_pair)
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
          ox = depthwise_interior<KXc, SXc, 4, 2>(rows, tap0, nr, wt, C, px, ox, hi, buf, pf, npf,
                                                  y + row0 * C, direct);
          return;
        }
      }
      ox = depthwise_interior<KXc, SXc>(rows, tap0, nr, wt, C, px, ox, hi, buf, pf, npf, y + row0 * C,
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

// Two output rows of a 3x3, stride-1 depthwise convolution at once (AVX-512: 16 sums and the
// 9 weight vectors fit its 32 registers): the four input rows the two windows span are read
// once, each input vector feeding up to six FMAs, instead of three rows per output row, and
// the epilogue (bias, residual, ReLU or clip) applied in registers before the store. One
// output row at a time spent most of its time outside the FMAs: 150x150x32 went from 425 to
// 250 us, 19x19x512 from 128 to 99 (Xeon, 1 thread; benchmarks/README, "depthwise row pairs").
// pf[0, npf): the input rows the next pair adds, prefetched a little per channel vector.
template <int U = 8>
int depthwise_interior_pair(const float* const* rows, const float* wt, int C, int px, int ox, int hi,
                            const DwOut& o0, const DwOut& o1, const float* const* pf, int npf) {
  constexpr int W = kVecWidth;
  const int nvk = C / W;
  const long bstep = static_cast<long>(C) * sizeof(float);
  const int lines = U * C / 16, per = (lines + nvk - 1) / nvk;  // prefetched lines per channel vector
  for (; ox + U <= hi; ox += U) {
    for (int cv = 0; cv < nvk; ++cv) {
      const int c0 = cv * W;
      for (int q = 0; q < npf; ++q) {
        const float* base = pf[q] + static_cast<long>(ox - px) * C;
        for (int l = cv * per, le = std::min(l + per, lines); l < le; ++l) __builtin_prefetch(base + l * 16L, 0, 2);
      }
      vf a0[U], a1[U], w[3][3];
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) a0[u] = a1[u] = simd::v_zero();
#pragma GCC unroll 3
      for (int ky = 0; ky < 3; ++ky)
#pragma GCC unroll 3
        for (int kx = 0; kx < 3; ++kx) w[ky][kx] = simd::v_loadu(wt + static_cast<long>(ky * 3 + kx) * C + c0);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {  // input row r: tap row r of output row 0, r - 1 of row 1
        const char* xp = reinterpret_cast<const char*>(rows[r] + static_cast<long>(ox - px) * C + c0);
#pragma GCC unroll 10
        for (int i = 0; i < U + 2; ++i) {
          const vf xv = simd::v_loadu(reinterpret_cast<const float*>(xp));
#pragma GCC unroll 8
          for (int u = 0; u < U; ++u) {
            const int k = i - u;
            if (k < 0 || k >= 3) continue;
            if (r < 3) a0[u] = simd::v_fma(xv, w[r][k], a0[u]);
            if (r >= 1) a1[u] = simd::v_fma(xv, w[r - 1][k], a1[u]);
          }
          xp += bstep;
          __asm__("" : "+r"(xp));  // keep the step an add on one register
        }
      }
      auto store = [&](const DwOut& out, const vf* acc) {
        const vf lo = simd::v_set1(out.lo), hv = simd::v_set1(out.hi), b = simd::v_loadu(out.bias + c0);
#pragma GCC unroll 8
        for (int u = 0; u < U; ++u) {
          vf v = simd::v_add(acc[u], b);
          if (out.res) v = simd::v_add(v, simd::v_loadu(out.res + (out.row0 + ox + u + out.r0) * out.res_ld + c0));
          if (out.act == 1) v = simd::v_relu(v);
          if (out.act == 2) v = simd::v_min(hv, simd::v_max(lo, v));
          if (out.act == 3) v = simd::v_mul(v, simd::v_sigmoid(v));
          simd::v_storeu(out.y + static_cast<long>(ox + u) * C + c0, v);
        }
      };
      store(o0, a0);
      store(o1, a1);
    }
  }
  return ox;
}

// Whether output rows oy and oy + 1 of a depthwise convolution can be computed as a pair: a
// 3x3 stride-1 window, whole channel vectors, AVX-512, and both windows inside the input's
// rows (no row of padding). Their four input rows start at oy - pad.
inline bool depthwise_pair_applies(const window::Geom& g, int C, int oy) {
  if (kVecWidth != 16 || g.k[0] != 1 || g.k[1] != 3 || g.k[2] != 3 || g.stride[1] != 1 || g.stride[2] != 1 ||
      g.dil[1] != 1 || g.dil[2] != 1 || C % kVecWidth != 0 || oy + 1 >= g.out[1])
    return false;
  const int iy0 = oy - g.pad[1];
  return iy0 >= 0 && iy0 + 3 < g.in[1];
}

// Output rows oy and oy + 1 of image n (plane oz) from their four input rows (rows[0, 4), each
// starting at its pixel 0; depthwise_pair_applies must hold) where the epilogue stores from
// registers (dw_out): the pixels with whole windows through depthwise_interior_pair, the rest
// of each row as depthwise_row_at does them. pf[0, npf): rows to prefetch for the next pair.
// False, with nothing done, for an epilogue that does not store from registers.
template <class Ep>
bool depthwise_row_pair_at(const window::Geom& g, const float* const* rows, const float* const* pf, int npf,
                           const float* wt, int C, long n, int oz, int oy, float* y, const Ep& ep) {
  if constexpr (kVecWidth != 16) {
    return false;
  } else {
    const int OX = g.out[2], px = g.pad[2];
    const long row0 = ((n * g.out[0] + oz) * static_cast<long>(g.out[1]) + oy) * OX;
    const DwOut o0 = dw_out(ep, y + row0 * C, row0), o1 = dw_out(ep, y + (row0 + OX) * C, row0 + OX);
    if (!o0.y || !o1.y) return false;
    int lo = 0, hi = OX;
    while (lo < OX && lo - px < 0) ++lo;
    while (hi > lo && hi + 1 - px >= g.in[2]) --hi;  // pixel hi - 1 reads input hi + 1 - px
    const int done = depthwise_interior_pair(rows, wt, C, px, lo, hi, o0, o1, pf, npf);
    const int tap0[3] = {0, 3, 6};
    depthwise_row_at(g, rows, tap0, 3, nullptr, 0, wt, C, n, oz, oy, y, ep, done);
    depthwise_row_at(g, rows + 1, tap0, 3, nullptr, 0, wt, C, n, oz, oy + 1, y, ep, done);
    return true;
  }
}

// The same, reading the rows from the whole input x. False, with nothing done, where the pair
// does not apply.
template <class Ep>
bool depthwise_row_pair(const window::Geom& g, const float* x, const float* wt, int C, long n, int oz, int oy,
                        float* y, const Ep& ep) {
  const int iz = oz * g.stride[0] - g.pad[0];
  if (!depthwise_pair_applies(g, C, oy) || iz < 0 || iz >= g.in[0]) return false;
  const int iy0 = oy - g.pad[1];
  auto row = [&](int iy) { return x + ((n * g.in[0] + iz) * static_cast<long>(g.in[1]) + iy) * g.in[2] * C; };
  const float* rows[4] = {row(iy0), row(iy0 + 1), row(iy0 + 2), row(iy0 + 3)};
  const float* pf[2];
  int npf = 0;
  for (int iy = iy0 + 4; iy < iy0 + 6 && iy < g.in[1] && oy + 2 < g.out[1]; ++iy) pf[npf++] = row(iy);
  return depthwise_row_pair_at(g, rows, pf, npf, wt, C, n, oz, oy, y, ep);
}

}  // namespace nhwc_detail

}  // namespace dnnf::conv
