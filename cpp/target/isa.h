// The CPU instruction sets code generation targets, as one table (paper §4.4 generates SIMD
// code per dialect): its name, the macro by which the prelude's simd.h selects the dialect,
// the compiler flags, and the f32 lanes of a vector. Codegen, the runtime, the bindings and
// the tests all read this table; nothing else spells a flag or a width. It sits below every
// stage (it knows no graph), so any layer may include it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dnnf {

struct IsaInfo {
  const char* name;   // "avx512": what compile(isa=) and $DNNF_ISA take
  const char* macro;  // the -D macro simd.h selects the dialect by ("" for scalar)
  const char* flags;  // target options, space-separated ("" for scalar and neon)
  int lanes;          // f32 lanes of one vector
  const char* arch;   // "x86_64" | "aarch64" | "any": where it can run
  const char* needs;  // the CPU features it needs, for messages
};

// Lowest first: on one architecture a later row runs wherever a later-or-equal one does.
inline constexpr IsaInfo kIsas[] = {
    {"scalar", "", "", 1, "any", "nothing"},
    {"avx2", "DNNF_ISA_AVX2", "-mavx2 -mfma", 8, "x86_64", "AVX2 and FMA"},
    {"avx512", "DNNF_ISA_AVX512",
     "-mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mprefer-vector-width=512", 16, "x86_64",
     "AVX-512 F/BW/DQ/VL and FMA"},
    {"neon", "DNNF_ISA_NEON", "", 4, "aarch64", "NEON (AArch64 Advanced SIMD)"},
};

// The widest vector of any dialect, in f32 lanes; every dialect's width divides it, so a
// decision made for it holds in every dialect (emitted C is dialect-independent).
inline constexpr int64_t kMaxVecWidth = [] {
  int w = 1;
  for (const IsaInfo& i : kIsas) w = i.lanes > w ? i.lanes : w;
  return w;
}();

// The row of `name`, or nullptr.
inline const IsaInfo* find_isa(const std::string& name) {
  for (const IsaInfo& i : kIsas)
    if (name == i.name) return &i;
  return nullptr;
}

// The compiler arguments code for `isa` is built with: -D<macro> then the target flags.
inline std::vector<std::string> isa_compile_flags(const IsaInfo& isa) {
  std::vector<std::string> out;
  if (*isa.macro) out.push_back(std::string("-D") + isa.macro);
  std::string f = isa.flags;
  for (size_t p = 0; p < f.size();) {
    size_t q = f.find(' ', p);
    if (q == std::string::npos) q = f.size();
    if (q > p) out.push_back(f.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

// "scalar, avx2, avx512, neon"
inline std::string isa_names() {
  std::string s;
  for (const IsaInfo& i : kIsas) s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}

}  // namespace dnnf
