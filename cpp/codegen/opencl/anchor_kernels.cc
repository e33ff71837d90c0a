// The OpenCL renderer's anchor kernels (paper §4.4 Many-to-Many operators on the GPU): one
// work-item per output element (GEMM and convolutions where they are not tiled, pools,
// Resize, RoiAlign, reductions), then the fused epilogue on its result (finish_element). The
// tiles are in work_groups.cc, the row kernels (Softmax, LayerNorm, TopK, ...) in row_kernels.cc.
#include <algorithm>
#include <cstring>
#include <functional>

#include "codegen/opencl/renderer.h"
#include "codegen/prelude/resize_taps.h"
#include "ir/errors.h"

namespace dnnf::cg::opencl {

void Renderer::gemm(K& k, const AnchorStage& a, int64_t global[3]) {
  const GemmCall& c = a.gemm;
  const std::string offa = c.batched ? index(a.offset_a, a.batch_vars) : "0L";
  const std::string offb = c.batched ? index(a.offset_b, a.batch_vars) : "0L";
  // v = A[dn_m, dn_k] by its prologue (index composition, or arithmetic where LowerOptions
  // allowed it for tiles).
  auto a_prologue = [&] {
    k.body.line("const long row = dn_m, j = dn_k;");
    k.body.line("(void)row; (void)j;");
    render_program(c.a_prog, sp, k.body);
  };
  // acc += A[dn_m, k] B[k, dn_n] for k = first, first + step, ... (dn_b: B's column dn_n).
  auto dot = [&](const std::string& first, int64_t step) {
    const std::string head = "for (long dn_k = " + first + "; dn_k < " + L(c.K) + "; dn_k += " + L(step) + ")";
    if (c.a_computed) {
      k.body.open(head);
      k.body.line("float v = 0.0f;");
      k.body.open("");
      a_prologue();
      k.body.close();
      k.body.line("acc = fma(v, dn_b[dn_k * " + L(c.rs_b) + "], acc);");
      k.body.close();
    } else {
      k.body.line("__global const float* dn_a = " + p(c.a) + " + (" + offa + ") + dn_m * " + L(c.rs_a) + ";");
      k.body.line(head + " acc = fma(dn_a[dn_k * " + L(c.cs_a) + "], dn_b[dn_k * " + L(c.rs_b) + "], acc);");
    }
  };
  const std::string b_column = "__global const float* dn_b = " + p(c.b) + " + (" + offb + ") + dn_n * " + L(c.cs_b) + ";";
  if (const TileChoice t = tile_for(c.M, c.N, c.K, a.batch); t.side) {
    tiled_gemm(
        k, a, t, c.M, c.N, c.K, a.batch,
        [&] {
          if (c.a_computed)  // once per element of the tile
            a_prologue();
          else
            k.body.line("v = " + p(c.a) + "[(" + offa + ") + dn_m * " + L(c.rs_a) + " + dn_k * " + L(c.cs_a) + "];");
        },
        [] {},
        [] {},
        [&] { k.body.line("v = " + p(c.b) + "[(" + offb + ") + dn_k * " + L(c.rs_b) + " + dn_n * " + L(c.cs_b) + "];"); },
        c.rs_b == 1 && c.cs_b != 1, !c.a_computed && c.rs_a == 1 && c.cs_a != 1,
        "(b * " + L(c.M) + " + dn_m) * " + L(c.N) + " + dn_n", global);
    return;
  }
  if ((c.rs_b == 1 || few_outputs(a.batch * c.M * c.N)) && c.K >= kRowGroup && row_groups(c.K)) {
    // Too few rows or columns to tile, and B's columns lie along K (a Linear layer's weights
    // [N, K]) or too few outputs to keep the device busy: a work-group per output element, its
    // items taking every kRowGroup-th k, so that a group's loads of B's column (and A's row) are
    // consecutive and the device has M * N groups of work instead of M * N items each walking
    // K alone (a classifier's 1 x 4096 x 25088 GEMV).
    group_head(k, a.batch * c.M * c.N, global);
    k.body.line("const long dn_n = dn_r % " + L(c.N) + ", dn_m = dn_r / " + L(c.N) + " % " + L(c.M) + ", b = dn_r / " +
                L(c.M * c.N) + ";");
    k.body.line("(void)b;");
    k.body.line(b_column);
    k.body.line("float acc = 0.0f;");
    dot("dn_lid", kRowGroup);
    group_reduce(k, "acc", "dn_all", "x + y");
    k.body.open("if (dn_lid == 0)");
    k.body.line("const float acc = dn_all;");
    finish_element(k, a, "dn_r");
    k.body.close();
    return;
  }
  global[0] = c.N;
  global[1] = c.M;
  global[2] = a.batch;
  shape.dims = 3;
  k.body.line("const long dn_n = get_global_id(0), dn_m = get_global_id(1), b = get_global_id(2);");
  k.body.line("if (dn_n >= " + L(c.N) + " || dn_m >= " + L(c.M) + ") return;");
  k.body.line("(void)b;");
  k.body.line(b_column);
  k.body.line("float acc = 0.0f;");
  dot("0", 1);  // an A made by arithmetic is not fused here (index composition only: see LowerOptions)
  finish_element(k, a, "(b * " + L(c.M) + " + dn_m) * " + L(c.N) + " + dn_n");
}

void Renderer::conv(K& k, const AnchorStage& a, int64_t global[3]) {
  const std::vector<int64_t>& s = a.args.at(0).ints;  // nd, N, C, M, group, in, out, k, stride, dil, begin
  const int nd = static_cast<int>(s[0]);
  const int64_t N = s[1], C = s[2], M = s[3], G = s[4];
  auto arr = [&](int which, int d) { return s[5 + 3 * which + d]; };
  int64_t pixels = 1, in_plane = 1, taps = 1;
  for (int d = 0; d < nd; ++d) {
    pixels *= arr(1, d);
    in_plane *= arr(0, d);
    taps *= arr(2, d);
  }
  const AnchorArg& wa = a.args.at(2);
  const ValueId W = wa.kind == AnchorArg::Kind::Packed ? mp.packed.at(static_cast<size_t>(wa.i)).value : wa.value;
  const int64_t Mg = M / G, Cg = C / G, Kc = Cg * taps;
  // Tap-major K (k = tap * Cg + c) where each K step of the tile lies in one tap, so the tile
  // finds where a tap reads once per step instead of once per element; the untiled kernel sums
  // in the same order, so both give the same bits.
  const bool tap_major = (opt.tile_features & kTileTapMajor) && Cg % kTileK == 0;
  if (const TileChoice t = tile_for(Mg, pixels, Kc, N * G, true); t.side) {
    // An implicit GEMM per (image, group): A = the group's weights [Mg, Cg * taps] as they
    // lie, B[(c, tap), pixel] = the input under that tap (0 in the padding), never formed. The
    // item's pixel is decomposed once (setup_b); (c, tap) per element, in 32-bit arithmetic
    // where the sizes allow (64-bit division is slow on GPUs).
    std::vector<int64_t> in_stride(static_cast<size_t>(nd));
    int64_t st = 1;
    for (int d = nd; d-- > 0;) {
      in_stride[static_cast<size_t>(d)] = st;
      st *= arr(0, d);
    }
    const bool narrow = in_plane < (int64_t{1} << 30) && Kc < (int64_t{1} << 30) && pixels < (int64_t{1} << 30);
    const std::string ix = narrow ? "int" : "long";
    auto I = [&](int64_t v) { return narrow ? std::to_string(v) : L(v); };
    const std::string X = p(a.args.at(1).value), chan0 = "(b / " + L(G) + ") * " + L(C) + " + (b % " + L(G) + ") * " + L(Cg);
    // The item's tap of the input: dn_in (inside the image) and dn_off (its offset in the plane)
    // for tap `tap`, given the pixel's dn_o<d> of setup_b.
    auto tap_at = [&](const std::string& tap) {
      k.body.line(ix + " dn_tr = " + tap + ", dn_off = 0; bool dn_in = true;");
      for (int d = nd; d-- > 0;)
        k.body.line("{ const " + ix + " kd = dn_tr % " + I(arr(2, d)) + "; dn_tr /= " + I(arr(2, d)) + "; const " + ix +
                    " id = dn_o" + std::to_string(d) + " + kd * " + I(arr(4, d)) + "; dn_in = dn_in && id >= 0 && id < " +
                    I(arr(0, d)) + "; dn_off += id * " + I(in_stride[static_cast<size_t>(d)]) + "; }");
    };
    tiled_gemm(
        k, a, t, Mg, pixels, Kc, N * G,
        [&] {
          if (tap_major) {  // k = tap * Cg + c (the step's tap, step_b's); the weights lie [m, c, tap]
            k.body.line("v = " + p(W) + "[((b % " + L(G) + ") * " + L(Mg) + " + dn_m) * " + L(Kc) + " + (dn_cb + (dn_k - dn_kb)) * " +
                        L(taps) + " + dn_tap];");
          } else {
            k.body.line("v = " + p(W) + "[((b % " + L(G) + ") * " + L(Mg) + " + dn_m) * " + L(Kc) + " + dn_k];");
          }
        },
        [&] {
          k.body.line(ix + " dn_rest = (" + ix + ")dn_nb;");
          for (int d = nd; d-- > 0;)
            k.body.line("const " + ix + " dn_o" + std::to_string(d) + " = dn_rest % " + I(arr(1, d)) + " * " + I(arr(3, d)) +
                        " - " + I(s[20 + d]) + "; dn_rest /= " + I(arr(1, d)) + ";");
        },
        [&] {
          if (!tap_major) return;
          // The step's kTileK values of k share one tap (Cg is a multiple of kTileK): the tap,
          // the step's first channel and where the item's pixel reads under the tap, once per step.
          k.body.line("const " + ix + " dn_tap = (" + ix + ")(dn_kb / " + L(Cg) + ");");
          k.body.line("const long dn_cb = dn_kb - (long)dn_tap * " + L(Cg) + ";  // the step's first channel");
          tap_at("dn_tap");
          k.body.line("const long dn_xb = (" + chan0 + " + dn_cb) * " + L(in_plane) + " + dn_off;");
        },
        [&] {
          if (tap_major) {
            k.body.line("if (dn_in) v = " + X + "[dn_xb + (dn_k - dn_kb) * " + L(in_plane) + "];");
            return;
          }
          k.body.line("const " + ix + " dn_ki = (" + ix + ")dn_k, dn_c = dn_ki / " + I(taps) + ";");
          tap_at("dn_ki % " + I(taps));
          k.body.line("if (dn_in) v = " + X + "[(" + chan0 + " + dn_c) * " + L(in_plane) + " + dn_off];");
        },
        false, false, "((b / " + L(G) + ") * " + L(M) + " + (b % " + L(G) + ") * " + L(Mg) + " + dn_m) * " + L(pixels) + " + dn_n",
        global);
    return;
  }
  // Too few outputs to keep the device busy with one item each, and a long K (a small image's
  // last stages: 512 channels of 2 x 2 pixels): a work-group per output element, its items
  // taking every kRowGroup-th k = c * taps + tap (the weights' own order, so a group's weight
  // loads are consecutive).
  const bool grouped = few_outputs(N * M * pixels) && Kc >= kRowGroup && row_groups(Kc);
  if (grouped) {
    group_head(k, N * M * pixels, global);
    k.body.line("const long e = dn_r;");
  } else {
    global[0] = N * M * pixels;
    elementwise_head(k, global[0]);
  }
  k.body.line("const long dn_pix = e % " + L(pixels) + ", dn_m = (e / " + L(pixels) + ") % " + L(M) +
              ", dn_img = e / " + L(pixels * M) + ";");
  k.body.line("const long dn_g = dn_m / " + L(M / G) + ";");
  // Output coordinates, last dim fastest.
  k.body.line("long dn_rest = dn_pix;");
  for (int d = nd; d-- > 0;)
    k.body.line("const long dn_o" + std::to_string(d) + " = dn_rest % " + L(arr(1, d)) + "; dn_rest /= " + L(arr(1, d)) + ";");
  k.body.line("float acc = 0.0f;");
  int64_t stride_in = 1;
  std::vector<int64_t> in_stride(static_cast<size_t>(nd));
  for (int d = nd; d-- > 0;) {
    in_stride[static_cast<size_t>(d)] = stride_in;
    stride_in *= arr(0, d);
  }
  auto tap = [&] {  // dn_in and dn_off of tap dn_t
    k.body.line("long dn_tr = dn_t, dn_off = 0; bool dn_in = true;");
    for (int d = nd; d-- > 0;) {
      const std::string D = std::to_string(d);
      k.body.line("{ const long kd = dn_tr % " + L(arr(2, d)) + "; dn_tr /= " + L(arr(2, d)) + "; const long id = dn_o" + D +
                  " * " + L(arr(3, d)) + " - " + L(s[20 + d]) + " + kd * " + L(arr(4, d)) + "; dn_in = dn_in && id >= 0 && id < " +
                  L(arr(0, d)) + "; dn_off += id * " + L(in_stride[static_cast<size_t>(d)]) + "; }");
    }
  };
  const std::string x_c = p(a.args.at(1).value) + " + (dn_img * " + L(C) + " + dn_g * " + L(C / G) + " + dn_c) * " + L(in_plane);
  const std::string w_c = p(W) + " + (dn_m * " + L(C / G) + " + dn_c) * " + L(taps);
  if (grouped) {
    k.body.open("for (long dn_k = dn_lid; dn_k < " + L(Kc) + "; dn_k += " + L(kRowGroup) + ")");
    k.body.line("const long dn_c = dn_k / " + L(taps) + ", dn_t = dn_k % " + L(taps) + ";");
    tap();
    k.body.line("if (dn_in) acc = fma((" + x_c + ")[dn_off], " + p(W) + "[dn_m * " + L(Kc) + " + dn_k], acc);");
    k.body.close();
    group_reduce(k, "acc", "dn_all", "x + y");
    k.body.open("if (dn_lid == 0)");
    k.body.line("const float acc = dn_all;");
    finish_element(k, a, "e");
    k.body.close();
    return;
  }
  if (tap_major) {  // the tile's order (see tap_major above)
    k.body.open("for (long dn_t = 0; dn_t < " + L(taps) + "; ++dn_t)");
    tap();
    k.body.open("if (dn_in)");
    k.body.open("for (long dn_c = 0; dn_c < " + L(C / G) + "; ++dn_c)");
    k.body.line("acc = fma((" + x_c + ")[dn_off], (" + w_c + ")[dn_t], acc);");
    k.body.close();
    k.body.close();
    k.body.close();
  } else {
    k.body.open("for (long dn_c = 0; dn_c < " + L(C / G) + "; ++dn_c)");
    k.body.line("__global const float* dn_x = " + x_c + ";");
    k.body.line("__global const float* dn_w = " + w_c + ";");
    k.body.open("for (long dn_t = 0; dn_t < " + L(taps) + "; ++dn_t)");
    tap();
    k.body.line("if (dn_in) acc = fma(dn_x[dn_off], dn_w[dn_t], acc);");
    k.body.close();
    k.body.close();
  }
  finish_element(k, a, "e");
}

void Renderer::pool(K& k, const AnchorStage& a, int64_t global[3], bool is_max) {
  // nd, N, C, in, out, kernel, stride, dilation, begin, end, count_include_pad
  const std::vector<int64_t>& s = a.args.at(0).ints;
  const int nd = static_cast<int>(s[0]);
  const int64_t N = s[1], C = s[2];
  auto arr = [&](int which, int d) { return s[3 + 3 * which + d]; };
  const bool cip = s[24] != 0;
  int64_t pixels = 1, in_plane = 1;
  for (int d = 0; d < nd; ++d) {
    pixels *= arr(1, d);
    in_plane *= arr(0, d);
  }
  global[0] = N * C * pixels;
  elementwise_head(k, global[0]);
  k.body.line("const long dn_pix = e % " + L(pixels) + ", dn_nc = e / " + L(pixels) + ";");
  k.body.line("__global const float* dn_x = " + p(a.args.at(1).value) + " + dn_nc * " + L(in_plane) + ";");
  k.body.line("long dn_rest = dn_pix, dn_count = 1;");
  for (int d = nd; d-- > 0;) {
    const std::string D = std::to_string(d);
    k.body.line("const long dn_o" + D + " = dn_rest % " + L(arr(1, d)) + "; dn_rest /= " + L(arr(1, d)) + ";");
    if (!is_max) {  // taps of this dim in the counted region (the input, + the pads with count_include_pad)
      const int64_t lo = cip ? -arr(5, d) : 0, hi = cip ? arr(0, d) + arr(6, d) : arr(0, d);
      k.body.line("{ long c = 0; for (long t = 0; t < " + L(arr(2, d)) + "; ++t) { const long q = dn_o" + D + " * " +
                  L(arr(3, d)) + " + t * " + L(arr(4, d)) + " - " + L(arr(5, d)) + "; c += q >= " + L(lo) + " && q < " +
                  L(hi) + "; } dn_count *= c; }");
    }
  }
  int64_t taps = 1;
  for (int d = 0; d < nd; ++d) taps *= arr(2, d);
  k.body.line(std::string("float acc = ") + (is_max ? "-INFINITY" : "0.0f") + "; long dn_best = 0;");
  k.body.open("for (long dn_t = 0; dn_t < " + L(taps) + "; ++dn_t)");
  k.body.line("long dn_tr = dn_t, dn_off = 0, dn_st = 1; bool dn_in = true;");
  for (int d = nd; d-- > 0;) {
    const std::string D = std::to_string(d);
    k.body.line("{ const long kd = dn_tr % " + L(arr(2, d)) + "; dn_tr /= " + L(arr(2, d)) + "; const long id = dn_o" + D +
                " * " + L(arr(3, d)) + " - " + L(arr(5, d)) + " + kd * " + L(arr(4, d)) + "; dn_in = dn_in && id >= 0 && id < " +
                L(arr(0, d)) + "; dn_off += id * dn_st; dn_st *= " + L(arr(0, d)) + "; }");
  }
  k.body.line(is_max ? "if (dn_in) { const float x = dn_x[dn_off]; if (x > acc || (isnan(x) && !isnan(acc))) { acc = x; dn_best = dn_t; } }"
                     : "if (dn_in) acc += dn_x[dn_off];");
  k.body.close();
  if (!a.second.empty()) {  // MaxPool's Indices: the flat input index of the max (storage_order 1: column-major)
    const bool colmajor = a.second.at(3).i != 0;
    k.body.line("long dn_idx = 0;");
    k.body.open("");
    k.body.line("long dn_tr = dn_best, dn_rs = 1;");
    std::vector<std::string> coord(static_cast<size_t>(nd));
    for (int d = nd; d-- > 0;) {
      const std::string D = std::to_string(d);
      k.body.line("const long kd" + D + " = dn_tr % " + L(arr(2, d)) + "; dn_tr /= " + L(arr(2, d)) + ";");
      k.body.line("const long id" + D + " = dn_o" + D + " * " + L(arr(3, d)) + " - " + L(arr(5, d)) + " + kd" + D + " * " +
                  L(arr(4, d)) + ";");
    }
    if (!colmajor) {
      for (int d = nd; d-- > 0;) {
        k.body.line("dn_idx += id" + std::to_string(d) + " * dn_rs; dn_rs *= " + L(arr(0, d)) + ";");
      }
    } else {
      for (int d = 0; d < nd; ++d) {
        k.body.line("dn_idx += id" + std::to_string(d) + " * dn_rs; dn_rs *= " + L(arr(0, d)) + ";");
      }
    }
    k.body.close();
    k.body.line(p(a.second.at(2).value) + "[e] = dn_nc * " + L(in_plane) + " + dn_idx;");
  }
  if (!is_max) k.body.line("acc /= (float)(dn_count > 0 ? dn_count : 1);");
  finish_element(k, a, "e");
}

void Renderer::global_pool(K& k, const AnchorStage& a, int64_t global[3], bool is_max) {
  const int64_t N = a.args.at(0).i, C = a.args.at(1).i, S = a.args.at(2).i;
  const std::string step = is_max ? "{ const float x = dn_x[dn_s]; acc = (x > acc || isnan(x)) ? x : acc; }" : "acc += dn_x[dn_s];";
  const std::string mean = "acc /= " + literal(static_cast<double>(std::max<int64_t>(S, 1)), DType::F32, sp) + ";";
  if (row_groups(S)) {  // a work-group per (n, c): its items take every kRowGroup-th pixel
    group_head(k, N * C, global);
    k.body.line("__global const float* dn_x = " + p(a.args.at(3).value) + " + dn_r * " + L(S) + ";");
    k.body.line(std::string("float acc = ") + (is_max ? "-INFINITY" : "0.0f") + ";");
    k.body.line("for (long dn_s = dn_lid; dn_s < " + L(S) + "; dn_s += " + L(kRowGroup) + ") " + step);
    group_reduce(k, "acc", "dn_all", is_max ? kNanMax : "x + y");
    k.body.open("if (dn_lid == 0)");
    k.body.line("float acc = dn_all;");
    if (!is_max) k.body.line(mean);
    finish_element(k, a, "dn_r");
    k.body.close();
    return;
  }
  global[0] = N * C;
  elementwise_head(k, global[0]);
  k.body.line("__global const float* dn_x = " + p(a.args.at(3).value) + " + e * " + L(S) + ";");
  k.body.line(std::string("float acc = ") + (is_max ? "-INFINITY" : "0.0f") + ";");
  k.body.line("for (long dn_s = 0; dn_s < " + L(S) + "; ++dn_s) " + step);
  if (!is_max) k.body.line(mean);
  finish_element(k, a, "e");
}

// Reduce*: one work-item per output element, looping over the reduced index space, or for
// float reductions over kRowGroupMin elements or more a work-group per output element.
void Renderer::reduce(K& k, const AnchorStage& a, int64_t global[3]) {
  const std::string kind = a.args.at(0).name;  // "ReduceKind::Sum", ...
  const std::vector<int64_t>& d = a.args.at(2).ints;
  const unsigned mask = static_cast<unsigned>(a.args.at(3).i);
  const int r = static_cast<int>(a.args.at(1).i);
  std::vector<int64_t> stride(static_cast<size_t>(std::max(r, 1)), 1);
  for (int i = r - 1; i > 0; --i) stride[static_cast<size_t>(i - 1)] = stride[static_cast<size_t>(i)] * d[static_cast<size_t>(i)];
  int64_t kept = 1, reduced = 1;
  for (int i = 0; i < r; ++i) (mask >> i & 1u ? reduced : kept) *= d[static_cast<size_t>(i)];
  const bool grouped = a.args.at(0).dtype == DType::F32 && row_groups(reduced);
  if (grouped) {
    group_head(k, out_numel(a), global);
  } else {
    global[0] = out_numel(a);
    elementwise_head(k, global[0]);
  }
  k.body.line("long dn_rest = " + std::string(grouped ? "dn_r" : "e") + ", dn_base = 0;");
  for (int i = r; i-- > 0;)
    if (!(mask >> i & 1u))
      k.body.line("dn_base += (dn_rest % " + L(d[static_cast<size_t>(i)]) + ") * " + L(stride[static_cast<size_t>(i)]) +
                  "; dn_rest /= " + L(d[static_cast<size_t>(i)]) + ";");
  const bool mx = kind.find("Max") != std::string::npos, mn = kind.find("Min") != std::string::npos;
  const bool prod = kind.find("Prod") != std::string::npos, l2 = kind.find("L2") != std::string::npos;
  const DType dt = a.args.at(0).dtype;
  if (dt != DType::F32) {  // integers: exact in their type (Sum and Prod wrap through unsigned)
    const std::string t = cltype(dt, sp), x = p(a.args.at(4).value);
    std::string ut = t.rfind("u", 0) == 0 ? t : "u" + t;
    if (dt == DType::I8 || dt == DType::U8 || dt == DType::I16 || dt == DType::U16) ut = "uint";
    // Max/Min start from the first element (integers' empty sets are refused by lowering;
    // bool's empty Max/Min are false/true).
    k.body.line(mx || mn ? t + " acc = " + (reduced == 0 ? std::string(mn ? "1" : "0") : x + "[dn_base]") + ";"
                         : ut + " acc = " + (prod ? "1" : "0") + ";");
    k.body.open("for (long dn_t = 0; dn_t < " + L(reduced) + "; ++dn_t)");
    k.body.line("long dn_tr = dn_t, dn_off = dn_base;");
    for (int i = r; i-- > 0;)
      if (mask >> i & 1u)
        k.body.line("dn_off += (dn_tr % " + L(d[static_cast<size_t>(i)]) + ") * " +
                    L(stride[static_cast<size_t>(i)]) + "; dn_tr /= " + L(d[static_cast<size_t>(i)]) + ";");
    k.body.line("const " + t + " x = " + x + "[dn_off];");
    k.body.line(mx ? "acc = x > acc ? x : acc;" : mn ? "acc = x < acc ? x : acc;"
                : prod ? "acc = (" + ut + ")(acc * (" + ut + ")x);" : "acc = (" + ut + ")(acc + (" + ut + ")x);");
    k.body.close();
    const std::string y = a.y != kNoValue ? "p" + std::to_string(a.y) : "";
    if (y.empty() || a.ep.present) throw InternalError("codegen: an integer reduction with an epilogue");
    k.body.line(y + "[e] = (" + t + ")acc;");
    return;
  }
  if (grouped) k.body.line("const long e = dn_r;");  // the item's output element
  k.body.line(std::string("float acc = ") + (mx ? "-INFINITY" : mn ? "INFINITY" : prod ? "1.0f" : "0.0f") + ";");
  k.body.open(grouped ? "for (long dn_t = dn_lid; dn_t < " + L(reduced) + "; dn_t += " + L(kRowGroup) + ")"
                    : "for (long dn_t = 0; dn_t < " + L(reduced) + "; ++dn_t)");
  k.body.line("long dn_tr = dn_t, dn_off = dn_base;");
  for (int i = r; i-- > 0;)
    if (mask >> i & 1u)
      k.body.line("dn_off += (dn_tr % " + L(d[static_cast<size_t>(i)]) + ") * " + L(stride[static_cast<size_t>(i)]) +
                  "; dn_tr /= " + L(d[static_cast<size_t>(i)]) + ";");
  k.body.line("const float x = " + p(a.args.at(4).value) + "[dn_off];");
  k.body.line(mx ? "acc = (x > acc || isnan(x)) ? x : acc;" : mn ? "acc = (x < acc || isnan(x)) ? x : acc;"
              : prod ? "acc *= x;" : l2 ? "acc = fma(x, x, acc);" : "acc += x;");
  k.body.close();
  if (grouped) {  // each item took every kRowGroup-th element; the group combines them
    group_reduce(k, "acc", "dn_all", mx ? kNanMax : mn ? kNanMin : prod ? "x * y" : "x + y");
    k.body.open("if (dn_lid == 0)");
    k.body.line("acc = dn_all;");
  }
  if (kind.find("Mean") != std::string::npos)
    k.body.line("acc /= " + literal(static_cast<double>(std::max<int64_t>(reduced, 1)), DType::F32, sp) + ";");
  if (l2) k.body.line("acc = sqrt(acc);");
  finish_element(k, a, "e");
  if (grouped) k.body.close();
}

// ConvTranspose: y[n, m, o] = sum over the group's c and taps t with o = i * stride +
// t * dilation - begin of x[n, c, i] * w[c, m % (M / G), t].
void Renderer::conv_transpose(K& k, const AnchorStage& a, int64_t global[3]) {
  const std::vector<int64_t>& s = a.args.at(0).ints;
  const int nd = static_cast<int>(s[0]);
  const int64_t N = s[1], C = s[2], M = s[3], G = s[4];
  auto arr = [&](int which, int d) { return s[5 + 3 * which + d]; };
  int64_t pixels = 1, in_plane = 1, taps = 1;
  for (int d = 0; d < nd; ++d) {
    pixels *= arr(1, d);
    in_plane *= arr(0, d);
    taps *= arr(2, d);
  }
  const int64_t Mg = M / G, Cg = C / G;
  bool blocks = true;  // stride == kernel, no dilation, padding or output padding: taps tile the output
  for (int d = 0; d < nd; ++d)
    blocks = blocks && arr(2, d) == arr(3, d) && arr(4, d) == 1 && arr(5, d) == 0 && arr(1, d) == arr(0, d) * arr(3, d);
  if (const TileChoice t = blocks ? tile_for(Mg * taps, in_plane, Cg, N * G) : TileChoice{}; t.side) {
    // Each input pixel's taps write their own output pixels: a GEMM per (image, group) of the
    // weights as they lie, A[(m, tap), c] = w[c, m, tap] (rows contiguous), by the input,
    // B[c, i] = x[c, i], scattered to output pixel i * stride + tap. Each output sums its one
    // tap's channels in order, as the kernel below does: the same bits.
    std::string o = "((b / " + L(G) + ") * " + L(M) + " + (b % " + L(G) + ") * " + L(Mg) + " + dn_m / " + L(taps) + ") * " +
                    L(pixels);
    int64_t ist = 1, kst = 1, ost = 1;
    for (int d = nd; d-- > 0;) {
      o += " + ((dn_n / " + L(ist) + ") % " + L(arr(0, d)) + " * " + L(arr(3, d)) + " + (dn_m % " + L(taps) + " / " + L(kst) +
           ") % " + L(arr(2, d)) + ") * " + L(ost);
      ist *= arr(0, d);
      kst *= arr(2, d);
      ost *= arr(1, d);
    }
    tiled_gemm(
        k, a, t, Mg * taps, in_plane, Cg, N * G,
        [&] {
          k.body.line("v = " + p(a.args.at(2).value) + "[((b % " + L(G) + ") * " + L(Cg) + " + dn_k) * " + L(Mg * taps) +
                      " + dn_m];");
        },
        [] {}, [] {},
        [&] {
          k.body.line("v = " + p(a.args.at(1).value) + "[((b / " + L(G) + ") * " + L(C) + " + (b % " + L(G) + ") * " + L(Cg) +
                      " + dn_k) * " + L(in_plane) + " + dn_n];");
        },
        false, true, o, global);
    return;
  }
  global[0] = N * M * pixels;
  elementwise_head(k, global[0]);
  k.body.line("const long dn_pix = e % " + L(pixels) + ", dn_m = (e / " + L(pixels) + ") % " + L(M) +
              ", dn_img = e / " + L(pixels * M) + ";");
  k.body.line("const long dn_g = dn_m / " + L(M / G) + ", dn_ml = dn_m % " + L(M / G) + ";");
  k.body.line("long dn_rest = dn_pix;");
  for (int d = nd; d-- > 0;)
    k.body.line("const long dn_o" + std::to_string(d) + " = dn_rest % " + L(arr(1, d)) + "; dn_rest /= " + L(arr(1, d)) + ";");
  k.body.line("float acc = 0.0f;");
  k.body.open("for (long dn_t = 0; dn_t < " + L(taps) + "; ++dn_t)");
  k.body.line("long dn_tr = dn_t, dn_off = 0, dn_st = 1; bool dn_in = true;");
  for (int d = nd; d-- > 0;) {
    const std::string D = std::to_string(d);
    k.body.line("{ const long kd = dn_tr % " + L(arr(2, d)) + "; dn_tr /= " + L(arr(2, d)) + "; const long q = dn_o" + D +
                " + " + L(arr(5, d)) + " - kd * " + L(arr(4, d)) + "; const long id = q / " + L(arr(3, d)) +
                "; dn_in = dn_in && q >= 0 && q % " + L(arr(3, d)) + " == 0 && id < " + L(arr(0, d)) +
                "; dn_off += id * dn_st; dn_st *= " + L(arr(0, d)) + "; }");
  }
  k.body.open("if (dn_in)");
  k.body.open("for (long dn_c = 0; dn_c < " + L(C / G) + "; ++dn_c)");
  k.body.line("const long dn_ci = dn_g * " + L(C / G) + " + dn_c;");
  k.body.line("acc = fma(" + p(a.args.at(1).value) + "[(dn_img * " + L(C) + " + dn_ci) * " + L(in_plane) + " + dn_off], " +
              p(a.args.at(2).value) + "[(dn_ci * " + L(M / G) + " + dn_ml) * " + L(taps) + " + dn_t], acc);");
  k.body.close();
  k.body.close();
  k.body.close();
  finish_element(k, a, "e");
}

// Resize: the CPU kernel's per-axis tap tables (resize_taps.h), baked into the program;
// each output element sums the products of its axes' taps.
void Renderer::resize(K& k, const AnchorStage& a, int64_t global[3]) {
  using namespace dnnf::irr;
  const std::vector<int64_t>& in = a.args.at(1).ints;
  const std::vector<int64_t>& outd = a.args.at(2).ints;
  const std::vector<double>& scales = a.args.at(3).floats;
  const int r = static_cast<int>(a.args.at(4).i);
  auto ends = [](const std::string& v, const char* tail) {
    return v.size() >= std::strlen(tail) && v.compare(v.size() - std::strlen(tail), std::string::npos, tail) == 0;
  };
  ResizeAttrs at;
  const std::string mode = a.args.at(5).name, coord = a.args.at(6).name, near = a.args.at(7).name;
  at.mode = ends(mode, "Linear") ? ResizeMode::Linear : ends(mode, "Cubic") ? ResizeMode::Cubic : ResizeMode::Nearest;
  at.coord = ends(coord, "PytorchHalfPixel") ? ResizeCoord::PytorchHalfPixel
             : ends(coord, "HalfPixelSymmetric") ? ResizeCoord::HalfPixelSymmetric
             : ends(coord, "HalfPixel") ? ResizeCoord::HalfPixel
             : ends(coord, "AlignCorners") ? ResizeCoord::AlignCorners
             : ends(coord, "Asymmetric") ? ResizeCoord::Asymmetric : ResizeCoord::TfCropAndResize;
  at.nearest = ends(near, "RoundPreferCeil") ? NearestMode::RoundPreferCeil
               : ends(near, "RoundPreferFloor") ? NearestMode::RoundPreferFloor
               : ends(near, "Floor") ? NearestMode::Floor : NearestMode::Ceil;
  at.cubic_coeff_a = static_cast<float>(a.args.at(8).f);
  at.exclude_outside = a.args.at(9).i != 0;
  at.antialias = a.args.at(10).i != 0;
  at.extrapolation_value = static_cast<float>(a.args.at(11).f);
  std::vector<float> roi;
  if (a.args.at(0).kind == AnchorArg::Kind::Floats)
    for (double v : a.args.at(0).floats) roi.push_back(static_cast<float>(v));
  int64_t total = 1;
  for (int64_t d : outd) total *= d;
  global[0] = total;
  elementwise_head(k, global[0]);
  k.body.line("long dn_rest = e;");
  for (int d = r; d-- > 0;)
    k.body.line("const long dn_o" + std::to_string(d) + " = dn_rest % " + L(outd[static_cast<size_t>(d)]) + "; dn_rest /= " +
                L(outd[static_cast<size_t>(d)]) + ";");
  k.body.line("float acc = 0.0f; bool dn_out = false;");
  std::string xi = "0L", wprod = "1.0f";
  int64_t st = 1;
  std::vector<std::string> closes;
  for (int d = r; d-- > 0;) {
    const size_t du = static_cast<size_t>(d);
    const detail::ResizeAxis t = detail::resize_axis(at, in[du], outd[du], scales[du], roi.empty() ? nullptr : roi.data(), d, r);
    const std::string D = std::to_string(d);
    if (t.identity) {
      xi += " + dn_o" + D + " * " + L(st);
    } else {
      const std::string tab = k.name + "_r" + D;
      std::string idx, w;
      for (size_t i = 0; i < t.idx.size(); ++i) {
        idx += (i ? "," : "") + std::to_string(t.idx[i]);
        w += (i ? "," : "") + literal(t.w[i], DType::F32, sp);
      }
      k.globals += "__constant long " + tab + "_i[] = {" + idx + "};\n__constant float " + tab + "_w[] = {" + w + "};\n";
      if (t.any_outside) {
        std::string out;
        for (size_t i = 0; i < t.out.size(); ++i) out += (i ? "," : "") + std::string(t.out[i] != 0.0f ? "1" : "0");
        k.globals += "__constant uchar " + tab + "_o[] = {" + out + "};\n";
        k.body.line("dn_out = dn_out || " + tab + "_o[dn_o" + D + "];");
      }
      k.body.open("for (long dn_t" + D + " = 0; dn_t" + D + " < " + L(t.taps) + "; ++dn_t" + D + ")");
      k.body.line("const long dn_k" + D + " = dn_o" + D + " * " + L(t.taps) + " + dn_t" + D + ";");
      xi += " + " + tab + "_i[dn_k" + D + "] * " + L(st);
      wprod += " * " + tab + "_w[dn_k" + D + "]";
      closes.push_back("}");
    }
    st *= in[du];
  }
  k.body.line("acc += " + wprod + " * " + p(a.args.at(12).value) + "[" + xi + "];");
  for (size_t i = 0; i < closes.size(); ++i) k.body.close();
  k.body.line("if (dn_out) acc = " + literal(at.extrapolation_value, DType::F32, sp) + ";");
  finish_element(k, a, "e");
}

// RoiAlign (the CPU kernel's arithmetic, per output element): [N, C, H, W, x, R, rois,
// batch indices, out h, out w, sampling ratio, spatial scale, half pixel, max mode, x strides
// (n, c, h, w), y, ep].
void Renderer::roi_align(K& k, const AnchorStage& a, int64_t global[3]) {
  const int64_t N = a.args.at(0).i, C = a.args.at(1).i, H = a.args.at(2).i, W = a.args.at(3).i;
  const int64_t sn = a.args.at(14).i, sc = a.args.at(15).i, sh = a.args.at(16).i, sw = a.args.at(17).i;
  const int64_t R = a.args.at(5).i, oh = a.args.at(8).i, ow = a.args.at(9).i, sr = a.args.at(10).i;
  const bool half = a.args.at(12).i != 0, mx = a.args.at(13).i != 0;
  const std::string real = sp.fp64 ? "double" : "float";
  global[0] = R * C * oh * ow;
  elementwise_head(k, global[0]);
  k.body.line("const long pw = e % " + L(ow) + ", ph = (e / " + L(ow) + ") % " + L(oh) + ", ch = (e / " + L(ow * oh) +
              ") % " + L(C) + ", r = e / " + L(ow * oh * C) + ";");
  k.body.line("const long bidx = " + p(a.args.at(7).value) + "[r];");
  k.body.line("if (bidx < 0 || bidx >= " + L(N) + ") { *dnnf_err = 2; return; }");
  k.body.line("__global const float* roi = " + p(a.args.at(6).value) + " + r * 4;");
  k.body.line("const " + real + " ss = " + literal(a.args.at(11).f, DType::F32, sp) + ", off = " + (half ? "0.5" : "0.0") + ";");
  k.body.line("const " + real + " x1 = roi[0] * ss - off, y1 = roi[1] * ss - off;");
  k.body.line(real + " rw = roi[2] * ss - off - x1, rh = roi[3] * ss - off - y1;");
  if (!half) k.body.line("rw = rw > 1.0 ? rw : 1.0; rh = rh > 1.0 ? rh : 1.0;");
  k.body.line("const long gh = " + (sr > 0 ? L(sr) : "lmax(0L, (long)ceil(rh / " + L(oh) + "))") + ", gw = " +
              (sr > 0 ? L(sr) : "lmax(0L, (long)ceil(rw / " + L(ow) + "))") + ";");
  k.body.line("__global const float* img = " + p(a.args.at(4).value) + " + bidx * " + L(sn) + " + ch * " + L(sc) + ";");
  k.body.line("const " + real + " bh = rh / " + L(oh) + ", bw = rw / " + L(ow) + ";");
  k.body.line(std::string("float acc = ") + (mx ? "(gh * gw > 0 ? -INFINITY : 0.0f)" : "0.0f") + ";");
  auto tap = [&](const std::string& v, const std::string& start, const std::string& pidx, const std::string& bin,
                 const std::string& grid, const std::string& gi, int64_t limit) {
    k.body.line(real + " " + v + "p = " + start + " + (" + real + ")(" + pidx + " * " + bin + ") + ((" + real + ")" + gi +
                " + 0.5) * " + bin + " / (" + real + ")" + grid + ";");
    k.body.line("const " + real + " " + v + "valid = (" + v + "p >= -1.0 && " + v + "p <= " + L(limit) + ") ? 1.0 : 0.0;");
    k.body.line(v + "p = " + v + "p > 0.0 ? " + v + "p : 0.0;");
    k.body.line("long " + v + "lo = (long)floor(" + v + "p), " + v + "hi = " + v + "lo + 1;");
    k.body.line("if (" + v + "lo >= " + L(limit - 1) + ") { " + v + "lo = " + v + "hi = " + L(limit - 1) + "; " + v + "p = (" +
                real + ")" + v + "lo; }");
    k.body.line("const " + real + " " + v + "f = " + v + "p - (" + real + ")" + v + "lo;");
    k.body.line("const float " + v + "wl = (float)((1.0 - " + v + "f) * " + v + "valid), " + v + "wh = (float)(" + v + "f * " +
                v + "valid);");
  };
  k.body.open("for (long gy = 0; gy < gh; ++gy)");
  tap("y", "y1", "ph", "bh", "gh", "gy", H);
  k.body.open("for (long gx = 0; gx < gw; ++gx)");
  tap("x", "x1", "pw", "bw", "gw", "gx", W);
  k.body.line("const float t0 = ywl * xwl * img[ylo * " + L(sh) + " + xlo * " + L(sw) + "], t1 = ywl * xwh * img[ylo * " +
              L(sh) + " + xhi * " + L(sw) + "], t2 = ywh * xwl * img[yhi * " + L(sh) + " + xlo * " + L(sw) +
              "], t3 = ywh * xwh * img[yhi * " + L(sh) + " + xhi * " + L(sw) + "];");
  k.body.line(mx ? "acc = fmax(fmax(fmax(acc, t0), fmax(t1, t2)), t3);" : "acc += (t0 + t1) + (t2 + t3);");
  k.body.close();
  k.body.close();
  if (!mx) k.body.line("acc /= (float)(gh * gw > 1 ? gh * gw : 1);");
  finish_element(k, a, "e");
}

}  // namespace dnnf::cg::opencl
