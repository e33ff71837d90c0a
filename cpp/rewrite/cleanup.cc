// Classic clean-ups (paper §4.2 "other optimizations"): dead code, common
// subexpressions, no-op removal and layout-chain collapse.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "ir/errors.h"
#include "rewrite/passes.h"
#include "rewrite/rebuild.h"

namespace dnnf {

Graph eliminate_dead_code(const Graph& g) {
  std::vector<bool> live(g.values().size(), false);
  for (ValueId o : g.outputs()) live[o] = true;
  std::vector<bool> keep(g.nodes().size(), false);
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    bool used = false;
    for (ValueId o : it->outputs) used |= live[o];
    if (!used) continue;
    keep[it->id] = true;
    for (ValueId in : it->inputs)
      if (in != kNoValue) live[in] = true;
  }
  Rebuilder rb(g);
  for (const Node& n : g.nodes())
    if (keep[n.id]) rb.copy(n);
  Graph out = rb.finish();
  // Drop constants nothing reads any more: rebuild once more without them.
  std::vector<bool> read(out.values().size(), false);
  for (const Node& n : out.nodes())
    for (ValueId in : n.inputs)
      if (in != kNoValue) read[in] = true;
  for (ValueId o : out.outputs()) read[o] = true;
  Graph pruned(out.name());
  std::vector<ValueId> map(out.values().size(), kNoValue);
  for (ValueId in : out.inputs()) map[in] = pruned.add_input(out.value(in).name, out.value(in).type);
  for (ValueId c : out.constants())
    if (read[c]) map[c] = pruned.add_constant(out.value(c).name, out.value(c).constant);
  for (const Node& n : out.nodes()) {
    std::vector<ValueId> ins;
    for (ValueId in : n.inputs) ins.push_back(in == kNoValue ? kNoValue : map[in]);
    std::vector<TensorType> types;
    std::vector<std::string> names;
    for (ValueId o : n.outputs) { types.push_back(out.value(o).type); names.push_back(out.value(o).name); }
    auto outs = pruned.add_node_typed(n.op, ins, n.attrs, types, n.name, names);
    for (size_t i = 0; i < outs.size(); ++i) map[n.outputs[i]] = outs[i];
  }
  std::vector<ValueId> gouts;
  for (ValueId o : out.outputs()) gouts.push_back(map[o]);
  pruned.set_outputs(gouts);
  return pruned;
}

namespace {

// Two constants are the same value when type and bytes agree. Weights too: the weight
// rewrites (fold_matmul_scale, combine_sibling_matmuls) make one new constant per layer, equal
// where the layers share their weights (ALBERT), and one copy is one packing, in memory and
// in cache. Constants are grouped by type and first bytes, so unequal weights are rarely
// compared and then differ early.
bool same_constant(const Value& a, const Value& b) {
  return a.constant && b.constant && a.type == b.type && a.constant->same_as(*b.constant);
}

std::string constant_key(const Value& v) {
  const size_t n = std::min<size_t>(16, v.constant->nbytes());
  return v.type.str() + "|" + (n ? std::string(static_cast<const char*>(v.constant->data), n) : std::string());
}

}  // namespace

Graph eliminate_common_subexpressions(const Graph& g) {
  std::map<std::tuple<OpKind, std::vector<ValueId>, size_t>, std::vector<NodeId>> seen;
  Rebuilder rb(g);
  Graph& d = rb.dst();
  // Equal constants: every one reads as the first (the others are left dead).
  std::map<std::string, std::vector<ValueId>> groups;
  for (ValueId c : g.constants()) {
    std::vector<ValueId>& group = groups[constant_key(g.value(c))];
    auto same = std::find_if(group.begin(), group.end(),
                             [&](ValueId e) { return same_constant(g.value(e), g.value(c)); });
    if (same != group.end()) {
      rb.alias(c, rb.map(*same));
    } else {
      group.push_back(c);
    }
  }
  for (const Node& n : g.nodes()) {
    auto key = std::make_tuple(n.op, rb.map(n.inputs), n.outputs.size());
    bool merged = false;
    for (NodeId prev : seen[key]) {
      const Node& p = d.node(prev);
      if (p.attrs != n.attrs) continue;
      rb.replace(n, p.outputs);
      merged = true;
      break;
    }
    if (merged) continue;
    auto outs = rb.copy(n);
    seen[key].push_back(d.value(outs[0]).producer);
  }
  return eliminate_dead_code(rb.finish());
}

namespace {

bool const_all(const Graph& g, ValueId v, int64_t want) {
  if (v == kNoValue || !g.value(v).constant) return false;
  auto xs = g.value(v).constant->to_ints();
  return std::all_of(xs.begin(), xs.end(), [&](int64_t x) { return x == want; });
}

bool identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Whether node `n` (of graph `g`) returns its first input unchanged.
bool is_noop(const Graph& g, const Node& n) {
  if (n.outputs.empty() || n.inputs.empty() || n.inputs[0] == kNoValue) return false;
  const TensorType& in = g.value(n.inputs[0]).type;
  const TensorType& out = g.value(n.outputs[0]).type;
  if (in != out) return false;
  switch (n.op) {
    case OpKind::Identity: case OpKind::Reshape: case OpKind::Expand: case OpKind::Cast:
    case OpKind::Squeeze: case OpKind::Unsqueeze: case OpKind::Flatten:
      return true;
    case OpKind::Dropout:  // inference: the mask output must be unused
      return n.outputs.size() == 1 || g.consumers(n.outputs[1]).empty();
    case OpKind::Transpose:
      return !n.has_attr("perm") || identity_perm(n.attrs.at("perm").ints) || in.shape.size() <= 1;
    case OpKind::Concat: case OpKind::Max: case OpKind::Min: case OpKind::Sum: case OpKind::Mean:
      return n.inputs.size() == 1;
    case OpKind::Tile: return const_all(g, n.inputs[1], 1);
    case OpKind::Pad: return const_all(g, n.inputs[1], 0);
    case OpKind::Slice:  // same shape and unit steps: every element stays in place
      return n.inputs.size() < 5 || n.inputs[4] == kNoValue || const_all(g, n.inputs[4], 1);
    default: return false;
  }
}

}  // namespace

Graph remove_identities(const Graph& g) {
  Rebuilder rb(g);
  for (const Node& n : g.nodes()) {
    if (n.outputs.size() == 1 && is_noop(g, n)) rb.replace(n, {rb.map(n.inputs[0])});
    else if (n.op == OpKind::Dropout && is_noop(g, n)) rb.replace(n, {rb.map(n.inputs[0]), kNoValue});
    else rb.copy(n);
  }
  return eliminate_dead_code(rb.finish());
}

namespace {

bool is_reshape_like(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Flatten || k == OpKind::Squeeze || k == OpKind::Unsqueeze;
}

TensorPtr i64_vector(const std::vector<int64_t>& v) {
  TensorType t{DType::I64, {Dim(static_cast<int64_t>(v.size()))}};
  return TensorData::copy_of(t, v.data());
}

}  // namespace

Graph merge_layout_chains(const Graph& g) {
  Rebuilder rb(g);
  Graph& d = rb.dst();
  for (const Node& n : g.nodes()) {
    ValueId in = n.inputs.empty() ? kNoValue : rb.map(n.inputs[0]);
    const Value* src = in == kNoValue ? nullptr : &d.value(in);
    const Node* prod = src && src->producer >= 0 ? &d.node(src->producer) : nullptr;
    // reshape-like(reshape-like(x)) -> Reshape(x, final shape): only the final shape matters.
    if (is_reshape_like(n.op) && prod && is_reshape_like(prod->op) && g.value(n.outputs[0]).type.is_static()) {
      auto dims = g.value(n.outputs[0]).type.dims();
      ValueId shape = rb.constant(i64_vector(dims), "shape");
      rb.replace(n, {rb.emit(OpKind::Reshape, {prod->inputs[0], shape})});
      continue;
    }
    // Transpose(Transpose(x, p), q) = Transpose(x, p∘q): out[i] = x-axis p[q[i]].
    if (n.op == OpKind::Transpose && prod && prod->op == OpKind::Transpose) {
      size_t r = src->type.shape.size();
      auto perm_of = [r](const Node& t) {
        if (t.has_attr("perm")) return t.attrs.at("perm").ints;
        std::vector<int64_t> p(r);
        for (size_t i = 0; i < r; ++i) p[i] = static_cast<int64_t>(r - 1 - i);
        return p;
      };
      auto p = perm_of(*prod), q = perm_of(n);
      std::vector<int64_t> pq(r);
      for (size_t i = 0; i < r; ++i) pq[i] = p[q[i]];
      if (identity_perm(pq)) { rb.replace(n, {prod->inputs[0]}); continue; }
      Attrs a;
      a["perm"] = Attr::of_ints(pq);
      rb.replace(n, {rb.emit(OpKind::Transpose, {prod->inputs[0]}, a)});
      continue;
    }
    rb.copy(n);
  }
  return eliminate_dead_code(rb.finish());
}

}  // namespace dnnf
