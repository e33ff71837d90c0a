// Timing driver for benchmarks/gemm_bench.py: runs dnnf::gemm over a list of shapes with a
// fixed thread count and prints one JSON object per shape with every run's seconds.
//
//   gemm_bench run   THREADS REPS BUDGET_S VARIANT M,N,K [M,N,K ...]
//   gemm_bench peak  THREADS SECONDS          (FMA throughput of this machine, GFLOP/s)
//   gemm_bench bandwidth THREADS MIB REPS      (memory bandwidth: STREAM triad, GB/s)
//
// VARIANT: plain (C = A B, B packed per call), packed (B pre-packed once), cold (B pre-packed,
// but each call takes the next of enough copies to fill twice the last-level cache, so B comes
// from memory as a model's weights do at batch 1), fused (plain plus a bias + GELU epilogue in
// the kernel), unfused (plain, then a separate bias + GELU pass).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "gemm.h"

using namespace dnnf;
using Clock = std::chrono::steady_clock;

namespace {

struct BiasGelu {  // the epilogue a Linear + GELU block fuses
  const float* bias;
  void apply(simd::vf& v, int, int col, int n) const {
    v = simd::v_gelu_erf(simd::v_add(v, gemm::load_lanes(bias + col, n)));
  }
};

void bias_gelu_pass(float* c, const float* bias, int M, int N) {
  parallel_for(M, [&](int i) {
    float* row = c + static_cast<size_t>(i) * N;
    for (int j = 0; j < N; j += simd::kVecWidth) {
      int n = std::min(simd::kVecWidth, N - j);
      simd::vf v = gemm::load_lanes(row + j, n);
      BiasGelu{bias}.apply(v, i, j, n);
      gemm::store_lanes(row + j, v, n);
    }
  });
}

int run(int threads, int reps, double budget, const std::string& variant,
        const std::vector<std::array<int, 3>>& shapes) {
  set_num_threads(threads);
  gemm::Options opt;
  opt.n_threads = threads;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto [M, N, K] : shapes) {
    std::vector<float> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(K) * N),
        C(static_cast<size_t>(M) * N), bias(N);
    for (auto* v : {&A, &B, &bias})
      for (float& x : *v) x = u(rng);
    std::vector<gemm::PackedB> packed;
    if (variant == "packed") packed.emplace_back(B.data(), N, 1, K, N);
    if (variant == "cold") {
      long llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
      llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
      if (llc <= 0) llc = 64L << 20;  // the OS does not say: assume a large one
      const long bytes = 4L * K * N;
      const long copies = std::max(2L, (2 * llc + bytes - 1) / bytes);
      for (long i = 0; i < copies; ++i) packed.emplace_back(B.data(), N, 1, K, N);
    }
    size_t next = 0;
    auto once = [&] {
      if (!packed.empty()) {
        const auto& pb = packed[next++ % packed.size()];
        gemm::gemm_f32_packed(M, A.data(), K, 1, pb.view(), C.data(), N, gemm::EpNone{},
                              gemm::ProNone{}, opt);
      } else if (variant == "fused") {
        gemm::gemm_f32(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), N, BiasGelu{bias.data()},
                       gemm::ProNone{}, opt);
      } else {
        gemm::gemm_f32(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), N, gemm::EpNone{},
                       gemm::ProNone{}, opt);
        if (variant == "unfused") bias_gelu_pass(C.data(), bias.data(), M, N);
      }
    };
    // Warm-up: page faults, packing buffers, pool wake-up; with threads, for a quarter
    // second: right after the pool starts, Linux ran its worker on the caller's core for
    // ~130 ms (a 2-vCPU Zen 4 VM: 256^3 at 300 us per call, then 150 us), which made the
    // first shape's median on 2 threads that of 1.
    {
      const auto w0 = Clock::now();
      for (int i = 0; i < 2 || (threads > 1 && std::chrono::duration<double>(Clock::now() - w0).count() < 0.25); ++i)
        once();
    }
    std::vector<double> times;
    auto start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    while (static_cast<int>(times.size()) < reps && (times.size() < 5 || elapsed() < budget)) {
      auto t0 = Clock::now();
      once();
      times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("{\"M\": %d, \"N\": %d, \"K\": %d, \"threads\": %d, \"variant\": \"%s\", ",
                M, N, K, threads, variant.c_str());
    std::printf("\"times\": [");
    for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.9f", i ? ", " : "", times[i]);
    std::printf("], \"checksum\": %.6g}\n", static_cast<double>(C[C.size() / 2]));
    std::fflush(stdout);
  }
  return 0;
}

// Independent FMA chains (more than latency x ports), one thread each, all in registers:
// 24 of AVX-512's 32 vector registers, but 12 of AVX2's 16 (24 AVX2 chains spilled to the
// stack and read 14% under what the AVX2 GEMM itself reached on a Zen 4; 12 still exceed
// the 8 that 4-cycle FMAs on 2 ports need).
double peak(int threads, double seconds) {
  constexpr int kChains = simd::kVecWidth >= 16 ? 24 : 12;
  std::vector<double> rates(threads);
  auto body = [&](int t) {
    simd::vf acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = simd::v_set1(0.001f * i);
    const simd::vf b = simd::v_set1(0.999999f), c = simd::v_set1(1e-7f);
    long iters = 0;
    double best = 0;
    auto start = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
      auto t0 = Clock::now();
      for (int r = 0; r < 200000; ++r) {
#pragma GCC unroll 24  // every chain, whichever count
        for (int i = 0; i < kChains; ++i) acc[i] = simd::v_fma(acc[i], b, c);
      }
      double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      best = std::max(best, 200000.0 * kChains * 2 * simd::kVecWidth / dt / 1e9);
      iters++;
    }
    float s = 0;
    for (int i = 0; i < kChains; ++i) s += simd::v_reduce_add(acc[i]);
    if (s == 12345.0f) std::printf("#");  // keep the chains alive
    rates[t] = best;
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
  for (auto& th : pool) th.join();
  double total = 0;
  for (double r : rates) total += r;
  return total;
}

// STREAM's triad a[i] = b[i] + s * c[i] over three arrays of `mib` MiB each (far larger than
// the caches), split over `threads` threads that each first touch their own part (so the
// pages sit near the thread on a NUMA machine). GB/s counts the bytes the loop must move,
// 12 per element (read b and c, write a; the write-allocate read is not counted, as in
// STREAM). Best of `reps` timed sweeps after one untimed one.
double bandwidth(int threads, int mib, int reps) {
  const size_t n = static_cast<size_t>(mib) * (1 << 20) / sizeof(float);
  float* a = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* b = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  float* c = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  if (!a || !b || !c) return 0.0;
  auto on_threads = [&](auto&& f) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { f(n * t / threads, n * (t + 1) / threads); });
    for (auto& th : pool) th.join();
  };
  on_threads([&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) a[i] = 0.0f, b[i] = 1.0f, c[i] = 2.0f;
  });
  double best = 0;
  for (int r = 0; r <= reps; ++r) {
    const float s = 0.5f + 0.001f * r;
    auto t0 = Clock::now();
    on_threads([&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
    });
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r > 0) best = std::max(best, 3.0 * n * sizeof(float) / dt / 1e9);
  }
  if (a[n / 2] == 12345.0f) std::printf("#");  // keep the stores
  std::free(a);
  std::free(b);
  std::free(c);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::strcmp(argv[1], "peak") == 0) {
    std::printf("{\"peak_gflops\": %.2f}\n", peak(std::atoi(argv[2]), std::atof(argv[3])));
    return 0;
  }
  if (argc >= 5 && std::strcmp(argv[1], "bandwidth") == 0) {
    std::printf("{\"bandwidth_gbs\": %.2f}\n",
                bandwidth(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4])));
    return 0;
  }
  if (argc >= 7 && std::strcmp(argv[1], "run") == 0) {
    std::vector<std::array<int, 3>> shapes;
    for (int i = 6; i < argc; ++i) {
      std::array<int, 3> s{};
      if (std::sscanf(argv[i], "%d,%d,%d", &s[0], &s[1], &s[2]) != 3) return 2;
      shapes.push_back(s);
    }
    return run(std::atoi(argv[2]), std::atoi(argv[3]), std::atof(argv[4]), argv[5], shapes);
  }
  std::fprintf(stderr,
               "usage: gemm_bench run THREADS REPS BUDGET_S VARIANT M,N,K...\n"
               "       gemm_bench peak THREADS SECONDS\n"
               "       gemm_bench bandwidth THREADS MIB REPS\n");
  return 2;
}
