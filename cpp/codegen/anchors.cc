// Many-to-Many anchors of fused blocks (paper §4.4): the call of a prelude kernel with the
// block's fused epilogue; MatMul and Gemm here, the other anchors in anchors_lib.cc.
#include <algorithm>

#include "codegen/cpu/spell.h"
#include "codegen/lower.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

namespace {

int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}
using cpu::L;
using cpu::literal;

void need_f32(const Graph& g, const Node& n) {
  for (ValueId v : n.inputs)
    if (v != kNoValue && g.value(v).type.dtype != DType::F32)
      throw UnsupportedOperatorError(std::string("code generation supports ") + op_info(n.op).name +
                                     " on f32 only; node '" + n.name + "' reads " +
                                     dtype_name(g.value(v).type.dtype));
}

}  // namespace

std::pair<int64_t, int64_t> BlockLowerer::anchor_view(const Node& n) const {
  const std::vector<int64_t> od = dims_of(g_, n.outputs.at(0));
  switch (n.op) {
    case OpKind::Conv:
    case OpKind::ConvTranspose:
    case OpKind::MaxPool:
    case OpKind::AveragePool:
    case OpKind::InstanceNormalization: {  // [N * channels, spatial]
      int64_t sp = 1;
      for (size_t k = 2; k < od.size(); ++k) sp *= od[k];
      return {od.size() >= 2 ? od[0] * od[1] : 1, sp};
    }
    case OpKind::GlobalAveragePool:
    case OpKind::GlobalMaxPool:  // [N, channels]
      return {od[0], od.size() > 1 ? od[1] : 1};
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::CumSum: {  // [outer * axis, inner], or [outer, axis] when inner == 1
      InferCtx c(g_, n);
      int64_t r = static_cast<int64_t>(od.size());
      int64_t a = c.attr_int("axis", -1);
      if (a < 0) a += r;
      if (n.op == OpKind::CumSum) {
        TensorPtr t = c.const_input(1);
        a = t ? t->to_ints().at(0) : r - 1;
        if (a < 0) a += r;
      }
      int64_t inner = 1;
      for (int64_t k = a + 1; k < r; ++k) inner *= od[k];
      if (inner == 1) return {numel(od) / std::max<int64_t>(od.empty() ? 1 : od[a], 1), od.empty() ? 1 : od[a]};
      return {numel(od) / inner, inner};
    }
    case OpKind::ReduceMean:
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ReduceProd:
    case OpKind::ReduceL2: {  // [out / C, C], C = the last input dim when it is kept, else 1
      const std::vector<int64_t> id = dims_of(g_, n.inputs.at(0));
      bool last_kept = !id.empty() && od.size() == id.size() && od.back() == id.back();
      InferCtx c(g_, n);
      std::vector<int64_t> axes;
      if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) axes = const_vector(c, 1, "axes");
      else axes = c.attr_ints("axes");
      int64_t r = static_cast<int64_t>(id.size());
      if (axes.empty() && !c.attr_int("noop_with_empty_axes", 0)) last_kept = false;
      for (int64_t a : axes) if ((a < 0 ? a + r : a) == r - 1) last_kept = false;
      int64_t C = last_kept ? id.back() : 1;
      return {numel(od) / std::max<int64_t>(C, 1), C};
    }
    default: {
      int64_t C = od.empty() ? 1 : std::max<int64_t>(od.back(), 1);
      return {numel(od) / C, C};
    }
  }
}

bool BlockLowerer::has_epilogue(const Node& n) const {
  switch (n.op) {
    case OpKind::MatMul:
    case OpKind::Gemm:
    case OpKind::Conv:
    case OpKind::ConvTranspose:
    case OpKind::NhwcConv:
    case OpKind::NhwcMaxPool:
    case OpKind::NhwcAveragePool:
    case OpKind::MaxPool:
    case OpKind::AveragePool:
    case OpKind::GlobalAveragePool:
    case OpKind::GlobalMaxPool:
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::ReduceMean:
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ReduceProd:
    case OpKind::ReduceL2:
    case OpKind::InstanceNormalization:
    case OpKind::CumSum:
    case OpKind::Resize:
    case OpKind::RoiAlign:
      return true;
    case OpKind::LayerNormalization:
      return n.outputs.size() == 1;
    default:
      return false;
  }
}

BlockLowerer::EpCode BlockLowerer::epilogue(
    const Node& n, const std::string& row_offset,
    const std::function<void(ExprBuilder&)>& pre) {
  const ValueId o = n.outputs[0];
  const std::vector<int64_t> od = dims_of(g_, o);
  const bool o_mem = materialised_.count(o) > 0;
  auto it = epilogues_.find(n.id);
  EpCode ep;
  if (it == epilogues_.end() && !pre) {
    ep.expr = "dnnf::gemm::EpNone{}";
    ep.y = ptr(o);
    if (!o_mem) throw InternalError("codegen: an anchor output with no epilogue is not in memory");
    return ep;
  }
  const auto [R, C] = anchor_view(n);
  Code body;
  body.indent = 2;
  Program prog;
  prog.mode = Mode::Vector;
  VarTable& vt = prog.vars;
  int row = vt.add("row", R);
  int j = vt.add("j", C);
  prog.inner = j;
  ExprBuilder em(g_, leaves_, prog);
  std::map<ValueId, std::vector<IExpr>> idx;
  idx[o] = delinearize(add(scale(IExpr::var(row), C, vt), IExpr::var(j), vt), od, vt);
  if (pre) pre(em);
  const Ref a0 = em.define(o, idx[o], "a0");
  std::string y_value;  // the stored value the kernel's own store can write
  bool stores = false;
  if (it != epilogues_.end()) {
    for (NodeId e : it->second.nodes) {
      const Node& en = g_.node(e);
      std::vector<IExpr> out;
      if (!forward_index(g_, en, idx, vt, out))
        throw InternalError("codegen: epilogue index changed between planning and emission");
      idx[en.outputs[0]] = out;
    }
    const std::string o_flat = render(linearize(idx[o], od, vt), vt);
    for (ValueId s : it->second.stores) try {
      Ref val = em.eval(s, idx[s]);
      std::vector<int64_t> sd = dims_of(g_, s);
      IExpr flat = linearize(idx[s], sd, vt);
      if (!o_mem && y_value.empty() && render(flat, vt) == o_flat) {
        em.accumulate("", val);
        y_value = ptr(s);
        continue;
      }
      ptr(s);
      em.store(s, flat, val);
    } catch (const NeedScalar& e) {
      std::string ops;
      for (NodeId x : it->second.nodes) ops += " " + g_.node(x).name;
      throw InternalError("codegen: the epilogue of '" + n.name + "' (" + ops + " ) cannot store '" +
                          g_.value(s).name + "' on vectors: " + e.what());
    }
  }
  if (o_mem) {
    ep.y = ptr(o);
    if (pre) em.accumulate("", a0);
  } else if (!y_value.empty()) {
    ep.y = y_value;
  } else {
    stores = true;
    ep.y = "reinterpret_cast<float*>" + scratch(numel(od) * 4);
  }
  cpu::render_program(prog, body);
  std::string f = "f" + std::to_string(counter_++);
  code_.open("const auto " + f + " = [&](V::vf& v, long row, long j, int n)");
  code_.text += body.text;
  code_.line("(void)row; (void)j; (void)n;");
  code_.close("};");
  ep.expr = "cg::make_ep<" + std::string(stores ? "true" : "false") + ">(" + f + ", " + row_offset + ")";
  return ep;
}

void BlockLowerer::emit_anchor(const Node& n) {
  switch (n.op) {
    case OpKind::MatMul: emit_matmul(n); return;
    case OpKind::Gemm: emit_gemm(n); return;
    default: emit_library(n); return;
  }
}

void BlockLowerer::emit_matmul(const Node& n) {
  need_f32(g_, n);
  const ValueId A = n.inputs[0], B = n.inputs[1], O = n.outputs[0];
  const std::vector<int64_t> ad = dims_of(g_, A), bd = dims_of(g_, B), od = dims_of(g_, O);
  const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  const int64_t M = a1 ? 1 : ad[ad.size() - 2], K = ad.back(), N = b1 ? 1 : bd.back();
  std::vector<int64_t> batch_dims(od.begin(), od.end() - (a1 ? 0 : 1) - (b1 ? 0 : 1));
  const int64_t batch = numel(batch_dims);
  VarTable vt;
  int bv = vt.add("b", batch);
  std::vector<IExpr> bidx = delinearize(IExpr::var(bv), batch_dims, vt);
  auto batch_offset = [&](const std::vector<int64_t>& d, bool vec, int64_t mat) {
    std::vector<int64_t> bd2(d.begin(), d.end() - (vec ? 1 : 2));
    std::vector<IExpr> i(bd2.size());
    size_t lead = batch_dims.size() - bd2.size();
    for (size_t k = 0; k < bd2.size(); ++k) i[k] = bd2[k] == 1 ? IExpr::constant(0) : bidx[lead + k];
    return std::make_pair(render(scale(linearize(i, bd2, vt), mat, vt), vt), numel(bd2));
  };
  auto [offa, na] = batch_offset(ad, a1, M * K);
  auto [offb, nb] = batch_offset(bd, b1, K * N);
  (void)na;
  std::string pb;  // a pre-packed constant B
  if (g_.value(B).constant && nb == 1) {
    pb = "w" + std::to_string(ms_.counter++);
    ms_.members.push_back("dnnf::gemm::PackedB " + pb + ";");
    ms_.create.line("st->" + pb + " = dnnf::gemm::PackedB(static_cast<const float*>(st->c[" +
                    std::to_string(ms_.constant(B)) + "]), " + L(N) + ", 1L, " +
                    std::to_string(K) + ", " + std::to_string(N) + ");");
  }
  code_.open("");
  EpCode ep = epilogue(n, "b * " + L(M));
  const std::string pa = ptr(A), pbp = ptr(B);
  code_.line("const bool par = cg::batch_parallel(" + L(batch) + ", " +
             std::to_string(2.0 * M * N * K) + ");");
  code_.open("auto one = [&](long b)");
  code_.line("(void)b;");
  code_.line("dnnf::gemm::Options opt;");
  code_.line("opt.n_threads = par ? 1 : 0;");
  std::string out = ep.y + " + b * " + L(M * N);
  if (!pb.empty()) {
    code_.line("dnnf::gemm::gemm_f32_packed(" + std::to_string(M) + ", " + pa + " + (" + offa + "), " +
               L(K) + ", 1L, x.st->" + pb + ".view(), " + out + ", " + L(N) + ", " + ep.expr +
               ", dnnf::gemm::ProNone{}, opt);");
  } else {
    code_.line("dnnf::gemm::gemm_f32(" + std::to_string(M) + ", " + std::to_string(N) + ", " +
               std::to_string(K) + ", " + pa + " + (" + offa + "), " + L(K) + ", 1L, " + pbp +
               " + (" + offb + "), " + L(N) + ", 1L, " + out + ", " + L(N) + ", " + ep.expr +
               ", dnnf::gemm::ProNone{}, opt);");
  }
  code_.close("};");
  code_.line("if (par) dnnf::parallel_for(" + std::to_string(batch) + ", [&](int b) { one(b); });");
  code_.line("else for (long b = 0; b < " + L(batch) + "; ++b) one(b);");
  code_.close();
  stages_.push_back("gemm " + std::to_string(batch) + "x[" + std::to_string(M) + "x" +
                    std::to_string(N) + "x" + std::to_string(K) + "]" + (pb.empty() ? "" : " packed-B") +
                    (epilogues_.count(n.id) ? " +epilogue(" + std::to_string(epilogues_[n.id].nodes.size()) + " ops)" : ""));
}

void BlockLowerer::emit_gemm(const Node& n) {
  need_f32(g_, n);
  InferCtx c(g_, n);
  const ValueId A = n.inputs[0], B = n.inputs[1], O = n.outputs[0];
  const ValueId Cv = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
  const std::vector<int64_t> ad = dims_of(g_, A), od = dims_of(g_, O);
  const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  const int64_t M = od[0], N = od[1], K = ta ? ad[0] : ad[1];
  const std::string rsa = ta ? "1L" : L(K), csa = ta ? L(M) : "1L";
  const std::string rsb = tb ? "1L" : L(N), csb = tb ? L(K) : "1L";
  std::string pb;
  if (g_.value(B).constant) {
    pb = "w" + std::to_string(ms_.counter++);
    ms_.members.push_back("dnnf::gemm::PackedB " + pb + ";");
    ms_.create.line("st->" + pb + " = dnnf::gemm::PackedB(static_cast<const float*>(st->c[" +
                    std::to_string(ms_.constant(B)) + "]), " + rsb + ", " + csb + ", " +
                    std::to_string(K) + ", " + std::to_string(N) + ");");
  }
  auto pre = [&](ExprBuilder& em) {
    if (alpha != 1.0) em.accumulate("mul", em.literal(alpha));
    if (Cv == kNoValue || beta == 0.0) return;
    std::vector<int64_t> cd = dims_of(g_, Cv);
    std::vector<IExpr> ci;  // C broadcast to [M, N]: vars 0 and 1 are the epilogue's row and col
    std::vector<IExpr> oi{IExpr::var(0), IExpr::var(1)};
    for (size_t k = 0; k < cd.size(); ++k)
      ci.push_back(cd[k] == 1 ? IExpr::constant(0) : oi[2 - cd.size() + k]);
    Ref cv = em.eval(Cv, ci);
    if (beta != 1.0) {
      Ew mul;
      mul.kind = Ew::Kind::Call;
      mul.name = "v_mul";
      mul.kids.resize(2);
      mul.kids[1].kind = Ew::Kind::Const;
      mul.kids[1].value = beta;
      cv = em.compute_inline(mul, {cv});
    }
    em.accumulate("add", cv);
  };
  const bool needs_pre = alpha != 1.0 || (Cv != kNoValue && beta != 0.0);
  code_.open("");
  EpCode ep = needs_pre ? epilogue(n, "0L", pre) : epilogue(n, "0L");
  code_.line("dnnf::gemm::Options opt;");
  if (!pb.empty()) {
    code_.line("dnnf::gemm::gemm_f32_packed(" + std::to_string(M) + ", " + ptr(A) + ", " + rsa + ", " +
               csa + ", x.st->" + pb + ".view(), " + ep.y + ", " + L(N) + ", " + ep.expr +
               ", dnnf::gemm::ProNone{}, opt);");
  } else {
    code_.line("dnnf::gemm::gemm_f32(" + std::to_string(M) + ", " + std::to_string(N) + ", " +
               std::to_string(K) + ", " + ptr(A) + ", " + rsa + ", " + csa + ", " + ptr(B) + ", " +
               rsb + ", " + csb + ", " + ep.y + ", " + L(N) + ", " + ep.expr +
               ", dnnf::gemm::ProNone{}, opt);");
  }
  code_.close();
  stages_.push_back("gemm [" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                    "]" + (pb.empty() ? "" : " packed-B") +
                    (epilogues_.count(n.id) ? " +epilogue(" + std::to_string(epilogues_[n.id].nodes.size()) + " ops)" : ""));
}

}  // namespace dnnf::cg
