// Winograd F(T x T, 3x3), T = 2 or 4, for the channels-last 3x3 convolution with stride 1
// (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each T x T block
// of outputs is computed from an A x A block of inputs (A = T + 2) with A^2 multiplies per
// (input, output) channel pair instead of 9 T^2, so the multiply-adds fall 2.25x (F(2x2),
// 16 for 36) or 4x (F(4x4), 36 for 144); the price is three cheap transforms:
//
//   V = B^T d B   (input tile d, A x A, per input channel)
//   U = G g G^T   (3x3 kernel g, once when the model loads, in double)
//   Y = A^T (U . V) A  (T x T outputs, per output channel)
//
//   F(2x2): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   A^T = [1 1 1 0; 0 1 -1 -1]
//           G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   F(4x4), with the points 0, 1, -1, 1/2, -2 and infinity (Xf<4> below has its matrices):
//   the textbook points 0, 1, -1, 2, -2 have sparser transforms but 2-3x the rounding error.
//
// and the elementwise product summed over input channels is A^2 GEMMs, one per position xi of
// the A x A tile: M_xi[tile, m] = sum_c V_xi[tile, c] U_xi[c, m], through the packed GEMM of
// gemm.h with U_xi packed once. One parallel task takes a few rows of tiles: it transforms
// their inputs into a buffer sized to stay in L2, runs the A^2 GEMMs single-threaded over it,
// transforms back into whole output rows and hands each row to the caller's `finish` (the
// epilogue and the store). F(2x2)'s transforms add and subtract only (the 1/2s are in U): its
// results differ from direct convolution by rounding only. F(4x4)'s coefficients (up to 8 in
// A^T, fractions of 3 and 15 in G) cost accuracy: with uniform [-1, 1) data at 128-256
// channels its largest error is 0.9-1.3e-4 of 1 + |y| (mean 2-4e-6), against 1-2e-5 for
// F(2x2) and the direct kernel (tests/test_winograd.py bounds both). DNNF_WINOGRAD_TILE=2
// keeps F(2x2) everywhere, DNNF_WINOGRAD=0 the direct kernel.
// The tile is chosen per convolution (tile() below): F(4x4) where each task still gets
// enough tiles for the GEMMs' rows, F(2x2) else.
// 3-D convolutions with 3x3 planes (C3D's 3x3x3, S3D's 1x3x3) run as one 2-D problem per
// output frame (see applies). Measured against the direct kernel (2 threads, Zen 4, AVX-512,
// GFLOP/s counted as direct convolution's), F(2x2): C3D 3x3x3 64->128 at 16x56x56 226 -> 412,
// 256->256 at 8x28x28 231 -> 445, 512->512 at 4x14x14 273 -> 384; S3D 1x3x3 64->192 at
// 32x56x56 216 -> 397.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include <unistd.h>

#include "conv.h"
#include "conv_direct.h"
#include "gemm.h"

namespace dnnf::conv::wino {

inline constexpr int kMinTiles = 2 * gemm::kMR;

// The tile: F(4x4, 3x3) where every thread gets at least one micro-kernel's rows of 4x4 tiles
// (the tasks split the tile rows: fewer tiles a task leave the GEMMs' MR-row tiles part empty,
// and F(4x4) on 14x14 planes with 256 channels ran 1.6x slower than F(2x2) on 2 threads, 1.2x
// faster on 1), F(2x2) else. Measured (2 threads, Zen 4, AVX-512, GFLOP/s counted as direct
// convolution's), F(2x2) -> F(4x4): 64 -> 64 at 56x56 368 -> 565, 128 -> 128 at 28x28
// 393 -> 616. DNNF_WINOGRAD_TILE=2 or 4 forces one (comparisons, tests).
inline int tile(const ConvShape& s) {
  if (const char* e = std::getenv("DNNF_WINOGRAD_TILE")) {
    if (e[0] == '2') return 2;
    if (e[0] == '4') return 4;
  }
  const window::Geom g = ::dnnf::conv::detail::geom(s);
  const long tiles = static_cast<long>(s.N) * g.out[0] * ((g.out[1] + 3) / 4) * ((g.out[2] + 3) / 4);
  return tiles >= static_cast<long>(get_num_threads()) * gemm::kMR ? 4 : 2;
}

// The transforms of F(T x T, 3x3) on vectors of channels: in() is B^T applied to A values (a
// column, then a row, of the input tile), out() A^T to A values (of the GEMMs' results).
template <int T>
struct Xf;
template <>
struct Xf<2> {
  static constexpr int A = 4;
  static constexpr double G[A][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static void in(const vf* d, vf* o) {
    o[0] = simd::v_sub(d[0], d[2]);
    o[1] = simd::v_add(d[1], d[2]);
    o[2] = simd::v_sub(d[2], d[1]);
    o[3] = simd::v_sub(d[1], d[3]);
  }
  static void out(const vf* m, vf* o) {
    o[0] = simd::v_add(simd::v_add(m[0], m[1]), m[2]);
    o[1] = simd::v_sub(simd::v_sub(m[1], m[2]), m[3]);
  }
};
template <>
struct Xf<4> {
  static constexpr int A = 6;
  static constexpr double G[A][3] = {{1, 0, 0},
                                     {1.0 / 3, 1.0 / 3, 1.0 / 3},
                                     {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                                     {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                                     {1.0 / 15, -2.0 / 15, 4.0 / 15},
                                     {0, 0, 1}};
  static void in(const vf* d, vf* o) {
    const vf c15 = simd::v_set1(1.5f), m2 = simd::v_set1(-2.0f), c25 = simd::v_set1(2.5f), c05 = simd::v_set1(0.5f);
    const vf e = simd::v_sub(d[4], d[2]), f = simd::v_sub(d[3], d[1]);
    o[0] = simd::v_fma(c15, f, simd::v_fma(m2, d[2], simd::v_add(d[0], d[4])));
    o[1] = simd::v_fma(c25, d[3], simd::v_fma(c05, d[2], simd::v_sub(d[4], d[1])));
    o[2] = simd::v_fma(c05, d[3], simd::v_fma(simd::v_set1(-2.5f), d[2], simd::v_add(d[4], d[1])));
    o[3] = simd::v_fma(simd::v_set1(2.0f), f, e);
    o[4] = simd::v_fma(simd::v_set1(-0.5f), f, e);
    o[5] = simd::v_fma(c15, e, simd::v_fma(m2, d[3], simd::v_add(d[5], d[1])));
  }
  static void out(const vf* m, vf* o) {
    const vf p = simd::v_add(m[1], m[2]), q = simd::v_sub(m[1], m[2]);
    o[0] = simd::v_add(simd::v_add(m[0], p), simd::v_add(m[3], m[4]));
    o[1] = simd::v_fma(simd::v_set1(0.5f), m[3], simd::v_fma(simd::v_set1(-2.0f), m[4], q));
    o[2] = simd::v_fma(simd::v_set1(0.25f), m[3], simd::v_fma(simd::v_set1(4.0f), m[4], p));
    o[3] = simd::v_add(simd::v_fma(simd::v_set1(0.125f), m[3], simd::v_fma(simd::v_set1(-8.0f), m[4], q)), m[5]);
  }
};

// U_xi = (G g G^T)[xi] as A^2 GEMM B operands [kd * C, M] (row kz * C + c), packed, for the
// tile tile(s) chooses.
class Weights {
 public:
  Weights(const ConvShape& s, const float* w) : tile_(wino::tile(s)), K_(detail::geom(s).k[0] * s.C), M_(s.M) {
    if (tile_ == 4) make<4>(s, w);
    else make<2>(s, w);
  }
  int tile() const { return tile_; }
  const gemm::PackedBView& b(int xi) const { return packed_[xi].view(); }

 private:
  template <int T>
  void make(const ConvShape& s, const float* w) {
    constexpr int A = Xf<T>::A;
    const int C = s.C, kd = K_ / C;
    // Two passes, so that the transform runs on vectors of output channels: the kernels
    // transposed to gt[kz * C + c][j][m] (in blocks of 64 m by 16 c: rows read in order,
    // writes in runs that stay in L2), then U for every m of a row at once, stored in runs.
    // A scalar transform per kernel, its values planes apart, spent 0.5 s of YOLOv4's load.
    const long MK = static_cast<long>(M_) * K_;
    std::vector<float> gt(static_cast<size_t>(9) * MK);
    constexpr int kMB = 64, kCB = 16;
    for (int m0 = 0; m0 < M_; m0 += kMB)
      for (int c0 = 0; c0 < C; c0 += kCB)
        for (int m = m0; m < std::min(M_, m0 + kMB); ++m)
          for (int c = c0; c < std::min(C, c0 + kCB); ++c)
            for (int kz = 0; kz < kd; ++kz) {
              const float* g = w + ((static_cast<long>(m) * C + c) * kd + kz) * 9;
              float* to = gt.data() + static_cast<long>(kz * C + c) * 9 * M_ + m;
              for (int j = 0; j < 9; ++j) to[static_cast<long>(j) * M_] = g[j];
            }
    std::vector<float> u(static_cast<size_t>(A) * A * MK);
    std::vector<double> gg(static_cast<size_t>(A) * 3 * M_);  // (G g)[i][kx] for every m
    for (int r = 0; r < K_; ++r) {
      const float* __restrict g = gt.data() + static_cast<long>(r) * 9 * M_;
      for (int i = 0; i < A; ++i)
        for (int kx = 0; kx < 3; ++kx) {
          double* __restrict to = gg.data() + static_cast<long>(i * 3 + kx) * M_;
          for (int m = 0; m < M_; ++m) to[m] = 0;
          for (int ky = 0; ky < 3; ++ky) {
            const double c = Xf<T>::G[i][ky];
            if (c == 0) continue;
            const float* __restrict from = g + static_cast<long>(ky * 3 + kx) * M_;
            for (int m = 0; m < M_; ++m) to[m] += c * from[m];
          }
        }
      for (int i = 0; i < A; ++i)
        for (int j = 0; j < A; ++j) {
          float* __restrict U = u.data() + static_cast<long>(i * A + j) * MK + static_cast<long>(r) * M_;
          const double* __restrict t = gg.data() + static_cast<long>(i * 3) * M_;
          const double c0 = Xf<T>::G[j][0], c1 = Xf<T>::G[j][1], c2 = Xf<T>::G[j][2];
          for (int m = 0; m < M_; ++m)
            U[m] = static_cast<float>(c0 * t[m] + c1 * t[M_ + m] + c2 * t[2L * M_ + m]);
        }
    }
    for (int xi = 0; xi < A * A; ++xi)
      packed_.emplace_back(u.data() + static_cast<size_t>(xi) * K_ * M_, M_, 1, K_, M_);
  }

  int tile_, K_, M_;
  std::vector<gemm::PackedB> packed_;
};

namespace impl {

// x [N, (IZ,) IY, IX, C] -> y [N, (OZ,) OY, OX, M] with F(T x T); see run.
template <int T, class Finish>
void run_tile(const ConvShape& s, const InputSegments& xs, const Weights& w, const Finish& finish) {
  constexpr int W = kVecWidth, A = Xf<T>::A, A2 = A * A;
  const window::Geom g = ::dnnf::conv::detail::geom(s);
  const int IY = g.in[1], IX = g.in[2], OY = g.out[1], OX = g.out[2], py = g.pad[1], px = g.pad[2];
  const int IZ = g.in[0], OZ = g.out[0], kd = g.k[0];
  const int C = s.C, M = s.M, K = kd * C;
  const long images = static_cast<long>(s.N) * OZ;  // output frames, each a 2-D problem
  const int TX = (OX + T - 1) / T, TY = (OY + T - 1) / T;
  const int nvk = (M + W - 1) / W, Mp = nvk * W;
  // Tile rows per task: the transformed inputs and the GEMM outputs of a task (A^2 values
  // per tile and channel each) within half of L2, but at least kMinTiles tiles (the GEMMs'
  // rows: fewer leave the micro-kernel's MR-row tiles mostly empty), while every thread gets
  // a task.
  const long budget = ::dnnf::conv::detail::l2_bytes() / 2 / 4;  // floats
  int R = static_cast<int>(std::max<long>(1, budget / (static_cast<long>(A2) * TX * (K + Mp))));
  R = std::max(R, (kMinTiles + TX - 1) / TX);
  const int nthreads = get_num_threads();
  while (R > 1 && images * ((TY + R - 1) / R) < nthreads) --R;
  R = std::min(R, TY);
  const int per_image = (TY + R - 1) / R;
  const long tasks = images * per_image;
  parallel_for(static_cast<int>(tasks), [&](int task) {
    const long img = task / per_image, n = img / OZ;
    const int oz = static_cast<int>(img % OZ);
    const int ty0 = (task % per_image) * R, ty1 = std::min(TY, ty0 + R);
    const int Tb = (ty1 - ty0) * TX;
    float* V = gemm::detail::scratch(5, static_cast<size_t>(A2) * Tb * K);
    float* Mb = gemm::detail::scratch(6, static_cast<size_t>(A2) * Tb * Mp);
    float* O = gemm::detail::scratch(7, static_cast<size_t>(T) * (ty1 - ty0) * OX * Mp);
    // 1. Input transform: V[xi][tile][kz * C + c], c = cs0 + the channel in segment si.
    for (int kz = 0; kz < kd; ++kz)
      for (int si = 0, cs0 = 0; si < xs.n; cs0 += xs.c[si++]) {
        const int iz = oz * g.stride[0] - g.pad[0] + kz * g.dil[0];
        const int Cs = xs.c[si];
        const float* xn = iz >= 0 && iz < IZ ? xs.x[si] + (n * IZ + iz) * static_cast<long>(IY) * IX * Cs : nullptr;
        for (int ty = ty0; ty < ty1; ++ty) {
          const float* rp[A];
          bool rows_in = true;
          for (int r = 0; r < A; ++r) {
            const int iy = T * ty - py + r;
            rp[r] = xn && iy >= 0 && iy < IY ? xn + static_cast<long>(iy) * IX * Cs : nullptr;
            rows_in = rows_in && rp[r] != nullptr;
          }
          for (int tx = 0; tx < TX; ++tx) {
            const long b = static_cast<long>(ty - ty0) * TX + tx;
            const int ix0 = T * tx - px;
            const bool inside = rows_in && ix0 >= 0 && ix0 + A - 1 < IX;
            for (int c0 = 0; c0 < Cs; c0 += W) {
              const int nn = std::min(W, Cs - c0);
              vf t[A][A];  // t[i][q] = (B^T d)[i][q]: each column q of the tile, transformed
              for (int q = 0; q < A; ++q) {
                const int ix = ix0 + q;
                vf d[A];
                for (int r = 0; r < A; ++r) {
                  if (inside && nn == W) {
                    d[r] = simd::v_loadu(rp[r] + static_cast<long>(ix) * Cs + c0);
                  } else {
                    d[r] = rp[r] && ix >= 0 && ix < IX ? gemm::load_lanes(rp[r] + static_cast<long>(ix) * Cs + c0, nn)
                                                       : simd::v_zero();
                  }
                }
                vf o[A];
                Xf<T>::in(d, o);
                for (int i = 0; i < A; ++i) t[i][q] = o[i];
              }
              for (int i = 0; i < A; ++i) {
                vf v[A];
                Xf<T>::in(t[i], v);
                for (int j = 0; j < A; ++j)
                  gemm::store_lanes(V + ((static_cast<long>(i * A + j) * Tb + b) * K + kz * C + cs0 + c0), v[j], nn);
              }
            }
          }
        }
      }
    // 2. The A^2 GEMMs, on this thread.
    gemm::Options one;
    one.n_threads = 1;
    one.b_in_l2 = true;  // the same A^2 weight matrices for every tile batch
    for (int xi = 0; xi < A2; ++xi)
      gemm::gemm_f32_src(Tb, M, K, gemm::AView<>{V + static_cast<long>(xi) * Tb * K, K, 1}, w.b(xi),
                         Mb + static_cast<long>(xi) * Tb * Mp, Mp, gemm::EpNone{}, one);
    // 3. Output transform into whole output rows O[row][pixel][nvk vectors].
    for (int ty = ty0; ty < ty1; ++ty)
      for (int tx = 0; tx < TX; ++tx) {
        const long b = static_cast<long>(ty - ty0) * TX + tx;
        for (int cv = 0; cv < nvk; ++cv) {
          vf s[T][A];  // s[i][q] = (A^T m)[i][q]: each column q, transformed
          for (int q = 0; q < A; ++q) {
            vf m[A];
            for (int r = 0; r < A; ++r) m[r] = simd::v_load(Mb + (static_cast<long>(r * A + q) * Tb + b) * Mp + cv * W);
            vf o[T];
            Xf<T>::out(m, o);
            for (int i = 0; i < T; ++i) s[i][q] = o[i];
          }
          for (int i = 0; i < T; ++i) {
            if (T * ty + i >= OY) break;
            vf out[T];
            Xf<T>::out(s[i], out);
            const long lr = static_cast<long>(T) * (ty - ty0) + i;
            for (int j = 0; j < T; ++j) {
              const int ox = T * tx + j;
              if (ox >= OX) break;
              simd::v_storeu(O + ((lr * OX + ox) * nvk + cv) * W, out[j]);
            }
          }
        }
      }
    // 4. Epilogue and store, one output row at a time.
    for (int lr = 0; lr < T * (ty1 - ty0); ++lr) {
      const int oy = T * ty0 + lr;
      if (oy >= OY) break;
      finish(O + static_cast<long>(lr) * OX * Mp, nvk, OX, (img * OY + oy) * static_cast<long>(OX));
    }
  });
}

}  // namespace impl

// x [N, (IZ,) IY, IX, C] -> y [N, (OZ,) OY, OX, M]. finish(buf, nvk, n_pixels, row0): buf
// holds one output row, row0 being the index of its first pixel in y viewed as
// [N * OZ * OY * OX, M], as n_pixels x nvk vectors; it applies the epilogue and stores.
// x may come in channel segments (a Concat along the channels read in place, conv_direct.h's
// InputSegments): each segment's channels are transformed from where they lie into their
// columns of V, which the GEMMs read as one K.
template <class Finish>
void run(const ConvShape& s, const InputSegments& xs, const Weights& w, const Finish& finish) {
  if (w.tile() == 4) impl::run_tile<4>(s, xs, w, finish);
  else impl::run_tile<2>(s, xs, w, finish);
}

}  // namespace dnnf::conv::wino
