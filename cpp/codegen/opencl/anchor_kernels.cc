// The OpenCL renderer's other anchor kernels (paper §4.4 Many-to-Many operators on the GPU):
// pools, reductions, Resize, RoiAlign, one work-item per output element (or a work-group per
// output for long reductions), then the fused epilogue on its result (finish_element). GEMMs
// and convolutions are in gemm_kernels.cc, the tiles in work_groups.cc, the row kernels
// (Softmax, LayerNorm, TopK, ...) in row_kernels.cc.
#include <algorithm>
#include <cstring>
#include <functional>

#include "codegen/counts.h"
#include "codegen/opencl/renderer.h"
#include "codegen/prelude/resize_taps.h"
#include "ir/errors.h"

namespace dnnf::cg::opencl {

void Renderer::pool(K& k, const AnchorStage& a, int64_t global[3], bool is_max) {
  // MaxPool also in f64, i8, u8 (lower_pool): no epilogue then; integers start from the
  // first in-bounds tap (no infinity below them, and no NaN).
  const DType dt = a.args.at(1).dtype;
  const std::string T = cltype(dt, sp);
  const bool integer = dt != DType::F32 && dt != DType::F64;
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
  k.body.line("__global const " + T + "* dn_x = " + p(a.args.at(1).value) + " + dn_nc * " + L(in_plane) + ";");
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
  k.body.line(T + " acc = " + (integer ? "0" : is_max ? "-INFINITY" : "0.0f") + "; long dn_best = 0;" +
              (integer ? " bool dn_seen = false;" : ""));
  k.body.open("for (long dn_t = 0; dn_t < " + L(taps) + "; ++dn_t)");
  k.body.line("long dn_tr = dn_t, dn_off = 0, dn_st = 1; bool dn_in = true;");
  for (int d = nd; d-- > 0;) {
    const std::string D = std::to_string(d);
    k.body.line("{ const long kd = dn_tr % " + L(arr(2, d)) + "; dn_tr /= " + L(arr(2, d)) + "; const long id = dn_o" + D +
                " * " + L(arr(3, d)) + " - " + L(arr(5, d)) + " + kd * " + L(arr(4, d)) + "; dn_in = dn_in && id >= 0 && id < " +
                L(arr(0, d)) + "; dn_off += id * dn_st; dn_st *= " + L(arr(0, d)) + "; }");
  }
  k.body.line(integer  ? "if (dn_in) { const " + T + " x = dn_x[dn_off]; if (!dn_seen || x > acc) { acc = x; dn_best = dn_t; } dn_seen = true; }"
              : is_max ? "if (dn_in) { const " + T + " x = dn_x[dn_off]; if (x > acc || (isnan(x) && !isnan(acc))) { acc = x; dn_best = dn_t; } }"
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
  if (dt != DType::F32 && dt != DType::F64) {  // integers: exact in their type (Sum and Prod wrap through unsigned)
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
  const std::string ft = dt == DType::F64 ? "double" : "float";  // (double: one item per output)
  k.body.line(ft + " acc = " + (mx ? "-INFINITY" : mn ? "INFINITY" : prod ? "1.0f" : "0.0f") + ";");
  k.body.open(grouped ? "for (long dn_t = dn_lid; dn_t < " + L(reduced) + "; dn_t += " + L(kRowGroup) + ")"
                    : "for (long dn_t = 0; dn_t < " + L(reduced) + "; ++dn_t)");
  k.body.line("long dn_tr = dn_t, dn_off = dn_base;");
  for (int i = r; i-- > 0;)
    if (mask >> i & 1u)
      k.body.line("dn_off += (dn_tr % " + L(d[static_cast<size_t>(i)]) + ") * " + L(stride[static_cast<size_t>(i)]) +
                  "; dn_tr /= " + L(d[static_cast<size_t>(i)]) + ";");
  k.body.line("const " + ft + " x = " + p(a.args.at(4).value) + "[dn_off];");
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

namespace {
// As resize_axis: the filter's stretch (1 / s) and its first tap relative to the base index.
double crop_stretch(const irr::ResizeAttrs& at, double scale) {
  return at.mode == irr::ResizeMode::Nearest || !at.antialias ? 1.0 : std::min(scale, 1.0);
}
int64_t crop_first_tap(const irr::ResizeAttrs& at, double s) {
  if (at.mode == irr::ResizeMode::Nearest) return 0;
  return static_cast<int64_t>(std::floor(-(at.mode == irr::ResizeMode::Cubic ? 2.0 : 1.0) / s)) + 1;
}
}  // namespace

// Resize with a roi computed at run time: axis d's taps for this element's output index, as
// resize_taps.h's resize_axis computes them (the same float32 coordinate, the weights in
// double where the device has it), into dn_i<d>[taps] and dn_w<d>[taps]; dn_out set when the
// coordinate falls outside the input.
void Renderer::resize_taps_at_run_time(K& k, const AnchorStage& a, const irr::ResizeAttrs& at, int d) {
  using namespace dnnf::irr;
  const size_t du = static_cast<size_t>(d);
  const int64_t n_in = a.args.at(1).ints[du], n_out = a.args.at(2).ints[du];
  const std::vector<int64_t>& axes = a.args.at(0).ints;  // the axis of each start in the roi buffer
  const std::string D = std::to_string(d), real = sp.fp64 ? "double" : "float";
  std::string r0 = "0.0f", r1 = "1.0f";
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == d) {
      r0 = "(float)" + p(a.args.at(0).value) + "[" + std::to_string(i) + "]";
      r1 = "(float)" + p(a.args.at(0).value) + "[" + std::to_string(i + axes.size()) + "]";
    }
  const bool nearest = at.mode == ResizeMode::Nearest;
  const double s = crop_stretch(at, a.args.at(3).floats[du]);
  const int64_t start = crop_first_tap(at, s), taps = nearest ? 1 : 2 - 2 * start;
  k.body.line("long dn_i" + D + "[" + L(taps) + "]; float dn_w" + D + "[" + L(taps) + "];");
  k.body.open("");
  k.body.line("const float r0 = " + r0 + ", r1 = " + r1 + ", n_in = " + literal(double(n_in), DType::F32, sp) + ";");
  if (n_out > 1) {  // (the product rounded before the sum, as the CPU's source_coord)
    k.body.line("const float r0s = r0 * (n_in - 1.0f);");
    k.body.line("const float xo = r0s + (float)dn_o" + D + " * (r1 - r0) * (n_in - 1.0f) / " +
                literal(double(n_out - 1), DType::F32, sp) + ";");
  } else {
    k.body.line("const float xo = 0.5f * (r0 + r1) * (n_in - 1.0f);");
  }
  k.body.line("if (xo < 0.0f || xo > n_in - 1.0f) dn_out = true;");
  if (nearest) {
    const char* round = at.nearest == NearestMode::RoundPreferFloor ? "ceil(xo - 0.5f)"
                        : at.nearest == NearestMode::RoundPreferCeil ? "floor(xo + 0.5f)"
                        : at.nearest == NearestMode::Floor ? "floor(xo)" : "ceil(xo)";
    k.body.line(std::string("const float v = xo != floor(xo) ? ") + round + " : xo;");
    k.body.line("dn_i" + D + "[0] = clamp((long)v, 0L, " + L(n_in - 1) + "); dn_w" + D + "[0] = 1.0f;");
    k.body.close();
    return;
  }
  k.body.line("const " + real + " base = ceil((" + real + ")xo) - 1, ratio = (" + real + ")xo - base;");
  k.body.line(real + " c[" + L(taps) + "]; " + real + " sum = 0.0, total = 0.0;");
  k.body.open("for (long t = 0; t < " + L(taps) + "; ++t)");
  k.body.line("dn_i" + D + "[t] = (long)base + " + L(start) + " + t;");
  k.body.line("const " + real + " u = fabs(((" + real + ")(" + L(start) + " + t) - ratio) * " +
              literal(s, DType::F64, sp) + ");");
  if (at.mode == ResizeMode::Linear) {
    k.body.line("c[t] = fmin(fmax(1.0 - u, 0.0), 1.0);");
  } else {
    const std::string A = literal(at.cubic_coeff_a, DType::F64, sp);
    k.body.line("c[t] = u <= 1.0 ? ((" + A + " + 2) * u - (" + A + " + 3)) * u * u + 1 : u < 2.0 ? ((" + A + " * u - 5 * " +
                A + ") * u + 8 * " + A + ") * u - 4 * " + A + " : 0.0;");
  }
  k.body.line("sum += c[t];");
  k.body.close();
  if (at.antialias) k.body.line("for (long t = 0; t < " + L(taps) + "; ++t) c[t] /= sum;");
  k.body.line("(void)sum; (void)total;");
  if (at.exclude_outside) {
    k.body.line("for (long t = 0; t < " + L(taps) + "; ++t) { if (dn_i" + D + "[t] < 0 || dn_i" + D + "[t] >= " +
                L(n_in) + ") c[t] = 0.0; total += c[t]; }");
    k.body.line("for (long t = 0; t < " + L(taps) + "; ++t) c[t] /= total == 0.0 ? 1.0 : total;");
  }
  k.body.line("for (long t = 0; t < " + L(taps) + "; ++t) { dn_i" + D + "[t] = clamp(dn_i" + D + "[t], 0L, " +
              L(n_in - 1) + "); dn_w" + D + "[t] = (float)c[t]; }");
  k.body.close();
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
  const bool run_roi = a.args.at(0).kind == AnchorArg::Kind::Buffer;  // read by the kernel
  for (int d = r; d-- > 0 && run_roi;) resize_taps_at_run_time(k, a, at, d);
  for (int d = r; d-- > 0;) {
    const size_t du = static_cast<size_t>(d);
    const std::string D = std::to_string(d);
    if (run_roi) {  // every axis crops: its taps are the dn_i<d>/dn_w<d> just computed
      const int64_t taps = at.mode == ResizeMode::Nearest ? 1 : 2 - 2 * crop_first_tap(at, crop_stretch(at, scales[du]));
      k.body.open("for (long dn_t" + D + " = 0; dn_t" + D + " < " + L(taps) + "; ++dn_t" + D + ")");
      xi += " + dn_i" + D + "[dn_t" + D + "] * " + L(st);
      wprod += " * dn_w" + D + "[dn_t" + D + "]";
      closes.push_back("}");
      st *= in[du];
      continue;
    }
    const detail::ResizeAxis t = detail::resize_axis(at, in[du], outd[du], scales[du], roi.empty() ? nullptr : roi.data(), d, r);
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

// ScatterND: [m, k, s, dims, strides, data, n, indices, updates, y, reduction]; ScatterElements:
// [rank, udims, dstrides, axis, axis size, data, n, indices, updates, y, reduction]. (1) y = data.
// (2) ScatterND: an item per element j of a slice, over the m index tuples in order (slices
// start at multiples of s, so items never share an output); ScatterElements: an item per line
// of the updates along the axis, over it in order (items differ in another coordinate). Either
// way each output sees its updates in the CPU kernel's row-major order.
void Renderer::scatter(K& k, const AnchorStage& a, int64_t global[3]) {
  const bool nd = a.node->op == OpKind::ScatterND;
  const size_t b = 5;  // data's position in both lists
  const DType dt = a.args.at(b).dtype;
  const std::string t = cltype(dt, sp), y = p(a.args.at(b + 4).value), data = p(a.args.at(b).value), idx = p(a.args.at(b + 2).value),
                    upd = p(a.args.at(b + 3).value);
  const int64_t n = a.args.at(b + 1).i, red = a.args.at(b + 5).i;
  const K base = k;
  const std::string name = k.name;
  if (!scatter_in_place(mp.blocks.at(static_cast<size_t>(cur_block)), a)) {  // else y is data's bytes
    k.name += "_copy";
    elementwise_head(k, n);
    k.body.line(y + "[e] = " + data + "[e];");
    int64_t g1[3] = {n, 1, 1};
    finish(k, g1);
    out.launches.back().block = cur_block;
    k = base;
    k.name = name;
  }
  shape = Shape{};
  auto combine = [&](const std::string& at, const std::string& u) {
    const std::string ya = y + "[" + at + "]";
    switch (red) {
      case 1: k.body.line(ya + " = (" + t + ")(" + ya + " + " + u + ");"); break;
      case 2: k.body.line(ya + " = (" + t + ")(" + ya + " * " + u + ");"); break;
      case 3: k.body.line("{ const " + t + " dn_w = " + u + "; if (dn_w != dn_w || dn_w > " + ya + ") " + ya + " = dn_w; }"); break;
      case 4: k.body.line("{ const " + t + " dn_w = " + u + "; if (dn_w != dn_w || dn_w < " + ya + ") " + ya + " = dn_w; }"); break;
      default: k.body.line(ya + " = " + u + ";");
    }
  };
  auto wrapped = [&](const std::string& var, const std::string& at, int64_t size) {
    k.body.line("long " + var + " = (long)" + idx + "[" + at + "];");
    k.body.line("if (" + var + " < 0) " + var + " += " + L(size) + ";");
    k.body.line("if (" + var + " < 0 || " + var + " >= " + L(size) + ") { *dnnf_err = 1; return; }");
  };
  if (nd) {
    const int64_t m = a.args.at(0).i, kk = a.args.at(1).i, s = a.args.at(2).i;
    const std::vector<int64_t>&dims = a.args.at(3).ints, &strides = a.args.at(4).ints;
    global[0] = s;
    elementwise_head(k, s);
    k.body.open("for (long dn_i = 0; dn_i < " + L(m) + "; ++dn_i)");
    k.body.line("long dn_off = e;");
    for (int64_t c = 0; c < kk; ++c) {
      wrapped("dn_c" + std::to_string(c), "dn_i * " + L(kk) + " + " + L(c), dims[static_cast<size_t>(c)]);
      k.body.line("dn_off += dn_c" + std::to_string(c) + " * " + L(strides[static_cast<size_t>(c)]) + ";");
    }
    combine("dn_off", upd + "[dn_i * " + L(s) + " + e]");
    k.body.close();
    return;
  }
  const int64_t rank = a.args.at(0).i, ax = a.args.at(3).i, axis_size = a.args.at(4).i;
  const std::vector<int64_t>&ud = a.args.at(1).ints, &ds = a.args.at(2).ints;
  int64_t lines = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (d != ax) lines *= ud[static_cast<size_t>(d)];
  global[0] = lines;
  elementwise_head(k, lines);
  // e's coordinates over the updates' dims without the axis: the line's first update and output.
  k.body.line("long dn_rest = e, dn_u0 = 0, dn_o0 = 0;");
  int64_t ustride = 1, uax = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    const int64_t ext = ud[static_cast<size_t>(d)];
    if (d == ax) {
      uax = ustride;
    } else {
      k.body.line("{ const long dn_c = dn_rest % " + L(ext) + "; dn_rest /= " + L(ext) + "; dn_u0 += dn_c * " + L(ustride) +
                  "; dn_o0 += dn_c * " + L(ds[static_cast<size_t>(d)]) + "; }");
    }
    ustride *= ext;
  }
  k.body.open("for (long dn_p = 0; dn_p < " + L(ud[static_cast<size_t>(ax)]) + "; ++dn_p)");
  k.body.line("const long dn_u = dn_u0 + dn_p * " + L(uax) + ";");
  wrapped("dn_c", "dn_u", axis_size);
  combine("dn_o0 + dn_c * " + L(ds[static_cast<size_t>(ax)]), upd + "[dn_u]");
  k.body.close();
}

}  // namespace dnnf::cg::opencl
