// The CPU renderer of one block's kernel plan (paper §4.4): a C++ function over the prelude.
// Pointwise stages become cg::par_rows loops over the SIMD vocabulary; anchors become calls
// of the prelude's kernels with the epilogue as a functor the kernel applies to each output
// vector (cg::make_ep), one type per distinct epilogue in the module (EpilogueTypes).
#include "codegen/cpu/render.h"

#include <algorithm>
#include <map>
#include <regex>

#include "codegen/prelude/conv_shape.h"
#include "ir/errors.h"
#include "target/isa.h"

namespace dnnf::cg::cpu {

namespace {

std::string where(const Location& l) {
  switch (l.kind) {
    case Location::Kind::GraphInput: return "x.in[" + std::to_string(l.at) + "]";
    case Location::Kind::GraphOutput: return "x.out[" + std::to_string(l.at) + "]";
    case Location::Kind::Arena: return "(x.arena + " + std::to_string(l.at) + ")";
    case Location::Kind::Constant: return "x.st->c[" + std::to_string(l.at) + "]";
    case Location::Kind::Scratch: return "(x.scratch + " + std::to_string(l.at) + ")";
  }
  throw InternalError("codegen: a buffer of unknown kind");
}

std::string ints3(const std::vector<int64_t>& v, size_t at) {
  return "{" + std::to_string(v[at]) + ", " + std::to_string(v[at + 1]) + ", " + std::to_string(v[at + 2]) + "}";
}

// The arguments of cg::make_ep_affine after the lambda and the row offset for an affine
// epilogue; "" otherwise, and the kernel calls the lambda.
std::string affine_epilogue(const Program& p) {
  const AffineEpilogue a = affine_form(p);
  if (!a.ok) return "";
  return ptr(a.bias) + ", " + (a.res == kNoValue ? std::string("nullptr") : ptr(a.res)) + ", " +
         std::to_string(a.res_ld) + "L, " + std::to_string(a.act) + ", " + literal(a.lo, DType::F32) + ", " +
         literal(a.hi, DType::F32);
}

}  // namespace

std::string shape_literal(const AnchorArg& a) {
  const std::vector<int64_t>& v = a.ints;
  if (a.name == "conv") {  // nd, N, C, M, group, in, out, kernel, stride, dilation, begin, ldy, planar_x
    std::string s = "dnnf::conv::ConvShape{";
    for (size_t i = 0; i < 5; ++i) s += std::to_string(v[i]) + ", ";
    for (size_t k = 0; k < 6; ++k) s += ints3(v, 5 + 3 * k) + ", ";
    return s + std::to_string(v.at(23)) + ", " + std::to_string(v.at(24)) + "}";
  }
  // pool: nd, N, C, in, out, kernel, stride, dilation, begin, end, count_include_pad
  std::string s = "dnnf::pool::PoolShape{";
  for (size_t i = 0; i < 3; ++i) s += std::to_string(v[i]) + ", ";
  for (size_t k = 0; k < 7; ++k) s += ints3(v, 3 + 3 * k) + ", ";
  return s + (v[24] ? "true" : "false") + "}";
}

int nhwc_paths(const AnchorStage& a) {
  using conv::NhwcPath;
  if (a.reduced_by) return static_cast<int>(NhwcPath::Depthwise);
  if (a.args.at(2).kind != AnchorArg::Kind::Packed) return conv::kAllNhwcPaths;
  const std::vector<int64_t>& v = a.args.at(0).ints;  // shape_literal's order
  conv::ConvShape s{};
  s.nd = static_cast<int>(v.at(0)), s.N = static_cast<int>(v[1]), s.C = static_cast<int>(v[2]);
  s.M = static_cast<int>(v[3]), s.group = static_cast<int>(v[4]);
  for (int i = 0; i < 3; ++i) {
    s.in[i] = static_cast<int>(v[5 + i]), s.out[i] = static_cast<int>(v[8 + i]), s.k[i] = static_cast<int>(v[11 + i]);
    s.stride[i] = static_cast<int>(v[14 + i]), s.dil[i] = static_cast<int>(v[17 + i]);
    s.pad_begin[i] = static_cast<int>(v[20 + i]);
  }
  s.ldy = static_cast<long>(v.at(23)), s.planar_x = static_cast<int>(v.at(24));
  if (a.args.at(1).kind == AnchorArg::Kind::Segments) return static_cast<int>(conv::segmented_nhwc_path(s));
  return conv::nhwc_paths_of(s);
}

namespace {

// Vectors a step of a loop whose body calls costly functions (see BlockRenderer::loop): 8 for
// a short body, 4 for one up to 48 instructions (more copies of a longer body only grow the
// code and its compile time, and run out of registers: AVX2 has 16), none beyond; and what
// such a call weighs against a plain elementwise op when par_rows decides to fork:
// single-precision exp/tanh/erf/sigmoid cost 0.3-0.7 ns an element a thread against ~0.1-0.15
// for an add streaming through L1/L2 (Xeon, AVX-512), so 8192 elements of one Sigmoid stay on
// one thread and 8192 of eight chained transcendental ops split.
int interleave_copies(const Program& body, int64_t row_len) {
  const size_t n = body.code.size();
  if (n <= 16 && row_len >= 8 * kMaxVecWidth) return 8;
  if (n <= 48 && row_len >= 4 * kMaxVecWidth) return 4;
  return 1;  // (a row shorter than the copies' widest vectors would never take the wide step)
}
constexpr int kHeavyWork = 4;

class BlockRenderer {
 public:
  BlockRenderer(const BlockPlan& b, EpilogueTypes& types) : b_(b), types_(types) {}

  std::string render(const std::string& name) {
    std::string fn = "// block " + std::to_string(b_.block) + ": " + std::to_string(b_.operators) +
                     " operators\nvoid " + name + "(const Ctx& x) {\n";
    for (const Buffer& buf : b_.buffers) {
      const std::string t = ctype(buf.dtype), c = buf.written ? "" : "const ";
      fn += "  " + c + t + "* const " + ptr(buf.value) + " = reinterpret_cast<" + c + t + "*>(" + where(buf.where) +
            ");\n";
    }
    if (b_.length_input >= 0)  // compile(..., dynamic=True)'s runtime sequence length L
      code_.line("const long seq_len = static_cast<long>(*static_cast<const " +
                 std::string(b_.length_f32 ? "float" : "int64_t") + "*>(x.in[" + std::to_string(b_.length_input) + "]));");
    for (size_t i = 0; i < b_.stages.size(); ++i) {
      const Stage& s = b_.stages[i];
      seq_ = s.seq;
      lim_.clear();
      if (seq_.how != SeqRows::How::None) {  // the positions this stage computes
        lim_ = "sq" + std::to_string(i);
        code_.line("const long " + lim_ + " = std::min<long>(std::max<long>(seq_len + (" + std::to_string(seq_.offset) +
                   "L), 0L), " + std::to_string(seq_.size) + "L);");
        if (seq_.n)
          code_.line("const long " + lim_ + "n = std::min<long>(std::max<long>(seq_len + (" +
                     std::to_string(seq_.n_offset) + "L), 0L), " + std::to_string(seq_.n_size) + "L);");
      }
      switch (s.kind) {
        case Stage::Kind::Loop: loop(s.loop); break;
        case Stage::Kind::Transpose: transpose(s.transpose); break;
        case Stage::Kind::Anchor: anchor(s.anchor); break;
      }
    }
    return fn + code_.text + "}\n";
  }

 private:
  void loop(const LoopStage& l) {
    const bool vec = l.body.mode == Mode::Vector;
    const std::string len = std::to_string(l.row_len);
    Code body;
    body.indent = code_.indent + 1;
    for (const LoopStage::IndexVar& v : l.index_vars)
      body.line("const long i" + std::to_string(v.k) + " = " +
                (v.zero ? std::string("0") : "(o / " + std::to_string(v.div) + "L) % " + std::to_string(v.mod) + "L") + ";");
    if (seq_.how == SeqRows::How::Guard) body.line("if (i" + std::to_string(seq_.var) + " >= " + lim_ + ") continue;");
    // the elements (flat) or rows computed: all, or those of the runtime length's positions
    const bool flat_seq = seq_.how == SeqRows::How::Flat;
    const std::string total = flat_seq ? "(" + lim_ + " * " + L(seq_.per) + ")" : std::to_string(l.total) + "L";
    const std::string rows = flat_seq ? "((" + lim_ + " * " + L(seq_.per) + " + " + len + "L - 1) / " + len + "L)"
                             : seq_.how == SeqRows::How::Rows ? "(" + lim_ + " * " + L(seq_.per) + ")"
                                                               : std::to_string(l.rows) + "L";
    // A body that calls costly functions (exp, tanh, erf, divisions: tens of cycles of
    // latency each, in one dependent chain per vector) runs several vectors a step,
    // instruction by instruction, so that the chains of different vectors overlap; one vector
    // a step left the FMA ports idle behind each chain's latency (8 chained Exp/Tanh/Erf/
    // Sigmoid over 8192 floats, hand-written, ns an element per op, 1 / 4 / 8 vectors a step:
    // AVX-512 0.85-1.69 / 0.36-0.67 / 0.29-0.66, AVX2 1.68-3.28 / 0.73-1.53 / 0.58-1.54).
    const int heavy = vec ? heavy_calls(l.body) : 0;
    const int copies = heavy > 0 && interleavable(l.body) ? interleave_copies(l.body, l.row_len) : 1;
    const std::string end = l.flat ? "std::min<long>(j + " + len + "L, " + total + ")" : len + "L";
    if (copies > 1) {
      const std::string step = std::to_string(copies) + " * cg::W";
      body.line("long j = " + std::string(l.flat ? "o * " + len + "L" : "0") + ";");
      body.line("const long je = " + end + ";");
      body.open("for (; j + " + step + " <= je; j += " + step + ")");
      body.line("[[maybe_unused]] constexpr int n = cg::W;");
      render_interleaved(l.body, copies, body);
      body.close();
      body.open("for (; j < je; j += cg::W)");
      body.line("[[maybe_unused]] const int n = static_cast<int>(std::min<long>(cg::W, je - j));");
    } else if (l.flat) {
      body.open("for (long j = o * " + len + "L, je = " + end + "; j < je; j += " + (vec ? "cg::W" : "1") + ")");
      body.line("const int n = static_cast<int>(std::min<long>(cg::W, je - j));");
    } else {
      body.open("for (long j = 0; j < " + len + "L; j += " + std::string(vec ? "cg::W" : "1") + ")");
      if (vec) body.line("const int n = static_cast<int>(std::min<long>(cg::W, " + len + "L - j));");
    }
    render_program(l.body, body);
    body.close();
    // Threads by the work, not the elements: a costly call counts as kHeavyWork plain ones.
    const int64_t work = l.row_len * (1 + static_cast<int64_t>(kHeavyWork) * heavy);
    code_.open("cg::par_rows(" + rows + ", " + std::to_string(work) + "L, [&](long o0, long o1)");
    code_.open("for (long o = o0; o < o1; ++o)");
    code_.text += body.text;
    code_.close();
    code_.close("});");
  }

  void transpose(const TransposeStage& t) {
    std::string dims, ps;
    for (size_t k = 0; k < t.dims.size(); ++k) {
      dims += (k ? ", " : "") + std::to_string(t.dims[k]) + "L";
      ps += (k ? ", " : "") + std::to_string(t.perm[k]);
    }
    code_.open("");
    code_.line("static const long dims[] = {" + dims + "};");
    code_.line("static const int perm[] = {" + ps + "};");
    code_.line("cg::transpose(" + ptr(t.in) + ", " + ptr(t.out) + ", " + std::to_string(t.dims.size()) +
               ", dims, perm);");
    code_.close();
  }

  // The epilogue as a lambda declared here; returns the expression the kernel takes.
  std::string epilogue(const AnchorStage& a, const std::string& row_offset) {
    if (!a.ep.present) return "dnnf::gemm::EpNone{}";
    Code body;
    body.indent = 2;
    render_program(a.ep.prog, body);
    const std::string f = "f" + std::to_string(lambdas_++);
    code_.line(shared_epilogue(body.text, f));
    const std::string fast = a.ep.stores ? "" : affine_epilogue(a.ep.prog);
    if (!fast.empty()) return "cg::make_ep_affine(" + f + ", " + row_offset + ", " + fast + ")";
    return "cg::make_ep<" + std::string(a.ep.stores ? "true" : "false") + ">(" + f + ", " + row_offset + ")";
  }

  std::string y(const AnchorStage& a) const {
    if (a.y != kNoValue) return ptr(a.y);
    return "reinterpret_cast<float*>(x.scratch + " + std::to_string(a.y_scratch) + ")";
  }

  std::string arg(const AnchorArg& a, const AnchorStage& st, const std::string& ep) const {
    switch (a.kind) {
      case AnchorArg::Kind::Int:
        return a.bare ? std::to_string(a.i) + (a.name == "unsigned" ? "u" : "") : L(a.i);
      case AnchorArg::Kind::Float: return literal(a.f, a.dtype);
      case AnchorArg::Kind::Bool: return a.i ? "true" : "false";
      case AnchorArg::Kind::Buffer: return ptr(a.value);
      case AnchorArg::Kind::Y: return y(st);
      case AnchorArg::Kind::Null: return "nullptr";
      case AnchorArg::Kind::Ints:
      case AnchorArg::Kind::Floats: return a.name;
      case AnchorArg::Kind::Shape: return shape_literal(a);
      case AnchorArg::Kind::Enum: return a.name;
      case AnchorArg::Kind::Packed: return "*x.st->w" + std::to_string(a.i);
      case AnchorArg::Kind::Ep: return ep;
      case AnchorArg::Kind::Segments: {
        std::string xs, cs;
        for (size_t k = 0; k < a.values.size(); ++k) {
          xs += (k ? ", " : "") + ptr(a.values[k]);
          cs += (k ? ", " : "") + std::to_string(a.ints[k]);
        }
        return "dnnf::conv::InputSegments{" + std::to_string(a.values.size()) + ", {" + xs + "}, {" + cs + "}}";
      }
    }
    throw InternalError("codegen: an anchor argument of unknown kind");
  }

  std::string call(const char* fn, const std::vector<AnchorArg>& args, const AnchorStage& st, const std::string& ep,
                   size_t from = 0) const {
    std::string s = std::string(fn) + "(";
    for (size_t i = from; i < args.size(); ++i)
      s += (i > from ? ", " : "") +
           (i == 0 && seq_.how == SeqRows::How::Outer ? "(" + lim_ + " * " + L(seq_.per) + ")" : arg(args[i], st, ep));
    return s + ");";
  }

  // Static arrays an anchor's call names, declared before it.
  void arrays(const std::vector<AnchorArg>& args) {
    std::string pending;
    auto flush = [&] {
      if (!pending.empty()) code_.line(pending + ";");
      pending.clear();
    };
    for (const AnchorArg& a : args) {
      if (a.kind != AnchorArg::Kind::Ints && a.kind != AnchorArg::Kind::Floats) continue;
      std::string list;
      if (a.kind == AnchorArg::Kind::Ints)
        for (int64_t v : a.ints) list += (list.empty() ? "" : ", ") + L(v);
      else
        for (double v : a.floats) list += (list.empty() ? "" : ", ") + literal(v, a.dtype);
      if (a.joined && !pending.empty()) {
        pending += ", " + a.name + "[] = {" + list + "}";
        continue;
      }
      flush();
      const std::string t = a.kind == AnchorArg::Kind::Ints ? "long" : ctype(a.dtype);
      pending = "static const " + t + " " + a.name + "[] = {" + list + "}";
    }
    flush();
  }

  // A fused prologue as a lambda declared here; returns the ARows source of A.
  std::string prologue(const GemmCall& g) {
    Code body;
    body.indent = code_.indent + 1;
    render_program(g.a_prog, body);
    const std::string f = "f" + std::to_string(lambdas_++);
    const bool vec = g.a_prog.mode == Mode::Vector;
    code_.open("const auto " + f + " = [&](" + (vec ? "V::vf& v, long row, long j, int n" : "float& v, long row, long j") +
               ")");
    code_.text += body.text;
    code_.line(vec ? "(void)row; (void)j; (void)n;" : "(void)row; (void)j;");
    code_.close("};");
    return (vec ? "cg::make_pro(" : "cg::make_pro_scalar(") + f + ")";
  }

  // One GEMM call: A strided (or computed by its prologue), B strided or packed beforehand.
  void gemm_call(const GemmCall& g, const std::string& offa, const std::string& offb, const std::string& out,
                 const std::string& ep) {
    const std::string M = seq_.how == SeqRows::How::GemmM ? lim_ : std::to_string(g.M);
    const std::string N = seq_.n ? lim_ + "n" : std::to_string(g.N), K = std::to_string(g.K);
    const std::string packed = "x.st->w" + std::to_string(g.packed_b) + ".view()";
    if (g.a_computed) {
      const std::string pro = prologue(g);
      const std::string b = g.packed_b >= 0 ? packed
                                            : "dnnf::gemm::BView{" + ptr(g.b) + offb + ", " + L(g.rs_b) + ", " +
                                                  L(g.cs_b) + "}";
      code_.line("dnnf::gemm::gemm_f32_src(" + M + ", " + N + ", " + K + ", " + pro + ", " + b + ", " + out + ", " +
                 L(g.N) + ", " + ep + ", opt);");
    } else if (g.packed_b >= 0) {
      code_.line("dnnf::gemm::gemm_f32_packed(" + M + ", " + ptr(g.a) + offa + ", " + L(g.rs_a) + ", " + L(g.cs_a) +
                 ", " + packed + ", " + out + ", " + L(g.N) + ", " + ep + ", dnnf::gemm::ProNone{}, opt);");
    } else {
      code_.line("dnnf::gemm::gemm_f32(" + M + ", " + N + ", " + K + ", " + ptr(g.a) + offa + ", " + L(g.rs_a) +
                 ", " + L(g.cs_a) + ", " + ptr(g.b) + offb + ", " + L(g.rs_b) + ", " + L(g.cs_b) + ", " + out +
                 ", " + L(g.N) + ", " + ep + ", dnnf::gemm::ProNone{}, opt);");
    }
  }

  void gemm(const AnchorStage& a) {
    const GemmCall& g = a.gemm;
    code_.open("");
    if (g.dtype != DType::F32) {  // cg::matmul_any: the batches one after the other, rows in parallel
      const std::string offa = g.batched ? index(a.offset_a, a.batch_vars) : "0L";
      const std::string offb = g.batched ? index(a.offset_b, a.batch_vars) : "0L";
      code_.open("for (long b = 0; b < " + L(g.batched ? a.batch : 1) + "; ++b)");
      code_.line("(void)b;");
      code_.line("dnnf::cg::matmul_any(" + L(g.M) + ", " + L(g.N) + ", " + L(g.K) + ", " + ptr(g.a) + " + (" + offa +
                 "), " + L(g.rs_a) + ", " + L(g.cs_a) + ", " + ptr(g.b) + " + (" + offb + "), " + L(g.rs_b) + ", " +
                 L(g.cs_b) + ", " + y(a) + " + b * " + L(g.M * g.N) + ");");
      code_.close();
      code_.close();
      return;
    }
    if (!g.batched) {
      const std::string ep = epilogue(a, "0L");
      code_.line("dnnf::gemm::Options opt;");
      gemm_call(g, "", "", y(a), ep);
      code_.close();
      return;
    }
    const std::string ep = epilogue(a, "b * " + L(g.M));
    const std::string offa = index(a.offset_a, a.batch_vars), offb = index(a.offset_b, a.batch_vars);
    code_.line("const bool par = cg::batch_parallel(" + L(a.batch) + ", " + std::to_string(a.flops_per_batch) + ");");
    code_.open("auto one = [&](long b)");
    code_.line("(void)b;");
    code_.line("dnnf::gemm::Options opt;");
    code_.line("opt.n_threads = par ? 1 : 0;");
    gemm_call(g, " + (" + offa + ")", " + (" + offb + ")", y(a) + " + b * " + L(g.M * g.N), ep);
    code_.close("};");
    code_.line("if (par) dnnf::parallel_for(" + std::to_string(a.batch) + ", [&](int b) { one(b); });");
    code_.line("else for (long b = 0; b < " + L(a.batch) + "; ++b) one(b);");
    code_.close();
  }

  // A depthwise convolution computing its input from a pointwise one (AnchorStage::expand):
  // conv_nhwc_expand_f32(pointwise shape, its x, weights, epilogue, depthwise shape, weights,
  // y, epilogue), then the pooled buffer and scale of a spatial mean it also takes.
  void expand(const AnchorStage& a) {
    const AnchorStage& p = a.expand.at(0);
    code_.open("");
    const std::string pep = epilogue(p, "0L"), ep = epilogue(a, "0L");
    std::string c = std::string(a.reduced_by ? "dnnf::conv::conv_nhwc_expand_mean_f32(" : "dnnf::conv::conv_nhwc_expand_f32(") +
                    shape_literal(p.args[0]) + ", " + arg(p.args[1], p, pep) + ", " + arg(p.args[2], p, pep) + ", " +
                    pep + ", " + shape_literal(a.args[0]) + ", " + arg(a.args[2], a, ep) + ", " + y(a) + ", " + ep;
    for (size_t i = 5; i < a.args.size(); ++i) c += ", " + arg(a.args[i], a, ep);
    code_.line(c + ");");
    code_.close();
  }

  void anchor(const AnchorStage& a) {
    using K = AnchorKind;
    if (a.kind == K::MatMul || a.kind == K::Gemm) return gemm(a);
    if (!a.expand.empty()) return expand(a);
    std::string fn;
    switch (a.kind) {
      case K::Conv: fn = "dnnf::conv::conv_f32"; break;
      case K::ConvTranspose: fn = "dnnf::conv::conv_transpose_f32"; break;
      case K::NhwcConv:  // with packed weights, the call of the one path they were packed for
        fn = a.reduced_by ? "dnnf::conv::conv_nhwc_mean_f32"
             : a.args.at(2).kind == AnchorArg::Kind::Packed
                 ? "dnnf::conv::conv_nhwc_paths_f32<" + std::to_string(nhwc_paths(a)) + ">"
                 : "dnnf::conv::conv_nhwc_f32";
        break;
      case K::MaxPool:
        if (a.args.at(1).dtype != DType::F32) {  // f64, i8, u8: values and indices in one pass
          const AnchorArg* idx = a.second.empty() ? nullptr : &a.second.at(2);
          code_.line("dnnf::pool::max_pool_scalar(" + shape_literal(a.args[0]) + ", " + arg(a.args[1], a, "") + ", " +
                     y(a) + ", " + (idx ? arg(*idx, a, "") : std::string("nullptr")) + ", " +
                     (idx && a.second.at(3).i ? "true" : "false") + ");");
          return;
        }
        fn = "dnnf::pool::max_pool_f32";
        break;
      case K::AvgPool: fn = "dnnf::pool::avg_pool_f32"; break;
      case K::NhwcMaxPool: fn = "dnnf::pool::max_pool_nhwc_f32"; break;
      case K::NhwcAvgPool: fn = "dnnf::pool::avg_pool_nhwc_f32"; break;
      case K::GlobalAvgPool: fn = "dnnf::pool::global_avg_pool_f32"; break;
      case K::GlobalMaxPool: fn = "dnnf::pool::global_max_pool_f32"; break;
      case K::Softmax:
        fn = a.args.at(3).dtype == DType::F64 ? "dnnf::rowops::softmax_f64<false>" : "dnnf::rowops::softmax_f32";
        break;
      case K::LogSoftmax:
        fn = a.args.at(3).dtype == DType::F64 ? "dnnf::rowops::softmax_f64<true>" : "dnnf::rowops::log_softmax_f32";
        break;
      case K::LayerNorm: fn = "dnnf::rowops::layer_norm_f32"; break;
      case K::InstanceNorm: fn = "dnnf::rowops::instance_norm_f32"; break;
      case K::CumSum:
        fn = a.node->op == OpKind::CumProd        ? "dnnf::rowops::cumprod_any"
             : a.args.at(3).dtype == DType::F32 ? "dnnf::rowops::cumsum_f32"
                                                  : "dnnf::rowops::cumsum_any";
        break;
      case K::RoiAlign: fn = "dnnf::irr::roi_align_f32"; break;
      case K::GridSample: fn = "dnnf::irr::grid_sample_f32"; break;
      case K::ArgReduce:  // no epilogue, no block
        code_.line(call("dnnf::rowops::arg_reduce_i64", a.args, a, ""));
        return;
      case K::TopK:
        code_.line(call("dnnf::irr::topk", a.args, a, ""));
        return;
      case K::Scatter:  // no epilogue
        code_.open("");
        arrays(a.args);
        code_.line(call(a.node->op == OpKind::ScatterND ? "dnnf::irr::scatter_nd" : "dnnf::irr::scatter_elements",
                        a.args, a, ""));
        code_.close();
        return;
      case K::Reduce: {  // the kind is a template argument
        code_.open("");
        arrays(a.args);
        const std::string ep = epilogue(a, "0L");
        const DType t = a.args[0].dtype;
        const std::string f = std::string(t == DType::F32   ? "dnnf::rowops::reduce_f32"
                                          : t == DType::F64 ? "dnnf::rowops::reduce_f64"
                                                            : "dnnf::rowops::reduce_int") +
                              "<dnnf::rowops::" + a.args[0].name + ">";
        code_.line(call(f.c_str(), a.args, a, ep, 1));
        code_.close();
        return;
      }
      case K::Resize: {  // mode .. extrapolation value form one ResizeAttrs
        code_.open("");
        arrays(a.args);
        const std::string ep = epilogue(a, "0L");
        std::string attrs = "dnnf::irr::ResizeAttrs{";
        for (size_t i = 5; i < 12; ++i)
          attrs += (i > 5 ? ", " : "") + (a.args[i].kind == AnchorArg::Kind::Enum ? "dnnf::irr::" : std::string()) +
                   arg(a.args[i], a, ep);
        attrs += "}";
        if (a.args[0].kind == AnchorArg::Kind::Buffer) {  // a roi computed at run time, put in place
          const int64_t r = a.args[4].i;
          const std::vector<int64_t>& axes = a.args[0].ints;  // the axis of each start
          const std::string p = ptr(a.args[0].value);
          std::string init;
          for (int64_t k = 0; k < 2 * r; ++k) init += std::string(k ? ", " : "") + (k < r ? "0.0f" : "1.0f");
          code_.line("float roi[" + std::to_string(2 * r) + "] = {" + init + "};");
          for (size_t i = 0; i < axes.size(); ++i)
            code_.line("roi[" + std::to_string(axes[i]) + "] = static_cast<float>(" + p + "[" + std::to_string(i) +
                       "]), roi[" + std::to_string(axes[i] + r) + "] = static_cast<float>(" + p + "[" +
                       std::to_string(i + axes.size()) + "]);");
        }
        code_.line("dnnf::irr::resize_f32(" + arg(a.args[4], a, ep) + ", in_shape, out_shape, scales, " +
                   (a.args[0].kind == AnchorArg::Kind::Null ? std::string("nullptr") : std::string("roi")) + ", " +
                   attrs + ", " + arg(a.args[12], a, ep) + ", " + arg(a.args[13], a, ep) + ", " +
                   arg(a.args[14], a, ep) + ");");
        code_.close();
        return;
      }
      default:
        throw InternalError("codegen: the CPU renderer has no kernel for an anchor kind");
    }
    code_.open("");
    arrays(a.args);
    if (seq_.how == SeqRows::How::Heads) {  // Softmax rows per head: (rows, axis, inner, x, y, ep)
      const std::string ep = epilogue(a, "hb * " + L(a.ep.present ? a.ep.R / seq_.heads : 0));
      const std::string off = " + hb * " + L(seq_.stride);
      // the heads shared out (one fork; each head's rows then run on its thread: the pool runs
      // a nested call inline), not a fork per head
      code_.open("dnnf::parallel_for(" + std::to_string(seq_.heads) + ", [&](int hb)");
      code_.line(fn + "((" + lim_ + " * " + L(seq_.per) + "), " + arg(a.args[1], a, ep) + ", " + arg(a.args[2], a, ep) +
                 ", " + arg(a.args[3], a, ep) + off + ", " + y(a) + off + ", " + ep + ");");
      code_.close("});");
      code_.close();
      return;
    }
    const std::string ep = epilogue(a, "0L");
    code_.line(call(fn.c_str(), a.args, a, ep));
    if (!a.second.empty()) code_.line(call("dnnf::pool::max_pool_indices", a.second, a, ep));
    code_.close();
  }

  // The shared functor type of an epilogue body (EpilogueTypes): the block's buffer pointers
  // it names (p<value>) become the members c0, c1, ... in the order they first appear; returns
  // the declaration of this block's instance `f` of it.
  std::string shared_epilogue(const std::string& body, const std::string& f) {
    static const std::regex pointer(R"(\bp([0-9]+)\b)");
    std::map<std::string, std::string> member;  // p<value> -> c<k>
    std::vector<std::string> order;
    std::string renamed;
    auto last = body.cbegin();
    for (std::sregex_iterator it(body.begin(), body.end(), pointer), end; it != end; ++it) {
      const std::string name = it->str();
      if (!member.count(name)) {
        member[name] = "c" + std::to_string(order.size());
        order.push_back(name);
      }
      renamed.append(last, body.cbegin() + it->position());
      renamed += member[name];
      last = body.cbegin() + it->position() + it->length();
    }
    renamed.append(last, body.cend());
    std::string members, args;
    for (const std::string& name : order) {
      const Buffer* buf = nullptr;
      for (const Buffer& b : b_.buffers)
        if (ptr(b.value) == name) buf = &b;
      if (!buf) throw InternalError("codegen: an epilogue names a pointer its block does not declare");
      members += std::string("  ") + (buf->written ? "" : "const ") + ctype(buf->dtype) + "* " + member[name] + ";\n";
      args += (args.empty() ? "" : ", ") + name;
    }
    const std::string def = members + "  void operator()(V::vf& v, long row, long j, int n) const {\n" + renamed +
                            "    (void)row; (void)j; (void)n;\n  }\n";
    auto [it, fresh] = types_.names.emplace(def, "Ep" + std::to_string(types_.names.size()));
    if (fresh) types_.text += "struct " + it->second + " {\n" + def + "};\n\n";
    return "const " + it->second + " " + f + "{" + args + "};";
  }

  const BlockPlan& b_;
  EpilogueTypes& types_;
  Code code_;
  int lambdas_ = 0;
  SeqRows seq_;      // the stage being rendered: which of its rows follow the runtime length
  std::string lim_;  // and the variable holding its positions
};

}  // namespace

std::string render_block(const BlockPlan& b, const std::string& name, EpilogueTypes& types) {
  return BlockRenderer(b, types).render(name);
}

}  // namespace dnnf::cg::cpu
