// The OpenCL renderer's row kernels: Softmax, LayerNorm, CumSum, ArgMax/ArgMin, TopK and
// InstanceNorm, one work-item per row (or a work-group, work_groups.cc) or per element.
#include <algorithm>
#include <cstring>
#include <functional>

#include "codegen/opencl/renderer.h"
#include "ir/errors.h"

namespace dnnf::cg::opencl {

// Softmax / LogSoftmax: one work-item per (outer, inner) row of `len` elements, or a
// work-group per row where the rows are long.
void Renderer::softmax(K& k, const AnchorStage& a, int64_t global[3], bool log) {
  const int64_t outer = a.args.at(0).i, len = a.args.at(1).i, inner = a.args.at(2).i;
  const std::string xl = "dn_x[l * " + L(inner) + "]";
  const std::string value = log ? xl + " - dn_max - log(dn_sum)" : "exp(" + xl + " - dn_max) / dn_sum";
  if (row_groups(len)) {
    group_head(k, outer * inner, global);
    k.body.line("const long dn_base = (dn_r / " + L(inner) + ") * " + L(len * inner) + " + dn_r % " + L(inner) + ";");
    k.body.line("__global const float* dn_x = " + p(a.args.at(3).value) + " + dn_base;");
    const std::string each = "for (long l = dn_lid; l < " + L(len) + "; l += " + L(kRowGroup) + ")";
    k.body.line("float dn_p = -INFINITY;");
    k.body.line(each + " dn_p = fmax(dn_p, " + xl + ");");
    group_reduce(k, "dn_p", "dn_max", "fmax(x, y)");
    k.body.line("dn_p = 0.0f;");
    k.body.line(each + " dn_p += exp(" + xl + " - dn_max);");
    group_reduce(k, "dn_p", "dn_sum", "x + y");
    k.body.open(each);
    k.body.line("const float acc = " + value + ";");
    finish_element(k, a, "dn_base + l * " + L(inner));
    k.body.close();
    return;
  }
  global[0] = outer * inner;
  k.body.line("const long dn_r = get_global_id(0);");
  k.body.line("if (dn_r >= " + L(outer * inner) + ") return;");
  k.body.line("const long dn_base = (dn_r / " + L(inner) + ") * " + L(len * inner) + " + dn_r % " + L(inner) + ";");
  k.body.line("__global const float* dn_x = " + p(a.args.at(3).value) + " + dn_base;");
  k.body.line("float dn_max = -INFINITY, dn_sum = 0.0f;");
  k.body.line("for (long l = 0; l < " + L(len) + "; ++l) dn_max = fmax(dn_max, " + xl + ");");
  k.body.line("for (long l = 0; l < " + L(len) + "; ++l) dn_sum += exp(" + xl + " - dn_max);");
  k.body.open("for (long l = 0; l < " + L(len) + "; ++l)");
  k.body.line("const float acc = " + value + ";");
  finish_element(k, a, "dn_base + l * " + L(inner));
  k.body.close();
}

// LayerNormalization: one work-item per row of `norm` elements, or a work-group per row
// where the rows are long (mean, then the variance about it, as the CPU kernel).
void Renderer::layer_norm(K& k, const AnchorStage& a, int64_t global[3]) {
  const int64_t rows = a.args.at(0).i, norm = a.args.at(1).i;
  const AnchorArg &scale = a.args.at(3), &bias = a.args.at(4), &mean = a.args.at(7), &inv = a.args.at(8);
  const std::string n = literal(static_cast<double>(norm), DType::F32, sp);
  const std::string eps = literal(a.args.at(5).f, DType::F32, sp);
  const bool group = row_groups(norm);
  std::string first = "0";
  if (group) {
    group_head(k, rows, global);
    first = "dn_lid";
  } else {
    global[0] = rows;
    k.body.line("const long dn_r = get_global_id(0);");
    k.body.line("if (dn_r >= " + L(rows) + ") return;");
  }
  const std::string each = "for (long l = " + first + "; l < " + L(norm) + "; l += " + (group ? L(kRowGroup) : "1") + ")";
  k.body.line("__global const float* dn_x = " + p(a.args.at(2).value) + " + dn_r * " + L(norm) + ";");
  if (group) {
    k.body.line("float dn_p = 0.0f;");
    k.body.line(each + " dn_p += dn_x[l];");
    group_reduce(k, "dn_p", "dn_sum", "x + y");
    k.body.line("const float dn_m = dn_sum / " + n + ";");
    k.body.line("dn_p = 0.0f;");
    k.body.line(each + " { const float d = dn_x[l] - dn_m; dn_p += d * d; }");
    group_reduce(k, "dn_p", "dn_var", "x + y");
  } else {
    k.body.line("float dn_mean = 0.0f, dn_var = 0.0f;");
    k.body.line(each + " dn_mean += dn_x[l];");
    k.body.line("const float dn_m = dn_mean / " + n + ";");
    k.body.line(each + " { const float d = dn_x[l] - dn_m; dn_var += d * d; }");
  }
  k.body.line("const float dn_inv = 1.0f / sqrt(dn_var / " + n + " + " + eps + ");");
  const std::string lead = group ? "if (dn_lid == 0) " : "";
  if (mean.kind == AnchorArg::Kind::Buffer && mean.value != kNoValue) k.body.line(lead + p(mean.value) + "[dn_r] = dn_m;");
  if (inv.kind == AnchorArg::Kind::Buffer && inv.value != kNoValue) k.body.line(lead + p(inv.value) + "[dn_r] = dn_inv;");
  k.body.open(each);
  std::string acc = "(dn_x[l] - dn_m) * dn_inv";
  if (scale.kind == AnchorArg::Kind::Buffer && scale.value != kNoValue) acc += " * " + p(scale.value) + "[l]";
  if (bias.kind == AnchorArg::Kind::Buffer && bias.value != kNoValue) acc += " + " + p(bias.value) + "[l]";
  k.body.line("const float acc = " + acc + ";");
  finish_element(k, a, "dn_r * " + L(norm) + " + l");
  k.body.close();
}

// Per-row kernels of irregular anchors: one work-item per (outer, inner) row of `len`.
void Renderer::row_head(K& k, int64_t outer, int64_t len, int64_t inner, int64_t global[3]) {
  global[0] = outer * inner;
  k.body.line("const long dn_r = get_global_id(0);");
  k.body.line("if (dn_r >= " + L(outer * inner) + ") return;");
  k.body.line("const long dn_o = dn_r / " + L(inner) + ", dn_i = dn_r % " + L(inner) + ";");
  k.body.line("const long dn_base = dn_o * " + L(len * inner) + " + dn_i;");
}

void Renderer::cumsum(K& k, const AnchorStage& a, int64_t global[3]) {  // [outer, len, inner, x, y, exclusive, reverse, ep]
  const int64_t outer = a.args.at(0).i, len = a.args.at(1).i, inner = a.args.at(2).i;
  const bool excl = a.args.at(5).i != 0, rev = a.args.at(6).i != 0;
  row_head(k, outer, len, inner, global);
  const DType dt = a.args.at(3).dtype;
  if (dt != DType::F32) {  // no epilogue; integers wrap (summed unsigned), f64 as is
    const std::string t = cltype(dt, sp), u = is_integer(dt) && t[0] != 'u' ? "u" + t : t;
    k.body.line(u + " dn_s = 0;");
    k.body.open("for (long dn_t = 0; dn_t < " + L(len) + "; ++dn_t)");
    k.body.line(std::string("const long dn_at = dn_base + (") + (rev ? L(len - 1) + " - dn_t" : "dn_t") + ") * " +
                L(inner) + ";");
    k.body.line("const " + u + " dn_v = (" + u + ")" + p(a.args.at(3).value) + "[dn_at];");
    const std::string y = p(a.y) + "[dn_at] = (" + t + ")dn_s;";
    k.body.line(excl ? y + " dn_s += dn_v;" : "dn_s += dn_v; " + y);
    k.body.close();
    return;
  }
  k.body.line("float dn_s = 0.0f;");
  k.body.open("for (long dn_t = 0; dn_t < " + L(len) + "; ++dn_t)");
  k.body.line(std::string("const long l = ") + (rev ? L(len - 1) + " - dn_t" : "dn_t") + ";");
  k.body.line("const float dn_v = " + p(a.args.at(3).value) + "[dn_base + l * " + L(inner) + "];");
  k.body.line(excl ? "const float acc = dn_s; dn_s += dn_v;" : "dn_s += dn_v; const float acc = dn_s;");
  finish_element(k, a, "dn_base + l * " + L(inner));
  k.body.close();
}

void Renderer::arg_reduce(K& k, const AnchorStage& a, int64_t global[3]) {  // [is_max, outer, len, inner, x, y, last]
  const bool mx = a.args.at(0).i != 0, last = a.args.at(6).i != 0;
  const int64_t outer = a.args.at(1).i, len = a.args.at(2).i, inner = a.args.at(3).i;
  row_head(k, outer, len, inner, global);
  const DType dt = a.args.at(4).dtype;
  if (dt != DType::F32) {  // integers: exact comparisons, no NaN
    const std::string t = cltype(dt, sp);
    k.body.line("__global const " + t + "* dn_x = " + p(a.args.at(4).value) + " + dn_base;");
    k.body.line("long bi = 0;");
    k.body.open("for (long l = 1; l < " + L(len) + "; ++l)");
    k.body.line("const " + t + " v = dn_x[l * " + L(inner) + "], b = dn_x[bi * " + L(inner) + "];");
    k.body.line(std::string("if (v != b ? v ") + (mx ? ">" : "<") + " b : " + (last ? "1" : "0") + ") bi = l;");
    k.body.close();
    k.body.line(p(a.args.at(5).value) + "[dn_o * " + L(inner) + " + dn_i] = bi;");
    return;
  }
  k.body.line("__global const float* dn_x = " + p(a.args.at(4).value) + " + dn_base;");
  k.body.line("long bi = 0;");
  k.body.open("for (long l = 1; l < " + L(len) + "; ++l)");
  // the CPU kernel's arg_better_scalar: NaN wins, then the better value, then the index rule
  k.body.line("const float v = dn_x[l * " + L(inner) + "], b = dn_x[bi * " + L(inner) + "];");
  k.body.line("const bool nv = isnan(v), nb = isnan(b);");
  k.body.line(std::string("const bool better = (nv || nb) ? (nv && (!nb || ") + (last ? "l > bi" : "l < bi") +
              ")) : (v != b ? v " + (mx ? ">" : "<") + " b : " + (last ? "l > bi" : "l < bi") + ");");
  k.body.line("if (better) bi = l;");
  k.body.close();
  k.body.line(p(a.args.at(5).value) + "[dn_o * " + L(inner) + " + dn_i] = bi;");
}

void Renderer::topk(K& k, const AnchorStage& a, int64_t global[3]) {  // [outer, len, inner, k, largest, sorted, x, v, i]
  const int64_t outer = a.args.at(0).i, len = a.args.at(1).i, inner = a.args.at(2).i, kk = a.args.at(3).i;
  const bool largest = a.args.at(4).i != 0;
  if (kk < 0 || kk > len)
    throw UnsupportedOperatorError("TopK with k = " + std::to_string(kk) + " outside [0, " + std::to_string(len) +
                                   "] (node '" + a.node->name + "')");
  // One work-item per element (row, l): its rank in the CPU kernel's strict order (NaN first
  // when largest, then the value, then the index), found by comparing it with every element of
  // its row; the ones ranked below k are the result, in rank order. The ranks of a row are
  // distinct, so no two items store the same place.
  global[0] = outer * inner * len;
  elementwise_head(k, global[0]);
  k.body.line("const long l = e % " + L(len) + ", dn_r = e / " + L(len) + ";");
  k.body.line("const long dn_o = dn_r / " + L(inner) + ", dn_i = dn_r % " + L(inner) + ";");
  // Integers have no NaN: nv and nw are false.
  const DType dt = a.args.at(6).dtype;
  const std::string t = dt == DType::F32 ? "float" : cltype(dt, sp), nan = dt == DType::F32 ? "isnan" : "0 && ";
  k.body.line("__global const " + t + "* dn_x = " + p(a.args.at(6).value) + " + dn_o * " + L(len * inner) + " + dn_i;");
  k.body.line("const " + t + " v = dn_x[l * " + L(inner) + "]; const bool nv = " + nan + "(v); long rank = 0;");
  k.body.open("for (long m = 0; m < " + L(len) + "; ++m)");
  k.body.line("const " + t + " w = dn_x[m * " + L(inner) + "]; const bool nw = " + nan + "(w);");
  k.body.line(std::string("rank += (nw != nv) ? ") + (largest ? "nw" : "nv") + " : (!nw && w != v) ? (w " +
              (largest ? ">" : "<") + " v) : (m < l);");
  k.body.close();
  k.body.open("if (rank < " + L(kk) + ")");
  k.body.line("const long dn_at = (dn_o * " + L(kk) + " + rank) * " + L(inner) + " + dn_i;");
  k.body.line(p(a.args.at(7).value) + "[dn_at] = v; " + p(a.args.at(8).value) + "[dn_at] = l;");
  k.body.close();
}

void Renderer::instance_norm(K& k, const AnchorStage& a, int64_t global[3]) {  // [N, C, S, x, scale, bias, eps, y, ep]
  const int64_t N = a.args.at(0).i, C = a.args.at(1).i, S = a.args.at(2).i;
  global[0] = N * C;
  k.body.line("const long dn_r = get_global_id(0);");
  k.body.line("if (dn_r >= " + L(N * C) + ") return;");
  k.body.line("__global const float* dn_x = " + p(a.args.at(3).value) + " + dn_r * " + L(S) + ";");
  k.body.line("float dn_mean = 0.0f, dn_var = 0.0f;");
  k.body.line("for (long l = 0; l < " + L(S) + "; ++l) dn_mean += dn_x[l];");
  k.body.line("dn_mean /= " + literal(static_cast<double>(std::max<int64_t>(S, 1)), DType::F32, sp) + ";");
  k.body.line("for (long l = 0; l < " + L(S) + "; ++l) { const float d = dn_x[l] - dn_mean; dn_var += d * d; }");
  k.body.line("const float dn_inv = 1.0f / sqrt(dn_var / " + literal(static_cast<double>(std::max<int64_t>(S, 1)), DType::F32, sp) +
              " + " + literal(a.args.at(6).f, DType::F32, sp) + ");");
  k.body.line("const long dn_c = dn_r % " + L(C) + ";");
  k.body.open("for (long l = 0; l < " + L(S) + "; ++l)");
  k.body.line("const float acc = (dn_x[l] - dn_mean) * dn_inv * " + p(a.args.at(4).value) + "[dn_c] + " +
              p(a.args.at(5).value) + "[dn_c];");
  finish_element(k, a, "dn_r * " + L(S) + " + l");
  k.body.close();
}

}  // namespace dnnf::cg::opencl
