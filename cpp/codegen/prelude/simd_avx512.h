// SIMD vocabulary, AVX-512 dialect: 16 f32 lanes in a zmm register, masks in k registers.
// Same names and lane semantics as simd_scalar.h (paper §4.4); needs AVX512F/BW/VL.
#pragma once

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_ps() when
// inlined (GCC bug 105593); the pragma must cover the header's lines to silence it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <limits>

namespace dnnf::simd_avx512 {

using vf = __m512;
using vm = __mmask16;

inline constexpr int kVecWidth = 16;
inline constexpr int kVecBytes = 64;
inline constexpr const char* kIsaName = "avx512";

inline __mmask16 tail_mask_(int n) { return static_cast<__mmask16>((1u << n) - 1u); }

// ---- memory (v_load/v_store: the caller promises kVecBytes alignment; the unaligned
// instructions cost nothing extra on aligned data, so a broken promise is slow, not fatal) --
inline vf v_zero() { return _mm512_setzero_ps(); }
inline vf v_set1(float x) { return _mm512_set1_ps(x); }
inline vf v_load(const float* p) { return _mm512_loadu_ps(p); }
inline vf v_loadu(const float* p) { return _mm512_loadu_ps(p); }
inline vf v_load_tail(const float* p, int n) { return _mm512_maskz_loadu_ps(tail_mask_(n), p); }
inline void v_store(float* p, vf v) { _mm512_storeu_ps(p, v); }
inline void v_storeu(float* p, vf v) { _mm512_storeu_ps(p, v); }
inline void v_store_tail(float* p, vf v, int n) { _mm512_mask_storeu_ps(p, tail_mask_(n), v); }

// ---- arithmetic --------------------------------------------------------------------------
inline vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
inline vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
inline vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
inline vf v_div(vf a, vf b) { return _mm512_div_ps(a, b); }
inline vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
inline vf v_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
inline vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
inline vf v_min(vf a, vf b) { return _mm512_min_ps(a, b); }
inline vf v_neg(vf a) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
}
inline vf v_abs(vf a) { return _mm512_abs_ps(a); }
inline vf v_sqrt(vf a) { return _mm512_sqrt_ps(a); }
inline vf v_floor(vf a) {
  return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
inline vf v_ceil(vf a) {
  return _mm512_roundscale_ps(a, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
inline vf v_round(vf a) {
  return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// ---- compares and masks ------------------------------------------------------------------
inline vm v_cmp_eq(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
inline vm v_cmp_ne(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }
inline vm v_cmp_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
inline vm v_cmp_le(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
inline vm v_cmp_gt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
inline vm v_cmp_ge(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
inline vf v_select(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, b, a); }
inline vm vm_and(vm a, vm b) { return static_cast<vm>(a & b); }
inline vm vm_or(vm a, vm b) { return static_cast<vm>(a | b); }
inline vm vm_not(vm a) { return static_cast<vm>(~a); }
inline vm vm_first(int n) { return tail_mask_(n); }
inline vm vm_load_u8(const uint8_t* p) {
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm_test_epi8_mask(b, b);
}
inline vm vm_load_u8_tail(const uint8_t* p, int n) {
  __m128i b = _mm_maskz_loadu_epi8(tail_mask_(n), p);
  return _mm_test_epi8_mask(b, b);
}

// ---- horizontal --------------------------------------------------------------------------
inline float v_reduce_add(vf a) { return _mm512_reduce_add_ps(a); }
inline float v_reduce_max(vf a) { return _mm512_reduce_max_ps(a); }
inline float v_reduce_min(vf a) { return _mm512_reduce_min_ps(a); }

// ---- exponent bits -----------------------------------------------------------------------
inline vf v_pow2n(vf n) {
  __m512i i = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
  return _mm512_castsi512_ps(_mm512_slli_epi32(i, 23));
}
// y * 2^n for integral n: one rounding (scalef), bit for bit the other dialects' products
// by exact powers of two. v_ldexp1 for n in [-126, 127], v_ldexp for n in [-252, 254].
inline vf v_ldexp1(vf y, vf n) { return _mm512_scalef_ps(y, n); }
inline vf v_ldexp(vf y, vf n) { return _mm512_scalef_ps(y, n); }
inline vf v_frexp(vf x, vf* e) {
  __m512i bits = _mm512_castps_si512(x);
  __m512i ex = _mm512_and_si512(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(0xff));
  *e = _mm512_cvtepi32_ps(_mm512_sub_epi32(ex, _mm512_set1_epi32(126)));
  bits = _mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi32(static_cast<int>(0x807fffffu))),
                         _mm512_set1_epi32(0x3f000000));
  return _mm512_castsi512_ps(bits);
}

#define DNNF_SIMD_DIALECT_BODY
#include "simd_math_body.h"
#undef DNNF_SIMD_DIALECT_BODY

}  // namespace dnnf::simd_avx512
