// SIMD vocabulary, scalar dialect (width 1): the reference twin every vector dialect must match
// lane for lane. Generated kernels (paper §4.4) call only these names; see simd.h for the list.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace dnnf::simd_scalar {

using vf = float;  // one f32 lane
using vm = bool;   // one lane of a compare result

inline constexpr int kVecWidth = 1;
inline constexpr int kVecBytes = 4;
inline constexpr const char* kIsaName = "scalar";

// ---- memory -------------------------------------------------------------------------------
inline vf v_zero() { return 0.0f; }
inline vf v_set1(float x) { return x; }
inline vf v_load(const float* p) { return *p; }
inline vf v_loadu(const float* p) { return *p; }
inline vf v_load_tail(const float* p, int n) { return n > 0 ? *p : 0.0f; }
inline void v_store(float* p, vf v) { *p = v; }
inline void v_storeu(float* p, vf v) { *p = v; }
inline void v_store_tail(float* p, vf v, int n) {
  if (n > 0) *p = v;
}

// ---- arithmetic (IEEE, round to nearest; v_fma is fused in every dialect) ------------------
inline vf v_add(vf a, vf b) { return a + b; }
inline vf v_sub(vf a, vf b) { return a - b; }
inline vf v_mul(vf a, vf b) { return a * b; }
inline vf v_div(vf a, vf b) { return a / b; }
inline vf v_fma(vf a, vf b, vf c) { return std::fma(a, b, c); }
inline vf v_fnma(vf a, vf b, vf c) { return std::fma(-a, b, c); }
// x86 semantics in every dialect: the second operand wins ties, NaNs and signed zeros.
inline vf v_max(vf a, vf b) { return a > b ? a : b; }
inline vf v_min(vf a, vf b) { return a < b ? a : b; }
inline vf v_neg(vf a) { return -a; }
inline vf v_abs(vf a) { return std::fabs(a); }
inline vf v_sqrt(vf a) { return std::sqrt(a); }
inline vf v_floor(vf a) { return std::floor(a); }
inline vf v_ceil(vf a) { return std::ceil(a); }
inline vf v_round(vf a) { return std::nearbyint(a); }  // half to even (default rounding mode)

// ---- compares and masks (ordered: false on NaN, except v_cmp_ne) --------------------------
inline vm v_cmp_eq(vf a, vf b) { return a == b; }
inline vm v_cmp_ne(vf a, vf b) { return a != b; }
inline vm v_cmp_lt(vf a, vf b) { return a < b; }
inline vm v_cmp_le(vf a, vf b) { return a <= b; }
inline vm v_cmp_gt(vf a, vf b) { return a > b; }
inline vm v_cmp_ge(vf a, vf b) { return a >= b; }
inline vf v_select(vm m, vf a, vf b) { return m ? a : b; }
inline vm vm_and(vm a, vm b) { return a && b; }
inline vm vm_or(vm a, vm b) { return a || b; }
inline vm vm_not(vm a) { return !a; }
inline vm vm_first(int n) { return n > 0; }
inline vm vm_load_u8(const uint8_t* p) { return p[0] != 0; }
inline vm vm_load_u8_tail(const uint8_t* p, int n) { return n > 0 && p[0] != 0; }

// ---- horizontal --------------------------------------------------------------------------
inline float v_reduce_add(vf a) { return a; }
inline float v_reduce_max(vf a) { return a; }
inline float v_reduce_min(vf a) { return a; }

// ---- exponent bits, for the shared math (valid ranges documented in simd.h) ---------------
inline vf v_pow2n(vf n) {
  // n == n keeps a NaN out of the int conversion (undefined behaviour in C++); the vector
  // dialects also produce 1.0 for it, and the NaN travels through the other factor.
  int32_t i = n == n ? static_cast<int32_t>(n) : 0;
  uint32_t bits = static_cast<uint32_t>(i + 127) << 23;
  float r;
  std::memcpy(&r, &bits, 4);
  return r;
}
// y * 2^n for integral n, one rounding (products by exact powers of two; AVX-512 uses
// scalef, bit for bit the same): v_ldexp1 for n in [-126, 127], v_ldexp for n in [-252, 254]
// (two factors, the first product exact).
inline vf v_ldexp1(vf y, vf n) { return v_mul(y, v_pow2n(n)); }
inline vf v_ldexp(vf y, vf n) {
  vf n1 = v_floor(v_mul(n, v_set1(0.5f)));
  return v_mul(v_mul(y, v_pow2n(n1)), v_pow2n(v_sub(n, n1)));
}
inline vf v_frexp(vf x, vf* e) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  *e = static_cast<float>(static_cast<int32_t>((bits >> 23) & 0xffu) - 126);
  bits = (bits & 0x807fffffu) | 0x3f000000u;
  float m;
  std::memcpy(&m, &bits, 4);
  return m;
}

#define DNNF_SIMD_DIALECT_BODY
#include "simd_math_body.h"
#undef DNNF_SIMD_DIALECT_BODY

}  // namespace dnnf::simd_scalar
