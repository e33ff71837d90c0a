// One side of benchmarks/kernel_ab.py: two versions of the prelude's channels-last
// convolution (VA_H, VB_H: their conv_nhwc.h) in one process, in alternating rounds, 1x1
// kernels of the given stride (the shapes ResNet's downsampling takes).
//   conv_ab THREADS ROUNDS N,C,H,M,S [N,C,H,M,S ...]   (an HxH input, C -> M channels, stride S)
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
#include <functional>
#include <array>
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
template <class F> double tb(F f, int reps) { std::vector<double> t; f(); for (int i = 0; i < reps; ++i) { auto t0 = Clock::now(); f(); t.push_back(std::chrono::duration<double>(Clock::now() - t0).count()); } std::sort(t.begin(), t.end()); return t[t.size()/2]; }
int main(int argc, char** argv) {
  int threads = atoi(argv[1]), rounds = atoi(argv[2]);
  va::dnnf::set_num_threads(threads); vb::dnnf::set_num_threads(threads);
  for (int a = 3; a < argc; ++a) {
    int N, C, H, M, S; sscanf(argv[a], "%d,%d,%d,%d,%d", &N, &C, &H, &M, &S);
    int OH = (H - 1) / S + 1;
    std::vector<float> x((size_t)N * H * H * C), w((size_t)M * C), ya((size_t)N * OH * OH * M), yb(ya.size());
    std::mt19937 rng(1); std::uniform_real_distribution<float> u(-1, 1); for (auto& v : x) v = u(rng); for (auto& v : w) v = u(rng);
    auto mk = [&](auto tag) { using CS = decltype(tag); CS s{2, N, C, M, 1, {H, H, 1}, {OH, OH, 1}, {1, 1, 1}, {S, S, 1}, {1, 1, 1}, {0, 0, 0}, 0, 0}; return s; };
    auto sa = mk(va::dnnf::conv::ConvShape{}); auto sb = mk(vb::dnnf::conv::ConvShape{});
    va::dnnf::conv::PackedNhwcWeights wa(sa, w.data()); vb::dnnf::conv::PackedNhwcWeights wb(sb, w.data());
    auto ra = [&] { va::dnnf::conv::conv_nhwc_f32(sa, x.data(), wa, ya.data()); };
    auto rb = [&] { vb::dnnf::conv::conv_nhwc_f32(sb, x.data(), wb, yb.data()); };
    ra(); rb(); double md = 0; for (size_t i = 0; i < ya.size(); ++i) md = std::max(md, (double)std::fabs(ya[i] - yb[i]));
    std::vector<double> r;
    for (int k = 0; k < rounds; ++k) { double A, B; if (k % 2) { A = tb(ra, 7); B = tb(rb, 7);} else { B = tb(rb, 7); A = tb(ra, 7);} r.push_back(B / A); std::this_thread::sleep_for(std::chrono::milliseconds(10)); }
    std::sort(r.begin(), r.end());
    printf("N%d C%d %dx%d -> M%d s%d T%d: new/old %.3f [%.3f-%.3f] paths %d/%d maxdiff %.2g\n", N, C, H, H, M, S, threads, r[r.size()/2], r[r.size()/4], r[3*r.size()/4], (int)wa.path(), (int)wb.path(), md);
  }
}
