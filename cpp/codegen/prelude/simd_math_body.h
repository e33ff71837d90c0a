// Transcendental and activation functions written once over the SIMD vocabulary, so every
// dialect runs the same algorithm and agrees lane for lane (paper §4.4, One-to-One ops).
//
// Not a standalone header: each simd_<isa>.h includes it inside its own namespace, after
// defining the primitives (the Highway pattern of one body in many namespaces). It therefore
// includes nothing and uses only vocabulary names plus std::numeric_limits.
#ifndef DNNF_SIMD_DIALECT_BODY
#error "simd_math_body.h is included by a simd_<isa>.h dialect header, not directly"
#endif

inline vf v_rcp(vf a) { return v_div(v_set1(1.0f), a); }  // exact 1/x, not an estimate
inline vf v_rsqrt(vf a) { return v_div(v_set1(1.0f), v_sqrt(a)); }

// The core of exp: n = round(x log2 e), r = x - n ln2 (two FMA steps), and e^r from the
// Cephes degree-5 polynomial; e^x = e^r 2^n.
inline vf v_exp_core_(vf xc, vf* n_out) {
  vf n = v_round(v_mul(xc, v_set1(1.44269504088896341f)));
  vf r = v_fma(n, v_set1(-0.693359375f), xc);
  r = v_fma(n, v_set1(2.12194440e-4f), r);
  vf y = v_set1(1.9875691500e-4f);
  y = v_fma(y, r, v_set1(1.3981999507e-3f));
  y = v_fma(y, r, v_set1(8.3334519073e-3f));
  y = v_fma(y, r, v_set1(4.1665795894e-2f));
  y = v_fma(y, r, v_set1(1.6666665459e-1f));
  y = v_fma(y, r, v_set1(5.0000001201e-1f));
  y = v_fma(y, v_mul(r, r), r);
  *n_out = n;
  return v_add(y, v_set1(1.0f));
}

// exp: Cephes expf range reduction (n = round(x log2 e), r = x - n ln2 in two FMA steps) and
// its degree-5 polynomial; about 1 ulp. Results below 2^-126 are flushed to 0 (x < -87.33):
// computing a subnormal costs a ~100-cycle microcode assist per vector on x86, and masked
// softmax rows (-1e9, -inf) would hit it on every element. x > 88.72 gives +inf, NaN stays
// NaN. 2^n is applied as two factors so n = 128 (results near FLT_MAX) needs no special case.
inline vf v_exp(vf x) {
  const vf lo = v_set1(-87.33f);
  // Constant first: v_min/v_max return their second operand on NaN, so NaN passes through.
  vf xc = v_max(lo, v_min(v_set1(88.8f), x));
  vf n;
  vf y = v_exp_core_(xc, &n);
  return v_select(v_cmp_lt(x, lo), v_zero(), v_ldexp(y, n));
}

// exp for x <= 0 (or NaN), bit for bit v_exp there: no upper clamp, and 2^n applied as one
// factor, since n >= -126 after the flush (y * 2^n1 * 2^n2 and y * 2^n are the same exact
// scaling). Sigmoid, softplus and the erfc tail only ever need it, and save a quarter of
// the work.
inline vf v_exp_nonpos_(vf x) {
  const vf lo = v_set1(-87.33f);
  vf n;
  vf y = v_exp_core_(v_max(lo, x), &n);  // constant first: NaN passes through
  return v_select(v_cmp_lt(x, lo), v_zero(), v_ldexp1(y, n));
}

// log: Cephes logf (mantissa folded to [sqrt(1/2), sqrt(2)), degree-8 polynomial); about
// 1 ulp. Subnormals are scaled up first; log(0) = -inf, log(x < 0) = NaN, log(+inf) = +inf.
inline vf v_log(vf x) {
  const vf one = v_set1(1.0f);
  vm tiny = v_cmp_lt(x, v_set1(1.17549435e-38f));
  vf xs = v_select(tiny, v_mul(x, v_set1(8388608.0f)), x);
  vf e;
  vf m = v_frexp(xs, &e);
  e = v_sub(e, v_select(tiny, v_set1(23.0f), v_zero()));
  vm low = v_cmp_lt(m, v_set1(0.707106781186547524f));
  e = v_sub(e, v_select(low, one, v_zero()));
  vf t = v_sub(v_select(low, v_add(m, m), m), one);
  vf z = v_mul(t, t);
  vf p = v_set1(7.0376836292e-2f);
  p = v_fma(p, t, v_set1(-1.1514610310e-1f));
  p = v_fma(p, t, v_set1(1.1676998740e-1f));
  p = v_fma(p, t, v_set1(-1.2420140846e-1f));
  p = v_fma(p, t, v_set1(1.4249322787e-1f));
  p = v_fma(p, t, v_set1(-1.6668057665e-1f));
  p = v_fma(p, t, v_set1(2.0000714765e-1f));
  p = v_fma(p, t, v_set1(-2.4999993993e-1f));
  p = v_fma(p, t, v_set1(3.3333331174e-1f));
  vf y = v_mul(v_mul(p, t), z);
  y = v_fma(e, v_set1(-2.12194440e-4f), y);
  y = v_fma(z, v_set1(-0.5f), y);
  vf r = v_fma(e, v_set1(0.693359375f), v_add(t, y));
  const float inf = std::numeric_limits<float>::infinity();
  r = v_select(v_cmp_eq(x, v_zero()), v_set1(-inf), r);
  r = v_select(v_cmp_eq(x, v_set1(inf)), x, r);
  return v_select(v_cmp_ge(x, v_zero()), r, v_set1(std::numeric_limits<float>::quiet_NaN()));
}

// log1p(u) = log(w) + (u - (w - 1)) / w with w = 1 + u rounded: the quotient restores what
// the rounding of w lost, so small u keeps full relative accuracy.
inline vf v_log1p(vf u) {
  const vf one = v_set1(1.0f);
  vf w = v_add(one, u);
  vf r = v_add(v_log(w), v_div(v_sub(u, v_sub(w, one)), w));
  const float inf = std::numeric_limits<float>::infinity();
  r = v_select(v_cmp_eq(w, v_zero()), v_set1(-inf), r);
  return v_select(v_cmp_eq(u, v_set1(inf)), u, r);
}

// expm1: exp(x) - 1, except for |x| < 1 where Kahan's trick (u - 1) x / log(u), u = exp(x),
// cancels the rounding of u (accurate near 0 without a second polynomial); u == 1 (tiny x)
// gives x itself.
inline vf v_expm1(vf x) {
  const vf one = v_set1(1.0f);
  vf u = v_exp(x);
  vf um1 = v_sub(u, one);
  vf r = v_div(v_mul(um1, x), v_log(u));
  r = v_select(v_cmp_eq(u, one), x, r);
  return v_select(v_cmp_lt(v_abs(x), one), r, um1);
}

// tanh: Cephes tanhf, odd polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above.
inline vf v_tanh(vf x) {
  vf a = v_abs(x);
  vf z = v_mul(x, x);
  vf p = v_set1(-5.70498872745e-3f);
  p = v_fma(p, z, v_set1(2.06390887954e-2f));
  p = v_fma(p, z, v_set1(-5.37397155531e-2f));
  p = v_fma(p, z, v_set1(1.33314422036e-1f));
  p = v_fma(p, z, v_set1(-3.33332819422e-1f));
  vf small = v_fma(v_mul(p, z), x, x);
  vf e = v_exp(v_add(a, a));
  vf big = v_sub(v_set1(1.0f), v_div(v_set1(2.0f), v_add(e, v_set1(1.0f))));
  big = v_select(v_cmp_lt(x, v_zero()), v_neg(big), big);
  return v_select(v_cmp_lt(a, v_set1(0.625f)), small, big);
}

// sigmoid = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, e = exp(-|x|): exp never
// overflows, so results stay accurate down to 2^-126 (below, 0: see v_exp).
inline vf v_sigmoid(vf x) {
  const vf one = v_set1(1.0f);
  vf e = v_exp_nonpos_(v_neg(v_abs(x)));
  return v_div(v_select(v_cmp_lt(x, v_zero()), e, one), v_add(one, e));
}

// erfc for a >= 0.5: exp(-a^2) * R(1 / (1 + a/2)), R a degree-9 least-squares fit made for
// this project (relative error 4e-8 on [0.5, 10.5] with float32 coefficients). a^2 is split
// hi + lo with an FMA so exp(-a^2) does not inherit the rounding of a^2 (which would cost a^2
// ulps at the tail). Beyond a = 9.1 (erfc < 1e-37) the result is 0, like v_exp's flush: the
// product would be subnormal.
inline vf v_erfc_tail_(vf a) {
  vm beyond = v_cmp_gt(a, v_set1(9.1f));
  a = v_min(v_set1(9.1f), a);
  vf hi = v_mul(a, a);
  vf lo = v_fma(a, a, v_neg(hi));
  vf g = v_exp_nonpos_(v_neg(hi));
  g = v_fnma(lo, g, g);  // exp(-hi - lo) ~= exp(-hi) (1 - lo)
  vf u = v_div(v_set1(1.0f), v_fma(a, v_set1(0.5f), v_set1(1.0f)));
  vf r = v_set1(-7.096736878e-02f);
  r = v_fma(r, u, v_set1(3.375948966e-01f));
  r = v_fma(r, u, v_set1(-5.876795053e-01f));
  r = v_fma(r, u, v_set1(3.839668632e-01f));
  r = v_fma(r, u, v_set1(-9.475068003e-02f));
  r = v_fma(r, u, v_set1(2.303069085e-01f));
  r = v_fma(r, u, v_set1(2.360769063e-01f));
  r = v_fma(r, u, v_set1(2.834526598e-01f));
  r = v_fma(r, u, v_set1(2.819964290e-01f));
  r = v_fma(r, u, v_set1(3.110769512e-06f));
  return v_select(beyond, v_zero(), v_mul(g, r));
}
// erf(x) = x P(x^2) for |x| < 0.875, P a degree-6 fit (relative error 7e-8).
inline vf v_erf_head_(vf x) {
  vf z = v_mul(x, x);
  vf p = v_set1(8.627481293e-05f);
  p = v_fma(p, z, v_set1(-8.198126452e-04f));
  p = v_fma(p, z, v_set1(5.205398425e-03f));
  p = v_fma(p, z, v_set1(-2.686091140e-02f));
  p = v_fma(p, z, v_set1(1.128371656e-01f));
  p = v_fma(p, z, v_set1(-3.761263490e-01f));
  p = v_fma(p, z, v_set1(1.128379226e+00f));
  return v_mul(x, p);
}
inline vf v_erf(vf x) {
  vf a = v_abs(x);
  vf big = v_sub(v_set1(1.0f), v_erfc_tail_(a));
  big = v_select(v_cmp_lt(x, v_zero()), v_neg(big), big);
  return v_select(v_cmp_lt(a, v_set1(0.875f)), v_erf_head_(x), big);
}
// erfc switches at 0.5, not 0.875: 1 - erf(x) would cancel (erfc(0.875) = 0.22).
inline vf v_erfc(vf x) {
  vf a = v_abs(x);
  vf t = v_erfc_tail_(a);
  vf big = v_select(v_cmp_lt(x, v_zero()), v_sub(v_set1(2.0f), t), t);
  return v_select(v_cmp_lt(a, v_set1(0.5f)), v_sub(v_set1(1.0f), v_erf_head_(x)), big);
}

// pow(a, b) = exp(b log|a|), sign restored for a < 0 and odd integer b, NaN for finite a < 0
// and non-integer b, 1 for b == 0 (C's pow, except pow(1, NaN) = NaN). Relative error grows
// as |b log a| * 2^-24, so the code generator should lower constant exponents 2, 3, 0.5, -1
// to v_mul / v_sqrt / v_rcp.
inline vf v_pow(vf a, vf b) {
  vf r = v_exp(v_mul(b, v_log(v_abs(a))));
  vm b_int = v_cmp_eq(v_floor(b), b);
  vf half = v_mul(b, v_set1(0.5f));
  vm b_odd = vm_and(b_int, v_cmp_ne(v_floor(half), half));
  vm neg = v_cmp_lt(a, v_zero());
  r = v_select(vm_and(neg, b_odd), v_neg(r), r);
  vm finite_neg = vm_and(neg, v_cmp_gt(a, v_set1(-std::numeric_limits<float>::infinity())));
  const vf nan = v_set1(std::numeric_limits<float>::quiet_NaN());
  r = v_select(vm_and(finite_neg, vm_not(b_int)), nan, r);
  return v_select(v_cmp_eq(b, v_zero()), v_set1(1.0f), r);
}

// ---- activations (ONNX definitions); the data operand goes second in v_max / v_min so a NaN
// input stays NaN, as NumPy and PyTorch have it. -------------------------------------------
inline vf v_relu(vf x) { return v_max(v_zero(), x); }
inline vf v_leaky_relu(vf x, float alpha) {
  return v_select(v_cmp_lt(x, v_zero()), v_mul(x, v_set1(alpha)), x);
}
inline vf v_elu(vf x, float alpha) {
  return v_select(v_cmp_lt(x, v_zero()), v_mul(v_set1(alpha), v_expm1(x)), x);
}
inline vf v_clip(vf x, float lo, float hi) { return v_min(v_set1(hi), v_max(v_set1(lo), x)); }
inline vf v_hard_sigmoid(vf x, float alpha, float beta) {
  return v_max(v_zero(), v_min(v_set1(1.0f), v_fma(x, v_set1(alpha), v_set1(beta))));
}
inline vf v_hard_swish(vf x) { return v_mul(x, v_hard_sigmoid(x, 1.0f / 6.0f, 0.5f)); }
// softplus = log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow, no cancellation.
inline vf v_softplus(vf x) {
  return v_add(v_max(v_zero(), x), v_log1p(v_exp_nonpos_(v_neg(v_abs(x)))));
}
// mish = x tanh(log(1 + e^x)) = x n / (n + 2) with n = e^x (e^x + 2): one exp and one
// division instead of exp, log1p (a log and a division) and tanh (an exp and a division).
// No cancellation anywhere: for x << 0, n / (n + 2) ~ e^x. Above x = 20 tanh(softplus(x))
// rounds to 1 (and e^2x would overflow near 44), so the result is x itself.
inline vf v_mish(vf x) {
  const vf big = v_set1(20.0f), two = v_set1(2.0f);
  vf u = v_exp(v_min(big, x));  // data second: NaN passes
  vf n = v_mul(u, v_add(u, two));
  vf r = v_mul(x, v_div(n, v_add(n, two)));
  return v_select(v_cmp_gt(x, big), x, r);
}
// Gelu (erf form) as x/2 erfc(-x/sqrt 2): no cancellation of 1 + erf for x << 0.
inline vf v_gelu_erf(vf x) {
  return v_mul(v_mul(x, v_set1(0.5f)), v_erfc(v_mul(x, v_set1(-0.707106781186547524f))));
}
// Gelu (tanh form): x/2 (1 + tanh y) == x sigmoid(2y), y = sqrt(2/pi) (x + 0.044715 x^3).
inline vf v_gelu_tanh(vf x) {
  vf y2 = v_mul(x, v_fma(v_mul(x, x), v_set1(2.0f * 0.7978845608028654f * 0.044715f),
                         v_set1(2.0f * 0.7978845608028654f)));
  return v_mul(x, v_sigmoid(y2));
}
