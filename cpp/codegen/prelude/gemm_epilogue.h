// Fused epilogues and prologues for the packed GEMM (paper §4.4: a Many-to-Many anchor keeps
// its One-to-One neighbours in the same kernel). The code generator normally emits its own
// struct with the same shape; these are the common cases and the examples.
//
// Epilogue: `void apply(vf& v, int row, int col, int n) const` is called once per output
// vector after the full K reduction (and after C's old value is added when accumulating),
// while the vector is still in a register. v holds C[row, col .. col + n), n <= kVecWidth;
// lanes >= n are never stored, and the epilogue must not read memory past n lanes (use
// load_lanes). Epilogues are called from several threads at once: keep them const.
//
// A generated block MatMul -> Add(bias) -> Gelu -> Add(residual) becomes, for example:
//
//   struct Ep_k12 {  // names made by the generator
//     const float* bias; const float* res; long res_ld;
//     void apply(dnnf::simd::vf& v, int row, int col, int n) const {
//       using namespace dnnf::simd;
//       v = v_add(v, dnnf::gemm::load_lanes(bias + col, n));
//       v = v_gelu_erf(v);
//       v = v_add(v, dnnf::gemm::load_lanes(res + row * res_ld + col, n));
//     }
//   };
//   dnnf::gemm::gemm_f32_packed(M, x, K, 1, w_packed, y, N, Ep_k12{b, r, N});
//
// Prologue: `void apply(vf& v, int row, int k, int n) const` rewrites A[row, k .. k + n)
// while A is packed, plus `static constexpr bool kIdentity` (true skips the call). Zero
// padding is written after it, so f(0) != 0 is fine. It runs once per element of A per
// column block of C: it must be a pure function of (value, row, k).
#pragma once

#include <tuple>
#include <utility>

#include "gemm_kernel.h"

namespace dnnf::gemm {

// EpNone (no epilogue) lives in gemm_kernel.h.

// C[r, c] += bias[c] (Gemm / Linear / Conv-as-GEMM with output channels on columns).
struct EpBiasCol {
  const float* bias;
  void apply(vf& v, int, int col, int n) const { v = simd::v_add(v, load_lanes(bias + col, n)); }
};

// C[r, c] += bias[r] (output channels on rows).
struct EpBiasRow {
  const float* bias;
  void apply(vf& v, int row, int, int) const { v = simd::v_add(v, simd::v_set1(bias[row])); }
};

struct EpScale {  // Gemm's alpha
  float alpha;
  void apply(vf& v, int, int, int) const { v = simd::v_mul(v, simd::v_set1(alpha)); }
};

// C[r, c] += R[r * rs + c * cs]: a residual tensor with its own strides. R must not alias C
// when K spans more than one k-block (C then holds partial sums); for an in-place residual
// use Options::accumulate instead.
struct EpResidual {
  const float* r;
  long rs, cs;
  void apply(vf& v, int row, int col, int n) const {
    const float* p = r + row * rs + col * cs;
    if (cs == 1) {
      v = simd::v_add(v, load_lanes(p, n));
    } else {
      alignas(64) float g[kVecWidth];
      for (int t = 0; t < n; ++t) g[t] = p[t * cs];
      v = simd::v_add(v, simd::v_load_tail(g, n));
    }
  }
};

struct EpRelu {
  void apply(vf& v, int, int, int) const { v = simd::v_relu(v); }
};
struct EpGeluErf {
  void apply(vf& v, int, int, int) const { v = simd::v_gelu_erf(v); }
};
struct EpGeluTanh {
  void apply(vf& v, int, int, int) const { v = simd::v_gelu_tanh(v); }
};
struct EpSigmoid {
  void apply(vf& v, int, int, int) const { v = simd::v_sigmoid(v); }
};
struct EpClip {  // Relu6 and Clip
  float lo, hi;
  void apply(vf& v, int, int, int) const { v = simd::v_clip(v, lo, hi); }
};

// Applies its parts left to right: EpChain<EpBiasCol, EpGeluErf, EpResidual>{{b}, {}, {r, ldr, 1}}.
template <class... Eps>
struct EpChain {
  std::tuple<Eps...> parts;
  EpChain(Eps... eps) : parts(std::move(eps)...) {}
  void apply(vf& v, int row, int col, int n) const {
    std::apply([&](const auto&... e) { (e.apply(v, row, col, n), ...); }, parts);
  }
};

struct ProNone {
  static constexpr bool kIdentity = true;
  void apply(vf&, int, int, int) const {}
};

// An elementwise function of A's values, e.g. ProMap{[](vf x) { return simd::v_relu(x); }}.
template <class F>
struct ProMap {
  static constexpr bool kIdentity = false;
  F f;
  void apply(vf& v, int, int, int) const { v = f(v); }
};
template <class F>
ProMap(F) -> ProMap<F>;

// A[r, k] * scale[k] + shift[k]: a per-input-channel affine map (e.g. a BatchNorm or a
// dequantisation in front of a MatMul) folded into the packing.
struct ProScaleShiftK {
  static constexpr bool kIdentity = false;
  const float* scale;
  const float* shift;
  void apply(vf& v, int, int k, int n) const {
    v = simd::v_fma(v, load_lanes(scale + k, n), load_lanes(shift + k, n));
  }
};

}  // namespace dnnf::gemm
