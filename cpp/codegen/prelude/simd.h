// The SIMD vocabulary generated kernels are written in (paper §4.4): one header per ISA with
// identical names, selected here by macro. `dnnf::simd` names the chosen dialect.
//
//   -DDNNF_ISA_AVX512  simd_avx512.h  16 lanes  (-mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma)
//   -DDNNF_ISA_AVX2    simd_avx2.h     8 lanes  (-mavx2 -mfma)
//   -DDNNF_ISA_NEON    simd_neon.h     4 lanes  (AArch64)
//   (none)             simd_scalar.h   1 lane   the reference twin; plain C++
//
// Vocabulary (f32 lanes; vf = vector, vm = lane mask, W = kVecWidth):
//   memory    v_zero v_set1 v_load v_loadu v_load_tail(p,n) v_store v_storeu v_store_tail(p,v,n)
//             tails take 0 <= n <= W, touch only p[0..n), and v_load_tail zero-fills lanes >= n;
//             v_load/v_store promise kVecBytes alignment (unchecked; only speed depends on it)
//   arith     v_add v_sub v_mul v_div v_fma(a,b,c)=a*b+c v_fnma(a,b,c)=c-a*b (both fused)
//             v_max v_min (a>b?a:b / a<b?a:b: x86 semantics everywhere, so put the data operand
//             second to propagate NaN) v_neg v_abs v_sqrt v_rcp v_rsqrt (exact, via division)
//             v_floor v_ceil v_round (half to even)
//   compare   v_cmp_eq/ne/lt/le/gt/ge (ordered; only ne is true on NaN) v_select(m,a,b)=m?a:b
//             vm_and vm_or vm_not vm_first(n) vm_load_u8(p) vm_load_u8_tail(p,n) (bytes != 0)
//   reduce    v_reduce_add v_reduce_max v_reduce_min -> float (lane order differs by ISA)
//   math      v_exp v_expm1 v_log v_log1p v_tanh v_sigmoid v_erf v_erfc v_pow(a,b)
//   act       v_relu v_leaky_relu(x,alpha) v_elu(x,alpha) v_clip(x,lo,hi)
//             v_hard_sigmoid(x,alpha,beta) v_hard_swish v_softplus v_mish v_gelu_erf v_gelu_tanh
//   bits      v_pow2n(n) = 2^n for integer n in [-126,127]; v_frexp(x,&e) = mantissa in
//             [0.5,1) and exponent of a positive normal x (the math is built on these two)
//
// Math accuracy, max over every 7th float32 of the range against double libm (AVX-512):
// exp 1.01 ulp, expm1 2.7, log 0.8, log1p 1.44, tanh 1.31, sigmoid 2.36, erf 2.44, erfc 6.1
// (4e-7 relative); pow = exp(b log|a|), relative error grows with |b log a|. Results below
// 2^-126 are flushed to 0 (exp, sigmoid, erfc, ...): subnormal arithmetic costs ~100 cycles
// a vector on x86. Every dialect runs the same algorithm (simd_math_body.h), so with
// -ffp-contract=off all dialects agree bit for bit on every elementwise function
// (tests/test_prelude_simd.py checks it; reductions differ in summation order). Do not compile
// generated code with -ffast-math: the NaN/inf handling relies on IEEE compares.
#pragma once

#if defined(DNNF_ISA_AVX512)
#include "simd_avx512.h"
namespace dnnf {
namespace simd = simd_avx512;
}
#elif defined(DNNF_ISA_AVX2)
#include "simd_avx2.h"
namespace dnnf {
namespace simd = simd_avx2;
}
#elif defined(DNNF_ISA_NEON)
#include "simd_neon.h"
namespace dnnf {
namespace simd = simd_neon;
}
#else
#include "simd_scalar.h"
namespace dnnf {
namespace simd = simd_scalar;
}
#endif
