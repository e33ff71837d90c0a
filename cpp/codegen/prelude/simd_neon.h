// SIMD vocabulary, NEON dialect (AArch64): 4 f32 lanes in a q register, masks as all-ones
// lanes. Same names and lane semantics as simd_scalar.h (paper §4.4).
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>
#include <limits>

namespace dnnf::simd_neon {

using vf = float32x4_t;
using vm = uint32x4_t;  // each lane all ones (true) or all zeros (false)

inline constexpr int kVecWidth = 4;
inline constexpr int kVecBytes = 16;
inline constexpr const char* kIsaName = "neon";

// ---- memory (NEON has no masked loads: tails go through a small stack buffer) -------------
inline vf v_zero() { return vdupq_n_f32(0.0f); }
inline vf v_set1(float x) { return vdupq_n_f32(x); }
inline vf v_load(const float* p) { return vld1q_f32(p); }
inline vf v_loadu(const float* p) { return vld1q_f32(p); }
inline vf v_load_tail(const float* p, int n) {
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::memcpy(t, p, static_cast<size_t>(n) * 4);
  return vld1q_f32(t);
}
inline void v_store(float* p, vf v) { vst1q_f32(p, v); }
inline void v_storeu(float* p, vf v) { vst1q_f32(p, v); }
inline void v_store_tail(float* p, vf v, int n) {
  float t[4];
  vst1q_f32(t, v);
  std::memcpy(p, t, static_cast<size_t>(n) * 4);
}

// ---- arithmetic --------------------------------------------------------------------------
inline vf v_add(vf a, vf b) { return vaddq_f32(a, b); }
inline vf v_sub(vf a, vf b) { return vsubq_f32(a, b); }
inline vf v_mul(vf a, vf b) { return vmulq_f32(a, b); }
inline vf v_div(vf a, vf b) { return vdivq_f32(a, b); }
inline vf v_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
inline vf v_fnma(vf a, vf b, vf c) { return vfmsq_f32(c, a, b); }
// fmax/fmin semantics differ (NaN-propagating); spell out x86's to match the scalar twin.
inline vf v_max(vf a, vf b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
inline vf v_min(vf a, vf b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
inline vf v_neg(vf a) { return vnegq_f32(a); }
inline vf v_abs(vf a) { return vabsq_f32(a); }
inline vf v_sqrt(vf a) { return vsqrtq_f32(a); }
inline vf v_floor(vf a) { return vrndmq_f32(a); }
inline vf v_ceil(vf a) { return vrndpq_f32(a); }
inline vf v_round(vf a) { return vrndnq_f32(a); }

// ---- compares and masks ------------------------------------------------------------------
inline vm v_cmp_eq(vf a, vf b) { return vceqq_f32(a, b); }
inline vm v_cmp_ne(vf a, vf b) { return vmvnq_u32(vceqq_f32(a, b)); }
inline vm v_cmp_lt(vf a, vf b) { return vcltq_f32(a, b); }
inline vm v_cmp_le(vf a, vf b) { return vcleq_f32(a, b); }
inline vm v_cmp_gt(vf a, vf b) { return vcgtq_f32(a, b); }
inline vm v_cmp_ge(vf a, vf b) { return vcgeq_f32(a, b); }
inline vf v_select(vm m, vf a, vf b) { return vbslq_f32(m, a, b); }
inline vm vm_and(vm a, vm b) { return vandq_u32(a, b); }
inline vm vm_or(vm a, vm b) { return vorrq_u32(a, b); }
inline vm vm_not(vm a) { return vmvnq_u32(a); }
inline vm vm_first(int n) {
  const uint32_t idx[4] = {0, 1, 2, 3};
  return vcltq_u32(vld1q_u32(idx), vdupq_n_u32(static_cast<uint32_t>(n)));
}
inline vm vm_from_bytes_(uint32_t bytes) {
  uint32x4_t w = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(bytes))));
  return vtstq_u32(w, w);
}
inline vm vm_load_u8(const uint8_t* p) {
  uint32_t b;
  std::memcpy(&b, p, 4);
  return vm_from_bytes_(b);
}
inline vm vm_load_u8_tail(const uint8_t* p, int n) {
  uint32_t b = 0;
  std::memcpy(&b, p, static_cast<size_t>(n));
  return vm_from_bytes_(b);
}

// ---- horizontal --------------------------------------------------------------------------
inline float v_reduce_add(vf a) { return vaddvq_f32(a); }
inline float v_reduce_max(vf a) {
  vf s = v_max(a, vextq_f32(a, a, 2));
  s = v_max(s, vextq_f32(s, s, 1));
  return vgetq_lane_f32(s, 0);
}
inline float v_reduce_min(vf a) {
  vf s = v_min(a, vextq_f32(a, a, 2));
  s = v_min(s, vextq_f32(s, s, 1));
  return vgetq_lane_f32(s, 0);
}

// ---- exponent bits -----------------------------------------------------------------------
inline vf v_pow2n(vf n) {
  int32x4_t i = vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127));
  return vreinterpretq_f32_s32(vshlq_n_s32(i, 23));
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
  uint32x4_t bits = vreinterpretq_u32_f32(x);
  int32x4_t ex = vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(bits, 23), vdupq_n_u32(0xff)));
  *e = vcvtq_f32_s32(vsubq_s32(ex, vdupq_n_s32(126)));
  bits = vorrq_u32(vandq_u32(bits, vdupq_n_u32(0x807fffffu)), vdupq_n_u32(0x3f000000u));
  return vreinterpretq_f32_u32(bits);
}

#define DNNF_SIMD_DIALECT_BODY
#include "simd_math_body.h"
#undef DNNF_SIMD_DIALECT_BODY

}  // namespace dnnf::simd_neon
