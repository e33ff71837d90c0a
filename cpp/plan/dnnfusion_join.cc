// Whether one candidate joins a block of the DNNFusion planner (dnnfusion_planner.h): the
// mapping-type table's cell for the edge (paper Table 3), with its exceptions (a reduction the
// anchor's kernel computes as it stores, reduced_by_anchor.cc), the profiling database for
// yellow cells (profile_db.cc), cycles and the target's kernel-argument limit; and the reason
// recorded for every edge between the candidate and the block, fused or not.
#include <algorithm>
#include <optional>
#include <set>

#include "ir/errors.h"
#include "plan/dnnfusion_planner.h"
#include "rewrite/cost.h"

namespace dnnf::planner_detail {

Planner::Crossing Planner::crossing(int grp, NodeId cand) const {
  Crossing x;
  auto inside = [&](NodeId n) { return n == cand || in(grp, n); };
  std::vector<ValueId> vals;
  for (ValueId v : node(cand).outputs)
    for (NodeId r : readers_[v])
      if (in(grp, r)) { vals.push_back(v); break; }
  for (ValueId v : node(cand).inputs)
    if (v != kNoValue && g_.value(v).producer >= 0 && in(grp, g_.value(v).producer) &&
        std::find(vals.begin(), vals.end(), v) == vals.end())
      vals.push_back(v);
  for (ValueId v : vals) {
    bool outside = g_.is_graph_output(v);
    for (NodeId r : readers_[v]) outside |= !inside(r);
    if (outside) { x.kept.push_back(v); continue; }
    x.removed.push_back(v);
    int64_t e = numel_of(g_, v);
    if (e < 0 || x.elements < 0) {
      x.bytes = x.elements = -1;
    } else {
      x.elements += e;
      x.bytes += static_cast<int64_t>(g_.value(v).type.nbytes());
    }
    for (NodeId r : readers_[v])
      if (std::find(x.removed_readers.begin(), x.removed_readers.end(), r) == x.removed_readers.end())
        x.removed_readers.push_back(r);
  }
  return x;
}

int Planner::kernel_args(int grp, NodeId extra, int other_grp) const {
  auto inside = [&](NodeId n) { return n == extra || in(grp, n) || (other_grp >= 0 && in(other_grp, n)); };
  std::set<ValueId> args;
  std::vector<NodeId> nodes = members_[grp];
  if (extra >= 0) nodes.push_back(extra);
  if (other_grp >= 0) nodes.insert(nodes.end(), members_[other_grp].begin(), members_[other_grp].end());
  for (NodeId n : nodes) {
    for (ValueId v : node(n).inputs)
      if (v != kNoValue && (g_.value(v).producer < 0 || !inside(g_.value(v).producer))) args.insert(v);
    for (ValueId v : node(n).outputs) {
      bool out = g_.is_graph_output(v);
      for (NodeId r : readers_[v]) out |= !inside(r);
      if (out) args.insert(v);
    }
  }
  return static_cast<int>(args.size());
}

std::string Planner::value_list(const std::vector<ValueId>& vs) const {
  std::string s;
  for (ValueId v : vs) s += (s.empty() ? "%" : ", %") + g_.value(v).name;
  return s;
}

bool Planner::try_join(int grp, NodeId p, NodeId c, NodeId cand) {
  const bool cand_is_consumer = cand == c;
  const MappingType tp = cand_is_consumer ? gtype_[grp] : type_[p];
  const MappingType tc = cand_is_consumer ? type_[c] : gtype_[grp];
  const FusionRule& rule = fusion_rule(tp, tc);
  // The side that is already a block of several ops is marked: the table looks at the
  // block's fused type there, not at the op on the edge.
  const char* block_mark = members_[grp].size() > 1 ? " (block)" : "";
  std::string cell = std::string("table: ") + mapping_type_name(tp) + (cand_is_consumer ? block_mark : "") +
                     " + " + mapping_type_name(tc) + (cand_is_consumer ? "" : block_mark) + " -> " +
                     mapping_type_name(rule.fused) + ", " + decision_name(rule.decision) + " (" +
                     decision_color(rule.decision) + "): " + rule.why;
  const NodeId reducer = cand_is_consumer && rule.decision == Decision::Reject
                             ? anchor_reducing_as_it_stores(g_, opt_.target, c, [&](NodeId x) { return in(grp, x); })
                             : -1;
  if (reducer >= 0)  // the table's red cell, but the anchor's kernel computes it as it stores
    cell += "; but " + name(reducer) + "'s kernel reduces its output as it stores it, row by row in cache, so " +
            name(c) + " is no pass of its own -> fuse";
  else if (rule.decision == Decision::Reject)
    return refuse(grp, cand, p, c, cell);
  for (ValueId v : node(cand).inputs)
    if (written_apart(g_, v) && in(grp, g_.value(v).producer))
      return refuse(grp, cand, p, c, cell + "; but " + name(cand) + " reads %" + g_.value(v).name +
                              ", which its producer's kernel writes to memory in a call of its own -> keep apart");
  for (ValueId v : node(cand).outputs)
    if (written_apart(g_, v))
      for (NodeId r : readers_[v])
        if (in(grp, r))
          return refuse(grp, cand, p, c, cell + "; but " + name(r) + " reads %" + g_.value(v).name +
                                  ", which " + name(cand) + "'s kernel writes to memory in a call of its own -> keep apart");
  if (would_create_cycle(g_, group_of_, grp, group_of_[cand]))
    return refuse(grp, cand, p, c, cell + "; but fusing would form a cycle: a path between the block and " +
                            name(cand) + " runs through another kernel");
  if (opt_.max_kernel_args > 0) {
    int args = kernel_args(grp, cand);
    if (args > opt_.max_kernel_args)
      return refuse(grp, cand, p, c, cell + "; but the fused kernel would take " + std::to_string(args) +
                              " arguments, over the " + opt_.target + " limit of " +
                              std::to_string(opt_.max_kernel_args) + " (kernel-argument limit)");
  }
  Crossing x = crossing(grp, cand);
  std::string why = cell;
  std::optional<ProfileKey> yellow;  // the key a yellow pair looked up
  if (rule.decision == Decision::Profile) {
    if (x.removed.empty())
      return refuse(grp, cand, p, c, cell + "; " + value_list(x.kept) + " would still be written (also read "
                              "outside the block): fusing would remove no tensor and only add "
                              "index arithmetic -> keep apart");
    const ProfileKey key = profile_key(p, c, tp, tc, x.elements);
    Settlement s = settle_yellow(db_, key, pair_cost(grp, cand, x, tc));
    why += "; " + s.why;
    yellow = key;
    if (!s.fuse) {
      refuse(grp, cand, p, c, why);
      mark_yellow(p, c, key);
      return false;
    }
  } else if (x.removed.empty() && !x.kept.empty()) {
    why += "; " + value_list(x.kept) + " is still written (also read outside the block)";
  }
  if (reducer >= 0) reduced_.insert(cand);
  join(grp, cand, reducer >= 0 ? kM2M : rule.fused);
  record(p, c, true, why);
  if (yellow) mark_yellow(p, c, *yellow);
  // Other edges between the newcomer and the block are now inside it too.
  for (auto [a, b] : edges_between(grp, cand)) {
    if (a == p && b == c) continue;
    auto it = reasons_.find({a, b});
    if (it == reasons_.end() || !it->second.fused)
      record(a, b, true, "same block: " + name(cand) + " joined through " + name(p) + " -> " +
                             name(c) + " (" + why + ")");
  }
  return true;
}

std::vector<std::pair<NodeId, NodeId>> Planner::edges_between(int grp, NodeId cand) const {
  std::vector<std::pair<NodeId, NodeId>> out;
  for (NodeId p : producers(cand))
    if (in(grp, p)) out.push_back({p, cand});
  for (ValueId v : node(cand).outputs)
    for (NodeId r : readers_[v])
      if (in(grp, r) && std::find(out.begin(), out.end(), std::make_pair(cand, r)) == out.end())
        out.push_back({cand, r});
  return out;
}

bool Planner::refuse(int grp, NodeId cand, NodeId p, NodeId c, const std::string& why) {
  for (auto [a, b] : edges_between(grp, cand)) record(a, b, false, why);
  return reject(p, c, why);
}

ProfileKey Planner::profile_key(NodeId p, NodeId c, MappingType tp, MappingType tc, int64_t elements) const {
  ProfileKey k;
  k.target = target_;
  k.producer_op = node(p).info().name;
  k.consumer_op = node(c).info().name;
  k.producer_type = tp;
  k.consumer_type = tc;
  k.bucket = shape_bucket(elements);
  k.threads = opt_.threads;
  return k;
}

PairCost Planner::pair_cost(int grp, NodeId cand, const Crossing& x, MappingType consumer_type) const {
  PairCost pc;
  pc.bytes = x.bytes;
  pc.elements = x.elements;
  if (x.elements <= 0) return pc;
  bool cand_is_consumer = !x.removed.empty() && g_.value(x.removed[0]).producer != cand;
  std::vector<NodeId> cons = cand_is_consumer ? std::vector<NodeId>{cand} : members_[grp];
  std::vector<NodeId> prods = cand_is_consumer ? members_[grp] : std::vector<NodeId>{cand};
  if (consumer_type == MappingType::OneToMany) {
    int64_t largest = 0;
    for (NodeId n : cons)
      for (ValueId v : node(n).outputs) largest = std::max(largest, numel_of(g_, v));
    pc.reads = std::max<int64_t>(1, largest / x.elements);
  }
  std::set<NodeId> ends(x.removed_readers.begin(), x.removed_readers.end());
  for (ValueId v : x.removed) ends.insert(g_.value(v).producer);
  for (NodeId n : ends) {
    MappingType t = type_[n];
    if ((t == MappingType::Reorganize || t == MappingType::Shuffle) && !is_reshape_view(node(n).op))
      pc.index_ops += 2 * static_cast<int64_t>(g_.value(node(n).outputs[0]).type.shape.size());
  }
  for (NodeId n : prods) pc.producer_flops += node_flops(g_, node(n));
  return pc;
}

void Planner::join(int grp, NodeId cand, MappingType fused) {
  int old = group_of_[cand];
  for (NodeId n : members_[old]) {
    group_of_[n] = grp;
    planned_[n] = 1;
    members_[grp].push_back(n);
  }
  members_[old].clear();
  gtype_[grp] = fused;
  int anchors = 0;
  for (NodeId n : members_[grp]) anchors += type_[n] == kM2M && !reduced_.count(n) && !expanded_.count(n);
  // The table rejects Many-to-Many + Many-to-Many, and a block holding one is itself
  // Many-to-Many, so growth can never give a block two anchors (a reduction its anchor's
  // kernel computes as it stores is part of that anchor's call, and so is a pointwise
  // convolution whose output a depthwise one computes, fuse_expansions).
  if (anchors > 1) throw InternalError("dnnfusion planner: block of " + name(grp) + " has two anchors");
}

bool Planner::reject(NodeId p, NodeId c, std::string why) {
  record(p, c, false, std::move(why));
  return false;
}

void Planner::mark_yellow(NodeId p, NodeId c, const ProfileKey& key) {
  Reason& r = reasons_[{p, c}];
  r.yellow = true;
  r.yellow_producer_type = key.producer_type;
  r.yellow_consumer_type = key.consumer_type;
  r.yellow_bucket = key.bucket;
}

void Planner::record(NodeId p, NodeId c, bool fused, std::string why) {
  reasons_[{p, c}] = Reason{p, c, fused, std::move(why)};
}

void Planner::note_other_block(NodeId p, NodeId c, NodeId planned) {
  if (reasons_.count({p, c})) return;
  NodeId seed = -1;
  for (NodeId s : seeds_)
    if (group_of_[s] == group_of_[planned]) seed = s;
  record(p, c, false, "already fused: " + name(planned) + " belongs to the block seeded by " +
                          (seed >= 0 ? name(seed) : name(planned)));
}

}  // namespace dnnf::planner_detail
