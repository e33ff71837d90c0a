// This machine's L1 data cache and L2 per core, read once from the OS (48 KiB and 1 MiB where
// it does not say): the GEMM's and the convolutions' blockings derive from them (gemm_blocking.h),
// and so does which path a convolution takes (conv_shape.h), in generated code and in the code
// generator alike. ISA-free, so the code generator includes it too.
#pragma once

#include <unistd.h>

namespace dnnf {

inline long cache_bytes(int level) {
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
  auto ask = [](int name, long fallback) {  // sysconf's answer where the OS gives one
    const long r = sysconf(name);
    return r > 0 ? r : fallback;
  };
  static const long l1 = ask(_SC_LEVEL1_DCACHE_SIZE, 48 * 1024), l2 = ask(_SC_LEVEL2_CACHE_SIZE, 1024 * 1024);
#else
  static const long l1 = 48 * 1024, l2 = 1024 * 1024;
#endif
  return level == 1 ? l1 : l2;
}

}  // namespace dnnf
