"""Correctness of the convolution and pooling anchors (cpp/codegen/prelude/conv.h,
conv_nhwc.h, conv_direct.h, pool.h, window.h) against the NumPy reference
(dnnfusion/_ref_nn.py).

One C++ driver reads a list of cases (kind, epilogue, threads, ONNX geometry) with their
inputs from a file, runs the prelude kernel and writes the output back. It is compiled once
per dialect (scalar, AVX2, AVX-512 when the CPU has them; NEON cross-compiled and run under
qemu-aarch64 on a few small cases). Epilogues: none; bias per channel + relu (on rows for
the [N*C, spatial] views, on columns for the global pools' [N, C] view and the channels-last
convolutions' [pixels, M] view); and a kStores
epilogue writing v + 1 into a separate buffer (y is then only scratch). conv_nhwc_mean is the
depthwise kernel that also takes the mean of its output (after the epilogue) over each image's
pixels (conv_nhwc_mean_f32): its output is y followed by the [N, M] means. Odd widths exercise
the vector tails; the output buffer starts as garbage so an unwritten element fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from dnnfusion import _ref_nn as nn
from dialects import params
from native_toolchain import DRIVER_MAIN_OPEN, PRELUDE, CompiledOnly, Job, build_and_run, dialect_commands

# -O1 keeps the four compiles quick; the kernels hold no optimisation-dependent semantics
# (no -ffast-math), and -O3 (the runtime's level) was checked to give the same results.
COMMON = ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{PRELUDE}"]
SCALAR_FLAGS = ("-mavx2", "-mfma")  # the scalar dialect; ISA flags only let std::fma inline
KINDS = ["conv", "conv_packed", "conv_transpose", "max_pool", "avg_pool", "global_avg",
         "global_max", "conv_nhwc", "max_pool_nhwc", "avg_pool_nhwc", "conv_nhwc_planar",
         "conv_nhwc_mean"]
EPS = ["none", "bias_relu", "stores", "affine"]

DRIVER = r"""
#include "conv.h"
#include "conv_nhwc.h"
#include "pool.h"
#include "pool_nhwc.h"
#include "cg_support.h"
#include <cstdio>
#include <cstdlib>
#include <vector>
using namespace dnnf;
using simd::vf;

struct EpBiasRowRelu {  // channel = row % channels ([N*C, spatial] views)
  const float* bias; int channels;
  void apply(vf& v, int row, int, int) const {
    v = simd::v_relu(simd::v_add(v, simd::v_set1(bias[row % channels])));
  }
};
struct EpBiasColRelu {  // channel = col (the global pools' [N, C] view)
  const float* bias;
  void apply(vf& v, int, int col, int n) const {
    v = simd::v_relu(simd::v_add(v, gemm::load_lanes(bias + col, n)));
  }
};
struct EpStorePlusOne {
  static constexpr bool kStores = true;
  float* out; long cols;
  void apply(vf& v, int row, int col, int n) const {
    gemm::store_lanes(out + row * cols + col, simd::v_add(v, simd::v_set1(1.0f)), n);
  }
};

enum { kHead = 40 };
""" + DRIVER_MAIN_OPEN + r"""
  for (int ci = 0; ci < n_cases; ++ci) {
    int h[kHead];
    if (std::fread(h, 4, kHead, in) != kHead) return 4;
    const int kind = h[0], ep = h[1], threads = h[2];
    conv::ConvShape cs{h[3], h[4], h[5], h[6], h[7], {}, {}, {}, {}, {}, {}};
    pool::PoolShape ps{h[3], h[4], h[5], {}, {}, {}, {}, {}, {}, {}, h[29] != 0};
    for (int i = 0; i < 3; ++i) {
      cs.in[i] = ps.in[i] = h[8 + i];
      cs.out[i] = ps.out[i] = h[11 + i];
      cs.k[i] = ps.k[i] = h[14 + i];
      cs.stride[i] = ps.stride[i] = h[17 + i];
      cs.dil[i] = ps.dil[i] = h[20 + i];
      cs.pad_begin[i] = ps.pad_begin[i] = h[23 + i];
      ps.pad_end[i] = h[26 + i];
    }
    const long nx = h[30], nw = h[31], nb = h[32], ny = h[33], cols = h[34];
    std::vector<float> x(nx + 1), w(nw + 1), b(nb + 1), y(ny + 1, 12345.0f), z(ny + 1, 777.0f);
    if (std::fread(x.data(), 4, nx, in) != size_t(nx) ||
        std::fread(w.data(), 4, nw, in) != size_t(nw) ||
        std::fread(b.data(), 4, nb, in) != size_t(nb))
      return 5;
    set_num_threads(threads);
    auto run = [&](const auto& e) {
      switch (kind) {
        case 0: conv::conv_f32(cs, x.data(), w.data(), y.data(), e); break;
        case 1: {
          conv::PackedConvWeights pw(cs, w.data());
          conv::conv_f32(cs, x.data(), pw, y.data(), e);
          break;
        }
        case 2: conv::conv_transpose_f32(cs, x.data(), w.data(), y.data(), e); break;
        case 3: pool::max_pool_f32(ps, x.data(), y.data(), e); break;
        case 4: pool::avg_pool_f32(ps, x.data(), y.data(), e); break;
        case 7: {  // x and y channels last
          conv::PackedNhwcWeights pw(cs, w.data());
          conv::conv_nhwc_f32(cs, x.data(), pw, y.data(), e);
          break;
        }
        case 8: pool::max_pool_nhwc_f32(ps, x.data(), y.data(), e); break;
        case 9: pool::avg_pool_nhwc_f32(ps, x.data(), y.data(), e); break;
        case 10: {  // x channels first (ConvShape::planar_x), y channels last
          conv::ConvShape pc = cs;
          pc.planar_x = 1;
          conv::PackedNhwcWeights pw(pc, w.data());
          conv::conv_nhwc_f32(pc, x.data(), pw, y.data(), e);
          break;
        }
        case 11: {  // depthwise channels last, then the [N, M] means after y's pixels
          conv::PackedNhwcWeights pw(cs, w.data());
          const long ylen = ny - long(cs.N) * cs.M, per_image = ylen / (long(cs.N) * cs.M);
          conv::conv_nhwc_mean_f32(cs, x.data(), pw, y.data(), e, y.data() + ylen, 1.0f / per_image);
          break;
        }
      }
    };
    auto run_global = [&](const auto& e) {
      const long sp = nx / (long(cs.N) * cs.C);
      if (kind == 5) pool::global_avg_pool_f32(cs.N, cs.C, sp, x.data(), y.data(), e);
      else pool::global_max_pool_f32(cs.N, cs.C, sp, x.data(), y.data(), e);
    };
    const bool global = kind == 5 || kind == 6;
    if (ep == 0) {
      global ? run_global(gemm::EpNone{}) : run(gemm::EpNone{});
    } else if (ep == 1) {
      if (global) run_global(EpBiasColRelu{b.data()});
      else if (kind >= 7) run(EpBiasColRelu{b.data()});
      else run(EpBiasRowRelu{b.data(), static_cast<int>(nb)});
    } else if (ep == 3) {  // the code generator's recognised form: clip(v + bias + res, 0, 6)
      std::vector<float> res(ny + 1);
      for (long i = 0; i < ny; ++i) res[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
      const float* bp = b.data();
      const float* rp = res.data();
      auto f = [bp, rp, cols](vf& v, long row, long j, int n) {
        v = simd::v_add(v, gemm::load_lanes(bp + j, n));
        v = simd::v_add(v, gemm::load_lanes(rp + row * cols + j, n));
        v = simd::v_min(simd::v_set1(6.0f), simd::v_max(simd::v_set1(0.0f), v));
      };
      run(cg::make_ep_affine(f, 0L, bp, rp, cols, 2, 0.0f, 6.0f));
    } else {
      EpStorePlusOne e{z.data(), cols};
      global ? run_global(e) : run(e);
    }
    std::fwrite(ep == 2 ? z.data() : y.data(), 4, ny, out);
  }
  return 0;
}
"""


@dataclass
class Case:
    kind: str
    x_shape: tuple  # N, C, spatial...
    k: tuple = ()
    M: int = 0  # output channels (conv kinds)
    group: int = 1
    strides: tuple = ()
    dil: tuple = ()
    pads: tuple = ()  # begin..., end...
    out_pad: tuple = ()  # ConvTranspose output_padding
    ceil: int = 0
    include_pad: int = 0
    ep: str = "none"
    threads: int = 1
    attrs: dict = field(default_factory=dict)

    @property
    def reduction(self) -> int:
        """Terms summed per output: C/group x taps for convolutions, the taps for pools."""
        taps = int(np.prod(self.k)) if self.k else 1
        return taps * (self.x_shape[1] // self.group if self.M else 1)

    @property
    def id(self) -> str:
        parts = [self.kind, "x".join(map(str, self.x_shape))]
        for name in ("k", "strides", "dil", "pads", "out_pad"):
            if getattr(self, name):
                parts.append(name + "".join(map(str, getattr(self, name))))
        for name, plain in (("M", 0), ("group", 1), ("ceil", 0), ("include_pad", 0),
                            ("threads", 1)):
            if getattr(self, name) != plain:
                parts.append(f"{name}{getattr(self, name)}")
        if self.ep != "none":
            parts.append(self.ep)
        return "-".join(parts)


def _relu(a):
    return np.maximum(a, 0)


def build(c: Case, rng) -> tuple[bytes, np.ndarray]:
    """The case's record for the driver and the expected output (float64, flat)."""
    N, C, *sp = c.x_shape
    nd = len(sp)
    u = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float32)  # noqa: E731
    x = u(*c.x_shape)
    k = list(c.k) or [1] * nd
    strides, dil = list(c.strides) or [1] * nd, list(c.dil) or [1] * nd
    pads = list(c.pads) or [0] * 2 * nd
    attrs = {"strides": strides, "dilations": dil, "pads": pads}
    w = np.zeros(0, np.float32)
    M = C
    if c.kind in ("conv", "conv_packed", "conv_nhwc", "conv_nhwc_planar", "conv_nhwc_mean"):
        M = c.M
        w = u(M, C // c.group, *k)
        want = nn.conv([x, w], {**attrs, "group": c.group})[0]
    elif c.kind == "conv_transpose":
        M = c.M
        w = u(C, M // c.group, *k)
        want = nn.conv_transpose([x, w], {**attrs, "group": c.group,
                                          "output_padding": list(c.out_pad) or [0] * nd})[0]
    elif c.kind in ("max_pool", "avg_pool", "max_pool_nhwc", "avg_pool_nhwc"):
        pattrs = {**attrs, "kernel_shape": k, "ceil_mode": c.ceil,
                  "count_include_pad": c.include_pad}
        if c.kind.startswith("max_pool"):
            want = nn.max_pool([x], pattrs)[0]
        else:
            want = nn.average_pool([x], pattrs)[0]
    elif c.kind == "global_avg":
        want = nn.global_average_pool([x], {})[0]
    else:
        want = nn.global_max_pool([x], {})[0]
    want = want.astype(np.float64)
    out_sp = list(want.shape[2:])
    glob = c.kind.startswith("global")
    # y channels last (the epilogue view is [pixels, M]); x too, but for conv_nhwc_planar
    last = c.kind.endswith("_nhwc") or c.kind in ("conv_nhwc_planar", "conv_nhwc_mean")
    bias = u(M)
    if last:
        if c.kind != "conv_nhwc_planar":
            x = np.moveaxis(x, 1, -1).copy()
        rows, cols = N * math.prod(out_sp), M
        flat = np.moveaxis(want, 1, -1).reshape(rows, cols)
    else:
        rows, cols = (N, M) if glob else (N * M, math.prod(out_sp))
        flat = want.reshape(rows, cols)
    if c.ep == "bias_relu":
        flat = _relu(flat + (bias[None, :] if glob or last else np.tile(bias, N)[:, None]))
    elif c.ep == "stores":
        flat = flat + 1
    elif c.ep == "affine":  # channels last only: bias per column, a residual [pixels, M]
        assert last, c
        res = ((np.arange(rows * cols) % 7).astype(np.float32) * np.float32(0.1) - np.float32(0.3)).reshape(rows, cols)
        flat = np.clip(flat + bias[None, :] + res, 0, 6)
    ny = rows * cols
    if c.kind == "conv_nhwc_mean":  # y, then each image's mean over its pixels
        assert c.ep != "stores" and c.group == C == M, c
        flat = np.concatenate([flat.ravel(), flat.reshape(N, -1, M).mean(axis=1).ravel()])
        ny += N * M
    pad3 = lambda v, fill: list(v) + [fill] * (3 - len(v))  # noqa: E731
    # in = x's spatial, out = y's (also for ConvTranspose, as conv.h takes them)
    head = [KINDS.index(c.kind), EPS.index(c.ep), c.threads, nd, N, C, M, c.group,
            *pad3(sp, 1), *pad3(out_sp if not glob else [1] * nd, 1), *pad3(k, 1),
            *pad3(strides, 1), *pad3(dil, 1), *pad3(pads[:nd], 0), *pad3(pads[nd:], 0),
            c.include_pad, x.size, w.size, bias.size, ny, cols]
    head += [0] * (40 - len(head))
    rec = b"".join(a.tobytes() for a in (np.array(head, np.int32), x, w.ravel(), bias))
    return rec, flat.ravel()


def cases_x86() -> list[Case]:
    cs = [
        # GEMM path: 1x1 as plain GEMM (N = 2), 1x1 strided, 3x3 pad 1 (threads, epilogue),
        # strided, dilated, asymmetric pads, grouped (one GEMM per task), two k-blocks
        Case("conv", (2, 16, 13, 11), k=(1, 1), M=24),
        Case("conv", (1, 8, 15, 9), k=(1, 1), M=12, strides=(2, 2), ep="bias_relu"),
        Case("conv", (1, 16, 17, 19), k=(3, 3), M=32, pads=(1, 1, 1, 1), ep="bias_relu", threads=2),
        Case("conv", (1, 8, 21, 23), k=(3, 3), M=10, pads=(1, 1, 1, 1), strides=(2, 2)),
        Case("conv", (1, 6, 19, 17), k=(3, 3), M=7, pads=(2, 2, 2, 2), dil=(2, 2)),
        Case("conv", (2, 3, 20, 23), k=(7, 7), M=9, pads=(3, 3, 2, 3), strides=(2, 3),
             threads=2),
        Case("conv", (1, 5, 12, 13), k=(3, 2), M=9, pads=(0, 1, 2, 1), strides=(1, 2)),
        Case("conv", (2, 16, 13, 13), k=(3, 3), M=8, group=4, pads=(1, 1, 1, 1), threads=2, ep="bias_relu"),
        Case("conv", (1, 64, 9, 11), k=(3, 3), M=20, pads=(1, 1, 1, 1), ep="stores"),
        # many columns: the GEMM streams B (packs each column block right before use)
        Case("conv", (1, 8, 40, 41), k=(3, 3), M=20, pads=(1, 1, 1, 1), threads=2, ep="bias_relu"),
        Case("conv", (1, 3, 90, 70), k=(7, 7), M=17, pads=(3, 3, 3, 3), strides=(2, 2)),
        Case("conv", (1, 16, 40, 41), k=(1, 1), M=9, ep="stores"),
        Case("conv", (1, 64, 9, 11), k=(3, 3), M=20, pads=(1, 1, 1, 1), ep="bias_relu", threads=2),
        # depthwise (window engine): k3 s1, k3 s2, k5 s2, k7 (generic taps), dilated, tiny
        Case("conv", (2, 5, 17, 19), k=(3, 3), M=5, group=5, pads=(1, 1, 1, 1),
             ep="bias_relu"),
        Case("conv", (1, 6, 15, 21), k=(3, 3), M=6, group=6, pads=(1, 1, 1, 1),
             strides=(2, 2), threads=2),
        Case("conv", (1, 4, 23, 17), k=(5, 5), M=4, group=4, pads=(2, 2, 2, 2),
             strides=(2, 2), ep="stores"),
        Case("conv", (1, 3, 13, 11), k=(7, 7), M=3, group=3, pads=(3, 3, 3, 3)),
        Case("conv", (1, 3, 13, 11), k=(3, 3), M=3, group=3, pads=(2, 1, 2, 1), dil=(2, 2)),
        Case("conv", (3, 7, 7, 7), k=(3, 3), M=7, group=7, pads=(1, 1, 1, 1), threads=2),
        Case("conv", (1, 4, 9, 10), k=(3, 3), M=4, group=4, pads=(0, 0, 0, 0), strides=(3, 2)),
        Case("conv", (1, 3, 13, 20), k=(3, 3), M=3, group=3, pads=(1, 1, 1, 1),
             strides=(1, 3), dil=(1, 2)),
        # 1-D and 3-D
        Case("conv", (2, 5, 29), k=(3,), M=7, strides=(2,), pads=(1, 1)),
        Case("conv", (1, 4, 29), k=(3,), M=4, group=4, pads=(1, 1), ep="bias_relu"),
        Case("conv", (1, 3, 5, 6, 7), k=(3, 3, 3), M=4, pads=(1,) * 6, strides=(1, 2, 1)),
        Case("conv", (1, 3, 5, 6, 7), k=(3, 3, 3), M=3, group=3, pads=(1,) * 6),
        # pre-packed weights: 1x1, 3x3 (two k-blocks), grouped, depthwise
        Case("conv_packed", (2, 16, 13, 11), k=(1, 1), M=24, ep="bias_relu"),
        Case("conv_packed", (1, 64, 9, 11), k=(3, 3), M=20, pads=(1, 1, 1, 1), threads=2),
        Case("conv_packed", (1, 8, 40, 41), k=(3, 3), M=20, pads=(1, 1, 1, 1), threads=2, ep="stores"),
        Case("conv_packed", (1, 3, 90, 70), k=(7, 7), M=17, pads=(3, 3, 3, 3), strides=(2, 2),
             ep="bias_relu"),
        Case("conv_packed", (2, 16, 13, 13), k=(3, 3), M=8, group=4, pads=(1, 1, 1, 1),
             threads=2),
        Case("conv_packed", (1, 6, 15, 21), k=(3, 3), M=6, group=6, pads=(1, 1, 1, 1),
             strides=(2, 2), ep="stores"),
        # pre-packed, small output planes: the pixel-major (NHWC-style) GEMM path
        Case("conv_packed", (1, 64, 7, 7), k=(3, 3), M=1024, pads=(1, 1, 1, 1), threads=2, ep="bias_relu"),
        Case("conv_packed", (2, 512, 14, 14), k=(1, 1), M=1024, strides=(2, 2), threads=2,
             ep="stores"),
        Case("conv_packed", (1, 512, 7, 7), k=(1, 1), M=1056, ep="bias_relu"),
        Case("conv_packed", (2, 128, 6, 6), k=(3, 3), M=2048, group=2, pads=(1, 1, 1, 1),
             threads=2, ep="bias_relu"),
        Case("conv_packed", (1, 64, 10, 9), k=(3, 3), M=1024, pads=(2, 2, 2, 2), dil=(2, 2),
             strides=(2, 1), ep="stores"),
        # planes of at most 64 output pixels: im2col from each (pixel, tap)'s offset
        # (small_plane_col), batched, grouped, dilated, 1-D and 3-D
        Case("conv", (2, 6, 5, 7), k=(3, 3), M=10, pads=(1, 2, 1, 0), dil=(1, 2), ep="bias_relu"),
        Case("conv", (1, 8, 6, 6), k=(3, 3), M=12, group=2, pads=(1, 1, 1, 1), strides=(2, 1), threads=2),
        Case("conv", (1, 4, 9), k=(3,), M=5, pads=(1, 1), ep="stores"),
        Case("conv", (1, 3, 3, 4, 4), k=(2, 3, 3), M=4, pads=(0, 1, 1, 1, 1, 1)),
        # pre-packed, tiny output planes (under a GEMM tile's width): pixel-major, im2col^T
        # built per pixel from each tap's offset (small_plane_colT); a width stride keeps the
        # phase-split rows
        Case("conv_packed", (1, 64, 2, 2), k=(3, 3), M=64, pads=(1, 1, 1, 1), ep="bias_relu"),
        Case("conv_packed", (2, 48, 5, 4), k=(3, 3), M=40, pads=(2, 1, 2, 1), dil=(2, 1), strides=(2, 1),
             threads=2, ep="stores"),
        Case("conv_packed", (1, 32, 2, 2, 2), k=(3, 3, 3), M=32, pads=(1,) * 6, ep="bias_relu"),
        Case("conv_packed", (1, 64, 3, 3), k=(3, 3), M=64, group=2, pads=(1, 1, 1, 1), threads=2),
        Case("conv_packed", (1, 32, 6, 6), k=(3, 3), M=32, pads=(1, 1, 1, 1), strides=(2, 2), ep="stores"),
        # channels last: the direct kernel (tiles wrapping rows and images, padding rows,
        # stride, dilation, merged kx runs, a stem on 3 channels, chunked input channels,
        # M past NR, groups, 1-D and 3-D), the pointwise GEMM and depthwise
        Case("conv_nhwc", (2, 7, 9, 11), k=(3, 3), M=5, pads=(1, 0, 1, 2), strides=(2, 1),
             ep="bias_relu", threads=2),
        Case("conv_nhwc", (1, 16, 17, 19), k=(3, 3), M=40, pads=(1, 1, 1, 1), threads=2),
        Case("conv_nhwc", (1, 3, 30, 30), k=(7, 7), M=8, pads=(3, 3, 3, 3), strides=(2, 2),
             ep="stores"),
        Case("conv_nhwc", (1, 6, 19, 17), k=(3, 3), M=7, pads=(2, 2, 2, 2), dil=(2, 2)),
        Case("conv_nhwc", (1, 12, 10, 10), k=(3, 3), M=8, group=4, pads=(1, 1, 1, 1),
             ep="bias_relu", threads=2),
        Case("conv_nhwc", (1, 300, 6, 7), k=(3, 3), M=70, pads=(1, 1, 1, 1), threads=2,
             ep="bias_relu"),
        Case("conv_nhwc", (1, 16, 14, 14), k=(1, 1), M=24, strides=(2, 2), ep="stores"),
        # strided 1x1s with weights of half of L2 or more (2 MiB here) run as a GEMM whose A
        # rows are every stride-th input pixel (conv_shape.h gemm_pointwise): odd extents, two
        # images, unequal strides, 3-D (ResNet's downsampling 1x1s; smaller ones run direct)
        Case("conv_nhwc", (2, 512, 9, 7), k=(1, 1), M=1024, strides=(2, 3), ep="bias_relu", threads=2),
        Case("conv_nhwc", (1, 512, 3, 5, 7), k=(1, 1, 1), M=1024, strides=(2, 2, 3), ep="affine"),
        Case("conv_nhwc", (1, 512, 14, 14), k=(1, 1), M=1024, strides=(2, 2), ep="bias_relu", threads=2),
        Case("conv_nhwc", (2, 16, 13, 11), k=(1, 1), M=24, ep="bias_relu"),
        Case("conv_nhwc", (2, 6, 40), k=(5,), M=10, pads=(2, 2), strides=(3,)),
        Case("conv_nhwc", (1, 4, 6, 7, 8), k=(3, 3, 3), M=5, pads=(1,) * 6, threads=2),
        # the fixed-stride kernel (tile_fixed): rows wide enough for whole tiles inside the
        # input, beside edge tiles and tiles wrapping rows; stride * C of 1, 2, 3, 4, 6, 8;
        # y dilation, 3-D, M past NR, every epilogue kind
        Case("conv_nhwc", (2, 3, 21, 40), k=(3, 3), M=40, pads=(1, 1, 1, 1), strides=(2, 2),
             ep="bias_relu", threads=2),
        Case("conv_nhwc", (1, 3, 9, 64), k=(7, 7), M=16, pads=(3, 3, 3, 3), strides=(2, 2), ep="stores"),
        Case("conv_nhwc", (1, 3, 6, 37), k=(3, 3), M=8, pads=(1, 1, 1, 1)),
        Case("conv_nhwc", (1, 1, 12, 50), k=(3, 3), M=8, pads=(2, 1, 2, 1), dil=(2, 1), ep="stores"),
        Case("conv_nhwc", (1, 1, 8, 61), k=(5, 5), M=7, pads=(2, 2, 2, 2), strides=(1, 2)),
        Case("conv_nhwc", (1, 4, 6, 45), k=(5, 5), M=33, pads=(2, 2, 2, 2), ep="bias_relu", threads=2),
        Case("conv_nhwc", (1, 4, 7, 40), k=(3, 3), M=20, pads=(0, 1, 0, 1), strides=(1, 2)),
        Case("conv_nhwc", (1, 8, 7, 40), k=(3, 3), M=20, pads=(1, 1, 1, 1), strides=(2, 1), threads=2),
        Case("conv_nhwc", (1, 2, 4, 5, 36), k=(3, 3, 3), M=6, pads=(1,) * 6, ep="bias_relu"),
        # 3-D: taps across frames further apart than any L2 (the next tile's rows are
        # prefetched), m-blocks run in bands per tile; input channels in two chunks or more
        Case("conv_nhwc", (1, 48, 5, 96, 96), k=(3, 1, 1), M=40, pads=(1, 0, 0, 1, 0, 0),
             strides=(2, 1, 1), ep="bias_relu", threads=2),
        Case("conv_nhwc", (1, 600, 3, 4, 5), k=(3, 3, 3), M=70, pads=(1,) * 6, threads=2,
             ep="stores"),
        Case("conv_nhwc", (1, 19, 15, 15), k=(5, 5), M=19, group=19, pads=(2,) * 4,
             ep="bias_relu"),
        # depthwise with the mean of its pixels: the row kernel (channel tail, two images,
        # threads, stride 2), the padded-row path (5x5 on a plane <= 16 wide), the recognised
        # epilogue storing from the interior
        Case("conv_nhwc_mean", (2, 19, 15, 13), k=(3, 3), M=19, group=19, pads=(1,) * 4,
             ep="bias_relu", threads=2),
        Case("conv_nhwc_mean", (1, 32, 14, 14), k=(5, 5), M=32, group=32, pads=(2,) * 4,
             ep="bias_relu", threads=2),
        Case("conv_nhwc_mean", (1, 48, 12, 37), k=(3, 3), M=48, group=48, pads=(1,) * 4,
             strides=(2, 2), ep="affine"),
        Case("conv_nhwc_mean", (1, 16, 9, 9), k=(3, 3), M=16, group=16, pads=(1,) * 4),
        # x channels first (a stem reading the model's input in place): the fixed-stride kernel on
        # input rows staged channels last per task (stride * C 4 from 2 and 4 channels, 2, 6, 3, 1;
        # 3-D; two images; several tasks a thread; asymmetric padding), and shapes it does not
        # serve, transposed in the kernel first (stride * C 12 and 5; x dilation)
        Case("conv_nhwc_planar", (2, 2, 23, 31), k=(3, 3), M=20, pads=(1,) * 4, strides=(2, 2), threads=2),
        Case("conv_nhwc_planar", (1, 4, 17, 40), k=(5, 5), M=33, pads=(2, 1, 0, 2), threads=3, ep="bias_relu"),
        Case("conv_nhwc_planar", (1, 2, 37, 45), k=(3, 2), M=16, pads=(0, 1, 2, 0), threads=2, ep="stores"),
        Case("conv_nhwc_planar", (1, 3, 5, 20, 22), k=(2, 3, 3), M=9, pads=(1, 1, 1, 0, 1, 1), strides=(1, 2, 2),
             threads=2),
        Case("conv_nhwc_planar", (1, 3, 30, 30), k=(7, 7), M=8, pads=(3, 3, 3, 3), strides=(2, 2),
             ep="bias_relu", threads=2),
        Case("conv_nhwc_planar", (2, 3, 9, 19), k=(3, 3), M=20, pads=(1, 1, 1, 1), ep="stores"),
        Case("conv_nhwc_planar", (1, 1, 8, 21), k=(5, 5), M=7, pads=(2, 2, 2, 2)),
        Case("conv_nhwc_planar", (1, 3, 4, 7, 6), k=(3, 3, 3), M=5, pads=(1,) * 6, threads=2),
        Case("conv_nhwc_planar", (1, 3, 9, 11), k=(3, 3), M=6, pads=(1, 1, 1, 1), strides=(4, 4)),
        Case("conv_nhwc_planar", (1, 5, 6, 7), k=(3, 3), M=4, pads=(1, 1, 1, 1), ep="bias_relu"),
        Case("conv_nhwc_planar", (1, 3, 9, 13), k=(3, 3), M=4, dil=(1, 2)),
        # Winograd F(2x2, 3x3) (3x3 stride 1, >= 32 channels, >= 8x8 outputs): odd output
        # sizes (half-empty edge tiles), no padding, asymmetric padding, channel tails on
        # both sides, two images, each epilogue kind
        Case("conv_nhwc", (1, 32, 9, 11), k=(3, 3), M=40, pads=(1, 1, 1, 1), ep="bias_relu",
             threads=2),
        Case("conv_nhwc", (2, 48, 12, 10), k=(3, 3), M=33, ep="stores"),
        Case("conv_nhwc", (1, 35, 17, 9), k=(3, 3), M=64, pads=(2, 1, 0, 2), threads=2),
        # 3-D with a 3x3 plane (one 2-D problem per output frame, K = kd x C): frames in the
        # depth padding, depth stride and dilation, a depth-1 kernel over several frames
        Case("conv_nhwc", (1, 32, 4, 9, 11), k=(3, 3, 3), M=40, pads=(1,) * 6, ep="bias_relu",
             threads=2),
        Case("conv_nhwc", (2, 33, 7, 10, 8), k=(2, 3, 3), M=34, strides=(2, 1, 1),
             dil=(2, 1, 1), pads=(1, 1, 0, 2, 1, 2), ep="stores"),
        Case("conv_nhwc", (1, 40, 3, 8, 9), k=(1, 3, 3), M=32, pads=(0, 1, 1, 0, 1, 1),
             threads=2),
        # depthwise with whole channel vectors: the specialised interiors (k3/k5, stride 1/2;
        # 8-pixel blocks, then the generic loop and the edges); with the recognised epilogue
        # (bias, residual, clip) the interior stores to the output itself
        Case("conv_nhwc", (2, 32, 13, 21), k=(3, 3), M=32, group=32, pads=(1,) * 4, ep="affine", threads=2),
        Case("conv_nhwc", (1, 48, 12, 37), k=(3, 3), M=48, group=48, pads=(1, 1, 1, 1), strides=(2, 2),
             ep="affine"),
        Case("conv_nhwc", (1, 32, 11, 23), k=(5, 5), M=32, group=32, pads=(2,) * 4, ep="affine"),
        Case("conv_nhwc", (1, 24, 9, 19), k=(3, 3), M=24, group=24, pads=(1,) * 4, ep="affine"),
        Case("conv_nhwc", (2, 48, 7, 7), k=(5, 5), M=48, group=48, pads=(2,) * 4, ep="affine"),
        Case("conv_nhwc", (1, 16, 13, 11), k=(3, 3), M=40, pads=(1,) * 4, ep="affine", threads=2),
        Case("conv_nhwc", (1, 16, 13, 11), k=(1, 1), M=40, ep="affine"),
        Case("conv_nhwc", (1, 32, 13, 21), k=(3, 3), M=32, group=32, pads=(1,) * 4,
             ep="bias_relu", threads=2),
        Case("conv_nhwc", (2, 48, 12, 37), k=(3, 3), M=48, group=48, pads=(1, 1, 1, 1),
             strides=(2, 2), ep="stores"),
        Case("conv_nhwc", (1, 32, 11, 23), k=(5, 5), M=32, group=32, pads=(2,) * 4),
        Case("conv_nhwc", (1, 16, 9, 40), k=(5, 5), M=16, group=16, pads=(2, 2, 1, 2),
             strides=(2, 2), ep="stores", threads=2),
        # 5x5, stride 1 along x, planes <= 16 wide: zero-padded row copies, all interior
        # (batches, asymmetric pads, row stride 2, row dilation 2, padding past the reach)
        Case("conv_nhwc", (2, 48, 7, 7), k=(5, 5), M=48, group=48, pads=(2,) * 4, ep="bias_relu",
             threads=2),
        Case("conv_nhwc", (1, 32, 14, 13), k=(5, 5), M=32, group=32, pads=(1, 3, 2, 0), ep="stores"),
        Case("conv_nhwc", (1, 32, 11, 10), k=(5, 5), M=32, group=32, pads=(2,) * 4, strides=(2, 1),
             threads=2),
        Case("conv_nhwc", (1, 32, 9, 16), k=(5, 5), M=32, group=32, pads=(4, 2, 4, 2), dil=(2, 1)),
        Case("conv_nhwc", (1, 16, 6, 3), k=(5, 5), M=16, group=16, pads=(0, 4, 1, 5)),
        # channels-last pools: channel tails, padding, ceil mode, dilation, 1-D and 3-D
        Case("max_pool_nhwc", (2, 19, 17, 15), k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
             ep="bias_relu", threads=2),
        Case("max_pool_nhwc", (1, 3, 16, 16), k=(3, 3), strides=(2, 2), ceil=1, ep="stores"),
        Case("max_pool_nhwc", (1, 40, 15, 13), k=(3, 3), dil=(2, 2), pads=(1, 2, 1, 2)),
        Case("max_pool_nhwc", (1, 5, 23), k=(3,), strides=(2,), pads=(1, 1)),
        Case("max_pool_nhwc", (1, 17, 6, 7, 9), k=(2, 2, 2), strides=(2, 2, 2), ceil=1),
        Case("avg_pool_nhwc", (1, 33, 13, 17), k=(3, 3), pads=(1, 1, 1, 1), ep="bias_relu"),
        Case("avg_pool_nhwc", (2, 18, 16, 15), k=(3, 3), strides=(2, 2), pads=(1, 0, 1, 1),
             ceil=1, include_pad=1, threads=2),
        Case("avg_pool_nhwc", (1, 6, 5, 7, 9), k=(3, 3, 3), pads=(1,) * 6, ep="stores"),
        # whole channel vectors (C a multiple of 16): interior pixels take the unchecked loop
        Case("max_pool_nhwc", (1, 32, 21, 23), k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), threads=2),
        Case("max_pool_nhwc", (1, 48, 9, 19), k=(5, 5), pads=(2, 4, 2, 4), dil=(1, 2), ep="bias_relu"),
        Case("avg_pool_nhwc", (2, 32, 11, 17), k=(3, 3), strides=(1, 2), pads=(1, 1, 1, 1),
             include_pad=1, ep="stores"),
        Case("avg_pool_nhwc", (1, 64, 7, 20), k=(3, 5), pads=(1, 2, 1, 2), threads=2),
        # ConvTranspose: stride 2 + output padding, grouped, dilated, 1-D, 3-D
        Case("conv_transpose", (1, 6, 7, 9), k=(3, 3), M=4, strides=(2, 2),
             pads=(1, 1, 1, 1), out_pad=(1, 1), ep="bias_relu"),
        Case("conv_transpose", (2, 8, 5, 6), k=(4, 4), M=6, group=2, strides=(2, 2),
             pads=(1, 1, 1, 1), threads=2),
        Case("conv_transpose", (1, 3, 6, 5), k=(3, 3), M=5, dil=(2, 2), pads=(0, 1, 2, 0),
             ep="stores"),
        Case("conv_transpose", (1, 4, 11), k=(5,), M=3, strides=(3,), pads=(2, 1),
             out_pad=(2,)),
        Case("conv_transpose", (1, 2, 3, 4, 5), k=(2, 3, 3), M=3, strides=(2, 1, 2),
             pads=(0, 1, 1, 0, 1, 1), out_pad=(1, 0, 1)),
        # pools
        Case("max_pool", (2, 3, 17, 15), k=(2, 2), strides=(2, 2)),
        Case("max_pool", (1, 4, 19, 21), k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
             ep="bias_relu", threads=2),
        Case("max_pool", (1, 3, 16, 16), k=(3, 3), strides=(2, 2), ceil=1),
        Case("max_pool", (1, 2, 15, 13), k=(3, 3), dil=(2, 2), pads=(1, 2, 1, 2)),
        Case("max_pool", (1, 3, 9, 35), k=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1),
             ep="stores"),
        Case("max_pool", (1, 3, 23), k=(3,), strides=(2,), pads=(1, 1)),
        Case("max_pool", (1, 2, 11, 25), k=(2, 4), strides=(2, 3), pads=(0, 1, 1, 2), ceil=1),
        Case("max_pool", (1, 2, 6, 7, 9), k=(2, 2, 2), strides=(2, 2, 2), ceil=1),
        Case("avg_pool", (1, 3, 13, 17), k=(3, 3), pads=(1, 1, 1, 1)),
        Case("avg_pool", (1, 3, 13, 17), k=(3, 3), pads=(1, 1, 1, 1), include_pad=1,
             ep="bias_relu"),
        Case("avg_pool", (2, 3, 16, 15), k=(3, 3), strides=(2, 2), pads=(1, 0, 1, 1), ceil=1,
             include_pad=1, threads=2),
        Case("avg_pool", (1, 3, 16, 15), k=(3, 3), strides=(2, 2), pads=(1, 0, 1, 1), ceil=1),
        Case("avg_pool", (1, 4, 14, 18), k=(2, 2), strides=(2, 2), ep="stores"),
        Case("avg_pool", (1, 2, 5, 7, 9), k=(3, 3, 3), pads=(1,) * 6, include_pad=1),
        Case("avg_pool", (1, 2, 5, 7, 9), k=(3, 3, 3), pads=(1,) * 6),
        Case("global_avg", (2, 37, 7, 7), ep="bias_relu"),
        Case("global_avg", (1, 19, 1, 1)),
        Case("global_avg", (2, 40, 56, 56), threads=2, ep="stores"),
        Case("global_max", (2, 37, 7, 7), ep="bias_relu"),
        Case("global_max", (1, 5, 3, 4, 5)),
    ]
    return cs


def cases_neon() -> list[Case]:
    return [
        Case("conv", (1, 8, 9, 11), k=(3, 3), M=10, pads=(1, 1, 1, 1), ep="bias_relu",
             threads=2),
        Case("conv", (1, 5, 11, 9), k=(3, 3), M=5, group=5, pads=(1, 1, 1, 1),
             strides=(2, 2)),
        Case("conv_packed", (1, 8, 7, 9), k=(1, 1), M=6, ep="stores"),
        Case("conv_packed", (1, 64, 7, 7), k=(3, 3), M=1024, pads=(1, 1, 1, 1), threads=2,
             ep="bias_relu"),
        Case("conv_transpose", (1, 4, 5, 6), k=(3, 3), M=3, strides=(2, 2), pads=(1, 1, 1, 1),
             out_pad=(1, 1)),
        Case("conv_nhwc", (1, 5, 9, 11), k=(3, 3), M=13, pads=(1, 1, 1, 1), strides=(2, 1),
             ep="bias_relu", threads=2),
        Case("conv_nhwc", (1, 12, 9, 19), k=(3, 3), M=12, group=12, pads=(1,) * 4, ep="affine"),
        Case("conv_nhwc", (1, 3, 12, 12), k=(5, 5), M=6, pads=(2, 2, 2, 2), ep="stores"),
        Case("conv_nhwc", (1, 3, 10, 40), k=(3, 3), M=12, pads=(1, 1, 1, 1), strides=(2, 2),
             ep="bias_relu", threads=2),
        # 1x1: the GEMM reading A unpacked (run_tile_direct) for full row panels, packed for the rest
        Case("conv_nhwc", (1, 12, 7, 9), k=(1, 1), M=20, ep="bias_relu"),
        Case("conv_nhwc", (1, 8, 9, 11), k=(3, 3), M=8, group=8, pads=(1, 1, 1, 1), strides=(1, 2),
             ep="bias_relu"),
        Case("conv_nhwc_mean", (2, 13, 9, 11), k=(3, 3), M=13, group=13, pads=(1,) * 4,
             ep="bias_relu", threads=2),
        Case("max_pool_nhwc", (1, 6, 13, 11), k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
             ep="bias_relu"),
        Case("max_pool_nhwc", (1, 8, 13, 11), k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
        Case("avg_pool_nhwc", (1, 5, 11, 9), k=(3, 3), strides=(2, 2), pads=(1, 0, 1, 1), ceil=1,
             include_pad=1),
        Case("max_pool", (1, 3, 13, 11), k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
        Case("avg_pool", (1, 3, 11, 9), k=(3, 3), strides=(2, 2), pads=(1, 0, 1, 1), ceil=1,
             include_pad=1),
        Case("global_avg", (2, 9, 5, 5), ep="bias_relu"),
        Case("global_max", (1, 6, 3, 7)),
    ]


def _run_dialect(workdir: Path, isa: str, job: Job,
                 cases: list[Case]) -> list[tuple[Case, np.ndarray, np.ndarray]] | CompiledOnly:
    rng = np.random.default_rng(7)
    recs, wants = zip(*(build(c, rng) for c in cases))
    res = build_and_run(workdir, isa, job, np.int32(len(cases)).tobytes() + b"".join(recs),
                        timeout=300)
    if isinstance(res, CompiledOnly):
        return res
    raw, _ = res
    data = np.frombuffer(raw, dtype=np.float32)
    res, pos = [], 0
    for c, w in zip(cases, wants):
        res.append((c, data[pos:pos + w.size], w))
        pos += w.size
    assert pos == data.size
    return res


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("convpool")
    (d / "driver.cc").write_text(DRIVER)
    return d


def _compile_and_check(driver: Path, isa: str) -> None:
    job = dialect_commands(driver / "driver.cc", COMMON, SCALAR_FLAGS)[isa]
    if isinstance(job, str):
        pytest.skip(job)
    cases = cases_neon() if isa == "neon" else cases_x86()
    res = _run_dialect(driver, isa, job, cases)
    if isinstance(res, CompiledOnly):
        return res.check()
    failures = []
    for c, got, want in res:
        err = np.abs(got.astype(np.float64) - want)
        # fp32 rounding of a sum grows like the square root of its length: the bound is
        # 1e-4 relative up to 2048 terms (a chunked 3-D conv sums 16200)
        bound = 1e-4 * (1 + np.abs(want)) * max(1.0, np.sqrt(c.reduction / 2048))
        bad = ~(err <= bound)  # NaN-safe
        if bad.any():
            i = int(np.argmax(np.where(bad, err, -1)))
            failures.append(f"{c.id}: {bad.sum()} of {want.size} wrong, e.g. [{i}] = {got[i]} "
                            f"want {want[i]}")
    assert not failures, f"{isa}:\n" + "\n".join(failures)


@pytest.mark.parametrize("isa", params(["scalar", "avx2", "avx512", "neon"]))
def test_conv_pool_match_reference(driver, isa):
    _compile_and_check(driver, isa)
