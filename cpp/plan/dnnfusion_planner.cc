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
#include <algorithm>
#include <optional>
#include <limits>
#include <map>
#include <set>

#include "ir/errors.h"
#include "ir/mapping.h"
#include "plan/plan.h"
#include "plan/profile_db.h"
#include "rewrite/cost.h"

namespace dnnf {

namespace {

constexpr MappingType kO2O = MappingType::OneToOne;
constexpr MappingType kM2M = MappingType::ManyToMany;

int64_t numel_of(const Graph& g, ValueId v) {
  const TensorType& t = g.value(v).type;
  return t.is_static() ? t.numel() : -1;
}

class Planner {
 public:
  Planner(const Graph& g, const PlanOptions& opt)
      : g_(g), opt_(opt), db_(ProfileDb::load(opt.profile_dbs)), target_(profile_target_key(opt.target)) {
    const size_t n = g.nodes().size();
    type_.resize(n);
    group_of_.resize(n);
    members_.resize(n);
    gtype_.resize(n);
    planned_.assign(n, 0);
    readers_.resize(g.values().size());
    for (const Node& nd : g.nodes()) {
      type_[nd.id] = node_mapping_type(g, nd);
      group_of_[nd.id] = nd.id;
      members_[nd.id] = {nd.id};
      gtype_[nd.id] = type_[nd.id];
      std::set<ValueId> seen;
      for (ValueId v : nd.inputs)
        if (v != kNoValue && seen.insert(v).second) readers_[v].push_back(nd.id);
    }
  }

  FusionPlan run() {
    for (NodeId seed = pick_seed(); seed >= 0; seed = pick_seed()) {
      planned_[seed] = 1;
      seeds_.push_back(seed);
      grow(seed);
    }
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

 private:
  const Node& node(NodeId id) const { return g_.node(id); }
  const std::string& name(NodeId id) const { return g_.node(id).name; }
  bool in(int grp, NodeId n) const { return group_of_[n] == grp; }

  std::vector<NodeId> producers(NodeId c) const {
    std::vector<NodeId> out;
    for (ValueId v : node(c).inputs) {
      if (v == kNoValue) continue;
      NodeId p = g_.value(v).producer;
      if (p >= 0 && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
    return out;
  }

  int64_t output_bytes(NodeId n) const {
    int64_t total = 0;
    for (ValueId v : node(n).outputs) {
      const TensorType& t = g_.value(v).type;
      if (!t.is_static()) return std::numeric_limits<int64_t>::max();
      total += static_cast<int64_t>(t.nbytes());
    }
    return total;
  }

  // Step I: the One-to-One op with the smallest intermediate result among unplanned ops;
  // when none is left, the smallest of the others, ops that only re-index last (seed_rank).
  // Ties go to the earlier op.
  NodeId pick_seed() const {
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

  // One-to-One ops seed first (the paper's step I); then anchors and other ops; ops that
  // only re-index last: a view read in place by an anchor costs nothing, so a block grown
  // from it around anchors would write what they could have read in place.
  int seed_rank(NodeId n) const {
    if (type_[n] == kO2O) return 0;
    return re_indexes(node(n).op) ? 2 : 1;
  }

  // Steps II and III for one block, repeated until it stops changing; deferred
  // Many-to-Many successors (prologues) are tried when nothing else joins.
  void grow(int grp) {
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

  bool grow_successors(int grp, std::vector<std::pair<NodeId, NodeId>>& deferred) {
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

  static bool re_indexes(OpKind k) {
    return is_reshape_view(k) || k == OpKind::Transpose || k == OpKind::Slice || k == OpKind::Split ||
           k == OpKind::Identity;
  }

  // A successor that only re-indexes a value the block writes anyway (it is also read
  // outside the block) or that is itself a view of memory the block reads, on the way to
  // Many-to-Many ops only: joining it would write its result as well, while the anchors it
  // leads to read it in place from the value (codegen/views.h). A widened Q/K/V
  // projection's parts are such views.
  bool view_left_for_reader(int grp, NodeId m, NodeId c) {
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

  // The paper tries one predecessor at a time: after each join the block's fused type may
  // change, so the remaining candidates are re-evaluated against the new block.
  bool grow_predecessors(int grp) {
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

  // A Many-to-Many member of the block that reads `p` (fusing p would be its prologue),
  // directly or through members that only re-index (re_indexes: views of p's result, as a
  // widened Q/K/V projection's parts are); -1 if none.
  NodeId feeds_anchor(int grp, NodeId p) const {
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

  // Whether every reader of p's outputs inside block `grp` is a Concat (and one is).
  bool only_concats_read(int grp, NodeId p) const {
    bool any = false;
    for (ValueId v : node(p).outputs)
      for (NodeId r : readers_[v]) {
        if (!in(grp, r)) continue;
        if (node(r).op != OpKind::Concat) return false;
        any = true;
      }
    return any;
  }

  // An unplanned Many-to-Many op that `p` could follow as an epilogue: found walking up
  // through unplanned One-to-One producers. -1 if none.
  NodeId epilogue_anchor(NodeId p) const {
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

  // Values crossing between the block and a candidate, split into those the join removes
  // (every reader inside afterwards, not a graph output) and those still written.
  struct Crossing {
    int64_t bytes = 0, elements = 0;  // removed; -1 when a size is symbolic
    std::vector<ValueId> removed, kept;
    std::vector<NodeId> removed_readers;  // readers of removed values on the consumer side
  };
  Crossing crossing(int grp, NodeId cand) const {
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

  // Distinct values the block would take as kernel arguments: inputs read from outside
  // (weights included) and outputs read outside or returned.
  int kernel_args(int grp, NodeId extra, int other_grp = -1) const {
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

  std::string value_list(const std::vector<ValueId>& vs) const {
    std::string s;
    for (ValueId v : vs) s += (s.empty() ? "%" : ", %") + g_.value(v).name;
    return s;
  }

  // Tries to add `cand` (the producer `p` or the consumer `c` of the edge p -> c, the
  // other end being in the block) to block `grp`. Records the reason either way.
  bool try_join(int grp, NodeId p, NodeId c, NodeId cand) {
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

  // Edges between a candidate and the block, in either direction.
  std::vector<std::pair<NodeId, NodeId>> edges_between(int grp, NodeId cand) const {
    std::vector<std::pair<NodeId, NodeId>> out;
    for (NodeId p : producers(cand))
      if (in(grp, p)) out.push_back({p, cand});
    for (ValueId v : node(cand).outputs)
      for (NodeId r : readers_[v])
        if (in(grp, r) && std::find(out.begin(), out.end(), std::make_pair(cand, r)) == out.end())
          out.push_back({cand, r});
    return out;
  }

  // A rejected candidate: the decision holds for every edge between it and the block.
  bool refuse(int grp, NodeId cand, NodeId p, NodeId c, const std::string& why) {
    for (auto [a, b] : edges_between(grp, cand)) record(a, b, false, why);
    return reject(p, c, why);
  }

  ProfileKey profile_key(NodeId p, NodeId c, MappingType tp, MappingType tc, int64_t elements) const {
    ProfileKey k;
    k.target = target_;
    k.producer_op = node(p).info().name;
    k.consumer_op = node(c).info().name;
    k.producer_type = tp;
    k.consumer_type = tc;
    k.bucket = shape_bucket(elements);
    return k;
  }

  // The analytic estimate's inputs (formula in profile_db.cc):
  //  reads: a One-to-Many consumer side reads each removed element (its largest output /
  //    removed elements) times; other consumers read each once (Many-to-Many anchors run on
  //    packed micro-kernels that read each operand element once per packing).
  //  index_ops: 2 per dimension (a divide and a modulo) for each non-view Reorganize or
  //    Shuffle op at either end of a removed tensor.
  //  producer_flops: the flops of the producer side, recomputed per extra read.
  PairCost pair_cost(int grp, NodeId cand, const Crossing& x, MappingType consumer_type) const {
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

  void join(int grp, NodeId cand, MappingType fused) {
    int old = group_of_[cand];
    for (NodeId n : members_[old]) {
      group_of_[n] = grp;
      planned_[n] = 1;
      members_[grp].push_back(n);
    }
    members_[old].clear();
    gtype_[grp] = fused;
    int anchors = 0;
    for (NodeId n : members_[grp]) anchors += type_[n] == kM2M && !reduced_.count(n);
    // The table rejects Many-to-Many + Many-to-Many, and a block holding one is itself
    // Many-to-Many, so growth can never give a block two anchors (a reduction its anchor's
    // kernel computes as it stores is part of that anchor's call).
    if (anchors > 1) throw InternalError("dnnfusion planner: block of " + name(grp) + " has two anchors");
  }

  bool reject(NodeId p, NodeId c, std::string why) {
    record(p, c, false, std::move(why));
    return false;
  }
  // Tags the reason of a yellow pair with the profiling key it looked up.
  void mark_yellow(NodeId p, NodeId c, const ProfileKey& key) {
    Reason& r = reasons_[{p, c}];
    r.yellow = true;
    r.yellow_producer_type = key.producer_type;
    r.yellow_consumer_type = key.consumer_type;
    r.yellow_bucket = key.bucket;
  }
  void record(NodeId p, NodeId c, bool fused, std::string why) {
    reasons_[{p, c}] = Reason{p, c, fused, std::move(why)};
  }
  // The other end of the edge is already in another block. The first decision about an
  // edge is its cause, so this never overwrites one.
  void note_other_block(NodeId p, NodeId c, NodeId planned) {
    if (reasons_.count({p, c})) return;
    NodeId seed = -1;
    for (NodeId s : seeds_)
      if (group_of_[s] == group_of_[planned]) seed = s;
    record(p, c, false, "already fused: " + name(planned) + " belongs to the block seeded by " +
                            (seed >= 0 ? name(seed) : name(planned)));
  }

  // Horizontal fusion: Many-to-Many siblings of the same op reading one non-constant value
  // (the Q/K/V projections) share one kernel, which reads the shared input once.
  void fuse_horizontally() {
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

  // Whether a node of group `b` reads a value produced in group `a`.
  bool depends(int a, int b) const {
    for (NodeId n : members_[b])
      for (NodeId p : producers(n))
        if (in(a, p)) return true;
    return false;
  }

  const Graph& g_;
  const PlanOptions& opt_;
  ProfileDb db_;
  std::string target_;
  std::vector<MappingType> type_;              // per node
  std::vector<int> group_of_;                  // per node; a group's id is its first node
  std::vector<std::vector<NodeId>> members_;   // per group id
  std::vector<MappingType> gtype_;             // per group id: the fused type
  std::vector<char> planned_;                  // per node: in a block grown from a seed
  std::set<NodeId> reduced_;                   // reductions joined as their anchor's (anchor_reducing_as_it_stores)
  std::vector<std::vector<NodeId>> readers_;   // per value: consumer nodes
  std::map<std::pair<NodeId, NodeId>, Reason> reasons_;
  std::vector<NodeId> seeds_;
};

}  // namespace

FusionPlan plan_dnnfusion(const Graph& g, const PlanOptions& opt) { return Planner(g, opt).run(); }

}  // namespace dnnf
