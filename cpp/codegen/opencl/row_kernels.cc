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
  const std::string T = cltype(a.args.at(3).dtype, sp);  // float, or double (no epilogue then)
  const std::string zero = a.args.at(3).dtype == DType::F64 ? "0.0" : "0.0f";
  const std::string xl = "dn_x[l * " + L(inner) + "]";
  const std::string value = log ? xl + " - dn_max - log(dn_sum)" : "exp(" + xl + " - dn_max) / dn_sum";
  if (row_groups(len) && a.args.at(3).dtype == DType::F32) {  // (group_reduce combines floats)
    group_head(k, outer * inner, global);
    k.body.line("const long dn_base = (dn_r / " + L(inner) + ") * " + L(len * inner) + " + dn_r % " + L(inner) + ";");
    k.body.line("__global const " + T + "* dn_x = " + p(a.args.at(3).value) + " + dn_base;");
    const std::string each = "for (long l = dn_lid; l < " + L(len) + "; l += " + L(kRowGroup) + ")";
    k.body.line(T + " dn_p = -INFINITY;");
    k.body.line(each + " dn_p = fmax(dn_p, " + xl + ");");
    group_reduce(k, "dn_p", "dn_max", "fmax(x, y)");
    k.body.line("dn_p = " + zero + ";");
    k.body.line(each + " dn_p += exp(" + xl + " - dn_max);");
    group_reduce(k, "dn_p", "dn_sum", "x + y");
    k.body.open(each);
    k.body.line("const " + T + " acc = " + value + ";");
    finish_element(k, a, "dn_base + l * " + L(inner));
    k.body.close();
    return;
  }
  global[0] = outer * inner;
  k.body.line("const long dn_r = get_global_id(0);");
  k.body.line("if (dn_r >= " + L(outer * inner) + ") return;");
  k.body.line("const long dn_base = (dn_r / " + L(inner) + ") * " + L(len * inner) + " + dn_r % " + L(inner) + ";");
  k.body.line("__global const " + T + "* dn_x = " + p(a.args.at(3).value) + " + dn_base;");
  k.body.line(T + " dn_max = -INFINITY, dn_sum = " + zero + ";");
  k.body.line("for (long l = 0; l < " + L(len) + "; ++l) dn_max = fmax(dn_max, " + xl + ");");
  k.body.line("for (long l = 0; l < " + L(len) + "; ++l) dn_sum += exp(" + xl + " - dn_max);");
  k.body.open("for (long l = 0; l < " + L(len) + "; ++l)");
  k.body.line("const " + T + " acc = " + value + ";");
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
  const bool prod = a.node->op == OpKind::CumProd;
  if (dt != DType::F32 || prod) {  // no epilogue; integers wrap (computed unsigned), floats as is
    const std::string t = cltype(dt, sp), u = is_integer(dt) && t[0] != 'u' ? "u" + t : t;
    k.body.line(u + std::string(" dn_s = ") + (prod ? "1;" : "0;"));
    k.body.open("for (long dn_t = 0; dn_t < " + L(len) + "; ++dn_t)");
    k.body.line(std::string("const long dn_at = dn_base + (") + (rev ? L(len - 1) + " - dn_t" : "dn_t") + ") * " +
                L(inner) + ";");
    k.body.line("const " + u + " dn_v = (" + u + ")" + p(a.args.at(3).value) + "[dn_at];");
    const std::string y = p(a.y) + "[dn_at] = (" + t + ")dn_s;";
    const std::string step = prod ? "dn_s = (" + u + ")(dn_s * dn_v);" : "dn_s += dn_v;";
    k.body.line(excl ? y + " " + step : step + " " + y);
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
  const DType dt = a.args.at(6).dtype;
  if (dt == DType::F32 && len >= kTopKSelectMin && len < (int64_t{1} << 31) && kk > 0 &&
      opt.max_work_group >= kRowGroup && opt.local_mem_bytes >= 260 * 4) {
    topk_select(k, a, global);
    return;
  }
  // One work-item per element (row, l): its rank in the CPU kernel's strict order (NaN first
  // when largest, then the value, then the index), found by comparing it with every element of
  // its row; the ones ranked below k are the result, in rank order. The ranks of a row are
  // distinct, so no two items store the same place.
  global[0] = outer * inner * len;
  elementwise_head(k, global[0]);
  k.body.line("const long l = e % " + L(len) + ", dn_r = e / " + L(len) + ";");
  k.body.line("const long dn_o = dn_r / " + L(inner) + ", dn_i = dn_r % " + L(inner) + ";");
  // Integers have no NaN: nv and nw are false.
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

// TopK over long float rows in three kernels instead of one item's pass over its row per
// element (Faster R-CNN's 1000 best of 160K anchors: 36 ms on an H200, 160K x 160K comparisons).
// Each element's key is a uint whose order is the CPU kernel's strict order less the index
// (larger is better: NaN first when largest, last when smallest; -0 as +0). (1) A work-group
// per row finds the k-th largest key T by radix selection, 8 bits at a time (a histogram of the
// keys under the prefix found so far, in local memory). (2) An item per element appends the
// elements whose key is T or more (at least k, more where T ties) to the row's candidates in
// scratch. (3) An item per candidate ranks it among the candidates by key, then index (every
// element better than it is one), and stores it at its rank if that is below k: the CPU
// kernel's result, whatever order the candidates were appended in.
void Renderer::topk_select(K& k, const AnchorStage& a, int64_t global[3]) {
  const int64_t outer = a.args.at(0).i, len = a.args.at(1).i, inner = a.args.at(2).i, kk = a.args.at(3).i;
  const bool largest = a.args.at(4).i != 0;
  const int64_t rows = outer * inner;
  const int64_t at = (cur_scratch + 255) / 256 * 256;
  auto scratch = [&](const std::string& t, int64_t off) {
    return "((__global " + t + "*)(dnnf_scratch + " + std::to_string(at + off) + "))";
  };
  const std::string thr = scratch("uint", 0), count = scratch("uint", rows * 4), keys = scratch("uint", rows * 8),
                    idx = scratch("int", rows * 8 + rows * len * 4);
  scratch_end = std::max(scratch_end, at + rows * 8 + rows * len * 8);
  // What runs writes: the thresholds and counts, and at least k candidates a row (more where
  // the k-th key ties).
  split_bytes[cur_block] += rows * 8 + rows * kk * 8;
  const std::string x = p(a.args.at(6).value);
  auto row_of = [&](const std::string& r) {
    k.body.line("const long dn_o = " + r + " / " + L(inner) + ", dn_i = " + r + " % " + L(inner) + ";");
    k.body.line("__global const float* dn_x = " + x + " + dn_o * " + L(len * inner) + " + dn_i;");
  };
  // dn_kv: the key of float `v`.
  auto key_of_v = [&] {
    k.body.line("const uint dn_u = as_uint(v == 0.0f ? 0.0f : v), dn_ou = (dn_u & 0x80000000u) ? ~dn_u : (dn_u | 0x80000000u);");
    k.body.line(std::string("const uint dn_kv = isnan(v) ? ") + (largest ? "0xFFFFFFFFu : dn_ou;" : "0u : ~dn_ou;"));
  };
  const K base = k;
  // (1) The threshold: a work-group per row.
  global[0] = rows * kRowGroup;
  shape.local[0] = kRowGroup;
  shape.local_bytes = 258 * 4;
  k.body.line("__local uint dn_hist[256], dn_pick[2];");
  k.body.line("const long dn_r = get_group_id(0); const int dn_lid = (int)get_local_id(0);");
  row_of("dn_r");
  k.body.line("uint dn_prefix = 0u, dn_need = " + std::to_string(kk) + "u;");
  k.body.open("for (int dn_shift = 24; dn_shift >= 0; dn_shift -= 8)");
  k.body.line("for (int h = dn_lid; h < 256; h += " + std::to_string(kRowGroup) + ") dn_hist[h] = 0u;");
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  k.body.line("const uint dn_mask = dn_shift == 24 ? 0u : (0xFFFFFFFFu << (dn_shift + 8));");
  k.body.open("for (long l = dn_lid; l < " + L(len) + "; l += " + L(kRowGroup) + ")");
  k.body.line("const float v = dn_x[l * " + L(inner) + "];");
  key_of_v();
  k.body.line("if ((dn_kv & dn_mask) == dn_prefix) atomic_inc(&dn_hist[(dn_kv >> dn_shift) & 255u]);");
  k.body.close();
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  k.body.open("if (dn_lid == 0)");  // the bucket, from the top, in which the need-th best key lies
  k.body.line("int b = 255; uint need = dn_need;");
  k.body.line("while (b > 0 && dn_hist[b] < need) { need -= dn_hist[b]; --b; }");
  k.body.line("dn_pick[0] = dn_prefix | ((uint)b << dn_shift); dn_pick[1] = need;");
  k.body.close();
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  k.body.line("dn_prefix = dn_pick[0]; dn_need = dn_pick[1];");
  k.body.line("barrier(CLK_LOCAL_MEM_FENCE);");
  k.body.close();
  k.body.line("if (dn_lid == 0) { " + thr + "[dn_r] = dn_prefix; " + count + "[dn_r] = 0u; }");
  const std::string name = k.name;
  k.name += "_select";
  int64_t g1[3] = {global[0], 1, 1};
  finish(k, g1);
  out.launches.back().block = cur_block;
  // (2) The candidates.
  k = base;
  k.name = name + "_gather";
  shape = Shape{};
  g1[0] = rows * len;
  elementwise_head(k, g1[0]);
  k.body.line("const long l = e % " + L(len) + ", dn_r = e / " + L(len) + ";");
  row_of("dn_r");
  k.body.line("const float v = dn_x[l * " + L(inner) + "];");
  key_of_v();
  k.body.open("if (dn_kv >= " + thr + "[dn_r])");
  k.body.line("const uint dn_s = atomic_inc(&" + count + "[dn_r]);");
  k.body.line(keys + "[dn_r * " + L(len) + " + dn_s] = dn_kv; " + idx + "[dn_r * " + L(len) + " + dn_s] = (int)l;");
  k.body.close();
  finish(k, g1);
  out.launches.back().block = cur_block;
  // (3) The ranks, in the stage's own kernel.
  k = base;
  k.name = name;
  shape = Shape{};
  global[0] = rows * len;
  elementwise_head(k, global[0]);
  k.body.line("const long dn_s = e % " + L(len) + ", dn_r = e / " + L(len) + ";");
  k.body.line("const uint dn_n = " + count + "[dn_r];");
  k.body.line("if (dn_s >= dn_n) return;");
  row_of("dn_r");
  k.body.line("__global const uint* dn_ks = " + keys + " + dn_r * " + L(len) + ";");
  k.body.line("__global const int* dn_ls = " + idx + " + dn_r * " + L(len) + ";");
  k.body.line("const uint dn_kv = dn_ks[dn_s]; const int l = dn_ls[dn_s]; long rank = 0;");
  k.body.line("for (uint m = 0; m < dn_n; ++m) rank += dn_ks[m] > dn_kv || (dn_ks[m] == dn_kv && dn_ls[m] < l);");
  k.body.open("if (rank < " + L(kk) + ")");
  k.body.line("const long dn_at = (dn_o * " + L(kk) + " + rank) * " + L(inner) + " + dn_i;");
  k.body.line(p(a.args.at(7).value) + "[dn_at] = dn_x[(long)l * " + L(inner) + "]; " + p(a.args.at(8).value) +
              "[dn_at] = l;");
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
