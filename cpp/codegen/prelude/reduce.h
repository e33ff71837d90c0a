// Reduction anchors (paper §4.4, Many-to-Many anchors): ReduceSum/Mean/Max/Min/Prod/L2 over
// any set of axes of a tensor of rank <= 8, with the fused epilogue; ArgMax/ArgMin at the end.
//
//   reduce_f32<ReduceKind::Mean>(rank, shape, axes_mask, x, y, ep)
//   reduce_int<ReduceKind::Sum>(rank, shape, axes_mask, x, y, EpNone{})  (integers, below)
//
// Bit a of axes_mask set = axis a is reduced (0 = noop_with_empty_axes: y = f(x) elementwise,
// so ReduceL2 gives |x|). y is the keepdims shape flattened; keepdims=0 only renames it.
// Epilogue view: [R, C] over that keepdims shape, C = shape[rank - 1] when the last axis is
// kept, else 1 (flat output index = row * C + col either way). Empty reductions give the
// oracle's values: Sum/L2 0, Prod 1, Max -inf, Min +inf, Mean NaN. Max/Min propagate NaN.
//
// After dropping unit axes and merging neighbours of the same kind, the shape is one of
//   [k, r]      rows: each output is a horizontal reduction of a contiguous run
//   [k0, r, k1] columns: vectors across the contiguous kept block k1, accumulated down r
//   anything else (e.g. [r0, k, r1]): a generic loop over the leading axes with the same
//               two inner kernels accumulating into y
// Long reductions run in blocks of kBlock steps per accumulator, merged at the end: no serial
// f32 sum is longer than kBlock, which keeps the rounding error of million-element sums small.
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "rowops.h"

namespace dnnf::rowops {

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L2 };

namespace detail {

template <ReduceKind K>
struct RedOp {
  static constexpr bool kMax = K == ReduceKind::Max, kMin = K == ReduceKind::Min;
  static float identity() {
    if constexpr (kMax) return -std::numeric_limits<float>::infinity();
    if constexpr (kMin) return std::numeric_limits<float>::infinity();
    if constexpr (K == ReduceKind::Prod) return 1.0f;
    return 0.0f;
  }
  // Merges two partial results. Max/Min: max(b, a) keeps a NaN already in a; the select
  // takes a NaN arriving in b (v_max alone drops it).
  static vf merge(vf a, vf b) {
    using namespace simd;
    if constexpr (kMax) return v_select(v_cmp_ne(b, b), b, v_max(b, a));
    if constexpr (kMin) return v_select(v_cmp_ne(b, b), b, v_min(b, a));
    if constexpr (K == ReduceKind::Prod) return v_mul(a, b);
    return v_add(a, b);
  }
  static vf step(vf acc, vf x) {  // folds one input vector into an accumulator
    if constexpr (K == ReduceKind::L2) return simd::v_fma(x, x, acc);
    return merge(acc, x);
  }
  static float merge_scalar(float a, float b) {
    if constexpr (kMax) return b != b ? b : (b > a ? b : a);
    if constexpr (kMin) return b != b ? b : (b < a ? b : a);
    if constexpr (K == ReduceKind::Prod) return a * b;
    return a + b;
  }
  static float hreduce(vf v) {  // across lanes, NaN-aware for every kind
    alignas(64) float t[kVecWidth];
    simd::v_store(t, v);
    float r = t[0];
    for (int l = 1; l < kVecWidth; ++l) r = merge_scalar(r, t[l]);
    return r;
  }
  static vf finish(vf acc, float count) {
    if constexpr (K == ReduceKind::Mean) return simd::v_div(acc, simd::v_set1(count));
    if constexpr (K == ReduceKind::L2) return simd::v_sqrt(acc);
    return acc;
  }
};

inline constexpr long kBlock = 512;

// Reduction of the contiguous run x[0, n) (not finished).
template <ReduceKind K>
float reduce_run(const float* x, long n) {
  using Op = RedOp<K>;
  constexpr int W = kVecWidth;
  const vf id = simd::v_set1(Op::identity());
  vf total = id;
  for (long b0 = 0; b0 < n; b0 += kBlock * 4 * W) {
    const long b1 = std::min(n, b0 + kBlock * 4 * W);
    vf a0 = id, a1 = id, a2 = id, a3 = id;
    long i = b0;
    for (; i + 4 * W <= b1; i += 4 * W) {
      a0 = Op::step(a0, simd::v_loadu(x + i));
      a1 = Op::step(a1, simd::v_loadu(x + i + W));
      a2 = Op::step(a2, simd::v_loadu(x + i + 2 * W));
      a3 = Op::step(a3, simd::v_loadu(x + i + 3 * W));
    }
    for (; i < b1; i += W) a0 = Op::step(a0, load_fill(x + i, b1 - i, Op::identity()));
    total = Op::merge(total, Op::merge(Op::merge(a0, a1), Op::merge(a2, a3)));
  }
  return Op::hreduce(total);
}

// acc[0, n) = merge(acc, reduction over i < r of x[i * ld + (0, n)]): a column block of at
// most kCols = 4 vectors kept in registers while walking down r.
template <ReduceKind K, bool kLoadAcc>
void reduce_cols(const float* x, long r, long ld, long n, float* acc) {
  using Op = RedOp<K>;
  constexpr int W = kVecWidth;
  const vf id = simd::v_set1(Op::identity());
  vf t[4] = {id, id, id, id};
  if constexpr (kLoadAcc) {
    for (int v = 0; v < 4; ++v) {
      if (v * W < n) t[v] = load_lanes(acc + v * W, static_cast<int>(std::min<long>(W, n - v * W)));
    }
  }
  for (long i0 = 0; i0 < r; i0 += kBlock) {
    const long i1 = std::min(r, i0 + kBlock);
    vf a[4] = {id, id, id, id};
    if (n == 4 * W) {
      for (long i = i0; i < i1; ++i) {
        const float* p = x + i * ld;
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) a[v] = Op::step(a[v], simd::v_loadu(p + v * W));
      }
    } else {
      for (long i = i0; i < i1; ++i) {
        const float* p = x + i * ld;
        for (int v = 0; v < 4 && v * W < n; ++v) {
          const int m = static_cast<int>(std::min<long>(W, n - v * W));
          a[v] = Op::step(a[v], load_lanes(p + v * W, m));
        }
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) t[v] = Op::merge(t[v], a[v]);
  }
  for (int v = 0; v < 4 && v * W < n; ++v) {
    store_lanes(acc + v * W, t[v], static_cast<int>(std::min<long>(W, n - v * W)));
  }
}

struct Group {
  long size;
  bool reduced;
};

}  // namespace detail

template <ReduceKind K, class Ep = EpNone>
void reduce_f32(int rank, const long* shape, unsigned axes_mask, const float* x, float* y,
                const Ep& ep = {}) {
  using Op = detail::RedOp<K>;
  constexpr int W = kVecWidth;
  constexpr long kCols = 4 * W;
  if (rank < 0 || rank > 8) throw std::invalid_argument("reduce_f32: rank must be 0..8");
  long out_n = 1, count = 1;
  for (int a = 0; a < rank; ++a) ((axes_mask >> a) & 1u ? count : out_n) *= shape[a];
  if (out_n == 0) return;
  const bool last_kept = rank == 0 || !((axes_mask >> (rank - 1)) & 1u);
  const long C = rank > 0 && last_kept ? shape[rank - 1] : 1, R = out_n / C;
  const float fcount = static_cast<float>(count);

  // Canonical groups: unit axes dropped, neighbours of one kind merged; then padded to start
  // with a kept group and end with a reduced one where that helps the two fast shapes.
  detail::Group g[9];
  int ng = 0;
  for (int a = 0; a < rank; ++a) {
    const bool red = (axes_mask >> a) & 1u;
    if (shape[a] == 1) continue;
    if (ng > 0 && g[ng - 1].reduced == red) {
      g[ng - 1].size *= shape[a];
    } else {
      g[ng++] = {shape[a], red};
    }
  }
  if (count == 0 || ng == 0 || (ng == 1 && !g[0].reduced)) {
    // Nothing to reduce over (an empty set, or one element per output): map x elementwise.
    detail::parallel_rows(R, C, [&](long lo, long hi) {
      for (long r = lo; r < hi; ++r) {
        for (long c = 0; c < C; c += W) {
          const int n = static_cast<int>(std::min<long>(W, C - c));
          const long off = r * C + c;
          vf v = simd::v_set1(Op::identity());
          if (count != 0) v = Op::step(v, load_lanes(x + off, n));
          detail::emit(y + off, Op::finish(v, fcount), r, c, n, ep);
        }
      }
    });
    return;
  }
  if (g[0].reduced) {  // a leading kept group of 1 makes [r, ...] look like [k, r, ...]
    for (int i = ng; i > 0; --i) g[i] = g[i - 1];
    g[0] = {1, false};
    ++ng;
  }

  if (ng == 2) {  // [k, r]: C == 1, every output is its own epilogue row
    const long k = g[0].size, r = g[1].size;
    detail::parallel_rows(k, r, [&](long lo, long hi) {
      for (long i = lo; i < hi; ++i) {
        const float v = detail::reduce_run<K>(x + i * r, r);
        detail::emit(y + i, Op::finish(simd::v_set1(v), fcount), i, 0, 1, ep);
      }
    });
    return;
  }
  if (ng == 3) {  // [k0, r, k1]: vectors across k1, then the epilogue over y as [R, C]
    const long k0 = g[0].size, r = g[1].size, k1 = g[2].size;
    const long blocks = (k1 + kCols - 1) / kCols, units = k0 * blocks;
    // Fewer column blocks than threads over a long reduced axis (a channels-last global pool:
    // [1, H*W, C] with C <= 64 one block): the rows split into S parts, each summed into a
    // partial of its own, merged in part order (the same sums for a given thread count).
    const long T = get_num_threads();
    const long S = units < T && r * std::min(k1, kCols) >= 4 * detail::kGrain
                       ? std::min((T + units - 1) / units, std::max(1L, r / 64))
                       : 1;
    if (S > 1) {
      std::vector<float> part(static_cast<size_t>(units * S * kCols));
      parallel_for(static_cast<int>(units * S), [&](int t) {
        const long u = t / S, s = t % S, o = u / blocks, j = (u % blocks) * kCols, n = std::min(kCols, k1 - j);
        const long i0 = r * s / S, i1 = r * (s + 1) / S;
        detail::reduce_cols<K, false>(x + (o * r + i0) * k1 + j, i1 - i0, k1, n, part.data() + t * kCols);
      });
      for (long u = 0; u < units; ++u) {
        const long o = u / blocks, j = (u % blocks) * kCols, n = std::min(kCols, k1 - j);
        float* yo = y + o * k1 + j;
        for (long c = 0; c < n; c += W) {
          const int m = static_cast<int>(std::min<long>(W, n - c));
          vf acc = load_lanes(part.data() + u * S * kCols + c, m);
          for (long q = 1; q < S; ++q) acc = Op::merge(acc, load_lanes(part.data() + (u * S + q) * kCols + c, m));
          store_lanes(yo + c, Op::finish(acc, fcount), m);
        }
      }
      detail::epilogue_pass(y, R, C, ep);
      return;
    }
    detail::parallel_rows(k0 * blocks, r * kCols, [&](long lo, long hi) {
      for (long u = lo; u < hi; ++u) {
        const long o = u / blocks, j = (u % blocks) * kCols, n = std::min(kCols, k1 - j);
        float* yo = y + o * k1 + j;
        detail::reduce_cols<K, false>(x + o * r * k1 + j, r, k1, n, yo);
        for (long c = 0; c < n; c += W) {
          const int m = static_cast<int>(std::min<long>(W, n - c));
          store_lanes(yo + c, Op::finish(load_lanes(yo + c, m), fcount), m);
        }
      }
    });
    detail::epilogue_pass(y, R, C, ep);
    return;
  }

  // Generic: y starts at the identity; an odometer over every group but the last folds each
  // contiguous run of the input into y (single-threaded: these shapes are rare and small).
  std::fill(y, y + out_n, Op::identity());
  long in_stride[9], out_stride[9], idx[9] = {};
  long s_in = 1, s_out = 1;
  for (int i = ng - 1; i >= 0; --i) {
    in_stride[i] = s_in;
    out_stride[i] = g[i].reduced ? 0 : s_out;
    s_in *= g[i].size;
    if (!g[i].reduced) s_out *= g[i].size;
  }
  const detail::Group last = g[ng - 1];
  long prefix = 1;
  for (int i = 0; i < ng - 1; ++i) prefix *= g[i].size;
  for (long p = 0; p < prefix; ++p) {
    long in_off = 0, out_off = 0;
    for (int i = 0; i < ng - 1; ++i) {
      in_off += idx[i] * in_stride[i];
      out_off += idx[i] * out_stride[i];
    }
    if (last.reduced) {
      y[out_off] = Op::merge_scalar(y[out_off], detail::reduce_run<K>(x + in_off, last.size));
    } else {
      for (long j = 0; j < last.size; j += kCols) {
        detail::reduce_cols<K, true>(x + in_off + j, 1, 0, std::min(kCols, last.size - j),
                                     y + out_off + j);
      }
    }
    for (int i = ng - 2; i >= 0 && ++idx[i] == g[i].size; --i) idx[i] = 0;
  }
  for (long i = 0; i < out_n; i += W) {
    const int n = static_cast<int>(std::min<long>(W, out_n - i));
    store_lanes(y + i, Op::finish(load_lanes(y + i, n), fcount), n);
  }
  detail::epilogue_pass(y, R, C, ep);
}

// ---- Integer reductions ---------------------------------------------------------------------
// reduce_int<K>(rank, shape, axes_mask, x, y): ReduceSum/Max/Min/Prod of an integer tensor
// (T: int8_t .. uint64_t; bool for Max/Min, i.e. any/all), same layout rules as reduce_f32, exact in T (Sum and Prod wrap
// modulo 2^bits, as ONNX Runtime's do). No epilogue: code generation keeps integer anchors'
// consumers out of the anchor (Ep is EpNone). The outputs split across threads; each output
// reads its elements in order.
namespace detail {
template <class T>
struct Is {
  using type = T;
};

// The element walk of the scalar reductions: output o's first input element, and the t-th of
// the elements it reduces (in row-major order of the reduced axes).
struct ReduceWalk {
  int rank;
  const long* shape;
  unsigned mask;
  long out_n = 1, count = 1, in_stride[8] = {};
  ReduceWalk(int r, const long* s, unsigned m) : rank(r), shape(s), mask(m) {
    if (rank < 0 || rank > 8) throw std::invalid_argument("reduce: rank must be 0..8");
    for (long a = rank - 1, st = 1; a >= 0; --a) {
      in_stride[a] = st;
      st *= shape[a];
      ((mask >> a) & 1u ? count : out_n) *= shape[a];
    }
  }
  long base(long o) const {
    long b = 0;
    for (int a = rank - 1; a >= 0; --a) {
      if ((mask >> a) & 1u) continue;
      b += (o % shape[a]) * in_stride[a];
      o /= shape[a];
    }
    return b;
  }
  long offset(long b, long t) const {
    for (int a = rank - 1; a >= 0; --a) {
      if (!((mask >> a) & 1u)) continue;
      b += (t % shape[a]) * in_stride[a];
      t /= shape[a];
    }
    return b;
  }
};
}  // namespace detail

template <ReduceKind K, class T, class Ep>
void reduce_int(int rank, const long* shape, unsigned axes_mask, const T* x, T* y, const Ep&) {
  static_assert(std::is_integral_v<T>, "reduce_int reduces integers");
  static_assert(std::is_same_v<Ep, EpNone>, "integer reductions take no epilogue");
  static_assert(K == ReduceKind::Sum || K == ReduceKind::Max || K == ReduceKind::Min ||
                K == ReduceKind::Prod, "integer reductions: Sum, Max, Min, Prod");
  // Wrapping arithmetic without signed overflow (types narrower than unsigned int widen to it,
  // so that promotion never multiplies in signed int).
  using U = typename std::conditional_t<(sizeof(T) < sizeof(unsigned)), detail::Is<unsigned>,
                                        std::make_unsigned<T>>::type;
  const detail::ReduceWalk w(rank, shape, axes_mask);
  if (w.out_n == 0) return;
  detail::parallel_rows(w.out_n, w.count, [&](long lo, long hi) {
    for (long o = lo; o < hi; ++o) {
      const long base = w.base(o);
      U acc = K == ReduceKind::Prod ? U(1) : U(0);
      T best = w.count > 0 ? x[base] : T(K == ReduceKind::Min);  // bool's empty Min/Max: true/false
      for (long t = 0; t < w.count; ++t) {
        const T v = x[w.offset(base, t)];
        if constexpr (K == ReduceKind::Sum) acc = U(acc + U(v));
        if constexpr (K == ReduceKind::Prod) acc = U(acc * U(v));
        if constexpr (K == ReduceKind::Max) best = v > best ? v : best;
        if constexpr (K == ReduceKind::Min) best = v < best ? v : best;
      }
      if constexpr (K == ReduceKind::Max || K == ReduceKind::Min) y[o] = best;
      else y[o] = static_cast<T>(acc);
    }
  });
}

// ---- Double reductions ----------------------------------------------------------------------
// reduce_f64<K>(rank, shape, axes_mask, x, y): every float kind on double tensors, in double,
// each output's elements in order (scalar: doubles are rare, e.g. the double sum inside
// ReduceLogSumExp's ONNX function body). Max/Min return NaN when an element is NaN; empty:
// Sum/L2 0, Prod 1, Mean NaN, Max -inf, Min +inf. No epilogue (epilogues compute in f32).
template <ReduceKind K, class Ep>
void reduce_f64(int rank, const long* shape, unsigned axes_mask, const double* x, double* y, const Ep&) {
  static_assert(std::is_same_v<Ep, EpNone>, "double reductions take no epilogue");
  const detail::ReduceWalk w(rank, shape, axes_mask);
  if (w.out_n == 0) return;
  detail::parallel_rows(w.out_n, w.count, [&](long lo, long hi) {
    for (long o = lo; o < hi; ++o) {
      const long base = w.base(o);
      double acc = K == ReduceKind::Prod ? 1.0 : K == ReduceKind::Max ? -HUGE_VAL : K == ReduceKind::Min ? HUGE_VAL : 0.0;
      for (long t = 0; t < w.count; ++t) {
        const double v = x[w.offset(base, t)];
        if constexpr (K == ReduceKind::Sum || K == ReduceKind::Mean) acc += v;
        if constexpr (K == ReduceKind::Prod) acc *= v;
        if constexpr (K == ReduceKind::L2) acc += v * v;
        if constexpr (K == ReduceKind::Max) acc = (v > acc || v != v) && acc == acc ? v : acc;
        if constexpr (K == ReduceKind::Min) acc = (v < acc || v != v) && acc == acc ? v : acc;
      }
      if constexpr (K == ReduceKind::Mean) acc /= static_cast<double>(w.count);
      if constexpr (K == ReduceKind::L2) acc = std::sqrt(acc);
      y[o] = acc;
    }
  });
}

// ---- ArgMax / ArgMin ----------------------------------------------------------------------
// y[o, i] = index along the axis of the extreme of x[o, :, i] (NumPy's rule: the first
// extreme; NaN counts as the extreme, the first NaN wins); select_last_index picks the last.
// Lanes carry indices as floats (exact below 2^24; longer axes take the scalar loop).
namespace detail {

template <bool kMax, bool kLast>
inline vm arg_better(vf v, vf best) {
  using namespace simd;
  vm nan_v = v_cmp_ne(v, v);
  if constexpr (kLast) {
    return vm_or(kMax ? v_cmp_ge(v, best) : v_cmp_le(v, best), nan_v);
  } else {
    return vm_or(kMax ? v_cmp_gt(v, best) : v_cmp_lt(v, best),
                 vm_and(nan_v, v_cmp_eq(best, best)));
  }
}

template <bool kMax, bool kLast>
inline bool arg_better_scalar(float v, long iv, float best, long ib) {
  const bool nv = v != v, nb = best != best;
  if (nv || nb) return nv && (!nb || (kLast ? iv > ib : iv < ib));
  if (v != best) return kMax ? v > best : v < best;
  return kLast ? iv > ib : iv < ib;
}

template <bool kMax, bool kLast>
void arg_reduce(long outer, long axis, long inner, const float* x, int64_t* y) {
  using namespace simd;
  constexpr int W = kVecWidth;
  alignas(64) float iota[W];
  for (int l = 0; l < W; ++l) iota[l] = static_cast<float>(l);
  if (axis >= (1L << 24) || (inner > 1 && inner < W)) {  // scalar
    for (long o = 0; o < outer; ++o) {
      for (long i = 0; i < inner; ++i) {
        const float* p = x + o * axis * inner + i;
        long bi = 0;
        for (long a = 1; a < axis; ++a) {
          if (arg_better_scalar<kMax, kLast>(p[a * inner], a, p[bi * inner], bi)) bi = a;
        }
        y[o * inner + i] = bi;
      }
    }
    return;
  }
  if (inner == 1) {  // lane l scans elements l, l + W, ...; then the lanes are merged
    parallel_rows(outer, axis, [&](long lo, long hi) {
      alignas(64) float bv[W], bi[W];
      for (long o = lo; o < hi; ++o) {
        const float* p = x + o * axis;
        vf best = v_set1(p[0]), idx = v_zero();
        for (long a = 0; a < axis; a += W) {
          const int k = static_cast<int>(std::min<long>(W, axis - a));
          vf v = load_lanes(p + a, k);
          vm take = vm_and(arg_better<kMax, kLast>(v, best), vm_first(k));
          best = v_select(take, v, best);
          idx = v_select(take, v_add(v_loadu(iota), v_set1(static_cast<float>(a))), idx);
        }
        v_store(bv, best);
        v_store(bi, idx);
        long b = static_cast<long>(bi[0]);
        for (int l = 1; l < W; ++l) {
          const long il = static_cast<long>(bi[l]);
          if (arg_better_scalar<kMax, kLast>(bv[l], il, p[b], b)) b = il;
        }
        y[o] = b;
      }
    });
    return;
  }
  const long blocks = (inner + W - 1) / W;  // inner >= W: vectors across inner
  parallel_rows(outer * blocks, axis, [&](long lo, long hi) {
    alignas(64) float bi[W];
    for (long u = lo; u < hi; ++u) {
      const long o = u / blocks, j = (u % blocks) * W;
      const int k = static_cast<int>(std::min<long>(W, inner - j));
      const float* p = x + o * axis * inner + j;
      vf best = load_lanes(p, k), idx = v_zero();
      for (long a = 1; a < axis; ++a) {
        vf v = load_lanes(p + a * inner, k);
        vm take = arg_better<kMax, kLast>(v, best);
        best = v_select(take, v, best);
        idx = v_select(take, v_set1(static_cast<float>(a)), idx);
      }
      v_store(bi, idx);
      for (int l = 0; l < k; ++l) y[o * inner + j + l] = static_cast<int64_t>(bi[l]);
    }
  });
}

}  // namespace detail

// Output [outer, inner] (keepdims only changes the shape). An empty axis writes zeros.
inline void arg_reduce_i64(bool is_max, long outer, long axis, long inner, const float* x,
                           int64_t* y, bool select_last_index) {
  if (outer <= 0 || inner <= 0) return;
  if (axis <= 0) {
    std::fill(y, y + outer * inner, int64_t{0});
    return;
  }
  if (is_max) {
    select_last_index ? detail::arg_reduce<true, true>(outer, axis, inner, x, y)
                      : detail::arg_reduce<true, false>(outer, axis, inner, x, y);
  } else {
    select_last_index ? detail::arg_reduce<false, true>(outer, axis, inner, x, y)
                      : detail::arg_reduce<false, false>(outer, axis, inner, x, y);
  }
}

// Integer inputs: exact comparisons, scalar (no NaN; ties by select_last_index).
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
void arg_reduce_i64(bool is_max, long outer, long axis, long inner, const T* x, int64_t* y,
                    bool select_last_index) {
  if (outer <= 0 || inner <= 0) return;
  detail::parallel_rows(outer * inner, axis, [&](long lo, long hi) {
    for (long u = lo; u < hi; ++u) {
      const long o = u / inner, i = u % inner;
      const T* p = x + o * axis * inner + i;
      long bi = 0;
      for (long a = 1; a < axis; ++a) {
        const T v = p[a * inner], b = p[bi * inner];
        const bool better = v != b ? (is_max ? v > b : v < b) : select_last_index;
        if (better) bi = a;
      }
      y[u] = bi;
    }
  });
}

}  // namespace dnnf::rowops
