// Packed f32 GEMM, C[M,N] = prologue(A)[M,K] * B[K,N] followed by a fused epilogue, for the
// Many-to-Many anchors of fused blocks (MatMul, Gemm, Conv as GEMM; paper §4.4).
//
// Matrices are views with element strides, so transposes cost nothing to express:
// element (i, k) of A is a[i*rs_a + k*cs_a], (k, j) of B is b[k*rs_b + j*cs_b], and C is
// row-major with leading dimension ldc. One call runs in two fork-join phases over the pool
// of parallel.h:
//   1. pack B (skipped for a pre-packed or streamed B, see stream_b) and, when several tasks
//      would each repack the same rows of A, pack A once too, into buffers shared by all tasks;
//   2. tasks over blocks of rows (at most Blocking::mc) x column chunks; each one packs its
//      A block per k-block (prologue fused) unless shared, and runs the micro-kernel over
//      MR-row x NR-column tiles, columns innermost (an A panel stays in L1; see Blocking).
// The epilogue runs once per output vector, on the last k-block, just before the store.
// A and B come from "sources" (gemm_f32_src): strided views, matrices packed beforehand
// (constant weights), or, for B, a functor producing rows while packing (implicit im2col).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>

#include <unistd.h>

#include "gemm_blocking.h"
#include "gemm_epilogue.h"
#include "gemm_kernel.h"
#include "large_alloc.h"
#include "parallel.h"

namespace dnnf::gemm {

struct Options {
  int n_threads = 0;        // 0: the pool's size; 1: run on the calling thread only
  bool accumulate = false;  // C += A*B (C must hold values): e.g. an in-place residual
  // A pre-packed B that the calls just before this one read too (a loop over the same weights:
  // Winograd's tile batches, a depthwise convolution's expanded rows), so it is likely still in
  // L2: the blocked tile order, not the read-once one (see gemm_run).
  bool b_in_l2 = false;
  const Blocking* blocking = nullptr;
};


namespace detail {
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, FreeDeleter>;
inline float* alloc_floats(size_t n) { return static_cast<float*>(alloc_aligned(n * sizeof(float))); }
// Per-thread scratch that only grows: packing buffers are reused across calls (a fresh
// multi-megabyte malloc would page-fault on every call). Slots: 0 packed B, 1 shared packed
// A, 2 a task's own A block (or streamed B block), 3 one row of a BRows source, 4 a direct
// convolution's output computed aside; 5-7 Winograd's per-task tiles (conv_winograd.h), which
// call the GEMM while holding them (5 also a channels-first input transposed by conv_direct.h,
// which runs no Winograd).
inline float* scratch(int slot, size_t n) {
  struct Slot {
    Buffer buf;
    size_t cap = 0;
  };
  thread_local Slot slots[8];
  Slot& s = slots[slot];
  if (s.cap < n) {
    size_t cap = std::max(n, s.cap + s.cap / 2);
    s.buf.reset(alloc_floats(cap));
    s.cap = cap;
  }
  return s.buf.get();
}
}  // namespace detail

// ---- Sources of A and B ------------------------------------------------------------------
// gemm_f32_src(M, N, K, a, b, ...) takes A as AView (strided, with a prologue) or PackedAView
// (packed beforehand), and B as BView (strided), PackedBView (packed beforehand) or BRows (a
// functor filling rows of B while they are packed: the implicit im2col of conv.h, which
// handles padding, stride and dilation there and never materialises the whole matrix).
// A pre-packed operand fixes the k-block kc of the call; two pre-packed operands must agree.

template <class Pro = ProNone>
struct AView {
  const float* a;
  long rs, cs;  // element (i, k) at a[i*rs + k*cs]
  Pro pro = {};
};
struct BView {
  const float* b;
  long rs, cs;  // element (k, j) at b[k*rs + j*cs]
};
// loader.row(k, j0, n, dst) writes B[k, j0 .. j0 + n) to dst[0 .. n); called from several
// threads at once (keep it const).
template <class L>
struct BRows {
  const L& loader;
};
template <class L>
BRows(const L&) -> BRows<L>;

// B packed once (constant weights): whole-matrix layout = k-blocks of kc one after the
// other, each n_pad = round_up(N, NR) columns of NR-panels; block p starts at p*kc*n_pad.
struct PackedBView {
  const float* data = nullptr;
  int k = 0, n = 0, kc = kKU;
};
inline size_t packed_b_floats(int K, int N, int kc) {
  return static_cast<size_t>(packed_k(K, kc)) * round_up(N, kNR);
}
// Packs B into dst (packed_b_floats(K, N, kc) floats, 64-byte aligned for speed).
// `parallel`: on the pool, in k-blocks x runs of 32 panels (a large weight at model setup:
// VGG-16's 25088x4096 classifier took 0.8 s on one thread); else one task per k-block, inline.
// A template of nothing so that its one instance lives in a prelude unit (pack.0,
// prelude_units.h) instead of in every module that packs weights (PackedB).
template <int I = 0>
PackedBView pack_b_into(float* dst, const float* b, long rs, long cs, int K, int N, int kc,
                        bool parallel = false) {
  const int n_pad = round_up(N, kNR), run = parallel ? 32 * kNR : std::max(N, 1), runs = (N + run - 1) / run;
  auto task = [&](int t) {
    const int pc = t / runs * kc, col0 = t % runs * run, kcb = std::min(kc, K - pc), kc_pad = round_up(kcb, kKU);
    pack_b(dst + static_cast<size_t>(pc) * n_pad + static_cast<size_t>(col0) * kc_pad, b, rs, cs, pc, kcb, kc_pad,
           col0, std::min(run, N - col0));
  };
  const int tasks = K > 0 ? num_kblocks(K, kc) * runs : 0;
  if (parallel) {
    parallel_for(tasks, task);
  } else {
    for (int t = 0; t < tasks; ++t) task(t);
  }
  return {dst, K, N, kc};
}

// A packed once, in the layout the GEMM shares between tasks: k-block p starts at
// p*kc*m_pad (m_pad = round_up(M, MR)) and holds MR-row panels of round_up(kcb, KU) steps.
struct PackedAView {
  const float* data = nullptr;
  int m = 0, k = 0, kc = kKU;
};
inline size_t packed_a_floats(int M, int K, int kc) {
  return static_cast<size_t>(packed_k(K, kc)) * round_up(M, kMR);
}
// Packs A (prologue applied) into dst (packed_a_floats(M, K, kc) floats, 64-byte aligned).
template <class Pro = ProNone>
PackedAView pack_a_into(float* dst, const float* a, long rs, long cs, int M, int K, int kc,
                        const Pro& pro = {}) {
  const int m_pad = round_up(M, kMR);
  for (int p = 0; p < num_kblocks(K, kc) && K > 0; ++p) {
    int pc = p * kc, kcb = std::min(kc, K - pc);
    pack_a(dst + static_cast<size_t>(pc) * m_pad, a, rs, cs, 0, M, M, pc, kcb,
           round_up(kcb, kKU), pro);
  }
  return {dst, M, K, kc};
}

// Packs rows [k0, k0 + kc) x columns [col0, col0 + nc) of a BRows source into NR-column
// panels, the layout of pack_b: each row is produced whole into an L1 scratch row (one call
// per k keeps the loader's index arithmetic out of the inner loop), then split into panels.
template <class L>
void pack_b_rows(float* dst, const L& loader, int k0, int kc, int kc_pad, int col0, int nc) {
  using namespace simd;
  constexpr int W = kVecWidth;
  float* row = detail::scratch(3, static_cast<size_t>(round_up(nc, kNR)));
  for (int k = 0; k < kc; ++k) {
    loader.row(k0 + k, col0, nc, row);
    for (int j = nc; j < round_up(nc, kNR); ++j) row[j] = 0.0f;
    float* d = dst + static_cast<size_t>(k) * kNR;
    for (int jr = 0; jr < nc; jr += kNR, d += static_cast<size_t>(kc_pad) * kNR) {
#pragma GCC unroll 8
      for (int j = 0; j < kNV; ++j) v_store(d + j * W, v_loadu(row + jr + j * W));
    }
  }
  for (int jr = 0; jr < nc; jr += kNR) {
    float* pad = dst + static_cast<size_t>(jr) * kc_pad + static_cast<size_t>(kc) * kNR;
    std::memset(pad, 0, sizeof(float) * (kc_pad - kc) * kNR);
  }
}

// Packs rows [row0, row0 + mc) x k [k0, k0 + kc) of an ARows source into MR-row panels, the
// layout of pack_a: each row segment is computed whole into an L1 scratch row (one call per
// row keeps the call's cost off the vectors), then split into KU-chunks.
inline void pack_a_rows(float* dst, const ARows& src, int row0, int mc, int m_total, int k0, int kc,
                        int kc_pad) {
  using namespace simd;
  constexpr int W = kVecWidth;
  float* row = detail::scratch(4, static_cast<size_t>(round_up(kc_pad, W)));
  for (int ir = 0; ir < mc; ir += kMR) {
    float* panel = dst + static_cast<size_t>(ir) * kc_pad;
    for (int i = 0; i < kMR; ++i) {
      const int r = row0 + ir + i;
      const bool live = ir + i < mc && r < m_total && kc > 0;
      if (live) {
        src.fill(src.ctx, r, k0, kc, row);
        for (int k = kc; k < kc_pad; ++k) row[k] = 0.0f;
      }
      for (int kb = 0; kb < kc_pad; kb += kKU) {
        float* d = panel + kb * kMR + i * kKU;
        for (int t = 0; t < kKU; t += W) v_store(d + t, live ? v_loadu(row + kb + t) : v_zero());
      }
    }
  }
}

namespace detail {
// Packing of one block from each kind of source (pre-packed ones are never packed).
inline void pack_a_block(const ARows& s, float* dst, int r0, int mc, int M, int k0, int kc, int kc_pad) {
  pack_a_rows(dst, s, r0, mc, M, k0, kc, kc_pad);
}
template <class Pro>
void pack_a_block(const AView<Pro>& s, float* dst, int r0, int mc, int M, int k0, int kc,
                  int kc_pad) {
  pack_a(dst, s.a, s.rs, s.cs, r0, mc, M, k0, kc, kc_pad, s.pro);
}
// Asks for rows [r0, r0 + mc) x k [k0, k0 + kc) of A ahead of their packing (a source in
// memory read along k; other sources compute their rows).
template <class Pro>
void prefetch_a_block(const AView<Pro>& s, int r0, int mc, int M, int k0, int kc) {
  if (s.cs != 1) return;
  for (int i = r0, ie = std::min(M, r0 + mc); i < ie; ++i) {
    const float* p = s.a + static_cast<long>(i) * s.rs + k0;
    for (int k = 0; k < kc; k += 16) __builtin_prefetch(p + k, 0, 3);
  }
}
inline void prefetch_a_block(const ARows&, int, int, int, int, int) {}
inline void pack_b_block(const BView& s, float* dst, int k0, int kc, int kc_pad, int c0, int nc) {
  pack_b(dst, s.b, s.rs, s.cs, k0, kc, kc_pad, c0, nc);
}
template <class L>
void pack_b_block(const BRows<L>& s, float* dst, int k0, int kc, int kc_pad, int c0, int nc) {
  pack_b_rows(dst, s.loader, k0, kc, kc_pad, c0, nc);
}
}  // namespace detail

class PackedB {
 public:
  PackedB() = default;
  PackedB(const float* b, long rs, long cs, int K, int N, int kc_max = default_blocking().kc)
      : kc_(choose_kc(K, kc_max)),
        buf_(detail::alloc_floats(std::max<size_t>(1, packed_b_floats(K, N, kc_)))) {
    view_ = pack_b_into(buf_.get(), b, rs, cs, K, N, kc_, static_cast<long>(K) * N >= (1L << 20));
  }
  const PackedBView& view() const { return view_; }

 private:
  int kc_ = kKU;
  detail::Buffer buf_;
  PackedBView view_;
};

class PackedA {
 public:
  PackedA() = default;
  template <class Pro = ProNone>
  PackedA(const float* a, long rs, long cs, int M, int K, int kc_max = default_blocking().kc,
          const Pro& pro = {})
      : kc_(choose_kc(K, kc_max)),
        buf_(detail::alloc_floats(std::max<size_t>(1, packed_a_floats(M, K, kc_)))) {
    view_ = pack_a_into(buf_.get(), a, rs, cs, M, K, kc_, pro);
  }
  const PackedAView& view() const { return view_; }

 private:
  int kc_ = kKU;
  detail::Buffer buf_;
  PackedAView view_;
};

namespace detail {

template <class Ep, class ASrc, class BSrc>
void gemm_run(int M, int N, int K, const ASrc& asrc, const BSrc& bsrc, float* c, long ldc,
              const Ep& ep, const Options& opt) {
  if (M <= 0 || N <= 0) return;
  constexpr bool a_pre = std::is_same_v<ASrc, PackedAView>;
  constexpr bool b_pre = std::is_same_v<BSrc, PackedBView>;
  if constexpr (a_pre && b_pre) {
    if (asrc.kc != bsrc.kc) throw std::invalid_argument("gemm: A and B packed with different kc");
  }
  const Blocking& blk = opt.blocking ? *opt.blocking : default_blocking();
  const int T = opt.n_threads == 1 ? 1 : (opt.n_threads > 0 ? opt.n_threads : get_num_threads());
  int kc;
  if constexpr (a_pre) {
    kc = asrc.kc;
  } else if constexpr (b_pre) {
    kc = bsrc.kc;
  } else {
    kc = choose_kc(K, blk.kc);
  }
  const int nk = num_kblocks(K, kc);
  if constexpr (IsEpDyn<Ep>::value) {
    // C in place of the epilogue's residual (the code generator gives them one buffer where
    // the residual dies here): with several k-blocks the partial sums would overwrite the
    // residual before the last k-block's epilogue reads it, so C is computed aside and
    // copied (rare: K beyond one k-block).
    if (nk > 1 && !opt.accumulate && ep.res_is(c, ldc)) {
      float* aside = scratch(3, static_cast<size_t>(M) * N);
      gemm_run(M, N, K, asrc, bsrc, aside, N, ep, opt);
      for (int i = 0; i < M; ++i) std::copy(aside + static_cast<long>(i) * N, aside + static_cast<long>(i + 1) * N, c + i * ldc);
      return;
    }
  }
  const int m_pad = round_up(M, kMR), n_pad = round_up(N, kNR);
  const int pm = m_pad / kMR, pn = n_pad / kNR;
  // Half of L2 for a k-block of B: on a 512 KiB L2 (Zen 3) kc = 816 leaves 80 columns, but a
  // 1x1 convolution with K = 144 (MobileNetV2) has room for 448, one column block for most of
  // its output channels, so its rows run with A packed per panel in the same region instead of
  // all of A packed first and read back (share_a).
  const int nc_blk = blk.nc_by_kc ? std::max(blk.nc / kNR * kNR, nc_for_kc(kc)) : std::max(kNR, blk.nc / kNR * kNR);

  // Task grid: row blocks of at most mc rows; with threads, about 3 tasks per thread (the
  // pool hands them out dynamically), preferring row blocks of >= 4 panels, then columns.
  const int mc_panels = std::max(1, blk.mc / kMR);
  int R = (pm + mc_panels - 1) / mc_panels;
  int Cc = 1;
  // Streamed B (the shape of convolutions: few rows, many columns): when A is one row block
  // and B spans several column blocks, each task packs its own kc x nc block of B right
  // before using it, so packed B never leaves L2 (packing all of B first would send it
  // through memory and back).
  const bool stream_b = !b_pre && pm <= mc_panels && n_pad > 2 * nc_blk;
  if (stream_b) {
    R = 1;
    Cc = std::min(pn, round_up(std::max((n_pad + nc_blk - 1) / nc_blk, 3 * T), T));
  } else if (T > 1 && b_pre && static_cast<long>(K) * n_pad > (512L << 10)) {
    // Pre-packed B over 2 MiB (weights at batch 1: BERT's 768x3072, a 3x3 512->1024 conv
    // channels last) comes from memory: split the columns, not the rows, so that each task
    // reads its own part of B once instead of every row block reading all of it.
    if (R < 3 * T) Cc = std::min(pn, (3 * T + R - 1) / R);
  } else if (T > 1 && n_pad <= nc_blk && pm >= T && 4L * pm >= 3L * T * ((pm + T - 1) / T)) {
    // One column block (a 1x1 convolution's output channels) and row panels that share out
    // evenly enough (at least 3/4 of the threads busy): rows only, so that every task packs
    // its panels just before use, or reads them unpacked (run_tile_direct), in one parallel
    // region. A column split packs all of A first, in a region of its own: on 2 threads
    // (Zen 4, AVX-512) that ran MobileNetV2's 196x96x576 no faster than one thread did
    // (0.19 ms; rows only 0.094), 196x64x384 0.060 -> 0.043, 49x160x960 0.092 -> 0.076 ms.
    R = std::max(R, std::min(pm, 3 * T));
  } else if (T > 1) {
    const int target = 3 * T;
    if (R < target) R = std::min(target, std::max(R, pm / 4));
    R = std::max(1, std::min(R, pm));
    if (R < target) Cc = std::min(pn, (target + R - 1) / R);
  }
  // Tasks take about equal time, so a count that T does not divide leaves threads idle at
  // the end: 2048^3 with pre-packed B made 7 row blocks, 4 + 3 on 2 threads. Split the rows
  // (within mc, into more and smaller blocks) until T divides the count, where they allow.
  if (T > 1 && !stream_b && (R * Cc) % T != 0 && R * Cc < 8 * T) {
    int r = R;
    while ((r * Cc) % T != 0 && r < pm) ++r;
    if ((r * Cc) % T == 0) R = r;
  }
  const bool share_a = a_pre || Cc > 1 || n_pad > nc_blk;
  // Row panels per task up to which a per-panel A goes with the next-block prefetch (below).
  constexpr int kAheadPanels = 8;
  const int nc_ahead = std::min(nc_blk, std::max(kNR, static_cast<int>(cache_bytes(2) / 4 / (4L * kc)) / kNR * kNR));

  // Phase 1: shared packing, split into jobs over k-blocks x panel chunks.
  float* bbuf = b_pre || stream_b ? nullptr
                                  : scratch(0, std::max<size_t>(1, packed_b_floats(K, N, kc)));
  float* abuf = nullptr;
  if (share_a && !a_pre) abuf = scratch(1, std::max<size_t>(1, packed_a_floats(M, K, kc)));
  const float* bp;
  const float* ap = abuf;
  if constexpr (b_pre) {
    bp = bsrc.data;
  } else {
    bp = bbuf;
  }
  if constexpr (a_pre) ap = asrc.data;
  const int chunks = T > 1 ? 2 * T : 1;
  const int b_jobs = b_pre || stream_b ? 0 : nk * std::min(chunks, pn);
  const int a_jobs = share_a && !a_pre ? nk * std::min(chunks, pm) : 0;
  auto pack_job = [&](int job) {
    const bool is_b = job < b_jobs;
    const int j = is_b ? job : job - b_jobs;
    const int per = is_b ? std::min(chunks, pn) : std::min(chunks, pm);
    const int p = j / per, q = j % per, np = is_b ? pn : pm;
    const int pc = p * kc, kcb = std::max(0, std::min(kc, K - pc)), kcp = round_up(kcb, kKU);
    const int lo = q * np / per, hi = (q + 1) * np / per;
    if (hi <= lo || kcb == 0) return;
    if (is_b) {
      if constexpr (!b_pre) {
        const int c0 = lo * kNR, c1 = std::min(N, hi * kNR);
        pack_b_block(bsrc, bbuf + static_cast<size_t>(pc) * n_pad + static_cast<size_t>(c0) * kcp,
                     pc, kcb, kcp, c0, c1 - c0);
      }
    } else {
      if constexpr (!a_pre) {
        const int r0 = lo * kMR, r1 = std::min(M, hi * kMR);
        pack_a_block(asrc, abuf + static_cast<size_t>(pc) * m_pad + static_cast<size_t>(r0) * kcp,
                     r0, r1 - r0, M, pc, kcb, kcp);
      }
    }
  };
  if (b_jobs + a_jobs > 0) {
    if (T > 1) {
      parallel_for(b_jobs + a_jobs, pack_job);
    } else {
      for (int j = 0; j < b_jobs + a_jobs; ++j) pack_job(j);
    }
  }

  // Phase 2: compute tasks.
  auto task = [&](int t) {
    const int r = t / Cc, cc = t % Cc;
    const int r0 = (r * pm / R) * kMR, r1 = std::min(M, ((r + 1) * pm / R) * kMR);
    const int c0 = (cc * pn / Cc) * kNR, c1 = std::min(N, ((cc + 1) * pn / Cc) * kNR);
    if (r1 <= r0 || c1 <= c0) return;
    float* tl = stream_b ? scratch(2, static_cast<size_t>(nc_blk) * kc)
                : share_a    ? nullptr
                             : scratch(2, static_cast<size_t>(round_up(r1 - r0, kMR)) * kc);
    // A read by one column block only (small N: a 1x1 convolution's few output channels):
    // each MR-row panel is packed right before its tiles run, with the source rows of the
    // next panel requested meanwhile, so reading A from memory overlaps the FMAs
    // instead of preceding them (a whole block packed first waits on memory, then computes).
    const bool per_panel = !share_a && !stream_b && c1 - c0 <= nc_blk;
    // With the next block prefetched (pre-packed B, two or more row panels), two blocks
    // share L2: column blocks of a quarter of L2 each. One panel (a batch-1 Linear layer)
    // reads each block once, with nothing to overlap: prefetching the next block there only
    // competed with the current one (1x4096x4096 1.23 -> 1.44 ms, 2 threads). Over 8 panels
    // only where A is packed once for all column blocks (share_a): else the narrower column
    // blocks repack A twice as often (361x512x512, a 1x1 convolution at 19x19: 0.98 -> 1.04
    // ms with, 1.00 without).
    const bool ahead_b = b_pre && r1 - r0 > kMR && (share_a || r1 - r0 <= kAheadPanels * kMR);
    // The task's A for k-block [pc, pc + kcb): in the shared packing, or packed now into tl
    // (`pack`; else per panel, by the caller).
    auto a_block = [&](int pc, int kcb, int kcp, bool pack) -> const float* {
      if (share_a) return ap + static_cast<size_t>(pc) * m_pad + static_cast<size_t>(r0) * kcp;
      if constexpr (!a_pre) {
        if (pack) pack_a_block(asrc, tl, r0, r1 - r0, M, pc, kcb, kcp);
      }
      return tl;
    };
    // Whether A's full panels go unpacked for `cols` columns of a k-block of kcb (see
    // run_tile_direct's use below).
    auto unpacked_a = [&](int cols, int kcb) {
      if constexpr (std::is_same_v<ASrc, AView<ProNone>>) {
        return per_panel && asrc.cs == 1 && (cols <= 4 * kNR || kcb <= 64);
      } else {
        return false;
      }
    };
    // Pre-packed B (weights: in a model each layer reads its own, which the layers between
    // two calls have evicted from L2) under a few row panels whose A block fits in a quarter
    // of L2 (weights at a short or moderate sequence: BERT's 128 tokens, a 1x1 convolution at
    // 19x19), unless A goes unpacked (unpacked_a): B is read once, in memory order, each
    // column panel by every row panel's tile in turn (from L2 after the first), while those
    // tiles bring the panel this thread reads next into L2, each a share by its rows. Block by
    // block (below), the first row panel's sweep waited on memory while the next block's
    // prefetches were issued as fast by the short remainder tiles as by the full ones.
    // Interleaved in one process (Xeon, AVX-512, weights cold, time with / without): 1 thread
    // 16x3072x768 0.83, 32x768x3072 0.91, 128x768x3072 0.93, 196x1024x256 0.86, 361x512x512
    // 0.91, 197x3072x768 0.99; 2 threads 16x3072x768 0.83, 64x3072x768 0.92, 128x2304x768
    // 0.93. B smaller than half of L2 gains as much when it is cold (1 thread: MobileBERT's
    // 128x384x512 0.85, 128x512x128 0.88, 49x576x160 0.84, 100x256x128 0.88, 256^3 0.97;
    // 128x128x512, 784x576x96 0.98-0.99), but loses where it is still in L2 (the same
    // weights called again: 128x384x512 1.05, 256^3 1.04, 784x576x96 1.02): a caller that
    // loops over the same weights says so (Options::b_in_l2) and keeps the blocked order,
    // whose A panel stays in L1 across the columns.
    if (b_pre && !opt.b_in_l2 && r1 - r0 > kMR && !unpacked_a(c1 - c0, std::min(kc, K)) &&
        static_cast<long>(round_up(r1 - r0, kMR)) * kc * 4 <= cache_bytes(2) / 4) {
      for (int p = 0; p < nk; ++p) {
        const int pc = p * kc, kcb = std::max(0, std::min(kc, K - pc)), kcp = round_up(kcb, kKU);
        const float* ablk = a_block(pc, kcb, kcp, true);
        const float* bblk = bp + static_cast<size_t>(pc) * n_pad;
        const bool load_c = opt.accumulate || p > 0, last = p == nk - 1;
        for (int jr = c0; jr < c1; jr += kNR) {
          BAhead ahead;  // this thread's next panel: the next column's, else the next k-block's first
          if (jr + kNR < c1) {
            ahead = {reinterpret_cast<const char*>(bblk + static_cast<size_t>(jr + kNR) * kcp),
                     static_cast<long>(kNR) * kcp * 4 / 64};
          } else if (p + 1 < nk) {
            const int kcpn = round_up(std::max(0, std::min(kc, K - pc - kc)), kKU);
            ahead = {reinterpret_cast<const char*>(bp + static_cast<size_t>(pc + kc) * n_pad + static_cast<size_t>(c0) * kcpn),
                     static_cast<long>(kNR) * kcpn * 4 / 64};
          }
          for (int ir = r0; ir < r1; ir += kMR) {
            const int rows = std::min(kMR, r1 - ir);
            run_tile(kcp, ablk + static_cast<size_t>(ir - r0) * kcp, bblk + static_cast<size_t>(jr) * kcp,
                     c + ir * ldc + jr, ldc, rows, std::min(kNR, c1 - jr), load_c, last, ep, ir, jr,
                     ahead.part(ir - r0, ir - r0 + rows, r1 - r0));
          }
        }
      }
      return;
    }
    const int nc_step = ahead_b ? nc_ahead : nc_blk;
    for (int jc = c0; jc < c1; jc += nc_step) {
      const int jend = std::min(c1, jc + nc_step);
      for (int p = 0; p < nk; ++p) {
        const int pc = p * kc, kcb = std::max(0, std::min(kc, K - pc)), kcp = round_up(kcb, kKU);
        const float* ablk = a_block(pc, kcb, kcp, !per_panel);
        const float* bblk = tl;
        if (!stream_b) {
          bblk = bp + static_cast<size_t>(pc) * n_pad + static_cast<size_t>(jc) * kcp;
        } else if constexpr (!b_pre) {
          pack_b_block(bsrc, tl, pc, kcb, kcp, jc, jend - jc);
        }
        const bool load_c = opt.accumulate || p > 0, last = p == nk - 1;
        // Pre-packed B (weights): its block is fetched from memory by the first panel's tiles
        // and from L2 by the rest. The block that comes next on this thread (the next k-block,
        // else the next column block, else the next task's first) is prefetched into L2
        // meanwhile, spread over this block's tiles, so that memory and the FMAs overlap.
        // Measured (Xeon, AVX-512, 1 thread, weights cold): 49x512x2048 0.86-1.03 -> 0.78-0.82
        // ms; then for every row count, not only up to 8 panels, and spread evenly over the
        // tiles' k-steps (BAhead::per): BERT's 128x3072x768 4.03 -> 3.70, 128x768x3072 4.06
        // -> 3.74 (2 threads 1.98 -> 1.75), ViT's 197 rows unchanged, 196x1024x256 0.61 ->
        // 0.54, 49x2048x512 0.77 -> 0.68 ms.
        BAhead ahead;
        long block_tiles = 1;
        if (ahead_b) {
          int jn = jc, pn2 = p + 1, cend = c1;
          if (pn2 == nk) {
            pn2 = 0;
            jn = jc + nc_step;
            if (jn >= c1) cend = cc + 1 < Cc ? std::min(N, ((cc + 2) * pn / Cc) * kNR) : jn;
          }
          if (jn < cend) {
            const int pcn = pn2 * kc, kcpn = round_up(std::max(0, std::min(kc, K - pcn)), kKU);
            const int cols = round_up(std::min(cend, jn + nc_step) - jn, kNR);
            ahead = {reinterpret_cast<const char*>(bp + static_cast<size_t>(pcn) * n_pad + static_cast<size_t>(jn) * kcpn),
                     static_cast<long>(cols) * kcpn * 4 / 64};
            block_tiles = static_cast<long>((r1 - r0 + kMR - 1) / kMR) * ((jend - jc + kNR - 1) / kNR);
          }
        }
        // A row-major A read by at most 4 column tiles goes unpacked (run_tile_direct):
        // 1x1 convolutions 3136x64x256 140 -> 184, 3136x32x144 131 -> 183, 784x128x512 164 ->
        // 199 GFLOP/s (Xeon, AVX-512, 1 thread); with more column tiles (196x256x1024,
        // 49x512x2048) re-reading the strided rows per tile lost to the packed panel. Rows of
        // at most 64 k-steps (256 bytes each, 3.5 KiB for an AVX-512 panel: they stay in L1
        // across the tiles) go unpacked for any number of tiles: the 1x1 expansions
        // 12544x96x16 1.18 / 1.16x, 3136x144x24 1.09 / 1.10x, 5625x128x64 1.12 / 1.12x,
        // 196x384x64 1.04 / 1.05x (AVX2 Zen 3, 1 / 2 threads, median of interleaved per-round
        // ratios; 1444x256x128, the same code both ways, 0.98 / 1.02x).
        const bool direct_a = unpacked_a(jend - jc, kcb);
        for (int ir = r0; ir < r1; ir += kMR) {
          if constexpr (std::is_same_v<ASrc, AView<ProNone>>) {
            if (direct_a && ir + kMR <= r1) {
              for (int jr = jc; jr < jend; jr += kNR)
                run_tile_direct(asrc.a + static_cast<long>(ir) * asrc.rs + pc, asrc.rs, kcb,
                                bblk + static_cast<size_t>(jr - jc) * kcp, c + ir * ldc + jr, ldc,
                                std::min(kNR, jend - jr), load_c, last, ep, ir, jr);
              continue;
            }
          }
          if constexpr (!a_pre) {
            if (per_panel) {
              if (ir + kMR < r1) prefetch_a_block(asrc, ir + kMR, kMR, std::min(M, r1), pc, kcb);
              pack_a_block(asrc, tl + static_cast<size_t>(ir - r0) * kcp, ir, std::min(kMR, r1 - ir), M, pc, kcb,
                           kcp);
            }
          }
          for (int jr = jc; jr < jend; jr += kNR) {
            BAhead next;
            if (ahead.lines > 0)  // this tile's share of the next block
              next = ahead.share(static_cast<long>((ir - r0) / kMR) * ((jend - jc + kNR - 1) / kNR) + (jr - jc) / kNR,
                                 block_tiles);
            run_tile(kcp, ablk + static_cast<size_t>(ir - r0) * kcp,
                     bblk + static_cast<size_t>(jr - jc) * kcp, c + ir * ldc + jr, ldc,
                     std::min(kMR, r1 - ir), std::min(kNR, jend - jr), load_c, last, ep, ir, jr, next);
          }
        }
      }
    }
  };
  if (T > 1) {
    parallel_for(R * Cc, task);
  } else {
    for (int t = 0; t < R * Cc; ++t) task(t);
  }
}

}  // namespace detail

// C = ep(A * B) from any pair of sources (see Sources above). M, N, K must match the packed
// operands' own.
template <class Ep = EpNone, class ASrc, class BSrc>
void gemm_f32_src(int M, int N, int K, const ASrc& a, const BSrc& b, float* c, long ldc,
                  const Ep& ep = {}, const Options& opt = {}) {
  detail::gemm_run(M, N, K, a, b, c, ldc, ep, opt);
}

// C = ep(pro(A) * B), B packed on the fly.
template <class Ep = EpNone, class Pro = ProNone>
void gemm_f32(int M, int N, int K, const float* a, long rs_a, long cs_a, const float* b,
              long rs_b, long cs_b, float* c, long ldc, const Ep& ep = {}, const Pro& pro = {},
              const Options& opt = {}) {
  detail::gemm_run(M, N, K, AView<Pro>{a, rs_a, cs_a, pro}, BView{b, rs_b, cs_b}, c, ldc, ep,
                   opt);
}

// C = ep(pro(A) * B) with B packed beforehand (PackedB::view() or pack_b_into); M and the
// epilogue may change from call to call, K and N are the packed ones.
template <class Ep = EpNone, class Pro = ProNone>
void gemm_f32_packed(int M, const float* a, long rs_a, long cs_a, const PackedBView& b, float* c,
                     long ldc, const Ep& ep = {}, const Pro& pro = {}, const Options& opt = {}) {
  detail::gemm_run(M, b.n, b.k, AView<Pro>{a, rs_a, cs_a, pro}, b, c, ldc, ep, opt);
}

}  // namespace dnnf::gemm
