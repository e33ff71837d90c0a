// The DNNFusion fusion planner (paper §4.3): grow blocks from One-to-One seeds along
// successors, then predecessors, as the mapping-type table allows; settle yellow cells
// with the profiling database; never form a cycle; respect the target's argument limit.
//
// Choices beyond the paper's text, each explained where it is made:
//  * Prologues last. An edge into a Many-to-Many op (producer -> anchor) is a prologue:
//    the anchor reads every input element many times, so an op fused before it is
//    recomputed per read (or needs a packing pass), while an op fused after it (epilogue)
//    runs once per output element in registers. Successor growth therefore defers a
//    Many-to-Many successor until predecessor growth is done, and predecessor growth leaves
//    a One-to-One producer of an anchor to the Many-to-Many op it could be the epilogue of.
//    The table still says green for these cells; this is the order of preference only.
//  * Multi-consumer producers. Blocks partition the graph (no op is duplicated), so
//    fusing a producer whose output is also read outside the block never adds work, but
//    the output is still written. Green cells fuse anyway (one launch and one read saved)
//    and the reason says the tensor is still written; yellow cells are rejected without
//    consulting the database, because their only gain, the removed tensor, is not there.
//  * Growth repeats (successors, predecessors) until the block stops changing, so a
//    candidate rejected for a cycle is retried once the path through it has joined.
//  * Expansions (fuse_expansions, after growth): a depthwise convolution's block takes the
//    block of the 1x1 convolution that makes its input, a red cell, because on the CPU the
//    depthwise kernel computes those rows itself into a ring in cache (expanded_by_anchor.cc);
//    where that pays: a yellow pair per expansion shape, measured into the profiling database,
//    else estimated by the expanded tensor's size against the caches (plan.h expand_min_bytes);
//    a measured difference within the noise is no answer, and the estimate decides it too.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "ir/errors.h"
#include "plan/dnnfusion_planner.h"
#include "rewrite/cost.h"

namespace dnnf {

namespace planner_detail {

FusionPlan Planner::run() {
  for (NodeId seed = pick_seed(); seed >= 0; seed = pick_seed()) {
    planned_[seed] = 1;
    seeds_.push_back(seed);
    grow(seed);
  }
  fuse_expansions();
  if (opt_.horizontal) fuse_horizontally();
  // Every edge between two nodes gets a reason; growth examines each boundary edge, so
  // this fallback only shows up if that invariant breaks.
  for (const Node& c : g_.nodes())
    for (NodeId p : producers(c.id))
      if (!reasons_.count({p, c.id}))
        reasons_[{p, c.id}] = {p, c.id, group_of_[p] == group_of_[c.id], "not examined by the planner"};
  std::vector<Reason> reasons;
  for (auto& [k, r] : reasons_) reasons.push_back(std::move(r));
  return finalize_plan(g_, "dnnfusion", group_of_, seeds_, std::move(reasons));
}

std::vector<NodeId> Planner::producers(NodeId c) const {
  std::vector<NodeId> out;
  for (ValueId v : node(c).inputs) {
    if (v == kNoValue) continue;
    NodeId p = g_.value(v).producer;
    if (p >= 0 && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

int64_t Planner::output_bytes(NodeId n) const {
  int64_t total = 0;
  for (ValueId v : node(n).outputs) {
    const TensorType& t = g_.value(v).type;
    if (!t.is_static()) return std::numeric_limits<int64_t>::max();
    total += static_cast<int64_t>(t.nbytes());
  }
  return total;
}

NodeId Planner::pick_seed() const {
  NodeId best = -1;
  int best_rank = 0;
  int64_t best_bytes = 0;
  for (const Node& nd : g_.nodes()) {
    if (planned_[nd.id]) continue;
    const int rank = seed_rank(nd.id);
    int64_t b = output_bytes(nd.id);
    if (best < 0 || rank < best_rank || (rank == best_rank && b < best_bytes)) {
      best = nd.id;
      best_rank = rank;
      best_bytes = b;
    }
  }
  return best;
}

int Planner::seed_rank(NodeId n) const {
  if (type_[n] == kO2O) return 0;
  return re_indexes(node(n).op) ? 2 : 1;
}

void Planner::grow(int grp) {
  std::vector<std::pair<NodeId, NodeId>> deferred;
  for (;;) {
    bool changed = grow_successors(grp, deferred);
    changed |= grow_predecessors(grp);
    if (changed) continue;
    for (auto [m, c] : deferred)
      if (!planned_[c] && try_join(grp, m, c, c)) changed = true;
    deferred.clear();
    if (!changed) break;
  }
}

bool Planner::grow_successors(int grp, std::vector<std::pair<NodeId, NodeId>>& deferred) {
  bool changed = false;
  for (size_t i = 0; i < members_[grp].size(); ++i) {  // members_ grows: a breadth-first walk
    NodeId m = members_[grp][i];
    for (ValueId v : node(m).outputs)
      for (NodeId c : readers_[v]) {
        if (in(grp, c)) continue;
        if (planned_[c]) { note_other_block(m, c, c); continue; }
        // Deferred: a Many-to-Many successor (a prologue), and a Concat after a value whose
        // anchor is still to join (that anchor first, taking the value as its epilogue, so
        // the Concat's other inputs can stay with theirs and it is assembled in place).
        if ((type_[c] == kM2M && fusion_rule(gtype_[grp], kM2M).decision != Decision::Reject) ||
            (node(c).op == OpKind::Concat && type_[m] == kO2O && epilogue_anchor(m) >= 0)) {
          if (std::find(deferred.begin(), deferred.end(), std::make_pair(m, c)) == deferred.end())
            deferred.push_back({m, c});
          continue;
        }
        if (view_left_for_reader(grp, m, c)) continue;
        changed |= try_join(grp, m, c, c);
      }
  }
  return changed;
}

bool Planner::re_indexes(OpKind k) {
  return is_reshape_view(k) || k == OpKind::Transpose || k == OpKind::Slice || k == OpKind::Split ||
         k == OpKind::Identity;
}

bool Planner::view_left_for_reader(int grp, NodeId m, NodeId c) {
  if (!re_indexes(node(c).op)) return false;
  const ValueId v = node(c).inputs[0];
  if (v == kNoValue || g_.value(v).producer != m) return false;
  bool written = g_.is_graph_output(v);
  for (NodeId r : readers_[v])
    if (r != c && !in(grp, r)) written = true;
  // Or v re-indexes, through members of the block, a value in memory (another block's
  // output): the anchors read c's result in place from there just as well.
  ValueId root = v;
  while (g_.value(root).producer >= 0 && in(grp, g_.value(root).producer) &&
         re_indexes(node(g_.value(root).producer).op))
    root = node(g_.value(root).producer).inputs[0];
  if (root != v && (g_.value(root).producer < 0 || !in(grp, g_.value(root).producer))) written = true;
  if (!written) return false;
  std::vector<NodeId> stack = {c};
  NodeId anchor = -1;
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    for (ValueId o : node(n).outputs) {
      if (g_.is_graph_output(o)) return false;
      for (NodeId r : readers_[o]) {
        if (type_[r] == kM2M) anchor = r;
        else if (re_indexes(node(r).op) && !in(grp, r)) stack.push_back(r);
        else return false;
      }
    }
  }
  if (anchor < 0) return false;
  refuse(grp, c, m, c,
         "left for its reader: " + name(c) + " only re-indexes %" + g_.value(v).name +
             ", which is in memory anyway (read outside the block, or a view of another block's "
             "output), on the way to " + name(anchor) + " (" + node(anchor).info().name +
             "), which reads it in place");
  return true;
}

bool Planner::grow_predecessors(int grp) {
  bool changed = false;
  for (;;) {
    std::vector<std::pair<NodeId, NodeId>> cands;  // (producer, member)
    for (NodeId m : members_[grp])
      for (NodeId p : producers(m)) {
        if (in(grp, p)) continue;
        if (planned_[p]) { note_other_block(p, m, p); continue; }
        cands.push_back({p, m});
      }
    // Nearest producer first (latest in topological order): joining it first keeps the
    // block convex for the ones above it.
    std::sort(cands.begin(), cands.end(), [](auto a, auto b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    bool joined = false;
    for (size_t i = 0; i < cands.size() && !joined; ++i) {
      auto [p, m] = cands[i];
      if (i > 0 && cands[i - 1].first == p) continue;
      // A One-to-One producer that can be an anchor's epilogue stays for it where the block
      // would only use it as a prologue (recomputed per read) or copy it into a Concat (which
      // the anchor's kernel writes in place instead).
      const NodeId reader = feeds_anchor(grp, p);
      const NodeId anchor = type_[p] == kO2O && (reader >= 0 || only_concats_read(grp, p)) ? epilogue_anchor(p) : -1;
      if (anchor >= 0) {
        const std::string as = name(p) + " can be the epilogue of " + name(anchor) + " (" + node(anchor).info().name + "), ";
        refuse(grp, p, p, reader >= 0 ? reader : m,
               reader >= 0 ? "prologue left for later: " + as + "which computes it once, while " + name(reader) +
                                 " would recompute it per read"
                           : "left for its anchor: " + as + "whose kernel then writes it straight into the Concat's "
                                 "bytes (assembled in place), while here it would be one more loop over the "
                                 "anchor's output");
        continue;
      }
      joined = try_join(grp, p, m, p);
    }
    if (!joined) return changed;
    changed = true;
  }
}

NodeId Planner::feeds_anchor(int grp, NodeId p) const {
  std::vector<NodeId> stack = {p};
  std::set<NodeId> seen = {p};
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    for (ValueId v : node(n).outputs)
      for (NodeId r : readers_[v]) {
        if (!in(grp, r) || !seen.insert(r).second) continue;
        if (type_[r] == kM2M) return r;
        if (re_indexes(node(r).op)) stack.push_back(r);
      }
  }
  return -1;
}

bool Planner::only_concats_read(int grp, NodeId p) const {
  bool any = false;
  for (ValueId v : node(p).outputs)
    for (NodeId r : readers_[v]) {
      if (!in(grp, r)) continue;
      if (node(r).op != OpKind::Concat) return false;
      any = true;
    }
  return any;
}

NodeId Planner::epilogue_anchor(NodeId p) const {
  std::vector<NodeId> stack = {p};
  std::set<NodeId> seen = {p};
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    for (NodeId q : producers(n)) {
      if (planned_[q] || !seen.insert(q).second) continue;
      if (type_[q] == kM2M) return q;
      if (type_[q] == kO2O) stack.push_back(q);
    }
  }
  return -1;
}

void Planner::fuse_horizontally() {
  for (const Value& v : g_.values()) {
    if (v.constant) continue;
    std::map<OpKind, std::vector<NodeId>> sibs;
    for (NodeId r : readers_[v.id])
      if (type_[r] == kM2M) sibs[node(r).op].push_back(r);
    for (auto& [op, list] : sibs) {
      // Each sibling joins the group of the first earlier one it can (Inception's: the
      // branch whose block also holds the Concat depends on the others, which still group).
      for (size_t i = 1; i < list.size(); ++i)
        for (size_t k = 0; k < i; ++k) {
          NodeId a = list[k], b = list[i];
          int ga = group_of_[a], gb = group_of_[b];
          if (ga == gb) break;
          std::string pair = "horizontal: " + name(a) + " and " + name(b) + " (" +
                             node(a).info().name + ") both read %" + v.name;
          // Siblings must be independent: a path from one block to the other would make
          // the grouped kernel wait on itself (or hide a Many-to-Many pair in one kernel).
          if (depends(ga, gb) || depends(gb, ga) || would_create_cycle(g_, group_of_, ga, gb)) {
            reject(a, b, pair + "; but one block depends on the other -> keep apart");
            continue;
          }
          if (opt_.max_kernel_args > 0 && kernel_args(ga, -1, gb) > opt_.max_kernel_args) {
            reject(a, b, pair + "; but the kernel would exceed the " + std::to_string(opt_.max_kernel_args) +
                             "-argument limit -> keep apart");
            continue;
          }
          for (NodeId n : members_[gb]) {
            group_of_[n] = ga;
            members_[ga].push_back(n);
          }
          members_[gb].clear();
          // The table's cells compose a producer with its consumer; siblings are not
          // composed (each keeps its own output), so the group takes the more general of
          // the two types (the enum's order: One-to-One ... Many-to-Many), never a red cell's.
          const MappingType t = std::max(gtype_[ga], gtype_[gb]);
          gtype_[ga] = t;
          record(a, b, true, pair + " -> grouped into one kernel (" + mapping_type_name(t) +
                                 ", the more general of the two blocks' types; siblings are not "
                                 "composed, so no cell of the table applies)");
          break;
        }
    }
  }
}

void Planner::fuse_expansions() {
  for (const Node& d : g_.nodes()) {
    std::vector<NodeId> chain;
    const NodeId pw = pointwise_expanded_by(g_, opt_.target, d.id, &chain);
    if (pw < 0) continue;
    const int gd = group_of_[d.id], gp = group_of_[pw];
    if (gd == gp) continue;
    std::set<NodeId> want(chain.begin(), chain.end());
    want.insert(pw);
    if (std::set<NodeId>(members_[gp].begin(), members_[gp].end()) != want) continue;
    const NodeId last = chain.empty() ? pw : chain.back();
    const FusionRule& rule = fusion_rule(gtype_[gp], type_[d.id]);
    std::string why = std::string("table: ") + mapping_type_name(gtype_[gp]) + " (block) + " +
                      mapping_type_name(type_[d.id]) + " -> " + mapping_type_name(rule.fused) + ", " +
                      decision_name(rule.decision) + " (" + decision_color(rule.decision) + "): " + rule.why;
    if (would_create_cycle(g_, group_of_, gd, gp)) {
      record(last, d.id, false, why + "; " + name(d.id) + " could compute its input rows from " + name(pw) +
                                    ", but fusing would form a cycle");
      continue;
    }
    // Whether computing the expansion inside the depthwise kernel pays depends on the machine
    // (the caches; a GEMM over one row of pixels against one over the whole tensor): a yellow
    // pair keyed by the expansion's shape, settled by the profiling database, else estimated
    // by the size rule. $DNNF_EXPAND_MIN_BYTES forces the rule (comparisons, tests).
    ProfileKey key;
    key.target = target_;
    key.producer_op = node(last).info().name;
    key.consumer_op = d.info().name;
    key.producer_type = gtype_[gp];
    key.consumer_type = type_[d.id];
    key.bucket = expansion_bucket(g_, d.id, pw);
    key.threads = opt_.threads;
    std::string rule_why;
    bool fuse = expansion_estimate(g_, d.id, &rule_why);
    const char* env = std::getenv("DNNF_EXPAND_MIN_BYTES");
    const bool forced = env && *env;
    std::string decided;
    if (forced) {
      decided = "$DNNF_EXPAND_MIN_BYTES decides: " + rule_why + (fuse ? " -> fuse" : " -> keep apart");
    } else if (const ProfileEntry* e = db_.find(key); e && std::abs(e->fused_ms - e->unfused_ms) <= e->noise_ms) {
      // Within the measurement's noise the two timings say nothing about which is faster (on
      // a shared VM, MobileNetV2's 144-channel expansion measured 0.3905 vs 0.3912 ms, noise
      // 0.088, and fusing it by that 0.2% cost 40% in the model): the estimate decides.
      char buf[200];
      std::snprintf(buf, sizeof buf, "profile: fused %.4f ms vs unfused %.4f ms, within the measured noise %.4f ms: "
                    "a tie, so the estimate decides: ", e->fused_ms, e->unfused_ms, e->noise_ms);
      decided = buf + rule_why + (fuse ? " -> fuse" : " -> keep apart") + entry_source(*e);
    } else if (db_.find(key)) {
      Settlement s = settle_yellow(db_, key, PairCost{});
      fuse = s.fuse;
      decided = s.why;
    } else {
      decided = "no profile entry; analytic estimate: " + rule_why + (fuse ? " -> fuse" : " -> keep apart");
    }
    why += "; but " + name(d.id) + "'s kernel " + (fuse ? "computes" : "could compute") + " the rows of its input from " +
           name(pw) + " itself, a few at a time into a ring that stays in cache, so that %" +
           g_.value(d.inputs[0]).name + " is never written; " + decided;
    if (fuse) {
      expanded_.insert(pw);
      join(gd, pw, kM2M);
    }
    record(last, d.id, fuse, why);
    if (!forced) mark_yellow(last, d.id, key);
  }
}

bool Planner::depends(int a, int b) const {
  for (NodeId n : members_[b])
    for (NodeId p : producers(n))
      if (in(a, p)) return true;
  return false;
}

}  // namespace planner_detail

FusionPlan plan_dnnfusion(const Graph& g, const PlanOptions& opt) { return planner_detail::Planner(g, opt).run(); }

}  // namespace dnnf
