// One side of benchmarks/kernel_ab.py: two versions of the prelude's GEMM (VA_H, VB_H: their
// gemm.h, each copy of the prelude included inside a namespace of its own) in one process,
// timed in alternating rounds, so that the per-round ratio cancels a shared VM's slow and fast
// spells. Prints one line per shape.
//   gemm_ab THREADS ROUNDS cold|warm M,N,K [M,N,K ...]
// cold: each call takes the next of copies of the packed B spanning about 250 MB (weights read
// from memory, as a model's layers each read their own at batch 1); warm: one copy.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
#include <cmath>
#include <cstdint>
#include <unistd.h>
#include <sys/mman.h>
#include <immintrin.h>
namespace va {
#include VA_H
}
namespace vb {
#include VB_H
}
using Clock = std::chrono::steady_clock;
template <class NS_PACKED, class F>
double time_block(F once, int reps) {
  std::vector<double> t;
  once();
  for (int i = 0; i < reps; ++i) { auto t0 = Clock::now(); once(); t.push_back(std::chrono::duration<double>(Clock::now() - t0).count()); }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
int main(int argc, char** argv) {
  int threads = atoi(argv[1]); int rounds = atoi(argv[2]); bool cold = argv[3][0] == 'c';
  va::dnnf::set_num_threads(threads); vb::dnnf::set_num_threads(threads);
  for (int s = 4; s < argc; ++s) {
    int M, N, K; sscanf(argv[s], "%d,%d,%d", &M, &N, &K);
    std::mt19937 rng(42); std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> A((size_t)M * K), B((size_t)K * N), Ca((size_t)M * N), Cb((size_t)M * N);
    for (auto& x : A) x = u(rng); for (auto& x : B) x = u(rng);
    const long span = 250L << 20;  // bytes of copies: far beyond L2, about what a model's weights span
    int copies = cold ? static_cast<int>(std::max(2L, span / (4L * K * N))) : 1;
    std::vector<va::dnnf::gemm::PackedB> pa; std::vector<vb::dnnf::gemm::PackedB> pb;
    for (int i = 0; i < copies; ++i) { pa.emplace_back(B.data(), N, 1, K, N); pb.emplace_back(B.data(), N, 1, K, N); }
    va::dnnf::gemm::Options oa; oa.n_threads = threads; vb::dnnf::gemm::Options ob; ob.n_threads = threads;
    size_t ia = 0, ib = 0;
    auto runa = [&] { va::dnnf::gemm::gemm_f32_packed(M, A.data(), K, 1, pa[ia++ % pa.size()].view(), Ca.data(), N, va::dnnf::gemm::EpNone{}, va::dnnf::gemm::ProNone{}, oa); };
    auto runb = [&] { vb::dnnf::gemm::gemm_f32_packed(M, A.data(), K, 1, pb[ib++ % pb.size()].view(), Cb.data(), N, vb::dnnf::gemm::EpNone{}, vb::dnnf::gemm::ProNone{}, ob); };
    runa(); runb();
    double maxdiff = 0; for (size_t i = 0; i < Ca.size(); ++i) maxdiff = std::max(maxdiff, (double)std::fabs(Ca[i] - Cb[i]));
    std::vector<double> ratios, ta, tb;
    for (int r = 0; r < rounds; ++r) {
      double a, b;
      if (r % 2 == 0) { a = time_block<int>(runa, 9); std::this_thread::sleep_for(std::chrono::milliseconds(15)); b = time_block<int>(runb, 9); }
      else { b = time_block<int>(runb, 9); std::this_thread::sleep_for(std::chrono::milliseconds(15)); a = time_block<int>(runa, 9); }
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
      ratios.push_back(b / a); ta.push_back(a); tb.push_back(b);
    }
    std::sort(ratios.begin(), ratios.end()); std::sort(ta.begin(), ta.end()); std::sort(tb.begin(), tb.end());
    double fl = 2.0 * M * N * K;
    printf("%dx%dx%d T%d %s: old %.1f GF/s  new %.1f GF/s  new/old time median %.3f [%.3f-%.3f]  maxdiff %.2g\n", M, N, K, threads, cold ? "cold" : "warm",
           fl / ta[ta.size()/2] / 1e9, fl / tb[tb.size()/2] / 1e9, ratios[ratios.size()/2], ratios[ratios.size()/4], ratios[3*ratios.size()/4], maxdiff);
    fflush(stdout);
  }
}
