// SIMD vocabulary, AVX2 dialect: 8 f32 lanes in a ymm register, masks as all-ones lanes.
// Same names and lane semantics as simd_scalar.h (paper §4.4); needs AVX2 and FMA.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <limits>

namespace dnnf::simd_avx2 {

using vf = __m256;
using vm = __m256;  // each lane all ones (true) or all zeros (false)

inline constexpr int kVecWidth = 8;
inline constexpr int kVecBytes = 32;
inline constexpr const char* kIsaName = "avx2";

inline __m256i tail_mask_(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// ---- memory (alignment of v_load/v_store is a promise, not checked; see simd_avx512.h) ---
inline vf v_zero() { return _mm256_setzero_ps(); }
inline vf v_set1(float x) { return _mm256_set1_ps(x); }
inline vf v_load(const float* p) { return _mm256_loadu_ps(p); }
inline vf v_loadu(const float* p) { return _mm256_loadu_ps(p); }
// vmaskmov does not fault on masked-off lanes, so reading past the end of an array is safe.
inline vf v_load_tail(const float* p, int n) { return _mm256_maskload_ps(p, tail_mask_(n)); }
inline void v_store(float* p, vf v) { _mm256_storeu_ps(p, v); }
inline void v_storeu(float* p, vf v) { _mm256_storeu_ps(p, v); }
inline void v_store_tail(float* p, vf v, int n) { _mm256_maskstore_ps(p, tail_mask_(n), v); }

// ---- arithmetic --------------------------------------------------------------------------
inline vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
inline vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
inline vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
inline vf v_div(vf a, vf b) { return _mm256_div_ps(a, b); }
inline vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
inline vf v_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
inline vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }
inline vf v_min(vf a, vf b) { return _mm256_min_ps(a, b); }
inline vf v_neg(vf a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
inline vf v_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
inline vf v_sqrt(vf a) { return _mm256_sqrt_ps(a); }
inline vf v_floor(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
inline vf v_ceil(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); }
inline vf v_round(vf a) {
  return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// ---- compares and masks ------------------------------------------------------------------
inline vm v_cmp_eq(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
inline vm v_cmp_ne(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_UQ); }
inline vm v_cmp_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
inline vm v_cmp_le(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
inline vm v_cmp_gt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
inline vm v_cmp_ge(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
inline vf v_select(vm m, vf a, vf b) { return _mm256_blendv_ps(b, a, m); }
inline vm vm_and(vm a, vm b) { return _mm256_and_ps(a, b); }
inline vm vm_or(vm a, vm b) { return _mm256_or_ps(a, b); }
inline vm vm_not(vm a) { return _mm256_xor_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(-1))); }
inline vm vm_first(int n) { return _mm256_castsi256_ps(tail_mask_(n)); }
inline vm vm_from_bytes_(int64_t bytes) {
  __m256i w = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
  return vm_not(_mm256_castsi256_ps(_mm256_cmpeq_epi32(w, _mm256_setzero_si256())));
}
inline vm vm_load_u8(const uint8_t* p) {
  int64_t b;
  std::memcpy(&b, p, 8);
  return vm_from_bytes_(b);
}
inline vm vm_load_u8_tail(const uint8_t* p, int n) {
  int64_t b = 0;
  std::memcpy(&b, p, static_cast<size_t>(n));
  return vm_from_bytes_(b);
}

// ---- horizontal --------------------------------------------------------------------------
inline float v_reduce_add(vf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float v_reduce_max(vf a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float v_reduce_min(vf a) {
  __m128 s = _mm_min_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_min_ps(s, _mm_movehl_ps(s, s));
  s = _mm_min_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- exponent bits -----------------------------------------------------------------------
inline vf v_pow2n(vf n) {
  __m256i i = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(i, 23));
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
  __m256i bits = _mm256_castps_si256(x);
  __m256i ex = _mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xff));
  *e = _mm256_cvtepi32_ps(_mm256_sub_epi32(ex, _mm256_set1_epi32(126)));
  bits = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(0x807fffffu))),
                         _mm256_set1_epi32(0x3f000000));
  return _mm256_castsi256_ps(bits);
}

#define DNNF_SIMD_DIALECT_BODY
#include "simd_math_body.h"
#undef DNNF_SIMD_DIALECT_BODY

}  // namespace dnnf::simd_avx2
