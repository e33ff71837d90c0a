// A convolution's shape, its window geometry and which channels-last path runs it, in plain
// C++ (no SIMD, no other prelude header): the prelude's kernels (conv.h, conv_nhwc.h,
// conv_winograd.h) and the code generator (codegen/cpu/render_module.cc, which names the
// prelude units a module links, prelude_units.h) decide with these same functions, so that a
// module compiles and links only the paths its convolutions take.
#pragma once

#include <algorithm>
#include <cstdlib>

#include "cache_info.h"

namespace dnnf::window {

// Canonical 3-D geometry (depth, height, width): 1-D and 2-D shapes are right-aligned, the
// leading dims get size 1, kernel 1, stride 1, dilation 1 and no padding.
struct Geom {
  int in[3], out[3], k[3], stride[3], dil[3], pad[3];
  int padded[3];  // extents of the padded volume: exactly what the windows reach
  long in_plane() const { return static_cast<long>(in[0]) * in[1] * in[2]; }
  long out_plane() const { return static_cast<long>(out[0]) * out[1] * out[2]; }
  int taps() const { return k[0] * k[1] * k[2]; }
};
inline Geom make_geom(int nd, const int* in, const int* out, const int* k, const int* stride,
                      const int* dil, const int* pad_begin) {
  Geom g;
  for (int i = 0; i < 3; ++i) {
    const int j = i - (3 - nd);  // index into the caller's arrays, < 0 for leading dims
    g.in[i] = j >= 0 ? in[j] : 1;
    g.out[i] = j >= 0 ? out[j] : 1;
    g.k[i] = j >= 0 ? k[j] : 1;
    g.stride[i] = j >= 0 ? stride[j] : 1;
    g.dil[i] = j >= 0 ? dil[j] : 1;
    g.pad[i] = j >= 0 ? pad_begin[j] : 0;
    g.padded[i] = std::max(1, (g.out[i] - 1) * g.stride[i] + (g.k[i] - 1) * g.dil[i] + 1);
  }
  return g;
}

}  // namespace dnnf::window

namespace dnnf::conv {

// nd spatial dims are used (unused entries: 1 for sizes, strides, dilations; 0 for pads).
// ldy: floats between consecutive output pixels of the channels-last convolution (0: M, a
// dense y). Larger when y is one part of a Concat along the channels, written where it lies
// in the Concat (conv_nhwc.h; not the depthwise path). planar_x: the channels-last
// convolution's x is channels first, [N, C, spatial...] (a stem reading the model's input
// where it lies, with no transposed copy: conv_direct.h gathers each tile's window from the
// planes). Channels-first convolutions ignore both.
struct ConvShape {
  int nd;
  int N, C, M, group;
  int in[3], out[3], k[3], stride[3], dil[3], pad_begin[3];
  long ldy = 0;
  int planar_x = 0;
};

namespace detail {
inline window::Geom geom(const ConvShape& s) {
  return window::make_geom(s.nd, s.in, s.out, s.k, s.stride, s.dil, s.pad_begin);
}
inline bool is_depthwise(const ConvShape& s) { return s.group == s.C && s.M == s.C; }
inline bool is_pointwise(const window::Geom& g) {
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.stride[i] != 1 || g.pad[i] != 0 || g.in[i] != g.out[i]) return false;
  return true;
}
// 1x1, unpadded, some stride above 1 (ResNet's downsampling 1x1s).
inline bool is_strided_pointwise(const window::Geom& g) {
  bool strided = false;
  for (int i = 0; i < 3; ++i) {
    if (g.k[i] != 1 || g.pad[i] != 0 || g.stride[i] < 1 || g.out[i] != (g.in[i] - 1) / g.stride[i] + 1) return false;
    strided = strided || g.stride[i] > 1;
  }
  return strided;
}
// Whether a single-group convolution runs as one GEMM over its output pixels (conv_nhwc.h's
// pointwise path): every 1x1 stride-1 unpadded one; a strided 1x1 (A's rows every stride-th
// input pixel) where its weights fill half of L2 or more, so that the GEMM reads them once in
// memory order (gemm.h). Against the direct kernel, interleaved in one process (Xeon,
// AVX-512, 1 / 2 threads): 14x14x1024 -> 2048 0.82 / 0.83x the time, 14x14x1024 -> 512
// 0.85x, 28x28x512 -> 1024 0.96 / 0.94x; smaller weights stayed faster direct (56x56x256 ->
// 512 1.05 / 1.05x, 28x28x512 -> 256 1.06x this way).
inline bool gemm_pointwise(const window::Geom& g, long C, long M) {
  return is_pointwise(g) || (is_strided_pointwise(g) && 4 * C * M >= cache_bytes(2) / 2);
}
}  // namespace detail

namespace wino {

// 3x3 in the plane with stride 1 and dilation 1, one group; 2-D, or 3-D with any depth
// kernel, stride, dilation and padding. A 3-D convolution (kd, 3, 3) is, per output frame,
// the sum over kz of the 2-D 3x3 convolutions of input frame z*sz - pz + kz*dz with weight
// slice kz, so each position's GEMM sums over kz and the channels together (K = kd * C, the
// transformed inputs of the kd frames side by side; a frame in the depth padding is zeros).
inline bool applies(const ConvShape& s) {
  if (s.group != 1) return false;
  const window::Geom g = detail::geom(s);
  return g.k[1] == 3 && g.k[2] == 3 && g.stride[1] == 1 && g.stride[2] == 1 && g.dil[1] == 1 && g.dil[2] == 1 &&
         g.pad[1] <= 2 && g.pad[2] <= 2;
}

// Whether to use it: where it applies, the channels are many enough that the GEMMs, not the
// transforms, carry the time (both at least kMinChannels) and the output plane is at least
// 8x8 (on 7x7 planes a quarter of the 2x2 tiles' outputs is padding and the direct kernel
// is as fast: measured 1.02x with AVX-512, 0.98x with AVX2 at 512 channels).
// DNNF_WINOGRAD=0 turns it off, =1 uses it wherever it applies (both for comparisons/tests).
inline constexpr int kMinChannels = 32, kMinPixels = 64;
inline bool chosen(const ConvShape& s) {
  if (!applies(s)) return false;
  if (const char* e = std::getenv("DNNF_WINOGRAD")) {
    if (e[0] == '0') return false;
    if (e[0] == '1') return true;
  }
  const window::Geom g = detail::geom(s);
  return s.C >= kMinChannels && s.M >= kMinChannels && g.out[1] * g.out[2] >= kMinPixels;
}

}  // namespace wino

// The paths of a channels-last convolution (conv_nhwc.h), as bits of a set: a module's
// generated call names the set its convolution may take (conv_nhwc_paths_f32).
enum class NhwcPath : int { Direct = 1, Winograd = 2, Depthwise = 4, Pointwise = 8 };
inline constexpr int kAllNhwcPaths = 15;

// The path of a channels-last convolution with weights packed beforehand (PackedNhwcWeights):
// a channels-first input takes the direct kernel; then Winograd where chosen, the depthwise
// window kernel, a GEMM for 1x1 unpadded single-group ones (detail::gemm_pointwise: strided
// ones with large weights too), the direct kernel else.
inline NhwcPath nhwc_path(const ConvShape& s) {
  if (s.planar_x) return NhwcPath::Direct;
  if (wino::chosen(s)) return NhwcPath::Winograd;
  if (detail::is_depthwise(s)) return NhwcPath::Depthwise;
  if (s.group == 1 && detail::gemm_pointwise(detail::geom(s), s.C, s.M)) return NhwcPath::Pointwise;
  return NhwcPath::Direct;
}

// The paths a module generated for s must hold: nhwc_path's, and for a strided 1x1 both the
// GEMM and the direct kernel, since gemm_pointwise follows the L2 of the machine that packs
// the weights, which need not be the one that generated the module (a kernel cache shared by
// VMs of one CPU model and another L2).
inline int nhwc_paths_of(const ConvShape& s) {
  const NhwcPath p = nhwc_path(s);
  if ((p == NhwcPath::Direct || p == NhwcPath::Pointwise) && s.group == 1 && !s.planar_x &&
      detail::is_strided_pointwise(detail::geom(s)))
    return static_cast<int>(NhwcPath::Direct) | static_cast<int>(NhwcPath::Pointwise);
  return static_cast<int>(p);
}

// The path of a channels-last convolution whose input comes in channel segments (a Concat
// read in place; one group): Winograd where chosen, the direct kernel else.
inline NhwcPath segmented_nhwc_path(const ConvShape& s) {
  return !s.planar_x && wino::chosen(s) ? NhwcPath::Winograd : NhwcPath::Direct;
}

}  // namespace dnnf::conv
