// FLOP counts per operator.
#include "rewrite/cost.h"

#include <algorithm>

namespace dnnf {

namespace {

int64_t numel(const Graph& g, ValueId v) {
  const TensorType& t = g.value(v).type;
  return t.is_static() ? t.numel() : 0;  // symbolic sizes: unknown, counted as 0
}

// Per-element cost of elementwise ops, in flops. Transcendentals are weighted by their
// rough cost relative to a multiply so the rewrites prefer removing them.
int64_t elementwise_cost(OpKind k) {
  switch (k) {
    case OpKind::Exp: case OpKind::Log: case OpKind::Erf: case OpKind::Tanh:
    case OpKind::Sin: case OpKind::Cos: case OpKind::Pow: return 8;
    case OpKind::Tan: case OpKind::Asin: case OpKind::Acos: case OpKind::Atan: case OpKind::Sinh:
    case OpKind::Cosh: case OpKind::Asinh: case OpKind::Acosh: case OpKind::Atanh: return 12;  // libm per lane
    case OpKind::Sigmoid: case OpKind::Gelu: case OpKind::Softplus: case OpKind::Elu:
    case OpKind::Selu: return 10;
    case OpKind::Mish: return 15;  // one exp, one division, three multiply/adds (simd_math_body.h)
    case OpKind::Sqrt: case OpKind::Div: case OpKind::Reciprocal: case OpKind::Mod:
    case OpKind::QuantizeLinear: return 4;  // a division, a rounding and a clamp
    case OpKind::HardSwish: case OpKind::HardSigmoid: case OpKind::BatchNormalization: return 3;
    case OpKind::Identity: case OpKind::Dropout: case OpKind::Cast: case OpKind::Constant: return 0;
    default: return 1;
  }
}

}  // namespace

int64_t node_flops(const Graph& g, const Node& n) {
  if (n.outputs.empty()) return 0;
  int64_t out = numel(g, n.outputs[0]);
  auto in0 = [&] { return numel(g, n.inputs[0]); };
  switch (n.info().mapping) {
    case MappingType::Reorganize:
    case MappingType::Shuffle:
      return 0;
    case MappingType::OneToMany:
      return n.op == OpKind::Resize ? out * 4 : 0;
    case MappingType::OneToOne: {
      int64_t ins = 0;
      for (ValueId v : n.inputs) ins += v != kNoValue;
      int64_t per = elementwise_cost(n.op) * std::max<int64_t>(1, ins - 1);
      return out * per;
    }
    case MappingType::ManyToMany:
      break;
  }
  switch (n.op) {
    case OpKind::Conv:
    case OpKind::NhwcConv: {
      // 2 * out elements * (C_in / groups) * kernel volume
      const Shape& w = g.value(n.inputs[1]).type.shape;
      int64_t k = 1;
      for (size_t i = 1; i < w.size(); ++i) k *= w[i].is_static() ? w[i].value : 0;
      return 2 * out * k;
    }
    case OpKind::ConvTranspose: {
      const Shape& w = g.value(n.inputs[1]).type.shape;
      int64_t k = 1;
      for (size_t i = 1; i < w.size(); ++i) k *= w[i].is_static() ? w[i].value : 0;
      return 2 * in0() * k;
    }
    case OpKind::MatMul: case OpKind::Gemm: {
      const Shape& a = g.value(n.inputs[0]).type.shape;
      if (a.empty()) return 0;
      bool trans_a = n.op == OpKind::Gemm && n.has_attr("transA") && n.attrs.at("transA").i;
      const Dim& kd = a.size() == 1 ? a[0] : (trans_a ? a[a.size() - 2] : a.back());
      return 2 * out * (kd.is_static() ? kd.value : 0);
    }
    case OpKind::MaxPool: case OpKind::AveragePool:
    case OpKind::NhwcMaxPool: case OpKind::NhwcAveragePool: {
      int64_t k = 1;
      if (n.has_attr("kernel_shape"))
        for (int64_t d : n.attrs.at("kernel_shape").ints) k *= d;
      return out * k;
    }
    case OpKind::Softmax: case OpKind::LogSoftmax: return 12 * out;
    case OpKind::LayerNormalization: case OpKind::InstanceNormalization: return 8 * out;
    default:
      return in0();  // reductions, pooling, scans: one op per input element
  }
}

int64_t graph_flops(const Graph& g) {
  int64_t total = 0;
  for (const Node& n : g.nodes()) total += node_flops(g, n);
  return total;
}

}  // namespace dnnf
