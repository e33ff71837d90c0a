// The GEMM's ISA-level pieces, written once in the SIMD vocabulary: the register-blocked
// micro-kernel with its fused epilogue, and the packing of A (with the fused prologue) and B
// (paper §4.4: Many-to-Many anchors run on tuned micro-kernels).
//
// Packed layouts (the GEMM Layout note; gemm.h relies on them):
//   A, one k-block of kc (padded to kc_pad, a multiple of KU): panels of MR rows, each
//     kc_pad * MR floats, stored as [kc_pad / KU][MR][KU]. Within a KU-chunk a row's values
//     are contiguous, so packing row-major A is vector copies, and the micro-kernel finds
//     row i, step kk at the compile-time offset i * KU + kk.
//   B, one k-block: panels of NR columns, each kc_pad * NR floats, stored [kc_pad][NR].
//   Rows past M, columns past N and k past K are zeros (after the prologue, never through it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "simd.h"

namespace dnnf::gemm {

using simd::kVecWidth;
using simd::vf;

// Register tile per ISA: MR rows x NV vectors of C live in registers, plus NV vectors of B
// and one broadcast of A: 14*2 + 2 + 1 = 31 of 32 zmm; 6*2 + 2 + 1 = 15 of 16 ymm;
// 8*3 + 3 + 1 = 28 of 32 NEON q registers.
// KU is the k-chunk of the packed A layout. -DDNNF_GEMM_MR=/_NV=/_KU= override them (tuning
// only; the tests run the defaults).
#if defined(DNNF_ISA_AVX512)
inline constexpr int kTileDefault[3] = {14, 2, 16};
#elif defined(DNNF_ISA_AVX2)
inline constexpr int kTileDefault[3] = {6, 2, 8};
#elif defined(DNNF_ISA_NEON)
inline constexpr int kTileDefault[3] = {8, 3, 4};
#else
inline constexpr int kTileDefault[3] = {4, 4, 4};
#endif
#ifndef DNNF_GEMM_MR
#define DNNF_GEMM_MR kTileDefault[0]
#endif
#ifndef DNNF_GEMM_NV
#define DNNF_GEMM_NV kTileDefault[1]
#endif
#ifndef DNNF_GEMM_KU
#define DNNF_GEMM_KU kTileDefault[2]
#endif
inline constexpr int kMR = DNNF_GEMM_MR, kNV = DNNF_GEMM_NV, kKU = DNNF_GEMM_KU;
inline constexpr int kNR = kNV * kVecWidth;
static_assert(kKU % kVecWidth == 0, "a KU-chunk of A is whole vectors");

// Unroll of the k loop, and whether a tile of more than two rows prefetches its own B and A
// panels (a line per k-step). AVX-512: unroll 4 beat 1, 2 and 16 (full), and the prefetches
// helped (Xeon, below). AVX2 (Zen 3, 6x16 tile, KU = 8): the whole KU chunk unrolled, and no
// prefetches in the loop (they cost issue slots; the hardware prefetchers keep up with the
// tile's two streams). Interleaved runs of benchmarks/gemm/gemm_bench.cc built both ways
// (weights cold), median per-round speed-up: 1 thread 128x3072x768 1.38, 128x768x3072 1.38,
// 512^3 1.12, 196x576x96 1.27; 2 threads 1.33, 1.24, 1.31, 1.28. Tiles of one or two rows
// keep the B prefetch (they read B once, from memory). -DDNNF_GEMM_UNROLL= and
// -DDNNF_GEMM_TILE_PREFETCH=0/1 override both (tuning only).
#if defined(DNNF_ISA_AVX2)
#ifndef DNNF_GEMM_UNROLL
#define DNNF_GEMM_UNROLL 8
#endif
#ifndef DNNF_GEMM_TILE_PREFETCH
#define DNNF_GEMM_TILE_PREFETCH 0
#endif
#else
#ifndef DNNF_GEMM_UNROLL
#define DNNF_GEMM_UNROLL 4
#endif
#ifndef DNNF_GEMM_TILE_PREFETCH
#define DNNF_GEMM_TILE_PREFETCH 1
#endif
#endif
inline constexpr bool kInTilePrefetch = DNNF_GEMM_TILE_PREFETCH != 0;
#define DNNF_STR_(x) #x
#define DNNF_PRAGMA_UNROLL(n) _Pragma(DNNF_STR_(GCC unroll n))

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

// Loads n <= kVecWidth lanes: the plain load when the vector is full.
inline vf load_lanes(const float* p, int n) {
  return n == kVecWidth ? simd::v_loadu(p) : simd::v_load_tail(p, n);
}
inline void store_lanes(float* p, vf v, int n) {
  if (n == kVecWidth) {
    simd::v_storeu(p, v);
  } else {
    simd::v_store_tail(p, v, n);
  }
}

// The empty epilogue (gemm_epilogue.h has the others); the micro-kernel special-cases it.
struct EpNone {
  void apply(vf&, int, int, int) const {}
};

// The epilogue contract shared by every anchor kernel (GEMM, convolution, pooling, row ops):
// the anchor's output y is viewed as row-major [R, C]; for each output vector
// v = y[row, col .. col + n) (1 <= n <= kVecWidth, never crossing a row end) the kernel calls
// ep.apply(v, row, col, n) once, after the value is final, then stores v there unless the
// epilogue declares `static constexpr bool kStores = true` (it then writes its own outputs,
// e.g. through a transposed index map, and y is only scratch: it must still be a valid R*C
// buffer, since a GEMM with several k-blocks keeps partial sums in it).
template <class Ep, class = void>
struct EpStores : std::false_type {};
template <class Ep>
struct EpStores<Ep, std::void_t<decltype(Ep::kStores)>> : std::bool_constant<Ep::kStores> {};
template <class Ep>
inline constexpr bool ep_stores = EpStores<Ep>::value;

// A type-erased epilogue: generated kernels pass every fused epilogue as EpDyn<kStores>, so
// each anchor kernel (GEMM, convolution, ...) is compiled once per module, not once per
// block, which is what dominated cold compile time. The per-vector call (`vec`) serves the
// row kernels; the GEMM micro-kernel calls `tile` once per finished tile, so the indirect
// call is paid once per MR x NR outputs. r0 offsets rows (batched MatMul, conv groups).
template <bool S>
struct EpDyn {
  static constexpr bool kStores = S;
  void (*vec)(const void* f, vf& v, long row, long col, int n);
  // Rows [0, m) x columns [0, n) of a tile held in `tile` (nvk vectors per row):
  // adds C when load_c, applies the epilogue, stores into c (ldc) unless S.
  void (*tile)(const void* f, const float* tile, int nvk, float* c, long ldc, int m, int n,
               bool load_c, long row0, long col0);
  const void* f;
  long r0;
  // The common epilogue recognised by the code generator (cg::make_ep_affine), for kernels
  // to apply in registers, without the tile's trip through L1 and the indirect call:
  // v = act(v + bias[col] + res[row * res_ld + col]), res optional (null), act 0 none,
  // 1 v_relu, 2 v_min(hi, v_max(lo, v)) (Clip's spelling), 3 v_mul(v, v_sigmoid(v)) (Swish,
  // never with res); act -1: not recognised. It computes what f computes, in the same order.
  // The GEMM's register tile applies acts 0-2 and leaves 3 to f (a sigmoid inlined in every
  // tile shape would grow every module); the depthwise kernels apply all four (dw_out).
  const float* bias = nullptr;
  const float* res = nullptr;
  long res_ld = 0;
  int act = -1;
  float lo = 0.0f, hi = 0.0f;
  void apply(vf& v, long row, long col, int n) const { vec(f, v, row + r0, col, n); }
  // Whether the residual is the output itself (C at c, rows ldc apart): the code generator
  // gives them one buffer where the residual dies (a kernel storing partial sums must then
  // compute aside).
  bool res_is(const float* c, long ldc) const { return res && res + r0 * res_ld == c && res_ld == ldc; }
  // One row segment: the values src[0, n) (any alignment) are y[row, col0 .. col0 + n);
  // applies the epilogue and stores them to dst unless S. Row kernels (the window engine)
  // make one call per output row instead of one per vector: a one-row tile, so that each
  // generated epilogue is compiled into two functions, not three.
  void apply_run(const float* src, float* dst, int n, long row, long col0) const {
    tile(f, src, (n + kVecWidth - 1) / kVecWidth, dst, 0, 1, n, false, row + r0, col0);
  }
  EpDyn shifted(long rows) const {
    EpDyn e = *this;
    e.r0 += rows;
    return e;
  }
};
template <class Ep>
struct IsEpDyn : std::false_type {};
template <bool S>
struct IsEpDyn<EpDyn<S>> : std::true_type {};

// Stores a finished register tile acc (rows [0, m) x columns [0, n) of C at c, ldc), adding
// C when load_c; on the last k-block a real epilogue runs on it first. Shared by the GEMM
// micro-kernel and the direct convolution (conv_direct.h).
template <int MRK, int NVK, class Ep>
[[gnu::always_inline]] inline void finish_tile(const vf (&acc)[MRK][NVK], float* c, long ldc, int m, int n,
                                               bool load_c, bool last, const Ep& ep, long row0, long col0) {
  using namespace simd;
  constexpr int W = kVecWidth;
  // Constant trip counts with guards (not breaks), so the loops unroll and acc stays in
  // registers: a runtime index into acc would send the whole tile to the stack.
  constexpr bool kPlain = std::is_same_v<Ep, EpNone>;
  if (kPlain || !last) {
#pragma GCC unroll 32
    for (int i = 0; i < MRK; ++i) {
      if (i < m) {
        float* cr = c + i * ldc;
#pragma GCC unroll 8
        for (int j = 0; j < NVK; ++j) {
          int nn = std::min(n - j * W, W);
          if (nn > 0) {
            vf v = acc[i][j];
            if (load_c) v = v_add(v, load_lanes(cr + j * W, nn));
            store_lanes(cr + j * W, v, nn);
          }
        }
      }
    }
  } else {
    // One compiled form with the parts chosen per vector at run time (predictable branches):
    // a variant per (residual, act) in every tile shape cost generated modules a third more
    // compile time. Full tiles only (MR x NV); the other variants serve the edges of C.
    if constexpr (IsEpDyn<Ep>::value && !ep_stores<Ep> && MRK == kMR && NVK == kNV) {
      if (ep.act >= 0 && ep.act <= 2) {  // the recognised form, in registers (Swish: f)
        vf bv[NVK];
#pragma GCC unroll 8
        for (int j = 0; j < NVK; ++j) {
          const int nn = std::min(n - j * W, W);
          bv[j] = nn > 0 ? load_lanes(ep.bias + col0 + j * W, nn) : v_zero();
        }
        const vf lo = v_set1(ep.lo), hi = v_set1(ep.hi);
        const int act = ep.act;
#pragma GCC unroll 32
        for (int i = 0; i < MRK; ++i) {
          if (i < m) {
            float* cr = c + i * ldc;
            const float* rr = ep.res ? ep.res + (row0 + i + ep.r0) * ep.res_ld + col0 : nullptr;
#pragma GCC unroll 8
            for (int j = 0; j < NVK; ++j) {
              const int nn = std::min(n - j * W, W);
              if (nn > 0) {
                vf v = acc[i][j];
                if (load_c) v = v_add(v, load_lanes(cr + j * W, nn));
                v = v_add(v, bv[j]);
                if (rr) v = v_add(v, load_lanes(rr + j * W, nn));
                if (act == 1) v = v_relu(v);
                if (act == 2) v = v_min(hi, v_max(lo, v));
                store_lanes(cr + j * W, v, nn);
              }
            }
          }
        }
        return;
      }
    }
    // A real epilogue runs from an L1 copy of the tile in a plain loop: inlined once rather
    // than MRK * NVK times, which keeps generated kernels small and quick to compile; the
    // extra store and load per vector are noise next to kc FMAs per vector.
    alignas(64) float tile[MRK * NVK * W];
#pragma GCC unroll 32
    for (int i = 0; i < MRK; ++i) {
#pragma GCC unroll 8
      for (int j = 0; j < NVK; ++j) v_store(tile + (i * NVK + j) * W, acc[i][j]);
    }
    if constexpr (IsEpDyn<Ep>::value) {
      ep.tile(ep.f, tile, NVK, c, ldc, m, n, load_c, row0 + ep.r0, col0);
      return;
    }
    for (int i = 0; i < m; ++i) {
      float* cr = c + i * ldc;
      for (int j = 0; j < NVK && j * W < n; ++j) {
        int nn = std::min(n - j * W, W);
        vf v = v_load(tile + (i * NVK + j) * W);
        if (load_c) v = v_add(v, load_lanes(cr + j * W, nn));
        ep.apply(v, row0 + i, col0 + j * W, nn);
        if constexpr (!ep_stores<Ep>) store_lanes(cr + j * W, v, nn);
      }
    }
  }
}

// The register tile's two pieces shared by every kernel that accumulates one (the GEMM
// micro-kernels here, the direct convolution's tiles in conv_direct.h): zeroing it, and one
// k-step, acc[i][j] += A(i) * B[j], with NVK vectors of B at b and row i's A value a_at(i).
template <int MRK, int NVK>
[[gnu::always_inline]] inline void zero_tile(vf (&acc)[MRK][NVK]) {
#pragma GCC unroll 32
  for (int i = 0; i < MRK; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NVK; ++j) acc[i][j] = simd::v_zero();
  }
}
template <int MRK, int NVK, class AAt>
[[gnu::always_inline]] inline void k_step(vf (&acc)[MRK][NVK], const float* b, const AAt& a_at) {
  vf bv[NVK];
#pragma GCC unroll 8
  for (int j = 0; j < NVK; ++j) bv[j] = simd::v_load(b + j * kVecWidth);
#pragma GCC unroll 32
  for (int i = 0; i < MRK; ++i) {
    const vf av = simd::v_set1(a_at(i));
#pragma GCC unroll 8
    for (int j = 0; j < NVK; ++j) acc[i][j] = simd::v_fma(av, bv[j], acc[i][j]);
  }
}

// A range of packed weights to bring into L2 while tiles compute (the next block's, where a
// block of B is read by few tiles and so would otherwise come from memory right when it is
// needed): `lines` 64-byte lines from p. The block's tiles each take a share, and a tile
// issues its share a few lines at a time over its k-steps.
struct BAhead {
  const char* p = nullptr;
  long lines = 0;
  // Share q of `parts` equal ones.
  BAhead share(long q, long parts) const { return part(q, q + 1, parts); }
  // The part [lo, hi) of `total` equal units (a tile's rows of its column's, say).
  BAhead part(long lo, long hi, long total) const {
    const long l0 = lines * lo / total, l1 = lines * hi / total;
    return {p + l0 * 64, l1 - l0};
  }
  // Lines to issue per group so that `groups` groups cover them, within [lo, hi].
  int per(long groups, long lo, long hi) const {
    return static_cast<int>(std::min(hi, std::max(lo, (lines + groups - 1) / std::max(1L, groups))));
  }
  // Requests the next n lines (into L2) and moves past them.
  void issue(int n) {
    for (; n > 0 && lines > 0; --n, --lines, p += 64) __builtin_prefetch(p, 0, 2);
  }
};

// C[0..m, 0..n) (+)= A-panel * B-panel over kc_pad steps; on the last k-block the epilogue
// runs on each vector of the tile before it is stored. MRK <= MR rows are computed (smaller
// variants serve the edges of M); the A panel's layout always has MR rows.
template <int MRK, int NVK, class Ep>
inline void micro_kernel(int kc_pad, const float* __restrict a, const float* __restrict b,
                         float* c, long ldc, int m, int n, bool load_c, bool last, const Ep& ep,
                         int row0, int col0, BAhead next = {}) {
  using namespace simd;
  constexpr int W = kVecWidth;
  vf acc[MRK][NVK];
  zero_tile(acc);
  // `next` a few lines per KU-chunk of k-steps, spread evenly over the tile. Bursts of at
  // least a line per k-step (the tile's whole share issued in its first chunks) were slower,
  // likely holding the line fill buffers the tile's own B loads need (49x2048x512, weights
  // from memory, 1 thread: 0.77 -> 0.68 ms evenly).
  const int per_chunk = next.per(kc_pad / kKU, 1, 4 * kKU);
  // The tile's rows of C, requested over its last kCChunks chunks of k-steps (every
  // kCChunks-th row from each), so that the store at the end, and the load after the first
  // k-block, find them in L1: between two k-blocks a column of tiles sweeps all of B's block,
  // which evicts C from L2. Interleaved (Xeon, AVX-512, 1 thread): 16x3072x768 weights cold
  // 0.93x the time (2 threads 0.91x), 128x3072x768 warm 0.98x, 1024^3 0.98-0.99x; requested
  // 8 chunks ahead no better, and the lines counted from the row's address (no spare line
  // for an unaligned row) 1-2% slower than this fixed, unrolled count.
  constexpr int kCLines = (NVK * W * 4 + 63) / 64 + 1, kCChunks = 4;
  const int c_from = std::max(0, kc_pad - kCChunks * kKU);
  for (int kb = 0; kb < kc_pad; kb += kKU) {
    if (next.lines > 0) next.issue(per_chunk);
    if (kb >= c_from) {
      for (int i = (kb - c_from) / kKU; i < MRK; i += kCChunks) {
        if (i < m) {
          for (int l = 0; l < kCLines; ++l) __builtin_prefetch(reinterpret_cast<const char*>(c + i * ldc) + l * 64, 1, 3);
        }
      }
    }
    DNNF_PRAGMA_UNROLL(DNNF_GEMM_UNROLL)
    for (int kk = 0; kk < kKU; ++kk) {
      if constexpr (W >= 8) {
        // B streams from L2: fetch 16 k-steps ahead (+5-7% at 2048^3). A tile of one or two
        // rows (batch-1 Linear layers, a classifier's 1280x1000 weights) reads B once, from
        // memory, at a k-step every few cycles: 64 steps ahead (1x1000x1280: 0.42 -> 0.32 ms).
        constexpr int kBAhead = MRK <= 2 ? 64 : 16;
        if (kInTilePrefetch || MRK <= 2) {
#pragma GCC unroll 8
          for (int j = 0; j < NVK * W; j += 16) {
            __builtin_prefetch(b + (kk + kBAhead) * kNR + j, 0, 3);
          }
        }
        // A two KU-chunks ahead, a line per k-step: constant weights (convolutions at small
        // batch) come from memory, and their panels are used for only a few column tiles.
        if (kInTilePrefetch && kk * 16 < kMR * kKU) __builtin_prefetch(a + 2 * kMR * kKU + kk * 16, 0, 3);
      }
      k_step(acc, b + kk * kNR, [&](int i) { return a[i * kKU + kk]; });
    }
    a += kMR * kKU;
    b += kKU * kNR;
  }
  finish_tile<MRK, NVK>(acc, c, ldc, m, n, load_c, last, ep, row0, col0);
}

// A full MR-row tile that reads A in place (row-major, rows lda floats apart; k-steps
// [0, kc) from a) instead of from a packed panel: row i's broadcast is at a + i * lda + k.
// Where a panel of A serves few column tiles (1x1 convolutions' 16-128 output channels),
// packing it cost a quarter of the time (perf: 21% in the packing on 3136x64x256) and, done
// before the FMAs, did not overlap them. B is the packed [kc_pad][NR] panel as for run_tile.
template <int NVK, class Ep>
[[gnu::noinline]] void micro_kernel_direct(const float* a, long lda, int kc, const float* b, float* c, long ldc,
                                           int n, bool load_c, bool last, const Ep& ep, int row0, int col0) {
  using namespace simd;
  vf acc[kMR][NVK];
  zero_tile(acc);
  const char* ab = reinterpret_cast<const char*>(a);
  const long ls = lda * static_cast<long>(sizeof(float));
#pragma GCC unroll 4
  for (int k = 0; k < kc; ++k)
    k_step(acc, b + k * kNR,
           [&](int i) { return *reinterpret_cast<const float*>(ab + i * ls + k * static_cast<long>(sizeof(float))); });
  finish_tile<kMR, NVK>(acc, c, ldc, kMR, n, load_c, last, ep, row0, col0);
}
template <class Ep>
inline void run_tile_direct(const float* a, long lda, int kc, const float* b, float* c, long ldc, int n,
                            bool load_c, bool last, const Ep& ep, int row0, int col0) {
  if constexpr (kNV > 1) {
    if (n <= kVecWidth) return micro_kernel_direct<1>(a, lda, kc, b, c, ldc, n, load_c, last, ep, row0, col0);
  }
  micro_kernel_direct<kNV>(a, lda, kc, b, c, ldc, n, load_c, last, ep, row0, col0);
}

// Runs one tile with the smallest compiled variant covering its m rows and n columns. Row
// variants MR, ceil(MR/2), 4, 2, 1 keep small M (batch-1..8 Linear layers) from paying for
// a full MR-row tile; a single-vector column edge uses NV = 1 (rows MR, 4, 1 only, to bound
// the number of instantiations per epilogue, i.e. compile time of generated kernels).
template <int NVK, class Ep>
inline void run_rows(int kc_pad, const float* a, const float* b, float* c, long ldc, int m, int n,
                     bool load_c, bool last, const Ep& ep, int row0, int col0, BAhead next) {
  auto go = [&](auto rows) {
    micro_kernel<decltype(rows)::value, NVK>(kc_pad, a, b, c, ldc, m, n, load_c, last, ep, row0,
                                             col0, next);
  };
  using std::integral_constant;
  constexpr int kHalf = (kMR + 1) / 2, k4 = kMR < 4 ? kMR : 4;
  if constexpr (NVK == kNV) {
    if (m > kHalf) return go(integral_constant<int, kMR>{});
    if constexpr (kHalf > 4) {
      if (m > 4) return go(integral_constant<int, kHalf>{});
    }
    if (m > 2) return go(integral_constant<int, k4>{});
    if (m > 1) return go(integral_constant<int, 2>{});
  } else {
    if (m > 4) return go(integral_constant<int, kMR>{});
    if (m > 1) return go(integral_constant<int, k4>{});
  }
  go(integral_constant<int, 1>{});
}
template <class Ep>
inline void run_tile(int kc_pad, const float* a, const float* b, float* c, long ldc, int m,
                     int n, bool load_c, bool last, const Ep& ep, int row0, int col0, BAhead next = {}) {
  if constexpr (kNV > 1) {
    if (n <= kVecWidth) {
      return run_rows<1>(kc_pad, a, b, c, ldc, m, n, load_c, last, ep, row0, col0, next);
    }
  }
  run_rows<kNV>(kc_pad, a, b, c, ldc, m, n, load_c, last, ep, row0, col0, next);
}

// A source of A (gemm.h) computed while it is packed (a fused prologue: the producers of A
// evaluated through their composed index maps, never stored): fill(ctx, row, k0, n, dst)
// writes A[row, k0 .. k0 + n) to dst (room for n rounded up to whole vectors). Called from
// several threads at once. Type-erased so that gemm_run is instantiated once per module,
// not once per prologue.
struct ARows {
  void (*fill)(const void* ctx, long row, long k0, int n, float* dst);
  const void* ctx;
};

// Packs rows [row0, row0 + mc) x k [k0, k0 + kc) of A (element (i, k) at a[i*rs + k*cs],
// rows >= m_total are zero) into MR-row panels, applying the prologue. dst holds
// round_up(mc, MR) * kc_pad floats. A k-stride other than 1 (transposed A) is gathered
// into a small buffer first, so the prologue always sees vectors.
template <class Pro>
inline void pack_a(float* dst, const float* a, long rs, long cs, int row0, int mc, int m_total,
                   int k0, int kc, int kc_pad, const Pro& pro) {
  using namespace simd;
  constexpr int W = kVecWidth;
  alignas(64) float gather[kKU];
  for (int ir = 0; ir < mc; ir += kMR) {
    float* panel = dst + static_cast<size_t>(ir) * kc_pad;
    for (int kb = 0; kb < kc_pad; kb += kKU) {
      float* blk = panel + kb * kMR;
      int kn = std::min(kKU, kc - kb);  // <= 0 in the zero padding of k
      if constexpr (Pro::kIdentity) {
        if (kn == kKU && cs == 1 && ir + kMR <= mc && row0 + ir + kMR <= m_total) {
          // A whole chunk of a whole panel: a plain copy, unrolled (the general loop's
          // bounds, tails and masks cost more than the copy when K is small).
          const float* s = a + static_cast<long>(row0 + ir) * rs + (k0 + kb);
#pragma GCC unroll 16
          for (int i = 0; i < kMR; ++i) {
#pragma GCC unroll 4
            for (int t = 0; t < kKU; t += W) v_store(blk + i * kKU + t, v_loadu(s + i * rs + t));
          }
          continue;
        }
      }
      for (int i = 0; i < kMR; ++i) {
        float* d = blk + i * kKU;
        int row = row0 + ir + i;
        if (ir + i >= mc || row >= m_total || kn <= 0) {
          for (int t = 0; t < kKU; t += W) v_store(d + t, v_zero());
          continue;
        }
        const float* s = a + row * rs + (k0 + kb) * cs;
        if (cs != 1) {
          for (int t = 0; t < kn; ++t) gather[t] = s[t * cs];
          s = gather;
        }
        for (int t = 0; t < kKU; t += W) {
          int nn = std::min(kn - t, W);
          if (nn <= 0) {
            v_store(d + t, v_zero());
            continue;
          }
          vf v = load_lanes(s + t, nn);
          if constexpr (!Pro::kIdentity) {
            pro.apply(v, row, k0 + kb + t, nn);
            if (nn < W) v = v_select(vm_first(nn), v, v_zero());
          }
          v_store(d + t, v);
        }
      }
    }
  }
}

// Packs k [k0, k0 + kc) x columns [col0, col0 + nc) of B (element (k, j) at b[k*rs + j*cs])
// into NR-column panels; dst holds round_up(nc, NR) * kc_pad floats.
inline void pack_b(float* dst, const float* b, long rs, long cs, int k0, int kc, int kc_pad,
                   int col0, int nc) {
  using namespace simd;
  constexpr int W = kVecWidth;
  const int n_panels = (nc + kNR - 1) / kNR;
  if (cs == 1) {
    // Row by row (B read sequentially; striding down a column would miss the TLB per row).
    for (int k = 0; k < kc; ++k) {
      const float* s = b + (k0 + k) * rs + col0;
      float* d = dst + static_cast<size_t>(k) * kNR;
      for (int jr = 0; jr < nc; jr += kNR, d += static_cast<size_t>(kc_pad) * kNR) {
        const int nn = std::min(kNR, nc - jr);
        if (nn == kNR) {
#pragma GCC unroll 8
          for (int j = 0; j < kNV; ++j) v_store(d + j * W, v_loadu(s + jr + j * W));
        } else {
          for (int j = 0; j < kNV; ++j) {
            int n1 = std::max(0, std::min(nn - j * W, W));
            v_store(d + j * W, v_load_tail(s + jr + j * W, n1));
          }
        }
      }
    }
  } else {  // transposed B: read down k (contiguous when rs == 1), write with stride NR
    for (int jr = 0; jr < nc; jr += kNR) {
      float* panel = dst + static_cast<size_t>(jr) * kc_pad;
      const int nn = std::min(kNR, nc - jr);
      for (int j = 0; j < kNR; ++j) {
        if (j < nn) {
          const float* s = b + static_cast<long>(k0) * rs + (col0 + jr + j) * cs;
          for (int k = 0; k < kc; ++k) panel[k * kNR + j] = s[k * rs];
        } else {
          for (int k = 0; k < kc; ++k) panel[k * kNR + j] = 0.0f;
        }
      }
    }
  }
  for (int p = 0; p < n_panels; ++p) {
    float* pad = dst + static_cast<size_t>(p) * kNR * kc_pad + static_cast<size_t>(kc) * kNR;
    std::memset(pad, 0, sizeof(float) * (kc_pad - kc) * kNR);
  }
}

}  // namespace dnnf::gemm
