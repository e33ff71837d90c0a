// The OpenCL renderer (paper §4.4 code generation for the mobile GPU): spells the kernel plan
// of every block as OpenCL C NDRange kernels, one per stage (a pointwise loop nest, a
// transpose, an anchor with its epilogue), launched in order on an in-order queue, which is
// the barrier between a block's stages. One work-item computes one output element (or one
// row of a row kernel); the fused epilogue runs on it before the store, as in the CPU target.
// Buffers are the CPU target's: graph inputs, outputs and constants, and the arena and block
// scratch, which kernels offset themselves (the OPENCL-ABI note of opencl_module.h).
#include <algorithm>
#include <map>

#include "codegen/counts.h"
#include "codegen/module.h"
#include "codegen/opencl/spell.h"
#include "codegen/opencl_module.h"
#include "ir/errors.h"

namespace dnnf {

namespace cg::opencl {

namespace {

constexpr int64_t kGroup = 64;  // work-items per group of 1-D launches (rounded-up global size)

struct Renderer {
  const Graph& g;
  const ModulePlan& mp;
  Spelling sp;
  OpenclModule& out;
  std::string kernels;

  // A kernel under construction: its value arguments (graph inputs, outputs, constants)
  // and its body.
  struct K {
    std::string name;
    std::vector<ValueId> values;
    Code body;
    std::map<ValueId, std::string> ptr;  // value -> the kernel's name of its memory
  };

  ValueId located_value(const Location& l) const {
    switch (l.kind) {
      case Location::Kind::GraphInput: return g.inputs().at(static_cast<size_t>(l.at));
      case Location::Kind::GraphOutput: return g.outputs().at(static_cast<size_t>(l.at));
      case Location::Kind::Constant: return mp.constants.at(static_cast<size_t>(l.at));
      default: return kNoValue;
    }
  }

  // Declares p<v> for every buffer of the block, as the CPU renderer does.
  void declare(K& k, const BlockPlan& b) {
    k.body.indent = 1;
    for (const Buffer& buf : b.buffers) {
      const std::string t = cltype(buf.dtype, sp);
      std::string at;
      switch (buf.where.kind) {
        case Location::Kind::Arena: at = "dnnf_arena + " + std::to_string(buf.where.at); break;
        case Location::Kind::Scratch: at = "dnnf_scratch + " + std::to_string(buf.where.at); break;
        default: {
          const ValueId v = located_value(buf.where);
          auto it = std::find(k.values.begin(), k.values.end(), v);
          size_t i = static_cast<size_t>(it - k.values.begin());
          if (it == k.values.end()) k.values.push_back(v);
          at = "dnnf_v" + std::to_string(i);
        }
      }
      k.body.line("__global " + t + "* p" + std::to_string(buf.value) + " = (__global " + t + "*)(" + at + ");");
    }
  }

  void finish(K& k, int dims, const int64_t (&global)[3], bool round_up) {
    std::string params = "__global int* dnnf_err, __global uchar* dnnf_arena, __global uchar* dnnf_scratch";
    for (size_t i = 0; i < k.values.size(); ++i) params += ", __global uchar* dnnf_v" + std::to_string(i);
    kernels += "__kernel void " + k.name + "(" + params + ") {\n" + k.body.text + "}\n\n";
    OpenclLaunch l;
    l.kernel = k.name;
    l.dims = dims;
    for (int d = 0; d < dims; ++d) l.global[d] = std::max<int64_t>(1, global[d]);
    if (round_up) l.global[0] = (l.global[0] + kGroup - 1) / kGroup * kGroup;
    OpenclArg a;
    for (OpenclArg::Kind kind : {OpenclArg::Kind::ErrorFlag, OpenclArg::Kind::Arena, OpenclArg::Kind::Scratch}) {
      a.kind = kind;
      l.args.push_back(a);
    }
    for (ValueId v : k.values) {
      a.kind = OpenclArg::Kind::Value;
      a.value = v;
      l.args.push_back(a);
    }
    out.launches.push_back(std::move(l));
  }

  void loop(K& k, const LoopStage& l) {
    k.body.line("const long gid = get_global_id(0);");
    k.body.line("if (gid >= " + std::to_string(l.total) + "L) return;");
    if (l.flat) {
      k.body.line("const long j = gid;");
    } else {
      k.body.line("const long o = gid / " + std::to_string(l.row_len) + "L, j = gid % " + std::to_string(l.row_len) + "L;");
      k.body.line("(void)o;");
      for (const LoopStage::IndexVar& v : l.index_vars)
        k.body.line("const long i" + std::to_string(v.k) + " = " +
                    (v.zero ? std::string("0") : "(o / " + std::to_string(v.div) + "L) % " + std::to_string(v.mod) + "L") + ";");
    }
    render_program(l.body, sp, k.body);
  }

  void transpose(K& k, const TransposeStage& t) {
    const size_t r = t.dims.size();
    std::vector<int64_t> in_stride(r, 1), od(r);
    for (size_t d = r - 1; d > 0; --d) in_stride[d - 1] = in_stride[d] * t.dims[d];
    int64_t total = 1;
    for (size_t d = 0; d < r; ++d) {
      od[d] = t.dims[static_cast<size_t>(t.perm[d])];
      total *= od[d];
    }
    k.body.line("const long gid = get_global_id(0);");
    k.body.line("if (gid >= " + std::to_string(total) + "L) return;");
    k.body.line("long rest = gid, src = 0;");
    for (size_t d = r; d-- > 0;) {
      k.body.line("src += (rest % " + std::to_string(od[d]) + "L) * " +
                  std::to_string(in_stride[static_cast<size_t>(t.perm[d])]) + "L; rest /= " + std::to_string(od[d]) + "L;");
    }
    k.body.line("p" + std::to_string(t.out) + "[gid] = p" + std::to_string(t.in) + "[src];");
  }

  // The anchor's result for element `e` is in `acc`: the epilogue (over the [R, C] view:
  // row = e / C, j = e % C) and the store.
  void finish_element(K& k, const AnchorStage& a, const std::string& e) {
    const std::string y = a.y != kNoValue ? "p" + std::to_string(a.y)
                                          : "((__global float*)(dnnf_scratch + " + std::to_string(a.y_scratch) + "))";
    if (!a.ep.present) {
      k.body.line(y + "[" + e + "] = acc;");
      return;
    }
    k.body.open("");
    k.body.line("const long row = (" + e + ") / " + std::to_string(a.ep.C) + "L, j = (" + e + ") % " +
                std::to_string(a.ep.C) + "L;");
    k.body.line("(void)row; (void)j;");
    k.body.line("float v = acc;");
    render_program(a.ep.prog, sp, k.body);
    if (!a.ep.stores) k.body.line(y + "[" + e + "] = v;");
    k.body.close();
  }

  static int64_t prod(const std::vector<int64_t>& v, size_t from, size_t to) {
    int64_t n = 1;
    for (size_t i = from; i < to; ++i) n *= v[i];
    return n;
  }

  std::string p(ValueId v) const { return "p" + std::to_string(v); }
  std::string L(int64_t v) const { return std::to_string(v) + "L"; }

  // One element per work-item over `total`: `e` is the element.
  void elementwise_head(K& k, int64_t total) {
    k.body.line("const long e = get_global_id(0);");
    k.body.line("if (e >= " + L(total) + ") return;");
  }

  int64_t out_numel(const AnchorStage& a) const { return g.value(a.node->outputs[0]).type.numel(); }

  void gemm(K& k, const AnchorStage& a, int64_t global[3]) {
    const GemmCall& c = a.gemm;
    global[0] = c.N;
    global[1] = c.M;
    global[2] = a.batch;
    k.body.line("const long dn_n = get_global_id(0), dn_m = get_global_id(1), b = get_global_id(2);");
    k.body.line("if (dn_n >= " + L(c.N) + " || dn_m >= " + L(c.M) + ") return;");
    const std::string offa = c.batched ? index(a.offset_a, a.batch_vars) : "0L";
    const std::string offb = c.batched ? index(a.offset_b, a.batch_vars) : "0L";
    k.body.line("(void)b;");
    k.body.line("__global const float* dn_a = " + p(c.a) + " + (" + offa + ") + dn_m * " + L(c.rs_a) + ";");
    k.body.line("__global const float* dn_b = " + p(c.b) + " + (" + offb + ") + dn_n * " + L(c.cs_b) + ";");
    k.body.line("float acc = 0.0f;");
    k.body.line("for (long dn_k = 0; dn_k < " + L(c.K) + "; ++dn_k) acc = fma(dn_a[dn_k * " + L(c.cs_a) +
                "], dn_b[dn_k * " + L(c.rs_b) + "], acc);");
    finish_element(k, a, "(b * " + L(c.M) + " + dn_m) * " + L(c.N) + " + dn_n");
  }

  void conv(K& k, const AnchorStage& a, int64_t global[3]) {
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
    global[0] = N * M * pixels;
    elementwise_head(k, global[0]);
    k.body.line("const long dn_pix = e % " + L(pixels) + ", dn_m = (e / " + L(pixels) + ") % " + L(M) +
                ", dn_img = e / " + L(pixels * M) + ";");
    k.body.line("const long dn_g = dn_m / " + L(M / G) + ";");
    // Output coordinates, last dim fastest.
    k.body.line("long dn_rest = dn_pix;");
    for (int d = nd; d-- > 0;)
      k.body.line("const long dn_o" + std::to_string(d) + " = dn_rest % " + L(arr(1, d)) + "; dn_rest /= " + L(arr(1, d)) + ";");
    k.body.line("float acc = 0.0f;");
    k.body.open("for (long dn_c = 0; dn_c < " + L(C / G) + "; ++dn_c)");
    k.body.line("__global const float* dn_x = " + p(a.args.at(1).value) + " + (dn_img * " + L(C) + " + dn_g * " +
                L(C / G) + " + dn_c) * " + L(in_plane) + ";");
    k.body.line("__global const float* dn_w = " + p(W) + " + (dn_m * " + L(C / G) + " + dn_c) * " + L(taps) + ";");
    k.body.open("for (long dn_t = 0; dn_t < " + L(taps) + "; ++dn_t)");
    k.body.line("long dn_tr = dn_t, dn_off = 0; bool dn_in = true;");
    int64_t stride_in = 1;
    std::vector<int64_t> in_stride(static_cast<size_t>(nd));
    for (int d = nd; d-- > 0;) {
      in_stride[static_cast<size_t>(d)] = stride_in;
      stride_in *= arr(0, d);
    }
    for (int d = nd; d-- > 0;) {
      const std::string D = std::to_string(d);
      k.body.line("{ const long kd = dn_tr % " + L(arr(2, d)) + "; dn_tr /= " + L(arr(2, d)) + "; const long id = dn_o" + D +
                  " * " + L(arr(3, d)) + " - " + L(s[20 + d]) + " + kd * " + L(arr(4, d)) + "; dn_in = dn_in && id >= 0 && id < " +
                  L(arr(0, d)) + "; dn_off += id * " + L(in_stride[static_cast<size_t>(d)]) + "; }");
    }
    k.body.line("if (dn_in) acc = fma(dn_x[dn_off], dn_w[dn_t], acc);");
    k.body.close();
    k.body.close();
    finish_element(k, a, "e");
  }

  void pool(K& k, const AnchorStage& a, int64_t global[3], bool is_max) {
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
    k.body.line(std::string("float acc = ") + (is_max ? "-INFINITY" : "0.0f") + ";");
    k.body.open("for (long dn_t = 0; dn_t < " + L(taps) + "; ++dn_t)");
    k.body.line("long dn_tr = dn_t, dn_off = 0, dn_st = 1; bool dn_in = true;");
    for (int d = nd; d-- > 0;) {
      const std::string D = std::to_string(d);
      k.body.line("{ const long kd = dn_tr % " + L(arr(2, d)) + "; dn_tr /= " + L(arr(2, d)) + "; const long id = dn_o" + D +
                  " * " + L(arr(3, d)) + " - " + L(arr(5, d)) + " + kd * " + L(arr(4, d)) + "; dn_in = dn_in && id >= 0 && id < " +
                  L(arr(0, d)) + "; dn_off += id * dn_st; dn_st *= " + L(arr(0, d)) + "; }");
    }
    k.body.line(is_max ? "if (dn_in) { const float x = dn_x[dn_off]; acc = (x > acc || isnan(x)) ? x : acc; }"
                       : "if (dn_in) acc += dn_x[dn_off];");
    k.body.close();
    if (!is_max) k.body.line("acc /= (float)(dn_count > 0 ? dn_count : 1);");
    finish_element(k, a, "e");
  }

  void global_pool(K& k, const AnchorStage& a, int64_t global[3], bool is_max) {
    const int64_t N = a.args.at(0).i, C = a.args.at(1).i, S = a.args.at(2).i;
    global[0] = N * C;
    elementwise_head(k, global[0]);
    k.body.line("__global const float* dn_x = " + p(a.args.at(3).value) + " + e * " + L(S) + ";");
    k.body.line(std::string("float acc = ") + (is_max ? "-INFINITY" : "0.0f") + ";");
    k.body.line("for (long dn_s = 0; dn_s < " + L(S) + "; ++dn_s) " +
                (is_max ? "{ const float x = dn_x[dn_s]; acc = (x > acc || isnan(x)) ? x : acc; }" : "acc += dn_x[dn_s];"));
    if (!is_max) k.body.line("acc /= " + literal(static_cast<double>(std::max<int64_t>(S, 1)), DType::F32, sp) + ";");
    finish_element(k, a, "e");
  }

  // Softmax / LogSoftmax: one work-item per (outer, inner) row of `len` elements.
  void softmax(K& k, const AnchorStage& a, int64_t global[3], bool log) {
    const int64_t outer = a.args.at(0).i, len = a.args.at(1).i, inner = a.args.at(2).i;
    global[0] = outer * inner;
    k.body.line("const long dn_r = get_global_id(0);");
    k.body.line("if (dn_r >= " + L(outer * inner) + ") return;");
    k.body.line("const long dn_base = (dn_r / " + L(inner) + ") * " + L(len * inner) + " + dn_r % " + L(inner) + ";");
    k.body.line("__global const float* dn_x = " + p(a.args.at(3).value) + " + dn_base;");
    k.body.line("float dn_max = -INFINITY, dn_sum = 0.0f;");
    k.body.line("for (long l = 0; l < " + L(len) + "; ++l) dn_max = fmax(dn_max, dn_x[l * " + L(inner) + "]);");
    k.body.line("for (long l = 0; l < " + L(len) + "; ++l) dn_sum += exp(dn_x[l * " + L(inner) + "] - dn_max);");
    k.body.open("for (long l = 0; l < " + L(len) + "; ++l)");
    k.body.line(std::string("const float acc = ") +
                (log ? "dn_x[l * " + L(inner) + "] - dn_max - log(dn_sum);" : "exp(dn_x[l * " + L(inner) + "] - dn_max) / dn_sum;"));
    finish_element(k, a, "dn_base + l * " + L(inner));
    k.body.close();
  }

  // LayerNormalization: one work-item per row of `norm` elements.
  void layer_norm(K& k, const AnchorStage& a, int64_t global[3]) {
    const int64_t rows = a.args.at(0).i, norm = a.args.at(1).i;
    const AnchorArg &scale = a.args.at(3), &bias = a.args.at(4), &mean = a.args.at(7), &inv = a.args.at(8);
    global[0] = rows;
    k.body.line("const long dn_r = get_global_id(0);");
    k.body.line("if (dn_r >= " + L(rows) + ") return;");
    k.body.line("__global const float* dn_x = " + p(a.args.at(2).value) + " + dn_r * " + L(norm) + ";");
    k.body.line("float dn_mean = 0.0f, dn_var = 0.0f;");
    k.body.line("for (long l = 0; l < " + L(norm) + "; ++l) dn_mean += dn_x[l];");
    k.body.line("dn_mean /= " + literal(static_cast<double>(norm), DType::F32, sp) + ";");
    k.body.line("for (long l = 0; l < " + L(norm) + "; ++l) { const float d = dn_x[l] - dn_mean; dn_var += d * d; }");
    k.body.line("const float dn_inv = 1.0f / sqrt(dn_var / " + literal(static_cast<double>(norm), DType::F32, sp) + " + " +
                literal(a.args.at(5).f, DType::F32, sp) + ");");
    if (mean.kind == AnchorArg::Kind::Buffer && mean.value != kNoValue) k.body.line(p(mean.value) + "[dn_r] = dn_mean;");
    if (inv.kind == AnchorArg::Kind::Buffer && inv.value != kNoValue) k.body.line(p(inv.value) + "[dn_r] = dn_inv;");
    k.body.open("for (long l = 0; l < " + L(norm) + "; ++l)");
    std::string acc = "(dn_x[l] - dn_mean) * dn_inv";
    if (scale.kind == AnchorArg::Kind::Buffer && scale.value != kNoValue) acc += " * " + p(scale.value) + "[l]";
    if (bias.kind == AnchorArg::Kind::Buffer && bias.value != kNoValue) acc += " + " + p(bias.value) + "[l]";
    k.body.line("const float acc = " + acc + ";");
    finish_element(k, a, "dn_r * " + L(norm) + " + l");
    k.body.close();
  }

  // Reduce*: one work-item per output element, looping over the reduced index space.
  void reduce(K& k, const AnchorStage& a, int64_t global[3]) {
    const std::string kind = a.args.at(0).name;  // "ReduceKind::Sum", ...
    const std::vector<int64_t>& d = a.args.at(2).ints;
    const unsigned mask = static_cast<unsigned>(a.args.at(3).i);
    const int r = static_cast<int>(a.args.at(1).i);
    std::vector<int64_t> stride(static_cast<size_t>(std::max(r, 1)), 1);
    for (int i = r - 1; i > 0; --i) stride[static_cast<size_t>(i - 1)] = stride[static_cast<size_t>(i)] * d[static_cast<size_t>(i)];
    int64_t kept = 1, reduced = 1;
    for (int i = 0; i < r; ++i) (mask >> i & 1u ? reduced : kept) *= d[static_cast<size_t>(i)];
    global[0] = out_numel(a);
    elementwise_head(k, global[0]);
    k.body.line("long dn_rest = e, dn_base = 0;");
    for (int i = r; i-- > 0;)
      if (!(mask >> i & 1u))
        k.body.line("dn_base += (dn_rest % " + L(d[static_cast<size_t>(i)]) + ") * " + L(stride[static_cast<size_t>(i)]) +
                    "; dn_rest /= " + L(d[static_cast<size_t>(i)]) + ";");
    const bool mx = kind.find("Max") != std::string::npos, mn = kind.find("Min") != std::string::npos;
    const bool prod = kind.find("Prod") != std::string::npos, l2 = kind.find("L2") != std::string::npos;
    k.body.line(std::string("float acc = ") + (mx ? "-INFINITY" : mn ? "INFINITY" : prod ? "1.0f" : "0.0f") + ";");
    k.body.open("for (long dn_t = 0; dn_t < " + L(reduced) + "; ++dn_t)");
    k.body.line("long dn_tr = dn_t, dn_off = dn_base;");
    for (int i = r; i-- > 0;)
      if (mask >> i & 1u)
        k.body.line("dn_off += (dn_tr % " + L(d[static_cast<size_t>(i)]) + ") * " + L(stride[static_cast<size_t>(i)]) +
                    "; dn_tr /= " + L(d[static_cast<size_t>(i)]) + ";");
    k.body.line("const float x = " + p(a.args.at(4).value) + "[dn_off];");
    k.body.line(mx ? "acc = (x > acc || isnan(x)) ? x : acc;" : mn ? "acc = (x < acc || isnan(x)) ? x : acc;"
                : prod ? "acc *= x;" : l2 ? "acc = fma(x, x, acc);" : "acc += x;");
    k.body.close();
    if (kind.find("Mean") != std::string::npos)
      k.body.line("acc /= " + literal(static_cast<double>(std::max<int64_t>(reduced, 1)), DType::F32, sp) + ";");
    if (l2) k.body.line("acc = sqrt(acc);");
    finish_element(k, a, "e");
  }

  bool anchor(K& k, const AnchorStage& a, int64_t global[3]) {
    using A = AnchorKind;
    if (!a.second.empty())
      throw UnsupportedOperatorError("MaxPool's Indices output is not supported by the OpenCL target yet (node '" +
                                     a.node->name + "')");
    switch (a.kind) {
      case A::MatMul:
      case A::Gemm: gemm(k, a, global); return true;
      case A::Conv: conv(k, a, global); return true;
      case A::MaxPool: pool(k, a, global, true); return true;
      case A::AvgPool: pool(k, a, global, false); return true;
      case A::GlobalAvgPool: global_pool(k, a, global, false); return true;
      case A::GlobalMaxPool: global_pool(k, a, global, true); return true;
      case A::Softmax: softmax(k, a, global, false); return true;
      case A::LogSoftmax: softmax(k, a, global, true); return true;
      case A::LayerNorm: layer_norm(k, a, global); return true;
      case A::Reduce: reduce(k, a, global); return true;
      default: break;
    }
    throw UnsupportedOperatorError(std::string(op_info(a.node->op).name) +
                                   " is not supported by the OpenCL target yet (node '" + a.node->name + "')");
  }

  void block(const BlockPlan& b) {
    KernelInfo info;
    info.block = b.block;
    info.function = "k" + std::to_string(b.block);
    info.scratch_bytes = b.scratch_bytes;
    for (size_t s = 0; s < b.stages.size(); ++s) {
      const Stage& st = b.stages[s];
      info.stages.push_back(st.label);
      K k;
      k.name = info.function + "_" + std::to_string(s);
      declare(k, b);
      int64_t global[3] = {1, 1, 1};
      int dims = 1;
      bool round_up = true;
      switch (st.kind) {
        case Stage::Kind::Loop:
          loop(k, st.loop);
          global[0] = st.loop.total;
          break;
        case Stage::Kind::Transpose: {
          transpose(k, st.transpose);
          global[0] = prod(st.transpose.dims, 0, st.transpose.dims.size());
          break;
        }
        case Stage::Kind::Anchor:
          anchor(k, st.anchor, global);
          if (st.anchor.kind == AnchorKind::MatMul || st.anchor.kind == AnchorKind::Gemm) {
            dims = 3;
            round_up = false;
          }
          break;
      }
      finish(k, dims, global, round_up);
      out.launches.back().block = b.block;
    }
    out.kernels.push_back(std::move(info));
  }
};

}  // namespace

}  // namespace cg::opencl

OpenclModule generate_opencl(const Graph& g, const FusionPlan& p, const OpenclCodegenOptions& opt) {
  for (ValueId v : g.inputs())
    if (!g.value(v).type.is_static())
      throw ShapeError("the OpenCL target needs static shapes: input '" + g.value(v).name + "' is " +
                       g.value(v).type.str());
  OpenclModule m;
  m.memory = plan_memory(g, p, std::max<int64_t>(64, opt.base_align_bytes));
  const cg::ModulePlan mp = cg::plan_module(g, p, m.memory);
  cg::opencl::Spelling sp;
  sp.fp64 = opt.fp64;
  for (ValueId v = 0; v < static_cast<ValueId>(g.values().size()); ++v)
    if (g.value(v).type.dtype == DType::F64 && !opt.fp64 && (g.value(v).producer >= 0 || g.value(v).constant))
      throw UnsupportedOperatorError("the model computes in float64, which this OpenCL device does not support "
                                     "(no cl_khr_fp64): value '" + g.value(v).name + "'");
  cg::opencl::Renderer r{g, mp, sp, m, {}};
  for (const cg::BlockPlan& b : mp.blocks) r.block(b);
  m.inputs = g.inputs();
  m.outputs = g.outputs();
  m.constants = mp.constants;
  m.scratch_bytes = mp.scratch_bytes;
  m.output_sources.assign(m.outputs.size(), kNoValue);
  for (const cg::ModulePlan::Copy& c : mp.copies)
    m.output_sources[static_cast<size_t>(c.output)] =
        c.from_output >= 0 ? m.outputs[static_cast<size_t>(c.from_output)] : r.located_value(c.from);
  m.source = "// Generated by dnnfusion: the OpenCL target (one kernel per stage of each fused block).\n" +
             cg::opencl::support_library(sp) + "\n" + r.kernels;
  m.build_options = "-cl-std=CL1.2";
  const cg::Counts c = cg::count_module(g, mp);
  m.passes = c.passes;
  m.kernels_run = c.kernels;
  m.intermediate_bytes_written = c.intermediate_bytes_written;
  for (size_t i = 0; i < mp.blocks.size(); ++i) {
    const cg::Counts bc = cg::count_block(g, mp.blocks[i]);
    m.kernels[i].passes = bc.passes;
    m.kernels[i].intermediate_bytes_written = bc.intermediate_bytes_written;
  }
  return m;
}

}  // namespace dnnf
