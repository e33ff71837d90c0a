// Winograd F(2x2, 3x3) for the channels-last 3x3 convolution with stride 1 (Lavin and Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2016): each 2x2 block of outputs is
// computed from a 4x4 block of inputs with 16 multiplies per (input, output) channel pair
// instead of 36, so the multiply-adds fall 2.25x; the price is three cheap transforms:
//
//   V = B^T d B   (input tile d, 4x4, per input channel)      B^T = [1  0 -1  0]
//   U = G g G^T   (3x3 kernel g, once when the model loads)         [0  1  1  0]
//   Y = A^T (U . V) A  (2x2 outputs, per output channel)            [0 -1  1  0]
//                                                                    [0  1  0 -1]
//   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]   A^T = [1 1 1 0; 0 1 -1 -1]
//
// and the elementwise product summed over input channels is 16 GEMMs, one per position xi of
// the 4x4 tile: M_xi[tile, m] = sum_c V_xi[tile, c] U_xi[c, m], through the packed GEMM of
// gemm.h with U_xi packed once. One parallel task takes a few rows of tiles: it transforms
// their inputs into a buffer sized to stay in L2, runs the 16 GEMMs single-threaded over it,
// transforms back into whole output rows and hands each row to the caller's `finish` (the
// epilogue and the store). The transforms add/subtract only (the 1/2s are in U), so the
// results differ from direct convolution by rounding only, within a few ulps of the sums.
// 3-D convolutions with 3x3 planes (C3D's 3x3x3, S3D's 1x3x3) run as one 2-D problem per
// output frame (see applies). Measured against the direct kernel (2 threads, Zen 4, AVX-512,
// GFLOP/s counted as direct convolution's): C3D 3x3x3 64->128 at 16x56x56 226 -> 412,
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

// U_xi = (G g G^T)[xi] as 16 GEMM B operands [kd * C, M] (row kz * C + c), packed.
class Weights {
 public:
  Weights(const ConvShape& s, const float* w) : K_(detail::geom(s).k[0] * s.C), M_(s.M) {
    const int C = s.C, kd = K_ / C;
    // Two passes, so that the transform runs on vectors of output channels: the kernels
    // transposed to gt[kz * C + c][j][m] (in blocks of 64 m by 16 c: rows read in order,
    // writes in runs that stay in L2), then U for every m of a row at once, stored in runs.
    // A scalar transform per kernel, its 16 values 16 planes apart, spent 0.5 s of YOLOv4's
    // model load.
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
    std::vector<float> u(static_cast<size_t>(16) * MK);
    for (int r = 0; r < K_; ++r) {
      const float* __restrict g = gt.data() + static_cast<long>(r) * 9 * M_;
      float* __restrict U = u.data() + static_cast<long>(r) * M_;
      // Row i of G g (g's rows a, b, c combined), then its columns by G^T: the same sums as
      // the textbook form, in the same order.
      const float* __restrict a = g;
      const float* __restrict b = g + 3L * M_;
      const float* __restrict c = g + 6L * M_;
      auto row = [&](int i, auto&& gi) {
        float* __restrict U0 = U + static_cast<long>(4 * i) * MK;
        float* __restrict U1 = U0 + MK;
        float* __restrict U2 = U1 + MK;
        float* __restrict U3 = U2 + MK;
        for (int m = 0; m < M_; ++m) {
          const float t0 = gi(m), t1 = gi(M_ + m), t2 = gi(2 * M_ + m);
          U0[m] = t0;
          U1[m] = 0.5f * (t0 + t1 + t2);
          U2[m] = 0.5f * (t0 - t1 + t2);
          U3[m] = t2;
        }
      };
      row(0, [&](long k) { return a[k]; });
      row(1, [&](long k) { return 0.5f * (a[k] + b[k] + c[k]); });
      row(2, [&](long k) { return 0.5f * (a[k] - b[k] + c[k]); });
      row(3, [&](long k) { return c[k]; });
    }
    for (int xi = 0; xi < 16; ++xi)
      packed_.emplace_back(u.data() + static_cast<size_t>(xi) * K_ * M_, M_, 1, K_, M_);
  }
  const gemm::PackedBView& b(int xi) const { return packed_[xi].view(); }

 private:
  int K_, M_;
  std::vector<gemm::PackedB> packed_;
};

// x [N, (IZ,) IY, IX, C] -> y [N, (OZ,) OY, OX, M]. finish(buf, nvk, n_pixels, row0): buf
// holds one output row, row0 being the index of its first pixel in y viewed as
// [N * OZ * OY * OX, M], as n_pixels x nvk vectors; it applies the epilogue and stores.
// x may come in channel segments (a Concat along the channels read in place, conv_direct.h's
// InputSegments): each segment's channels are transformed from where they lie into their
// columns of V, which the GEMMs read as one K.
template <class Finish>
void run(const ConvShape& s, const InputSegments& xs, const Weights& w, const Finish& finish) {
  constexpr int W = kVecWidth;
  const window::Geom g = ::dnnf::conv::detail::geom(s);
  const int IY = g.in[1], IX = g.in[2], OY = g.out[1], OX = g.out[2], py = g.pad[1], px = g.pad[2];
  const int IZ = g.in[0], OZ = g.out[0], kd = g.k[0];
  const int C = s.C, M = s.M, K = kd * C;
  const long images = static_cast<long>(s.N) * OZ;  // output frames, each a 2-D problem
  const int TX = (OX + 1) / 2, TY = (OY + 1) / 2;
  const int nvk = (M + W - 1) / W, Mp = nvk * W;
  // Tile rows per task: the transformed inputs and the GEMM outputs of a task (16 values
  // per tile and channel each) within half of L2, but at least kMinTiles tiles (the GEMMs'
  // rows: fewer leave the micro-kernel's MR-row tiles mostly empty), while every thread gets
  // a task.
  const long budget = detail::l2_bytes() / 2 / 4;  // floats
  int R = static_cast<int>(std::max<long>(1, budget / (16L * TX * (K + Mp))));
  R = std::max(R, (kMinTiles + TX - 1) / TX);
  const int T = get_num_threads();
  while (R > 1 && images * ((TY + R - 1) / R) < T) --R;
  R = std::min(R, TY);
  const int per_image = (TY + R - 1) / R;
  const long tasks = images * per_image;
  parallel_for(static_cast<int>(tasks), [&](int task) {
    const long img = task / per_image, n = img / OZ;
    const int oz = static_cast<int>(img % OZ);
    const int ty0 = (task % per_image) * R, ty1 = std::min(TY, ty0 + R);
    const int Tb = (ty1 - ty0) * TX;
    float* V = gemm::detail::scratch(5, static_cast<size_t>(16) * Tb * K);
    float* Mb = gemm::detail::scratch(6, static_cast<size_t>(16) * Tb * Mp);
    float* O = gemm::detail::scratch(7, static_cast<size_t>(2) * (ty1 - ty0) * OX * Mp);
    // 1. Input transform: V[xi][tile][kz * C + c], c = cs0 + the channel in segment si.
    for (int kz = 0; kz < kd; ++kz)
      for (int si = 0, cs0 = 0; si < xs.n; cs0 += xs.c[si++]) {
        const int iz = oz * g.stride[0] - g.pad[0] + kz * g.dil[0];
        const int Cs = xs.c[si];
        const float* xn = iz >= 0 && iz < IZ ? xs.x[si] + (n * IZ + iz) * static_cast<long>(IY) * IX * Cs : nullptr;
        for (int ty = ty0; ty < ty1; ++ty) {
          const float* rp[4];
          for (int r = 0; r < 4; ++r) {
            const int iy = 2 * ty - py + r;
            rp[r] = xn && iy >= 0 && iy < IY ? xn + static_cast<long>(iy) * IX * Cs : nullptr;
          }
          for (int tx = 0; tx < TX; ++tx) {
            const long b = static_cast<long>(ty - ty0) * TX + tx;
            const int ix0 = 2 * tx - px;
            bool inside = ix0 >= 0 && ix0 + 3 < IX;
            for (int r = 0; r < 4; ++r) inside = inside && rp[r] != nullptr;
            for (int c0 = 0; c0 < Cs; c0 += W) {
              const int nn = std::min(W, Cs - c0);
              vf d[4][4];
              for (int r = 0; r < 4; ++r)
                for (int q = 0; q < 4; ++q) {
                  const int ix = ix0 + q;
                  if (inside && nn == W) {
                    d[r][q] = simd::v_loadu(rp[r] + static_cast<long>(ix) * Cs + c0);
                  } else {
                    d[r][q] = rp[r] && ix >= 0 && ix < IX
                                  ? gemm::load_lanes(rp[r] + static_cast<long>(ix) * Cs + c0, nn)
                                  : simd::v_zero();
                  }
                }
              vf t[4][4];
              for (int q = 0; q < 4; ++q) {
                t[0][q] = simd::v_sub(d[0][q], d[2][q]);
                t[1][q] = simd::v_add(d[1][q], d[2][q]);
                t[2][q] = simd::v_sub(d[2][q], d[1][q]);
                t[3][q] = simd::v_sub(d[1][q], d[3][q]);
              }
              for (int i = 0; i < 4; ++i) {
                const vf v4[4] = {simd::v_sub(t[i][0], t[i][2]), simd::v_add(t[i][1], t[i][2]),
                                  simd::v_sub(t[i][2], t[i][1]), simd::v_sub(t[i][1], t[i][3])};
                for (int j = 0; j < 4; ++j)
                  gemm::store_lanes(V + ((static_cast<long>(i * 4 + j) * Tb + b) * K + kz * C + cs0 + c0), v4[j], nn);
              }
            }
          }
        }
      }
    // 2. The 16 GEMMs, on this thread.
    gemm::Options one;
    one.n_threads = 1;
    for (int xi = 0; xi < 16; ++xi)
      gemm::gemm_f32_src(Tb, M, K, gemm::AView<>{V + static_cast<long>(xi) * Tb * K, K, 1}, w.b(xi),
                         Mb + static_cast<long>(xi) * Tb * Mp, Mp, gemm::EpNone{}, one);
    // 3. Output transform into whole output rows O[row][pixel][nvk vectors].
    for (int ty = ty0; ty < ty1; ++ty)
      for (int tx = 0; tx < TX; ++tx) {
        const long b = static_cast<long>(ty - ty0) * TX + tx;
        for (int cv = 0; cv < nvk; ++cv) {
          vf m[16];
          for (int xi = 0; xi < 16; ++xi) m[xi] = simd::v_load(Mb + (static_cast<long>(xi) * Tb + b) * Mp + cv * W);
          vf s0[4], s1[4];
          for (int q = 0; q < 4; ++q) {
            s0[q] = simd::v_add(simd::v_add(m[q], m[4 + q]), m[8 + q]);
            s1[q] = simd::v_sub(simd::v_sub(m[4 + q], m[8 + q]), m[12 + q]);
          }
          const vf out[2][2] = {
              {simd::v_add(simd::v_add(s0[0], s0[1]), s0[2]), simd::v_sub(simd::v_sub(s0[1], s0[2]), s0[3])},
              {simd::v_add(simd::v_add(s1[0], s1[1]), s1[2]), simd::v_sub(simd::v_sub(s1[1], s1[2]), s1[3])}};
          for (int i = 0; i < 2; ++i) {
            if (2 * ty + i >= OY) break;
            for (int j = 0; j < 2; ++j) {
              const int ox = 2 * tx + j;
              if (ox >= OX) break;
              const long lr = 2L * (ty - ty0) + i;
              simd::v_storeu(O + ((lr * OX + ox) * nvk + cv) * W, out[i][j]);
            }
          }
        }
      }
    // 4. Epilogue and store, one output row at a time.
    for (int lr = 0; lr < 2 * (ty1 - ty0); ++lr) {
      const int oy = 2 * ty0 + lr;
      if (oy >= OY) break;
      finish(O + static_cast<long>(lr) * OX * Mp, nvk, OX, (img * OY + oy) * static_cast<long>(OX));
    }
  });
}

}  // namespace dnnf::conv::wino
