// Anchors on the prelude's convolution, pooling, row and irregular kernels (paper §4.4):
// each call passes the block's fused epilogue (see BlockLowerer::epilogue).
#include "codegen/lower.h"
#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf::cg {

namespace {

int64_t prod(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t k = from; k < to && k < d.size(); ++k) n *= d[k];
  return n;
}
std::string L(int64_t v) { return std::to_string(v) + "L"; }

}  // namespace

void BlockLowerer::emit_library(const Node& n) {
  for (ValueId v : n.inputs)
    if (v != kNoValue && g_.value(v).type.dtype != DType::F32 &&
        !(g_.value(v).constant && is_integer(g_.value(v).type.dtype)))
      throw UnsupportedOperatorError(std::string("code generation supports ") + op_info(n.op).name +
                                     " on f32 only (node '" + n.name + "')");
  InferCtx c(g_, n);
  const std::vector<int64_t> id = dims_of(g_, n.inputs[0]);
  const int64_t r = static_cast<int64_t>(id.size());
  auto axis = [&](int64_t dflt) {
    int64_t a = c.attr_int("axis", dflt);
    return a < 0 ? a + r : a;
  };
  std::string call;
  switch (n.op) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      int64_t a = axis(-1);
      code_.open("");
      EpCode ep = epilogue(n, "0L");
      code_.line(std::string("dnnf::rowops::") + (n.op == OpKind::Softmax ? "softmax_f32" : "log_softmax_f32") +
                 "(" + L(prod(id, 0, a)) + ", " + L(id[a]) + ", " + L(prod(id, a + 1, id.size())) + ", " +
                 ptr(n.inputs[0]) + ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string(op_info(n.op).name) + " rows" + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::LayerNormalization: {
      int64_t a = axis(-1);
      int64_t norm = prod(id, a, id.size());
      auto full = [&](size_t i) -> std::string {
        if (n.inputs.size() <= i || n.inputs[i] == kNoValue) return "nullptr";
        if (g_.value(n.inputs[i]).type.numel() != norm)
          throw UnsupportedOperatorError("LayerNormalization with a broadcast scale or bias (node '" + n.name + "')");
        return ptr(n.inputs[i]);
      };
      auto opt_out = [&](size_t i) -> std::string {
        if (n.outputs.size() <= i) return "nullptr";
        return ptr(n.outputs[i]);
      };
      code_.open("");
      std::string s = full(1), b = full(2), mo = opt_out(1), io = opt_out(2);
      EpCode ep = epilogue(n, "0L");
      code_.line("dnnf::rowops::layer_norm_f32(" + L(prod(id, 0, a)) + ", " + L(norm) + ", " +
                 ptr(n.inputs[0]) + ", " + s + ", " + b + ", " +
                 literal(c.attr_float("epsilon", 1e-5), DType::F32) + ", " + ep.y + ", " + mo + ", " +
                 io + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string("LayerNormalization rows") + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    case OpKind::ReduceMean:
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
    case OpKind::ReduceProd:
    case OpKind::ReduceL2: {
      std::vector<int64_t> axes;
      if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) axes = const_vector(c, 1, "axes");
      else axes = c.attr_ints("axes");
      unsigned mask = 0;
      if (axes.empty()) {
        if (c.attr_int("noop_with_empty_axes", 0)) mask = 0;
        else mask = (1u << r) - 1u;
      }
      for (int64_t x : axes) mask |= 1u << (x < 0 ? x + r : x);
      if (r > 8) throw UnsupportedOperatorError("reductions of rank > 8");
      const char* kind = n.op == OpKind::ReduceMean ? "Mean" : n.op == OpKind::ReduceSum ? "Sum"
                        : n.op == OpKind::ReduceMax ? "Max" : n.op == OpKind::ReduceMin ? "Min"
                        : n.op == OpKind::ReduceProd ? "Prod" : "L2";
      std::string shape;
      for (int64_t d : id) shape += (shape.empty() ? "" : ", ") + L(d);
      code_.open("");
      code_.line("static const long shape[] = {" + (shape.empty() ? std::string("1L") : shape) + "};");
      EpCode ep = epilogue(n, "0L");
      code_.line(std::string("dnnf::rowops::reduce_f32<dnnf::rowops::ReduceKind::") + kind + ">(" +
                 std::to_string(r) + ", shape, " + std::to_string(mask) + "u, " + ptr(n.inputs[0]) +
                 ", " + ep.y + ", " + ep.expr + ");");
      code_.close();
      stages_.push_back(std::string(op_info(n.op).name) + (epilogues_.count(n.id) ? " +epilogue" : ""));
      return;
    }
    default:
      break;
  }
  throw UnsupportedOperatorError(std::string("code generation does not support ") +
                                 op_info(n.op).name + " yet (node '" + n.name + "')");
}

}  // namespace dnnf::cg
