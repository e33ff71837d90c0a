// The packed GEMM's cache blocking (gemm.h): the block sizes derived from this machine's L1
// and L2, and how K splits into k-blocks, which every packed layout of A and B follows.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <unistd.h>

#include "cache_info.h"
#include "gemm_kernel.h"

namespace dnnf::gemm {

// Cache blocking (the loop order is BLIS's with A and B swapped, because here B carries the
// vector dimension and A is broadcast): an A micro-panel MR x kc stays in L1 while the
// micro-kernel sweeps the B panels of a kc x nc block held in L2; A is packed per row block
// (or once for all, when column blocks would repack it). So kc is sized to ~60% of L1
// (14 x 512 x 4 B = 28 KB of 48 KB) and nc to half of L2 (512 x 256 x 4 B = 512 KB of a 1 MB
// Zen 5 L2; 512 columns on a 2 MB L2). mc is the row block of a task.
struct Blocking {
  int mc = kMR * 24;
  int kc = 512;
  int nc = 512;
  // nc follows the call's k-block (nc_for_kc): half of L2 holds kc x nc whatever K is, so a
  // 1x1 convolution's short K gets wide column blocks. False: nc as given (DNNF_GEMM_BLOCKING).
  bool nc_by_kc = true;
};
using ::dnnf::cache_bytes;  // cache_info.h
// Columns of a kc x nc block of packed B in half of L2.
inline int nc_for_kc(int kc) {
  return std::max(kNR, static_cast<int>(cache_bytes(2) / 2 / (std::max(1, kc) * 4L)) / kNR * kNR);
}
inline Blocking cache_blocking() {
  Blocking b;
  const long l1 = cache_bytes(1);
  b.kc = std::max(kKU, static_cast<int>(l1 * 6 / 10 / (kMR * 4)) / kKU * kKU);
  b.nc = nc_for_kc(b.kc);  // for the largest k-block; a call with a shorter one widens it
  // DNNF_GEMM_BLOCKING=mc,kc,nc overrides (for tuning on a new machine).
  if (const char* env = std::getenv("DNNF_GEMM_BLOCKING")) {
    int mc = 0, kc = 0, nc = 0;
    if (std::sscanf(env, "%d,%d,%d", &mc, &kc, &nc) == 3 && mc > 0 && kc > 0 && nc > 0) {
      b.mc = mc;
      b.kc = std::max(kKU, kc / kKU * kKU);
      b.nc = std::max(kNR, nc / kNR * kNR);
      b.nc_by_kc = false;
    }
  }
  return b;
}
inline Blocking& default_blocking() {
  static Blocking b = cache_blocking();
  return b;
}

// The k-block actually used for K: the largest multiple of KU not above the blocking's kc
// that splits K into equal blocks (576 -> 2 x 288 rather than 512 + 64).
inline int choose_kc(int K, int kc_max) {
  kc_max = std::max(kKU, kc_max / kKU * kKU);
  if (K <= 0) return kKU;
  int nk = (K + kc_max - 1) / kc_max;
  return round_up((K + nk - 1) / nk, kKU);
}
inline int num_kblocks(int K, int kc) { return K > 0 ? (K + kc - 1) / kc : 1; }
// Total padded k over all k-blocks: block p starts at p*kc in every packed layout.
inline long packed_k(int K, int kc) {
  if (K <= 0) return 0;
  int nk = num_kblocks(K, kc);
  return static_cast<long>(nk - 1) * kc + round_up(K - (nk - 1) * kc, kKU);
}

}  // namespace dnnf::gemm
