"""Winograd F(2x2, 3x3) and F(4x4, 3x3) (cpp/codegen/prelude/conv_winograd.h) against a float64
direct convolution, in every dialect the machine builds (scalar, AVX2, AVX-512 run where the
CPU has them, compiled otherwise; NEON under qemu-aarch64).

A C++ driver reads cases (shape, padding, tile, threads, channel segments) with their inputs,
packs the weights as the generated code does (PackedNhwcWeights, with DNNF_WINOGRAD=1 and
DNNF_WINOGRAD_TILE set to the case's tile before packing), runs conv_nhwc_f32 and writes the
output and the tile the weights were packed for, so a case that silently took another path
fails. The output buffer starts as garbage, so an unwritten element fails too.

Tolerance. F(2x2)'s transforms only add (its 1/2s are in the packed weights): its error is
that of any fp32 sum, the bound of test_prelude_conv_pool (1e-4 of 1 + |y|, growing with the
square root of the terms past 2048). F(4x4)'s transforms scale by up to 8 and its weights by
fractions of 15 and 3, so its rounding error is larger: measured with uniform [-1, 1) data at
128-256 channels, at most 0.9-1.3e-4 of 1 + |y| (mean 2-4e-6) with the points 0, 1, -1, 1/2,
-2 it uses (2.5-3.6e-4 with the textbook 0, 1, -1, 2, -2; a NumPy model of the same
arithmetic agrees). Its bound is 4e-4 of 1 + |y|, and for both tiles the mean error must
stay under 1e-5 of 1 + |y|: a wrong coefficient or tile offset gives errors of order 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from dialects import params
from native_toolchain import DRIVER_MAIN_OPEN, PRELUDE, CompiledOnly, build_and_run, dialect_commands

COMMON = ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{PRELUDE}"]
SCALAR_FLAGS = ("-mavx2", "-mfma")

DRIVER = r"""
#include "conv_nhwc.h"
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
using namespace dnnf;

enum { kHead = 24 };
""" + DRIVER_MAIN_OPEN + r"""
  setenv("DNNF_WINOGRAD", "1", 1);
  for (int ci = 0; ci < n_cases; ++ci) {
    int h[kHead];
    if (std::fread(h, 4, kHead, in) != kHead) return 4;
    // nd N C M tile threads nseg seg0 seg1 | in[3] out[3] k0 pad_begin[3] | nx nw ny
    conv::ConvShape s{};
    s.nd = h[0]; s.N = h[1]; s.C = h[2]; s.M = h[3]; s.group = 1;
    const int tile = h[4], threads = h[5], nseg = h[6];
    for (int i = 0; i < 3; ++i) {
      s.in[i] = h[9 + i]; s.out[i] = h[12 + i]; s.k[i] = i == 0 ? h[15] : 3;
      s.stride[i] = 1; s.dil[i] = 1; s.pad_begin[i] = h[16 + i];
    }
    if (s.nd == 2) { s.in[0] = s.in[1]; s.in[1] = s.in[2]; s.out[0] = s.out[1]; s.out[1] = s.out[2];
                     s.k[0] = 3; s.pad_begin[0] = s.pad_begin[1]; s.pad_begin[1] = s.pad_begin[2];
                     s.in[2] = s.out[2] = s.k[2] = 1; s.pad_begin[2] = 0; }
    const long nx = h[19], nw = h[20], ny = h[21];
    std::vector<float> x(nx + 1), w(nw + 1), y(ny + 1, 12345.0f);
    if (std::fread(x.data(), 4, nx, in) != size_t(nx) || std::fread(w.data(), 4, nw, in) != size_t(nw)) return 5;
    setenv("DNNF_WINOGRAD_TILE", std::to_string(tile).c_str(), 1);
    set_num_threads(threads);
    float used = 0;
    if (nseg == 1) {
      conv::PackedNhwcWeights pw(s, w.data());
      if (pw.path() == conv::NhwcPath::Winograd) used = static_cast<float>(pw.winograd()->tile());
      conv::conv_nhwc_f32(s, x.data(), pw, y.data(), gemm::EpNone{});
    } else {  // x holds the segments one after the other, each [pixels, c_i]
      const std::vector<int> segs = {h[7], h[8]};
      conv::PackedNhwcWeights pw(s, w.data(), segs);
      if (pw.path() == conv::NhwcPath::Winograd) used = static_cast<float>(pw.winograd()->tile());
      const long pixels = nx / s.C;
      conv::InputSegments xs{2, {x.data(), x.data() + pixels * segs[0]}, {segs[0], segs[1]}};
      conv::conv_nhwc_f32(s, xs, pw, y.data(), gemm::EpNone{});
    }
    std::fwrite(&used, 4, 1, out);
    std::fwrite(y.data(), 4, ny, out);
  }
  return 0;
}
"""


@dataclass
class Case:
    x_shape: tuple  # N, C, (D,) H, W
    M: int
    tile: int
    pads: tuple = (1, 1, 1, 1)  # begin..., end... of the 3x3 plane (and depth first in 3-D)
    kd: int = 1  # 3-D: the depth kernel
    threads: int = 1
    segments: tuple = ()  # two channel counts summing to C: the input as two segments

    @property
    def id(self) -> str:
        s = f"F{self.tile}-" + "x".join(map(str, self.x_shape)) + f"-M{self.M}-p" + "".join(map(str, self.pads))
        return s + (f"-kd{self.kd}" if self.kd > 1 else "") + (f"-t{self.threads}" if self.threads > 1 else "") + \
            (f"-seg{self.segments[0]}+{self.segments[1]}" if self.segments else "")


def conv_ref(x: np.ndarray, w: np.ndarray, pads: tuple) -> np.ndarray:
    """Direct convolution in float64: x [N, C, *sp], w [M, C, *k], pads begin..., end..."""
    nd = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)])
    k = w.shape[2:]
    out_sp = [xp.shape[2 + i] - k[i] + 1 for i in range(nd)]
    y = np.zeros((x.shape[0], w.shape[0], *out_sp))
    for tap in np.ndindex(*k):
        sl = tuple(slice(tap[i], tap[i] + out_sp[i]) for i in range(nd))
        y += np.einsum("nc...,mc->nm...", xp[(slice(None), slice(None)) + sl], w[(slice(None), slice(None)) + tap])
    return y


def build(c: Case, rng) -> tuple[bytes, np.ndarray]:
    N, C, *sp = c.x_shape
    nd = len(sp)
    x = rng.uniform(-1, 1, c.x_shape).astype(np.float32)
    k = (c.kd, 3, 3) if nd == 3 else (3, 3)
    w = rng.uniform(-1, 1, (c.M, C, *k)).astype(np.float32)
    want = conv_ref(x, w, c.pads)
    out_sp = want.shape[2:]
    xl = np.moveaxis(x, 1, -1)  # channels last
    if c.segments:  # each segment stored whole, one after the other
        a = c.segments[0]
        xb = np.concatenate([np.ascontiguousarray(xl[..., :a]).ravel(), np.ascontiguousarray(xl[..., a:]).ravel()])
    else:
        xb = np.ascontiguousarray(xl).ravel()
    sp3 = [1] * (3 - nd) + list(sp)
    out3 = [1] * (3 - nd) + list(out_sp)
    pb = [0] * (3 - nd) + list(c.pads[:nd])
    segs = list(c.segments) or [C, 0]
    head = [nd, N, C, c.M, c.tile, c.threads, 2 if c.segments else 1, *segs, *sp3, *out3, c.kd, *pb,
            xb.size, w.size, want.size, 0, 0]
    rec = np.array(head, np.int32).tobytes() + xb.astype(np.float32).tobytes() + w.tobytes()
    return rec, np.moveaxis(want, 1, -1).ravel()


def cases() -> list[Case]:
    out = []
    for t in (2, 4):
        out += [
            # output sizes past every tile remainder (14 = 4*3 + 2, 13, 15, 9), pad 1
            Case((1, 32, 14, 13), 40, t, threads=2),
            Case((2, 20, 15, 9), 33, t),
            # no padding; asymmetric padding up to 2 (output larger than the input)
            Case((1, 37, 12, 11), 17, t, pads=(0, 0, 0, 0)),
            Case((1, 16, 10, 9), 24, t, pads=(2, 0, 1, 2), threads=3),
            # many channels (the sums the error bound is about), several tile rows a task
            Case((1, 256, 16, 16), 64, t, threads=2),
            # 3-D: a 3x3x3 kernel with depth padding (C3D), a 1x3x3 one (S3D)
            Case((1, 12, 4, 9, 10), 20, t, pads=(1, 1, 1, 1, 1, 1), kd=3, threads=2),
            Case((1, 16, 3, 8, 8), 16, t, pads=(0, 1, 1, 0, 1, 1)),
            # the input as two channel segments (a Concat read in place), a tail in each
            Case((1, 40, 13, 12), 24, t, segments=(17, 23), threads=2),
        ]
    return out


def neon_cases() -> list[Case]:
    return [Case((1, 20, 9, 10), 12, 4, threads=2), Case((1, 16, 6, 7), 9, 2),
            Case((1, 24, 9, 9), 16, 4, segments=(8, 16))]


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    d = tmp_path_factory.mktemp("winograd")
    (d / "driver.cc").write_text(DRIVER)
    return d


@pytest.mark.parametrize("isa", params(["scalar", "avx2", "avx512", "neon"]))
def test_winograd_matches_direct_convolution(driver, isa):
    job = dialect_commands(driver / "driver.cc", COMMON, SCALAR_FLAGS)[isa]
    if isinstance(job, str):
        pytest.skip(job)
    cs = neon_cases() if isa == "neon" else cases()
    rng = np.random.default_rng(11)
    recs, wants = zip(*(build(c, rng) for c in cs))
    res = build_and_run(driver, isa, job, np.int32(len(cs)).tobytes() + b"".join(recs), timeout=300)
    if isinstance(res, CompiledOnly):
        return res.check()
    data = np.frombuffer(res[0], dtype=np.float32)
    failures, pos = [], 0
    for c, want in zip(cs, wants):
        used, got = data[pos], data[pos + 1:pos + 1 + want.size]
        pos += 1 + want.size
        if used != c.tile:
            failures.append(f"{c.id}: packed for tile {used:g} (0: not Winograd), asked for {c.tile}")
            continue
        rel = np.abs(got.astype(np.float64) - want) / (1 + np.abs(want))
        terms = c.kd * 9 * c.x_shape[1]
        bound = (4e-4 if c.tile == 4 else 1e-4) * max(1.0, np.sqrt(terms / 2048))
        if not (rel.max() <= bound and rel.mean() <= 1e-5):  # NaN-safe: a NaN fails
            i = int(np.nanargmax(rel)) if not np.isnan(rel).all() else 0
            failures.append(f"{c.id}: max {rel.max():.2e} (bound {bound:.1e}), mean {rel.mean():.2e}; "
                            f"[{i}] = {got[i]} want {want[i]}")
    assert pos == data.size
    assert not failures, f"{isa}:\n" + "\n".join(failures)


def test_f4_is_chosen_where_each_thread_gets_a_row_of_tiles(driver):
    """The automatic tile (DNNF_WINOGRAD_TILE unset) at 2 threads: F(4x4) where the 4x4 tiles
    are at least 2 x the GEMM micro-kernel's rows (MR: 14 with AVX-512, so 14x14 planes, 16
    tiles, take F(2x2) there), F(2x2) else; here in the scalar dialect (MR 4), where 8x8
    planes (4 tiles) take F(2x2)."""
    src = r"""
#include "conv_nhwc.h"
#include <cstdio>
using namespace dnnf;
int main() {
  set_num_threads(2);
  std::printf("%d ", gemm::kMR);
  for (int hw : {56, 28, 14, 8}) {
    conv::ConvShape s{};
    s.nd = 2; s.N = 1; s.C = 64; s.M = 64; s.group = 1;
    for (int i = 0; i < 3; ++i) { s.in[i] = s.out[i] = 1; s.k[i] = 1; s.stride[i] = 1; s.dil[i] = 1; s.pad_begin[i] = 0; }
    s.in[0] = s.in[1] = s.out[0] = s.out[1] = hw; s.k[0] = s.k[1] = 3; s.pad_begin[0] = s.pad_begin[1] = 1;
    std::printf("%d ", conv::wino::tile(s));
  }
  return 0;
}
"""
    import os
    import subprocess

    (driver / "choice.cc").write_text(src)
    job = dialect_commands(driver / "choice.cc", COMMON, SCALAR_FLAGS)["scalar"]
    if isinstance(job, str):
        pytest.skip(job)
    exe = driver / "choice"
    subprocess.run([*job.cmd, "-o", str(exe)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "DNNF_WINOGRAD_TILE"}
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, env=env).stdout
    mr, *tiles = map(int, out.split())
    assert mr == 4 and tiles == [4, 4, 4, 2]
