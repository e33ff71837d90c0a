// The TVM baseline (paper §5): TVM's FuseOps, post-dominator fusion over op pattern kinds,
// re-implemented on the ECG from the algorithm of src/relay/transforms/fuse_ops.cc (the
// Relax pass of the same name ports it).
//
// The rules implemented, as TVM has them:
//  * Every op has an OpPatternKind (kElemWise < kBroadcast < kInjective < kCommReduce <
//    kOutEWiseFusable < kOpaque; patterns combine by max). An edge into a kBroadcast op
//    from an input of the op's output shape is kElemWise (so a bias add or a residual add
//    is elementwise on the edge from the conv, and a broadcast of a computed tensor is not).
//  * The post-dominator tree: for each node, the least common ancestor (in the tree) of
//    its consumers, and the combined pattern of the edges and tree nodes on the way. A
//    node whose output is returned has no post-dominator (Relay's extern_ref).
//  * Each node starts as its own group (union-find; a group's pattern is its root's; a
//    group that takes in a kOutEWiseFusable anchor becomes kOutEWiseFusable). Three phases
//    walk the nodes in topological order and try to fuse the node's group into the group
//    of its immediate post-dominator, fusing every node on every path between them:
//      phase 0: kOutEWiseFusable (conv, dense, matmul, pooling) fuses when the path
//               pattern is kElemWise and every group on the paths is <= kBroadcast;
//      phases 0, 1: kElemWise/kBroadcast fuses when the path pattern is <= kInjective or
//               kCommReduce, every group on the way is <= kInjective and the sink's group
//               is fusable (<= kCommReduce or kOutEWiseFusable);
//      phase 1: kInjective fuses when every group on the paths, sink included, is <=
//               kInjective (deferred so convolutions finish fusing first);
//      phase 2: fuses injective ops into intermediate tuples; the ECG has no tuple nodes
//               (Concat reads its inputs directly, which phases 0/1 already cover), so
//               this phase has nothing to do.
//    kCommReduce groups do not fuse into their successors (reductions take in their
//    elementwise inputs only) and kOpaque never fuses.
//  * A fusion is refused if the group would exceed max_fuse_depth (256, TVM's default) ops
//    or, when the target has one, the kernel-argument limit (TVM's max_function_args).
#include <algorithm>
#include <functional>
#include <set>

#include "ir/errors.h"
#include "plan/baselines.h"

namespace dnnf {

namespace {

enum Kind : int { kElemWise = 0, kBroadcast = 1, kInjective = 2, kCommReduce = 3, kOutEWiseFusable = 4, kOpaque = 8 };
constexpr int kMaxFuseDepth = 256;

const char* kind_name(int k) {
  switch (k) {
    case kElemWise: return "kElemWise";
    case kBroadcast: return "kBroadcast";
    case kInjective: return "kInjective";
    case kCommReduce: return "kCommReduce";
    case kOutEWiseFusable: return "kOutEWiseFusable";
    default: return "kOpaque";
  }
}

// Ops whose kind is not the default of their mapping type, with the Relay op they stand for.
// Defaults: One-to-One -> kElemWise if it has one data input, kBroadcast if more (Relay
// registers add, multiply, where, prelu... as broadcast); Reorganize, Shuffle and the other
// One-to-Many ops -> kInjective (reshape, transpose, strided_slice, concatenate, take,
// tile, image.resize2d); Many-to-Many -> kOpaque unless listed.
struct KindRow {
  OpKind op;
  Kind kind;
};
constexpr KindRow kKinds[] = {
    {OpKind::Conv, kOutEWiseFusable},           // nn.conv2d
    {OpKind::NhwcConv, kOutEWiseFusable},       // nn.conv2d, layout NHWC
    {OpKind::ConvTranspose, kOutEWiseFusable},  // nn.conv2d_transpose
    {OpKind::Gemm, kOutEWiseFusable},           // nn.dense (+ bias_add)
    {OpKind::MatMul, kOutEWiseFusable},         // nn.dense / nn.batch_matmul
    {OpKind::MaxPool, kOutEWiseFusable},        // nn.max_pool2d
    {OpKind::AveragePool, kOutEWiseFusable},    // nn.avg_pool2d
    {OpKind::NhwcMaxPool, kOutEWiseFusable},    // nn.max_pool2d, layout NHWC
    {OpKind::NhwcAveragePool, kOutEWiseFusable},  // nn.avg_pool2d, layout NHWC
    {OpKind::GlobalAveragePool, kOutEWiseFusable},  // nn.global_avg_pool2d
    {OpKind::GlobalMaxPool, kOutEWiseFusable},  // nn.global_max_pool2d
    // Relax legalizes the norms to a reduction with an elementwise output stage
    // (out-elementwise fusable); Relay decomposes them into reductions and broadcasts.
    {OpKind::LayerNormalization, kOutEWiseFusable},
    {OpKind::InstanceNormalization, kOutEWiseFusable},
    {OpKind::ReduceMean, kCommReduce}, {OpKind::ReduceSum, kCommReduce},
    {OpKind::ReduceMax, kCommReduce},  {OpKind::ReduceMin, kCommReduce},
    {OpKind::ReduceProd, kCommReduce}, {OpKind::ReduceL2, kCommReduce},
    {OpKind::ArgMax, kCommReduce},     {OpKind::ArgMin, kCommReduce},
    // nn.softmax, nn.log_softmax, cumsum, topk, vision ops: opaque (the Many-to-Many default).
    {OpKind::Expand, kBroadcast},              // broadcast_to
    {OpKind::Max, kBroadcast}, {OpKind::Min, kBroadcast},  // maximum, minimum (variadic here)
    {OpKind::Sum, kBroadcast}, {OpKind::Mean, kBroadcast},
    {OpKind::BatchNormalization, kBroadcast},  // SimplifyInference: multiply + add, broadcast
    {OpKind::Shape, kOpaque}, {OpKind::Size, kOpaque},  // shape_of, ndarray_size
    {OpKind::Range, kOpaque},                  // arange with tensor bounds: dynamic
    {OpKind::Constant, kOpaque},               // a non-scalar constant node is opaque
};

Kind tvm_kind(OpKind op) {
  for (const KindRow& r : kKinds)
    if (r.op == op) return r.kind;
  const OpInfo& info = op_info(op);
  switch (info.mapping) {
    case MappingType::OneToOne: return info.min_inputs > 1 ? kBroadcast : kElemWise;
    case MappingType::Reorganize:
    case MappingType::Shuffle:
    case MappingType::OneToMany: return kInjective;
    case MappingType::ManyToMany: return kOpaque;
  }
  return kOpaque;
}

class FuseOps {
 public:
  FuseOps(const Graph& g, const PlanOptions& opt) : ix_(g), opt_(opt) {
    const size_t n = g.nodes().size();
    kind_.resize(n);
    for (const Node& nd : g.nodes()) kind_[nd.id] = tvm_kind(nd.op);
    // Edges with TVM's edge pattern.
    outs_.resize(n);
    for (const Node& c : g.nodes()) {
      const TensorType* out = c.outputs.empty() ? nullptr : &g.value(c.outputs[0]).type;
      for (ValueId v : c.inputs) {
        if (v == kNoValue || g.value(v).producer < 0) continue;
        int k = kind_[c.id];
        if (k == kBroadcast && out && g.value(v).type.shape == out->shape) k = kElemWise;
        outs_[g.value(v).producer].push_back({c.id, k});
      }
    }
    extern_.assign(n, 0);
    for (const Node& nd : g.nodes())
      for (ValueId v : nd.outputs) extern_[nd.id] |= ix_.is_output[v];
    build_post_dominators();
    parent_.resize(n);
    gkind_ = kind_;
    anchor_.resize(n);
    size_.assign(n, 1);
    merged_at_.assign(n, -1);
    merge_note_.resize(n);
    decision_.resize(n);
    members_.resize(n);
    for (const Node& nd : g.nodes()) {
      parent_[nd.id] = nd.id;
      members_[nd.id] = {nd.id};
      anchor_[nd.id] = kind_[nd.id] == kOutEWiseFusable;
    }
  }

  FusionPlan run() {
    for (int phase = 0; phase < 3; ++phase) run_phase(phase);
    std::vector<int> group_of(parent_.size());
    for (size_t i = 0; i < parent_.size(); ++i) group_of[i] = root(static_cast<int>(i));
    baseline::Reasons reasons;
    for (auto [p, c] : ix_.edges()) {
      if (group_of[p] == group_of[c]) {
        reasons.add(p, c, true, "tvm: " + unifying_note(p, c));
      } else {
        reasons.add(p, c, false, "tvm: " + (decision_[p].empty() ? name(p) + " was not fused into its "
                                            "post-dominator" : decision_[p]));
      }
    }
    return finalize_plan(ix_.g, "tvm", group_of, {}, reasons.take());
  }

 private:
  struct Link {
    NodeId node;
    int kind;  // the edge pattern
  };

  const std::string& name(NodeId n) const { return ix_.name(n); }
  std::string label(NodeId n) const {
    return name(n) + " (" + ix_.node(n).info().name + ", " + kind_name(kind_[n]) + ")";
  }

  // ---- Post-dominator tree (TVM's DominatorTree::PostDom) ----------------------------
  void build_post_dominators() {
    const int n = static_cast<int>(kind_.size());
    dom_parent_.assign(n, -1);
    dom_depth_.assign(n, 1);
    dom_kind_.assign(n, kElemWise);
    for (int i = n - 1; i >= 0; --i) {
      if (extern_[i]) {
        dom_kind_[i] = kOpaque;
        continue;
      }
      if (outs_[i].empty()) continue;
      int k = kElemWise;
      int lca = outs_[i][0].node;
      k = std::max(k, outs_[i][0].kind);
      for (size_t j = 1; j < outs_[i].size() && lca >= 0; ++j) {
        lca = least_common_ancestor(lca, outs_[i][j].node, &k);
        k = std::max(k, outs_[i][j].kind);
      }
      dom_parent_[i] = lca;
      dom_depth_[i] = lca >= 0 ? dom_depth_[lca] + 1 : 1;
      dom_kind_[i] = k;
    }
  }

  int least_common_ancestor(int a, int b, int* k) const {
    while (a != b) {
      if (a < 0 || b < 0) return -1;
      if (dom_depth_[a] < dom_depth_[b]) {
        *k = std::max(*k, dom_kind_[b]);
        b = dom_parent_[b];
      } else if (dom_depth_[b] < dom_depth_[a]) {
        *k = std::max(*k, dom_kind_[a]);
        a = dom_parent_[a];
      } else {
        *k = std::max({*k, dom_kind_[a], dom_kind_[b]});
        a = dom_parent_[a];
        b = dom_parent_[b];
      }
    }
    return a;
  }

  // ---- Groups (union-find) -----------------------------------------------------------
  int root(int g) const {
    while (parent_[g] != g) g = parent_[g];
    return g;
  }

  // Nodes from `src` (inclusive) up to `sink` (exclusive), along every path.
  std::vector<NodeId> path_nodes(NodeId src, NodeId sink) const {
    std::vector<NodeId> out, stack = {src};
    std::set<NodeId> seen = {src};
    while (!stack.empty()) {
      NodeId n = stack.back();
      stack.pop_back();
      out.push_back(n);
      for (const Link& l : outs_[n])
        if (l.node != sink && seen.insert(l.node).second) stack.push_back(l.node);
    }
    return out;
  }

  // TVM's CheckPath: every group met on a path from src's consumers to sink satisfies
  // `ok(kind, is_sink)`; returns the first node that does not, or -1.
  NodeId check_path(NodeId src, NodeId sink, const std::function<bool(int, bool)>& ok) const {
    std::vector<NodeId> stack;
    std::set<NodeId> seen;
    for (const Link& l : outs_[src])
      if (seen.insert(l.node).second) stack.push_back(l.node);
    while (!stack.empty()) {
      NodeId n = stack.back();
      stack.pop_back();
      if (!ok(gkind_[root(n)], n == sink)) return n;
      if (n == sink) continue;
      for (const Link& l : outs_[n])
        if (seen.insert(l.node).second) stack.push_back(l.node);
    }
    return -1;
  }

  // The nodes the fused group would hold.
  std::vector<NodeId> fused_members(NodeId src, NodeId sink) const {
    std::set<int> roots = {root(sink)};
    for (NodeId n : path_nodes(src, sink)) roots.insert(root(n));
    std::vector<NodeId> out;
    for (int r : roots) out.insert(out.end(), members_[r].begin(), members_[r].end());
    return out;
  }

  void commit(NodeId src, NodeId sink, const std::string& note) {
    int target = root(sink);
    ++clock_;
    for (NodeId n : path_nodes(src, sink)) {
      int child = root(n);
      if (child == target) continue;
      size_[target] += size_[child];
      members_[target].insert(members_[target].end(), members_[child].begin(), members_[child].end());
      members_[child].clear();
      parent_[child] = target;
      merged_at_[child] = clock_;
      merge_note_[child] = note;
      if (anchor_[child]) {
        anchor_[target] = true;
        gkind_[target] = std::max(gkind_[target], gkind_[child]);
      }
    }
  }

  // ---- The three phases (TVM's GraphPartitioner::RunFuse) -----------------------------
  void run_phase(int phase) {
    for (NodeId i = 0; i < static_cast<NodeId>(kind_.size()); ++i) {
      const int gk = gkind_[i];  // the node's own group object, as TVM reads it
      if (gk == kOpaque) {
        decision_[i] = label(i) + " is opaque: TVM never fuses it";
        continue;
      }
      const NodeId dom = dom_parent_[i];
      if (dom < 0) {
        decision_[i] = name(i) + " has no post-dominator (" +
                       (extern_[i] ? std::string("its output is returned") : "its consumers' paths never meet") +
                       "): TVM fuses a node only into its post-dominator";
        continue;
      }
      if (phase == 2) continue;  // tuples only; see the file comment
      if (root(i) == root(dom)) continue;  // already fused into its post-dominator
      std::string head = label(i) + ", group " + kind_name(gk) + ", post-dominator " + name(dom) +
                         " through a " + kind_name(dom_kind_[i]) + " path";
      std::string rule;
      NodeId bad = -1;
      if (gk == kOutEWiseFusable) {
        if (phase != 0) continue;
        rule = "phase 0: an out-elementwise-fusable group fuses into a post-dominator reached through elementwise paths";
        if (dom_kind_[i] != kElemWise) {
          decision_[i] = head + "; " + rule + " -> not fused";
          continue;
        }
        bad = check_path(i, dom, [](int k, bool) { return k <= kBroadcast; });
      } else if (gk <= kBroadcast) {
        rule = "phase " + std::to_string(phase) + ": an elementwise/broadcast op fuses into a post-dominator "
               "reached through injective or reduction paths";
        if (!(dom_kind_[i] <= kInjective || dom_kind_[i] == kCommReduce)) {
          decision_[i] = head + "; " + rule + " -> not fused";
          continue;
        }
        bad = check_path(i, dom, [](int k, bool sink) {
          return sink ? (k <= kCommReduce || k == kOutEWiseFusable) : k <= kInjective;
        });
      } else if (gk == kInjective) {
        if (phase != 1) continue;
        rule = "phase 1: an injective op fuses when every op up to its post-dominator is injective";
        bad = check_path(i, dom, [](int k, bool) { return k <= kInjective; });
      } else {
        decision_[i] = label(i) + " is a reduction: TVM fuses its elementwise inputs into it, "
                                  "never it into its successors";
        continue;
      }
      if (bad >= 0) {
        decision_[i] = head + "; " + rule + ", but the group of " + name(bad) + " is " +
                       kind_name(gkind_[root(bad)]) + " -> not fused";
        continue;
      }
      if (size_[root(dom)] + count_up_to(i, dom) > kMaxFuseDepth) {
        decision_[i] = head + "; " + rule + ", but the group would exceed TVM's max_fuse_depth of 256 ops";
        continue;
      }
      if (opt_.max_kernel_args > 0) {
        int args = ix_.kernel_args(fused_members(i, dom));
        if (args > opt_.max_kernel_args) {
          decision_[i] = head + "; " + rule + ", but the fused function would take " + std::to_string(args) +
                         " arguments, over the kernel-argument limit of " + std::to_string(opt_.max_kernel_args);
          continue;
        }
      }
      decision_[i] = head + "; " + rule + " -> fused";
      commit(i, dom, head + "; " + rule);
    }
  }

  int count_up_to(NodeId src, NodeId sink) const {
    std::set<int> roots;
    int total = 0;
    for (NodeId n : path_nodes(src, sink)) {
      int r = root(n);
      if (r != root(sink) && roots.insert(r).second) total += size_[r];
    }
    return total;
  }

  // The note of the merge that first put p and c into one group.
  std::string unifying_note(NodeId p, NodeId c) const {
    std::vector<int> chain_p, chain_c;
    for (int g = p;; g = parent_[g]) { chain_p.push_back(g); if (parent_[g] == g) break; }
    for (int g = c;; g = parent_[g]) { chain_c.push_back(g); if (parent_[g] == g) break; }
    int best = -1;
    for (size_t i = 0; i < chain_p.size(); ++i) {
      auto it = std::find(chain_c.begin(), chain_c.end(), chain_p[i]);
      if (it == chain_c.end()) continue;
      // chain_p[i] is the first common group; the later of the two merges into it joined them.
      int a = i > 0 ? chain_p[i - 1] : -1;
      int b = it != chain_c.begin() ? *(it - 1) : -1;
      best = (a >= 0 && (b < 0 || merged_at_[a] > merged_at_[b])) ? a : b;
      break;
    }
    if (best < 0) throw InternalError("tvm planner: " + name(p) + " and " + name(c) + " share no merge");
    return merge_note_[best] + " -> fused";
  }

  baseline::GraphIndex ix_;
  const PlanOptions& opt_;
  std::vector<int> kind_;                 // per node: its OpPatternKind
  std::vector<std::vector<Link>> outs_;   // per node: consumers with edge patterns
  std::vector<char> extern_;              // per node: produces a graph output
  std::vector<int> dom_parent_, dom_depth_, dom_kind_;  // post-dominator tree
  std::vector<int> parent_, gkind_, size_;  // groups: union-find parent, pattern, node count
  std::vector<std::vector<NodeId>> members_;  // per root group: its nodes
  std::vector<char> anchor_;              // group holds a kOutEWiseFusable op
  std::vector<int> merged_at_;            // when the group was merged into its parent
  std::vector<std::string> merge_note_;   // why it was
  std::vector<std::string> decision_;     // per node: the last fusion decision about it
  int clock_ = 0;
};

}  // namespace

FusionPlan plan_tvm(const Graph& g, const PlanOptions& opt) { return FuseOps(g, opt).run(); }

}  // namespace dnnf
