// The OpenCL renderer's GridSample kernel: one work-item per output element, its taps computed
// as the CPU kernel (prelude/grid_sample.h) computes them, then the fused epilogue.
#include <string>
#include <vector>

#include "codegen/opencl/renderer.h"

namespace dnnf::cg::opencl {

// GridSample: [N, C, nd, in dims (3), out dims (3), x, grid, mode, padding, align_corners, y,
// ep]. Per axis (sizes, strides, mode and padding are constants of the program): the
// coordinate as grid_sample.h's grid_axis_taps makes it, then its 1, 2 or 4 taps, an offset of
// -1 reading zero; the taps are summed innermost axis first. Reflection in double where the
// device has it.
void Renderer::grid_sample(K& k, const AnchorStage& a, int64_t global[3]) {
  const int64_t N = a.args.at(0).i, C = a.args.at(1).i, nd = a.args.at(2).i;
  int64_t din[3], dout[3], plane = 1, points = 1;
  for (int i = 0; i < 3; ++i) din[i] = a.args.at(3 + i).i, dout[i] = a.args.at(6 + i).i;
  for (int64_t i = 0; i < nd; ++i) plane *= din[i], points *= dout[i];
  const int64_t mode = a.args.at(11).i, pad = a.args.at(12).i;
  const bool align = a.args.at(13).i != 0;
  const std::string real = sp.fp64 ? "double" : "float", x = p(a.args.at(9).value), grid = p(a.args.at(10).value);
  global[0] = N * C * points;
  elementwise_head(k, global[0]);
  k.body.line("const long pt = e % " + L(points) + ", ch = (e / " + L(points) + ") % " + L(C) + ", n = e / " +
              L(points * C) + ";");
  k.body.line("__global const float* g = " + grid + " + (n * " + L(points) + " + pt) * " + L(nd) + ";");
  k.body.line("__global const float* img = " + x + " + (n * " + L(C) + " + ch) * " + L(plane) + ";");
  k.body.line("int isnan_pt = 0;");
  const int taps = mode == 1 ? 1 : mode == 0 ? 2 : 4;
  // reflect(v) into [lo, hi] (NaN if v is not finite), as grid_sample.h's grid_reflect
  auto reflect = [&](const std::string& v, double lo, double hi) {
    const std::string l = "(" + real + ")" + std::to_string(lo), h = "(" + real + ")" + std::to_string(hi),
                      r = "(" + real + ")" + std::to_string(hi - lo);
    if (hi - lo <= 0) return "(isfinite(" + v + ") ? " + l + " : (" + real + ")NAN)";
    return "(!isfinite(" + v + ") ? (" + real + ")NAN : " + v + " < " + l + " ? (fmod(" + l + " - " + v + ", 2 * " + r +
           ") < " + r + " ? " + l + " + fmod(" + l + " - " + v + ", 2 * " + r + ") : " + h + " - (fmod(" + l + " - " + v +
           ", 2 * " + r + ") - " + r + ")) : " + v + " > " + h + " ? (fmod(" + v + " - " + h + ", 2 * " + r + ") < " + r +
           " ? " + h + " - fmod(" + v + " - " + h + ", 2 * " + r + ") : " + l + " + (fmod(" + v + " - " + h + ", 2 * " + r +
           ") - " + r + ")) : " + v + ")";
  };
  int64_t stride = 1;
  std::vector<int64_t> strides(static_cast<size_t>(nd));
  for (int64_t i = nd - 1; i >= 0; --i) strides[static_cast<size_t>(i)] = stride, stride *= din[i];
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t d = din[i];
    const std::string s = std::to_string(i), D = std::to_string(d);
    const double lo = align ? 0.0 : -0.5, hi = align ? d - 1.0 : d - 0.5;
    k.body.line("long o" + s + "[4]; float w" + s + "[4];");
    k.body.open("");
    k.body.line("const float v = g[" + std::to_string(nd - 1 - i) + "];");
    k.body.line(align ? "float xx = (v + 1.0f) / 2.0f * " + std::to_string(d - 1) + ".0f;"
                      : "float xx = ((v + 1.0f) * " + D + ".0f - 1.0f) / 2.0f;");
    if (mode == 1) k.body.line("xx = rint(xx);");
    k.body.open("if (xx < " + std::to_string(lo) + "f || xx > " + std::to_string(hi) + "f)");
    if (pad == 1 && mode != 2) k.body.line("xx = fmin(fmax(xx, 0.0f), " + std::to_string(d - 1) + ".0f);");
    if (pad == 2) k.body.line("{ const " + real + " xr = xx; xx = (float)" + reflect("xr", lo, hi) + "; }");
    k.body.close();
    if (pad == 1 && mode == 2) k.body.line("if (!isnan(xx)) xx = fmin(fmax(xx, -4.0f), " + std::to_string(d + 3) + ".0f);");
    k.body.line("if (isnan(xx)) { isnan_pt = 1; xx = 0.0f; }");
    k.body.line("const int inf = isinf(xx);");
    if (mode == 1) {
      k.body.line("const " + real + " base = trunc((" + real + ")xx);");
      k.body.line("w" + s + "[0] = 1.0f;");
    } else {
      k.body.line(real + " base = floor((" + real + ")xx);");
      k.body.line("const float f = inf ? 0.0f : xx - (float)base;");
      if (mode == 0) {
        k.body.line("w" + s + "[0] = 1.0f - f; w" + s + "[1] = f;");
      } else {
        k.body.line("const float ca = -0.75f, u = f + 1.0f, r = 1.0f - f, q = 2.0f - f;");
        k.body.line("w" + s + "[0] = ((ca * u - 5 * ca) * u + 8 * ca) * u - 4 * ca;");
        k.body.line("w" + s + "[1] = ((ca + 2) * f - (ca + 3)) * f * f + 1.0f;");
        k.body.line("w" + s + "[2] = ((ca + 2) * r - (ca + 3)) * r * r + 1.0f;");
        k.body.line("w" + s + "[3] = ((ca * q - 5 * ca) * q + 8 * ca) * q - 4 * ca;");
        k.body.line("base -= 1;");
      }
    }
    k.body.open("for (int t = 0; t < " + std::to_string(taps) + "; ++t)");
    k.body.line("const " + real + " bt = base + t;");
    if (pad == 2) {
      k.body.line("const " + real + " rf = " + reflect("bt", lo, hi) + ";");
      k.body.line("long j = isnan(rf) ? 0L : (long)trunc(rf);");
      k.body.line("j = j < 0L ? 0L : j > " + std::to_string(d - 1) + "L ? " + std::to_string(d - 1) + "L : j;");
    } else {
      k.body.line("long j = (long)fmin(fmax(bt, (" + real + ")-8), (" + real + ")" + std::to_string(d + 8) + ");");
      if (pad == 0)
        k.body.line("if (inf || j < 0L || j >= " + D + "L) j = -1L;");
      else
        k.body.line("j = j < 0L ? 0L : j > " + std::to_string(d - 1) + "L ? " + std::to_string(d - 1) + "L : j;");
    }
    k.body.line("o" + s + "[t] = j < 0L ? -1L : j * " + L(strides[static_cast<size_t>(i)]) + ";");
    k.body.close();
    k.body.close();
  }
  // the sum, innermost axis first: acc over axis 0 of (acc1 over axis 1 of (acc2 over axis 2))
  k.body.line("float acc = 0.0f;");
  std::string offset = "";
  std::vector<std::string> accs = {"acc", "acc1", "acc2"};
  for (int64_t i = 0; i < nd; ++i) {
    const std::string s = std::to_string(i);
    k.body.open("for (int t" + s + " = 0; t" + s + " < " + std::to_string(taps) + "; ++t" + s + ")");
    k.body.line("if (o" + s + "[t" + s + "] < 0L) continue;");
    offset += (offset.empty() ? "" : " + ") + ("o" + s + "[t" + s + "]");
    if (i + 1 < nd) k.body.line("float " + accs[static_cast<size_t>(i + 1)] + " = 0.0f;");
  }
  k.body.line(accs[static_cast<size_t>(nd - 1)] + " += w" + std::to_string(nd - 1) + "[t" + std::to_string(nd - 1) +
              "] * img[" + offset + "];");
  for (int64_t i = nd - 1; i >= 0; --i) {
    k.body.close();
    if (i > 0)
      k.body.line(accs[static_cast<size_t>(i - 1)] + " += w" + std::to_string(i - 1) + "[t" + std::to_string(i - 1) +
                  "] * " + accs[static_cast<size_t>(i)] + ";");
  }
  k.body.line("if (isnan_pt) acc = NAN;");
  finish_element(k, a, "e");
}

}  // namespace dnnf::cg::opencl
