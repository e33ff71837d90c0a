// The OpenCL renderer's GEMM-like anchors (paper §4.4 Many-to-Many operators on the GPU): GEMM
// and MatMul, convolutions as implicit GEMMs, ConvTranspose; through the local-memory tiles of
// work_groups.cc where choose_tile gives one, else a work-group per output element (few outputs
// with a long K) or a work-item per output element, then the fused epilogue (finish_element).
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "codegen/opencl/renderer.h"
#include "ir/errors.h"

namespace dnnf::cg::opencl {

void Renderer::gemm(K& k, const AnchorStage& a, int64_t global[3]) {
  const GemmCall& c = a.gemm;
  const std::string offa = c.batched ? index(a.offset_a, a.batch_vars) : "0L";
  const std::string offb = c.batched ? index(a.offset_b, a.batch_vars) : "0L";
  // A work-item per output element (dn_n, dn_m, batch b) over a 3-D range.
  auto per_element = [&] {
    global[0] = c.N;
    global[1] = c.M;
    global[2] = a.batch;
    shape.dims = 3;
    k.body.line("const long dn_n = get_global_id(0), dn_m = get_global_id(1), b = get_global_id(2);");
    k.body.line("if (dn_n >= " + L(c.N) + " || dn_m >= " + L(c.M) + ") return;");
    k.body.line("(void)b;");
  };
  const std::string element = "(b * " + L(c.M) + " + dn_m) * " + L(c.N) + " + dn_n";
  if (c.dtype != DType::F32) {
    // MatMul in f64 or a 32/64-bit integer type (no prologue, no epilogue: lower_matmul): a
    // work-item per output element, summed in k order in the type, integers in its unsigned
    // form so that they wrap (signed overflow is undefined in OpenCL C as in C).
    const std::string T = cltype(c.dtype, sp);
    const std::string S = c.dtype == DType::F64 || T[0] == 'u' ? T : "u" + T;
    per_element();
    k.body.line("__global const " + T + "* dn_a = " + p(c.a) + " + (" + offa + ") + dn_m * " + L(c.rs_a) + ";");
    k.body.line("__global const " + T + "* dn_b = " + p(c.b) + " + (" + offb + ") + dn_n * " + L(c.cs_b) + ";");
    k.body.line(S + " dn_s = 0;");
    k.body.line("for (long dn_k = 0; dn_k < " + L(c.K) + "; ++dn_k) dn_s += (" + S + ")dn_a[dn_k * " + L(c.cs_a) +
                "] * (" + S + ")dn_b[dn_k * " + L(c.rs_b) + "];");
    k.body.line("const " + T + " acc = (" + T + ")dn_s;");
    finish_element(k, a, element);
    return;
  }
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
        element, global);
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
  per_element();
  k.body.line(b_column);
  k.body.line("float acc = 0.0f;");
  dot("0", 1);  // an A made by arithmetic is not fused here (index composition only: see LowerOptions)
  finish_element(k, a, element);
}

void Renderer::conv(K& k, const AnchorStage& a, int64_t global[3]) {
  const std::vector<int64_t>& s = a.args.at(0).ints;  // nd, N, C, M, group, in, out, k, stride, dil, begin
  // (the memory plan puts no output in rows of a Concat here: OpenCL plans with no row writers)
  if (s.size() > 24 && (s[23] != 0 || s[24] != 0))
    throw InternalError("opencl: a convolution's output in rows of a Concat, or its input channels first");
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
  // A channel Concat read in place (group 1): the input's channels are the segments' in turn,
  // each its own [N, C_i, ...] value.
  const AnchorArg& xa = a.args.at(1);
  const bool segmented = xa.kind == AnchorArg::Kind::Segments;
  bool steps_in_one_segment = true;
  for (int64_t c : xa.ints) steps_in_one_segment = steps_in_one_segment && c % kTileK == 0;
  // Input channel `ch` of image `img` at plane offset `off`: from its segment.
  auto seg_read = [&](const std::string& img, const std::string& ch, const std::string& off) {
    std::string e;
    int64_t first = 0;
    for (size_t i = 0; i < xa.values.size(); ++i) {
      const int64_t c = xa.ints[i];
      const std::string read = p(xa.values[i]) + "[(" + img + " * " + L(c) + " + " + ch + " - " + L(first) + ") * " +
                               L(in_plane) + " + " + off + "]";
      e += i + 1 < xa.values.size() ? "(" + ch + " < " + L(first + c) + " ? " + read + " : " : read;
      first += c;
    }
    return e + std::string(xa.values.size() - 1, ')');
  };
  const bool tap_major = (opt.tile_features & kTileTapMajor) && Cg % kTileK == 0 && (!segmented || steps_in_one_segment);
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
          if (!segmented) {
            k.body.line("const long dn_xb = (" + chan0 + " + dn_cb) * " + L(in_plane) + " + dn_off;");
            return;
          }
          // The step's channels lie in one segment (each a multiple of kTileK channels): its
          // image's plane of the step's first channel there.
          k.body.line("__global const float* dn_xs; long dn_xb;");
          int64_t first = 0;
          for (size_t i = 0; i < xa.values.size(); ++i) {
            const int64_t c = xa.ints[i];
            const std::string set = "dn_xs = " + p(xa.values[i]) + " + b * " + L(c * in_plane) + "; dn_xb = (dn_cb - " +
                                    L(first) + ") * " + L(in_plane) + " + dn_off;";
            if (i + 1 < xa.values.size())
              k.body.line(std::string(i ? "else " : "") + "if (dn_cb < " + L(first + c) + ") { " + set + " }");
            else
              k.body.line("else { " + set + " }");
            first += c;
          }
        },
        [&] {
          if (tap_major) {
            k.body.line("if (dn_in) v = " + (segmented ? std::string("dn_xs") : X) + "[dn_xb + (dn_k - dn_kb) * " +
                        L(in_plane) + "];");
            return;
          }
          k.body.line("const " + ix + " dn_ki = (" + ix + ")dn_k, dn_c = dn_ki / " + I(taps) + ";");
          tap_at("dn_ki % " + I(taps));
          if (segmented)
            k.body.line("if (dn_in) v = " + seg_read("b", "(long)dn_c", "dn_off") + ";");
          else
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
    k.body.line("if (dn_in) acc = fma(" + (segmented ? seg_read("dn_img", "dn_c", "dn_off") : "(" + x_c + ")[dn_off]") +
                ", " + p(W) + "[dn_m * " + L(Kc) + " + dn_k], acc);");
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
    k.body.line("acc = fma(" + (segmented ? seg_read("dn_img", "dn_c", "dn_off") : "(" + x_c + ")[dn_off]") + ", (" + w_c +
                ")[dn_t], acc);");
    k.body.close();
    k.body.close();
    k.body.close();
  } else {
    k.body.open("for (long dn_c = 0; dn_c < " + L(C / G) + "; ++dn_c)");
    if (!segmented) k.body.line("__global const float* dn_x = " + x_c + ";");
    k.body.line("__global const float* dn_w = " + w_c + ";");
    k.body.open("for (long dn_t = 0; dn_t < " + L(taps) + "; ++dn_t)");
    tap();
    k.body.line("if (dn_in) acc = fma(" + (segmented ? seg_read("dn_img", "dn_c", "dn_off") : std::string("dn_x[dn_off]")) +
                ", dn_w[dn_t], acc);");
    k.body.close();
    k.body.close();
  }
  finish_element(k, a, "e");
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

}  // namespace dnnf::cg::opencl
