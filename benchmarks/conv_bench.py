"""Speed sanity check of the convolution and pooling anchors (cpp/codegen/prelude/conv.h,
pool.h): GFLOP/s on ResNet-50 and MobileNetV2/EfficientNet layers with 1 and 2 threads,
beside torch (conv2d / pooling, same thread count) when it is installed.

    python benchmarks/conv_bench.py                 # all layers, 1 and 2 threads
    python benchmarks/conv_bench.py --threads 1 --budget 0.5

Every cell is the median of timed calls after two warm-up calls (at least 5 runs, stopping
after --budget seconds). Convs count 2 * N * M * C/group * prod(k) * prod(out) flops; pools
count one op per tap and output (their GB/s, input bytes read / time, is also printed).
A measurement, not a test: the machine may be shared, so the load average is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRELUDE = ROOT / "cpp" / "codegen" / "prelude"
CXX = os.environ.get("CXX", "g++")


def _isa_flags() -> list[str]:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if "avx512bw" in flags:
        return ["-DDNNF_ISA_AVX512", "-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl",
                "-mfma", "-mprefer-vector-width=512"]
    if "avx2" in flags:
        return ["-DDNNF_ISA_AVX2", "-mavx2", "-mfma"]
    return []


FLAGS = ["-std=c++17", "-O3", "-ffp-contract=off", "-pthread", *_isa_flags()]

# (label, kind, N, C, M, group, H, W, k, stride, pad); kind: conv | maxpool | gap
LAYERS = [
    ("resnet50 3x3 64ch 56x56", "conv", 1, 64, 64, 1, 56, 56, 3, 1, 1),
    ("resnet50 1x1 256->64 56x56", "conv", 1, 256, 64, 1, 56, 56, 1, 1, 0),
    ("resnet50 3x3 s2 128ch 56->28", "conv", 1, 128, 128, 1, 56, 56, 3, 2, 1),
    ("resnet50 stem 7x7 s2 3->64", "conv", 1, 3, 64, 1, 224, 224, 7, 2, 3),
    ("mbv2 dw 3x3 s2 96ch 112->56", "conv", 1, 96, 96, 96, 112, 112, 3, 2, 1),
    ("mbv2 dw 3x3 144ch 56x56", "conv", 1, 144, 144, 144, 56, 56, 3, 1, 1),
    ("mbv2 dw 3x3 384ch 14x14", "conv", 1, 384, 384, 384, 14, 14, 3, 1, 1),
    ("mbv2 dw 3x3 960ch 7x7", "conv", 1, 960, 960, 960, 7, 7, 3, 1, 1),
    ("effnet dw 5x5 s2 240ch 28->14", "conv", 1, 240, 240, 240, 28, 28, 5, 2, 2),
    ("resnet50 maxpool 3x3 s2 64ch 112", "maxpool", 1, 64, 64, 1, 112, 112, 3, 2, 1),
    ("global avg pool 1280ch 7x7", "gap", 1, 1280, 1280, 1, 7, 7, 1, 1, 0),
]

DRIVER = r"""
#include "conv.h"
#include "pool.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>
using namespace dnnf;

int main(int argc, char** argv) {
  const int threads = std::atoi(argv[1]);
  const double budget = std::atof(argv[2]);
  set_num_threads(threads);
  for (int a = 3; a < argc; ++a) {
    char kind[16];
    int N, C, M, G, H, W, k, s, p, packed;
    std::sscanf(argv[a], "%15[^:]:%d:%d:%d:%d:%d:%d:%d:%d:%d:%d", kind, &N, &C, &M, &G, &H, &W, &k,
                &s, &p, &packed);
    const int OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> x(size_t(N) * C * H * W), w(size_t(M) * C / G * k * k);
    std::vector<float> y(size_t(N) * M * OH * OW);
    for (auto& v : x) v = u(rng);
    for (auto& v : w) v = u(rng);
    conv::ConvShape cs{2, N, C, M, G, {H, W, 1}, {OH, OW, 1}, {k, k, 1}, {s, s, 1}, {1, 1, 1},
                       {p, p, 0}};
    pool::PoolShape ps{2, N, C, {H, W, 1}, {OH, OW, 1}, {k, k, 1}, {s, s, 1}, {1, 1, 1},
                       {p, p, 0}, {p, p, 0}, false};
    std::unique_ptr<conv::PackedConvWeights> pw;
    if (packed) pw = std::make_unique<conv::PackedConvWeights>(cs, w.data());
    auto once = [&] {
      if (std::string(kind) == "conv") {
        if (pw) conv::conv_f32(cs, x.data(), *pw, y.data());
        else conv::conv_f32(cs, x.data(), w.data(), y.data());
      } else if (std::string(kind) == "maxpool") {
        pool::max_pool_f32(ps, x.data(), y.data());
      } else {
        pool::global_avg_pool_f32(N, C, long(H) * W, x.data(), y.data());
      }
    };
    once();
    once();
    std::vector<double> t;
    auto start = std::chrono::steady_clock::now();
    auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    while (t.size() < 5 || secs(start, std::chrono::steady_clock::now()) < budget) {
      auto t0 = std::chrono::steady_clock::now();
      once();
      t.push_back(secs(t0, std::chrono::steady_clock::now()));
      if (t.size() >= 2000) break;
    }
    std::sort(t.begin(), t.end());
    std::printf("%.9f\n", t[t.size() / 2]);
  }
  return 0;
}
"""

TORCH_CHILD = r"""
import sys, json, time, statistics
import torch
threads, budget, layers = int(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
torch.set_num_threads(threads)
F = torch.nn.functional
out = []
with torch.inference_mode():
    for kind, N, C, M, G, H, W, k, s, p in layers:
        x = torch.rand(N, C, H, W) * 2 - 1
        w = torch.rand(M, C // G, k, k) * 2 - 1
        if kind == "conv":
            once = lambda: F.conv2d(x, w, stride=s, padding=p, groups=G)
        elif kind == "maxpool":
            once = lambda: F.max_pool2d(x, k, s, p)
        else:
            once = lambda: F.adaptive_avg_pool2d(x, 1)
        once(); once()
        ts, start = [], time.perf_counter()
        while len(ts) < 5 or time.perf_counter() - start < budget:
            t0 = time.perf_counter(); once(); ts.append(time.perf_counter() - t0)
        out.append(statistics.median(ts))
print(json.dumps(out))
"""


def flops(kind: str, N: int, C: int, M: int, G: int, H: int, W: int, k: int, s: int,
          p: int) -> tuple[float, float]:
    """(flops, input bytes) of one call."""
    OH, OW = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    if kind == "conv":
        return 2.0 * N * M * (C // G) * k * k * OH * OW, 4.0 * N * C * H * W
    if kind == "maxpool":
        return 1.0 * N * C * k * k * OH * OW, 4.0 * N * C * H * W
    return 1.0 * N * C * H * W, 4.0 * N * C * H * W


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timed runs per cell")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "conv_bench.cc", Path(tmp) / "conv_bench"
        src.write_text(DRIVER)
        subprocess.run([CXX, *FLAGS, f"-I{PRELUDE}", str(src), "-o", str(exe)], check=True)
        specs = [":".join(map(str, (kind, *dims, 0))) for _, kind, *dims in LAYERS]
        packed = [":".join(map(str, (kind, *dims, 1))) for _, kind, *dims in LAYERS
                  if kind == "conv" and dims[3] == 1]
        print(f"flags: {' '.join(FLAGS)}")
        print(f"load average: {os.getloadavg()[0]:.2f}")
        hdr = f"{'layer':34s} {'thr':>3s} {'dnnf GF/s':>9s} {'packed':>7s} {'torch':>7s} {'ms':>8s}"
        print(hdr)
        print("-" * len(hdr))
        for t in threads:
            run = lambda s: [float(v) for v in subprocess.run(  # noqa: E731
                [str(exe), str(t), str(args.budget), *s], capture_output=True, text=True,
                check=True).stdout.split()]
            ours, ours_packed = run(specs), iter(run(packed))
            theirs = [None] * len(LAYERS)
            if not args.no_torch:
                r = subprocess.run([sys.executable, "-c", TORCH_CHILD, str(t), str(args.budget),
                                    json.dumps([l[1:] for l in LAYERS])],
                                   capture_output=True, text=True,
                                   env={**os.environ, "OMP_NUM_THREADS": str(t)})
                if r.returncode == 0:
                    theirs = json.loads(r.stdout)
            for (label, kind, *dims), sec, tsec in zip(LAYERS, ours, theirs):
                f, nbytes = flops(kind, *dims)
                pk = f"{f / next(ours_packed) / 1e9:7.1f}" if kind == "conv" and dims[3] == 1 \
                    else f"{'':7s}"
                th = f"{f / tsec / 1e9:7.1f}" if tsec else f"{'n/a':>7s}"
                extra = f"  ({nbytes / sec / 1e9:.1f} GB/s)" if kind != "conv" else ""
                print(f"{label:34s} {t:3d} {f / sec / 1e9:9.1f} {pk} {th} {sec * 1e3:8.3f}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
