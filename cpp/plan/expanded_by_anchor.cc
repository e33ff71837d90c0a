// Inputs an anchor's kernel computes itself (paper §4.3 beyond its table, which keeps
// Many-to-Many + Many-to-Many apart): on the CPU a depthwise NhwcConv computes its input rows
// from the pointwise NhwcConv that makes them (an inverted residual's expansion, MobileNetV2,
// EfficientNet, MnasNet), a few rows at a time into a ring that stays in cache
// (conv_nhwc.h conv_nhwc_expand_f32; codegen/expand_rows.cc lowers it). The expanded tensor,
// the largest of such a network (112x112x96 floats at MobileNetV2's second block), is then
// neither written nor read back.
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>

#include "ir/errors.h"
#include "ir/mapping.h"
#include "ir/shape_rules.h"
#include "ir/window.h"
#include "plan/plan.h"
#include "plan/profile_db.h"

namespace dnnf {

namespace {

// The window of a 2-D channels-last convolution with constant weights, f32, static shapes.
bool nhwc_window(const Graph& g, const Node& n, Window& w, WindowPlacement& at) {
  if (n.op != OpKind::NhwcConv || n.inputs.size() < 2 || n.outputs.size() != 1 || !g.value(n.inputs[1]).constant)
    return false;
  const TensorType& x = g.value(n.inputs[0]).type;
  const TensorType& y = g.value(n.outputs[0]).type;
  if (x.dtype != DType::F32 || y.dtype != DType::F32 || !x.is_static() || !y.is_static() || x.shape.size() != 4)
    return false;
  try {
    InferCtx c(g, n);
    w = read_window(c, 2, 1);
    at = place_window(w, {x.shape[1].value, x.shape[2].value});
  } catch (const Error&) {
    return false;
  }
  return true;
}

int64_t group_of(const Node& n) { return n.attrs.count("group") ? n.attrs.at("group").i : 1; }

}  // namespace

int64_t expand_min_bytes() {
  if (const char* e = std::getenv("DNNF_EXPAND_MIN_BYTES"); e && *e) {
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (end && *end == 0 && v >= 0) return v;
  }
  long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
  l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return 2 * static_cast<int64_t>(l2 > 0 ? l2 : 1L << 20);
}

bool expands_pointwise(const Graph& g, const Node& n) {
  Window w;
  WindowPlacement at;
  if (!nhwc_window(g, n, w, at) || group_of(n) != 1) return false;
  for (size_t i = 0; i < 2; ++i)
    if (w.kernel[i] != 1 || w.strides[i] != 1 || at.begin[i] != 0 || at.end[i] != 0) return false;
  return true;
}

NodeId pointwise_expanded_by(const Graph& g, const std::string& target, NodeId dw, std::vector<NodeId>* chain) {
  const Node& d = g.node(dw);
  Window w;
  WindowPlacement at;
  if (target != "cpu" || !nhwc_window(g, d, w, at)) return -1;
  const TensorType& x = g.value(d.inputs[0]).type;
  const int64_t C = x.shape.back().value, W = x.shape[2].value;
  if (group_of(d) != C || g.value(d.outputs[0]).type.shape.back().value != C) return -1;
  if ((w.kernel[0] - 1) * w.dilations[0] + 1 > 16) return -1;
  // Rows narrower than this make a GEMM of too few pixels per call (a register tile is 4-8
  // rows of pixels). Whether a wider one pays is the planner's decision (expansion_estimate,
  // or a measurement in the profiling database).
  if (W < kExpandMinWidth) return -1;
  // Back from x through One-to-One ops of x's shape (the pointwise convolution's epilogue, a
  // chain or a diamond such as Swish's Sigmoid and Mul) to one pointwise convolution.
  std::set<NodeId> between;
  NodeId pw = -1;
  std::vector<ValueId> todo{d.inputs[0]};
  std::set<ValueId> seen{d.inputs[0]};
  while (!todo.empty()) {
    const ValueId v = todo.back();
    todo.pop_back();
    const NodeId p = g.value(v).producer;
    if (p < 0) return -1;
    const Node& n = g.node(p);
    if (n.op == OpKind::NhwcConv) {
      if ((pw >= 0 && pw != p) || !expands_pointwise(g, n)) return -1;
      pw = p;
      continue;
    }
    if (node_mapping_type(g, n) != MappingType::OneToOne || n.outputs.size() != 1 || between.size() >= 16) return -1;
    between.insert(p);
    // The operands of x's shape made by a node are on the convolution's side; the others
    // (constants, values from elsewhere) the epilogue reads.
    for (ValueId u : n.inputs)
      if (u != kNoValue && g.value(u).producer >= 0 && g.value(u).type.shape == x.shape && seen.insert(u).second)
        todo.push_back(u);
  }
  if (pw < 0) return -1;
  // Closed: what the convolution and these ops make is read by them and by d only (x alone by
  // d), and is no graph output.
  std::vector<NodeId> all(between.begin(), between.end());
  all.push_back(pw);
  for (NodeId n : all)
    for (ValueId v : g.node(n).outputs) {
      for (ValueId o : g.outputs())
        if (o == v) return -1;
      for (NodeId c : g.consumers(v))
        if (c == dw ? v != d.inputs[0] : !between.count(c)) return -1;
    }
  if (g.consumers(d.inputs[0]).size() != 1) return -1;
  if (chain) chain->assign(between.begin(), between.end());
  return pw;
}

std::string expansion_bucket(const Graph& g, NodeId dw, NodeId pw) {
  const TensorType& x = g.value(g.node(dw).inputs[0]).type;
  const TensorType& in = g.value(g.node(pw).inputs[0]).type;
  Window w;
  WindowPlacement at;
  int64_t stride = 1;
  if (nhwc_window(g, g.node(dw), w, at)) stride = w.strides[0];
  return shape_bucket(x.numel()) + " w" + std::to_string(x.shape[2].value) + " k" +
         std::to_string(in.shape.back().value) + " c" + std::to_string(x.shape.back().value) + " s" +
         std::to_string(stride);
}

bool expansion_estimate(const Graph& g, NodeId dw, std::string* why) {
  const int64_t bytes = static_cast<int64_t>(g.value(g.node(dw).inputs[0]).type.nbytes());
  const int64_t bound = expand_min_bytes();
  const bool fuse = bytes > bound;
  if (why)
    *why = "the expanded tensor's " + std::to_string(bytes) + " B " + (fuse ? "> " : "<= ") +
           std::to_string(bound) + " B (twice the L2, or $DNNF_EXPAND_MIN_BYTES)";
  return fuse;
}

}  // namespace dnnf
