// Test driver for tests/test_prelude_rowops.py: runs the prelude's row and irregular anchor
// kernels (rowops.h, reduce.h, irregular.h, resize.h) as `driver <in> <out>` on a list of
// cases, each an op code, int and float parameters and input buffers (the test's
// Case.record), and writes every case's outputs, or the text of the error it threw, to <out>
// (read back by the test's _read_outputs). The test builds it once per dialect.

#include "reduce.h"
#include "resize.h"
#include "gemm_epilogue.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>
using namespace dnnf;
using namespace dnnf::gemm;

struct Buf { int64_t kind = 0; std::vector<char> bytes; };  // kind 0 f32, 1 i64, 2 i32, 3 text
static FILE* in_f;
static std::vector<Buf> outs;
static int64_t rd() { int64_t v; if (std::fread(&v, 8, 1, in_f) != 1) std::exit(3); return v; }
template <class T> T* ptr(Buf& b) { return reinterpret_cast<T*>(b.bytes.data()); }
template <class T> void put(int64_t kind, const T* p, long n) {
  Buf b; b.kind = kind; b.bytes.assign(reinterpret_cast<const char*>(p),
                                       reinterpret_cast<const char*>(p + n));
  outs.push_back(std::move(b));
}
void put_text(const std::string& s) { put(3, s.data(), static_cast<long>(s.size())); }

// kStores: the epilogue writes 2 * v to its own [R, C] buffer; y is scratch.
struct EpStoreTwice {
  static constexpr bool kStores = true;
  float* out; long C;
  void apply(vf& v, int row, int col, int n) const {
    store_lanes(out + row * C + col, simd::v_add(v, v), n);
  }
};

// Runs fn(ep) with the case's epilogue: 0 none, 1 bias per column + relu, 2 kStores.
template <class F>
void with_ep(long ep, long R, long C, const float* bias, std::vector<float>& y, F fn) {
  if (ep == 0) return fn(EpNone{});
  if (ep == 1) return fn(EpChain<EpBiasCol, EpRelu>(EpBiasCol{bias}, EpRelu{}));
  std::vector<float> side(static_cast<size_t>(R * C), -12345.0f);
  fn(EpStoreTwice{side.data(), C});
  y = side;
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  in_f = std::fopen(argv[1], "rb");
  FILE* out_f = std::fopen(argv[2], "wb");
  if (!in_f || !out_f) return 3;
  const long n_cases = rd();
  for (long ci = 0; ci < n_cases; ++ci) {
    const long op = rd();
    std::vector<long> I(rd());
    for (auto& v : I) v = rd();
    std::vector<double> F(rd());
    for (auto& v : F) { int64_t b = rd(); std::memcpy(&v, &b, 8); }
    std::vector<Buf> B(rd());
    for (auto& b : B) {
      b.kind = rd();
      b.bytes.resize(static_cast<size_t>(rd()));
      const size_t n = b.bytes.size();
      if (n && std::fread(b.bytes.data(), 1, n, in_f) != n) return 4;
      b.bytes.resize(b.bytes.size() + 64);  // slack: a bad kernel must not crash the others
    }
    outs.clear();
    const float* x = ptr<float>(B[0]);
    auto run_y = [&](long n, long ep, long R, long C, const float* bias, auto kernel) {
      std::vector<float> y(static_cast<size_t>(std::max(n, 1L)), -999.0f);
      with_ep(ep, R, C, bias, y, [&](const auto& e) { kernel(y.data(), e); });
      put(0, y.data(), n);
    };
    try {
      switch (op) {
        case 0: {  // softmax / log_softmax: outer axis inner ep log
          long o = I[0], a = I[1], in = I[2], ep = I[3], lg = I[4];
          long R = in == 1 ? o : o * a, C = in == 1 ? a : in;
          run_y(o * a * in, ep, R, C, ptr<float>(B[1]), [&](float* y, const auto& e) {
            if (lg) rowops::log_softmax_f32(o, a, in, x, y, e);
            else rowops::softmax_f32(o, a, in, x, y, e);
          });
          break;
        }
        case 1: {  // layer_norm: outer norm has_scale has_bias ep; eps
          long o = I[0], nm = I[1], ep = I[4];
          std::vector<float> mean(o + 1, -7.0f), inv(o + 1, -7.0f);
          run_y(o * nm, ep, o, nm, ptr<float>(B[3]), [&](float* y, const auto& e) {
            rowops::layer_norm_f32(o, nm, x, I[2] ? ptr<float>(B[1]) : nullptr,
                                   I[3] ? ptr<float>(B[2]) : nullptr, static_cast<float>(F[0]),
                                   y, mean.data(), inv.data(), e);
          });
          put(0, mean.data(), o);
          put(0, inv.data(), o);
          break;
        }
        case 2: {  // instance_norm: N C S ep; eps
          long N = I[0], C = I[1], S = I[2];
          run_y(N * C * S, I[3], N * C, S, ptr<float>(B[3]), [&](float* y, const auto& e) {
            rowops::instance_norm_f32(N, C, S, x, ptr<float>(B[1]), ptr<float>(B[2]),
                                      static_cast<float>(F[0]), y, e);
          });
          break;
        }
        case 3: {  // reduce: kind rank mask ep shape...
          const int rank = static_cast<int>(I[1]);
          const unsigned mask = static_cast<unsigned>(I[2]);
          long n = 1;
          for (int a = 0; a < rank; ++a) n *= ((mask >> a) & 1u) ? 1 : I[4 + a];
          const bool last_kept = rank == 0 || !((mask >> (rank - 1)) & 1u);
          const long C = rank > 0 && last_kept ? I[4 + rank - 1] : 1;
          const long* shp = I.data() + 4;
          run_y(n, I[3], C ? n / C : 0, C, ptr<float>(B[1]), [&](float* y, const auto& e) {
            using rowops::ReduceKind;
            switch (I[0]) {
              case 0: return rowops::reduce_f32<ReduceKind::Sum>(rank, shp, mask, x, y, e);
              case 1: return rowops::reduce_f32<ReduceKind::Mean>(rank, shp, mask, x, y, e);
              case 2: return rowops::reduce_f32<ReduceKind::Max>(rank, shp, mask, x, y, e);
              case 3: return rowops::reduce_f32<ReduceKind::Min>(rank, shp, mask, x, y, e);
              case 4: return rowops::reduce_f32<ReduceKind::Prod>(rank, shp, mask, x, y, e);
              default: return rowops::reduce_f32<ReduceKind::L2>(rank, shp, mask, x, y, e);
            }
          });
          break;
        }
        case 4: {  // arg_reduce: is_max outer axis inner last
          std::vector<int64_t> y(I[1] * I[3] + 1, -5);
          rowops::arg_reduce_i64(I[0] != 0, I[1], I[2], I[3], x, y.data(), I[4] != 0);
          put(1, y.data(), I[1] * I[3]);
          break;
        }
        case 5: {  // cumsum: outer axis inner exclusive reverse ep
          long o = I[0], a = I[1], in = I[2];
          long R = in == 1 ? o : o * a, C = in == 1 ? a : in;
          run_y(o * a * in, I[5], R, C, ptr<float>(B[1]), [&](float* y, const auto& e) {
            rowops::cumsum_f32(o, a, in, x, y, I[3] != 0, I[4] != 0, e);
          });
          break;
        }
        case 6: {  // topk: outer axis inner k largest
          long n = I[0] * I[3] * I[2];
          std::vector<float> v(n + 1);
          std::vector<int64_t> idx(n + 1);
          irr::topk(I[0], I[1], I[2], I[3], I[4] != 0, true, x, v.data(), idx.data());
          put(0, v.data(), n);
          put(1, idx.data(), n);
          break;
        }
        case 7: {  // gather_elements: rank axis idx_i32 dshape... ishape...
          const int rank = static_cast<int>(I[0]);
          const long* ds = I.data() + 3;
          const long* is = ds + rank;
          long n = 1;
          for (int a = 0; a < rank; ++a) n *= is[a];
          std::vector<float> y(n + 1);
          const int axis = static_cast<int>(I[1]);
          if (I[2]) irr::gather_elements(rank, ds, is, axis, x, ptr<int32_t>(B[1]), y.data());
          else irr::gather_elements(rank, ds, is, axis, x, ptr<int64_t>(B[1]), y.data());
          put(0, y.data(), n);
          break;
        }
        case 8: {  // nms: B classes n max has_score_t center; iou score_t
          float st = static_cast<float>(F[1]);
          std::vector<int64_t> sel(3 * irr::nms_capacity(I[0], I[1], I[2], I[3]) + 3);
          long k = irr::nms_f32(I[0], I[1], I[2], x, ptr<float>(B[1]), I[3],
                                static_cast<float>(F[0]), I[4] ? &st : nullptr,
                                static_cast<int>(I[5]), sel.data());
          put(1, sel.data(), 3 * k);
          break;
        }
        case 9: {  // roi_align: N C H W num oh ow ratio half_pixel max ep channels_last;
                   // spatial_scale
          long n = I[4] * I[1] * I[5] * I[6];
          const long N = I[0], C = I[1], H = I[2], W = I[3];
          std::vector<float> xl;  // x channels last, read through strides
          long st[4] = {C * H * W, H * W, W, 1};
          const float* xp = x;
          if (I[11]) {
            xl.resize(static_cast<size_t>(N * C * H * W));
            for (long b = 0; b < N; ++b)
              for (long c = 0; c < C; ++c)
                for (long i = 0; i < H * W; ++i) xl[(b * H * W + i) * C + c] = x[(b * C + c) * H * W + i];
            st[0] = H * W * C, st[1] = 1, st[2] = W * C, st[3] = C;
            xp = xl.data();
          }
          run_y(n, I[10], I[4] * I[1] * I[5], I[6], ptr<float>(B[3]), [&](float* y, const auto& e) {
            irr::roi_align_f32(N, C, H, W, xp, I[4], ptr<float>(B[1]),
                               ptr<int64_t>(B[2]), I[5], I[6], I[7], static_cast<float>(F[0]),
                               I[8] != 0, I[9] != 0, st[0], st[1], st[2], st[3], y, e);
          });
          break;
        }
        case 10: {  // resize: rank mode coord nearest exclude antialias has_roi ep in... out...;
                   // cubic_a extrapolation scales...
          const int rank = static_cast<int>(I[0]);
          irr::ResizeAttrs at;
          at.mode = static_cast<irr::ResizeMode>(I[1]);
          at.coord = static_cast<irr::ResizeCoord>(I[2]);
          at.nearest = static_cast<irr::NearestMode>(I[3]);
          at.exclude_outside = I[4] != 0;
          at.antialias = I[5] != 0;
          at.cubic_coeff_a = static_cast<float>(F[0]);
          at.extrapolation_value = static_cast<float>(F[1]);
          const long* is = I.data() + 8;
          const long* os = is + rank;
          long n = 1;
          for (int a = 0; a < rank; ++a) n *= os[a];
          const long C = rank ? os[rank - 1] : 1;
          run_y(n, I[7], C ? n / C : 0, C, ptr<float>(B[2]), [&](float* y, const auto& e) {
            irr::resize_f32(rank, is, os, F.data() + 2, I[6] ? ptr<float>(B[1]) : nullptr, at,
                            x, y, e);
          });
          break;
        }
        default: return 6;
      }
    } catch (const std::exception& e) {
      outs.clear();
      put_text(e.what());
    }
    int64_t n_out = static_cast<int64_t>(outs.size());
    std::fwrite(&n_out, 8, 1, out_f);
    for (auto& b : outs) {
      int64_t h[2] = {b.kind, static_cast<int64_t>(b.bytes.size())};
      std::fwrite(h, 8, 2, out_f);
      std::fwrite(b.bytes.data(), 1, b.bytes.size(), out_f);
    }
  }
  std::fclose(out_f);
  return 0;
}
