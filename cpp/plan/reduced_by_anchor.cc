// Reductions an anchor's kernel computes as it stores its output (paper §4.3, beyond its
// table, which keeps Many-to-Many + Many-to-Many apart): on the CPU the depthwise NhwcConv
// kernel adds up each row of pixels right after storing it (codegen/conv_mean.cc), so the
// global pool of a squeeze-and-excitation gate after it is no pass of its own.
#include <algorithm>

#include "ir/errors.h"
#include "ir/mapping.h"
#include "ir/shape_rules.h"
#include "plan/plan.h"

namespace dnnf {

bool reduces_pixels(const Graph& g, const Node& n) {
  if ((n.op != OpKind::ReduceMean && n.op != OpKind::ReduceSum) || n.inputs.empty() || n.outputs.size() != 1)
    return false;
  const TensorType& t = g.value(n.inputs[0]).type;
  const int64_t r = static_cast<int64_t>(t.shape.size());
  if (t.dtype != DType::F32 || !t.is_static() || r < 3 || r > 5) return false;
  std::optional<std::vector<int64_t>> axes;
  try {
    axes = InferCtx(g, n).const_ints(1, "axes");
  } catch (const Error&) {
    return false;
  }
  if (!axes || axes->size() != static_cast<size_t>(r - 2)) return false;
  std::vector<int64_t> a = *axes;
  for (int64_t& v : a) v = v < 0 ? v + r : v;
  std::sort(a.begin(), a.end());
  for (int64_t i = 1; i + 1 < r; ++i)
    if (a[static_cast<size_t>(i - 1)] != i) return false;
  return true;
}

NodeId anchor_reducing_as_it_stores(const Graph& g, const std::string& target, NodeId red,
                                    const std::function<bool(NodeId)>& in_block) {
  const Node& r = g.node(red);
  if (target != "cpu" || !reduces_pixels(g, r)) return -1;
  // Back from the reduced value through One-to-One ops of the block that keep its shape (the
  // convolution's epilogue, e.g. Swish's Sigmoid and Mul) to the convolution.
  const TensorType& shape = g.value(r.inputs[0]).type;
  ValueId v = r.inputs[0];
  for (int steps = 0; steps < 64; ++steps) {
    const NodeId p = g.value(v).producer;
    if (p < 0 || !in_block(p)) return -1;
    const Node& n = g.node(p);
    if (n.op == OpKind::NhwcConv) {
      const TensorType& x = g.value(n.inputs[0]).type;
      const int64_t C = x.shape.back().value, M = shape.shape.back().value;
      const Attr* group = n.attrs.count("group") ? &n.attrs.at("group") : nullptr;
      const bool depthwise = group && group->i == C && C == M && g.value(n.inputs[1]).constant;
      return depthwise && g.value(n.outputs[0]).type == shape ? p : -1;
    }
    if (node_mapping_type(g, n) != MappingType::OneToOne || g.value(n.outputs[0]).type.shape != shape.shape) return -1;
    ValueId next = kNoValue;  // the operand made in the block with the same shape
    for (ValueId x : n.inputs)
      if (x != kNoValue && g.value(x).producer >= 0 && in_block(g.value(x).producer) &&
          g.value(x).type.shape == shape.shape) {
        next = x;
        break;
      }
    if (next == kNoValue) return -1;
    v = next;
  }
  return -1;
}

}  // namespace dnnf
