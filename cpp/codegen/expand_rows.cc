// A pointwise convolution computed by the depthwise convolution it feeds (the planner's
// expansion, plan/expanded_by_anchor.cc): the depthwise kernel computes each input row it needs
// with a GEMM over that row's pixels into a ring of rows that stays in cache
// (conv_nhwc_expand_f32), so the expanded tensor is never stored. Part of BlockLowerer (lower.h):
// lower() finds the pairs before it places buffers (the expanded value gets none) and moves the
// pointwise stage into the depthwise one's call once both are emitted.
#include <algorithm>

#include "codegen/anchors.h"
#include "codegen/lower.h"
#include "ir/errors.h"
#include "plan/plan.h"

namespace dnnf::cg {

void BlockLowerer::find_expansions() {
  if (!opt_.expand_rows) return;
  std::set<ValueId> in_concats;  // values an assembled Concat holds, and the Concats
  for (const auto& [cat, runs] : assembled_) {
    in_concats.insert(cat);
    for (const auto& [u, part] : runs) in_concats.insert(u);
  }
  for (NodeId id : b_.nodes) {
    const Node& d = g_.node(id);
    if (d.op != OpKind::NhwcConv || !is_anchor(d)) continue;
    std::vector<NodeId> chain;
    const NodeId pw = pointwise_expanded_by(g_, "cpu", id, &chain);
    if (pw < 0 || !inside_.count(pw) || !is_anchor(g_.node(pw))) continue;
    const Node& p = g_.node(pw);
    const ValueId x = d.inputs[0];
    if (g_.value(x).type.numel() == 0 || g_.value(d.outputs[0]).type.numel() == 0) continue;
    // x lies nowhere else: not a block output, view, Concat part or channels-first read.
    if (block_outputs_.count(x) || views_.count(x) || segments_.count(x) || planar_.count(x) || in_concats.count(x) ||
        !materialised_.count(x))
      continue;
    // p's epilogue is the chain, storing x only (or p has none and x is its output).
    auto ep = epilogues_.find(pw);
    if (chain.empty() ? ep != epilogues_.end() || x != p.outputs[0]
                      : ep == epilogues_.end() ||
                            std::set<NodeId>(ep->second.nodes.begin(), ep->second.nodes.end()) !=
                                std::set<NodeId>(chain.begin(), chain.end()) ||
                            ep->second.stores != std::vector<ValueId>{x})
      continue;
    // p reads its input where it lies (not channel segments, not channels first).
    if (segments_.count(p.inputs[0]) || planar_.count(p.inputs[0])) continue;
    // d writes its output dense (not into rows of a Concat).
    bool dense = !in_concats.count(d.outputs[0]);
    if (auto de = epilogues_.find(id); de != epilogues_.end())
      for (ValueId s : de->second.stores) dense = dense && !in_concats.count(s);
    if (!dense) continue;
    materialised_.erase(x);
    streamed_.insert(x);
    expand_[id] = pw;
  }
}

void BlockLowerer::expand_into(const Node& d) {
  auto it = expand_.find(d.id);
  if (it == expand_.end()) return;
  const Node& p = g_.node(it->second);
  const ValueId x = d.inputs[0];
  auto ps = std::find_if(plan_.stages.begin(), plan_.stages.end(),
                         [&](const Stage& s) { return s.kind == Stage::Kind::Anchor && s.anchor.node == &p; });
  if (ps == plan_.stages.end() || plan_.stages.back().kind != Stage::Kind::Anchor || plan_.stages.back().anchor.node != &d)
    throw InternalError("codegen: the expansion of '" + d.name + "' has no stage of '" + p.name + "' before it");
  const AnchorStage& pa = ps->anchor;
  AnchorStage& da = plan_.stages.back().anchor;
  // The call conv_nhwc_expand_f32 takes: [shape, x, packed weights, y, ep] on both sides, the
  // pointwise one storing x (dense, its epilogue leaving the store to the GEMM), the depthwise
  // one reading it as its x and writing a dense output.
  auto plain = [](const AnchorStage& a) {
    return a.kind == AnchorKind::NhwcConv && a.args.size() == 5 && a.args[0].ints.size() == 25 &&
           a.args[0].ints[23] == 0 && a.args[0].ints[24] == 0 && a.args[1].kind == AnchorArg::Kind::Buffer &&
           a.args[2].kind == AnchorArg::Kind::Packed && a.args[3].kind == AnchorArg::Kind::Y;
  };
  if (!plain(pa) || !plain(da) || pa.ep.stores || pa.y != x || da.args[1].value != x || !pa.expand.empty())
    throw InternalError("codegen: '" + p.name + "' cannot be computed by '" + d.name + "' as planned");
  const std::string pl = ps->label;
  da.expand.push_back(std::move(ps->anchor));
  plan_.stages.back().label += " <- its input rows computed in it by " + pl;
  plan_.stages.erase(ps);
}

}  // namespace dnnf::cg
