// The dynamic-programming baseline (paper §5): a search over fusion schemes with a cost
// model, after Gao et al., "Operator Fusion Optimization for Deep Learning Compiler TVM",
// Computer Science 2025, 52(5).
//
// The search. Operators are put in one topological order, one that keeps chains together
// (Kahn's algorithm preferring a consumer of the op placed last). A block is a contiguous
// window of that order of at most kWindow ops; any such window is convex (a path between
// two of its ops only passes through ops placed between them), so no partition into
// windows has a cycle. best[j] is the cheapest partition of the first j ops:
//     best[j] = min over legal windows [i, j) of best[i] + cost([i, j)),
// which is the paper's "extend the open group with the next op, or close it" recurrence
// with the open group's start as the state. O(n * kWindow * degree).
//
// Legality of a window, from the mapping-type table as the DNNFusion planner reads it:
//  * every op's cell with the fused type of its producers inside the window: red rejects;
//    yellow is settled by the profiling database or its analytic estimate (profile_db.h),
//    and needs the tensor between them to be removed (no reader outside, not returned);
//  * at most one Many-to-Many op (the kernel's anchor);
//  * the window is connected (no horizontal fusion of unrelated ops);
//  * at most max_kernel_args kernel arguments when the target has a limit.
//
// The cost model of a block, in seconds:
//     kLaunch                                   a kernel launch and its completion sync
//   + (bytes read from outside + bytes written for outside) / 40 GB/s
//   + (flops + extra ops of yellow fusions) / 485 GFLOP/s
// where the bytes count every input once (weights included) and every output read by a
// later block or returned, and the extra ops are the analytic estimate's index arithmetic
// and recomputation. The bandwidth and compute rates are the paper's; kLaunch = 5 us is a
// thread-pool fork-join plus a kernel's set-up on a CPU. The model never charges a prologue
// more than an epilogue, so equal-cost partitions differ only in where a One-to-One op
// goes; ties go to the shortest last block, which gives it to the earlier kernel as an
// epilogue, the DNNFusion planner's preference (a prologue is recomputed per read).
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "ir/errors.h"
#include "plan/baselines.h"
#include "plan/profile_db.h"
#include "rewrite/cost.h"

namespace dnnf {

namespace {

constexpr int kWindow = 32;
constexpr double kLaunch = 5e-6;
constexpr double kBytesPerSecond = 40e9;
constexpr double kFlopsPerSecond = 485e9;

std::string us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f us", seconds * 1e6);
  return buf;
}

class DpPlanner {
 public:
  DpPlanner(const Graph& g, const PlanOptions& opt)
      : ix_(g), opt_(opt), db_(ProfileDb::load(opt.profile_dbs)), target_(profile_target_key(opt.target)) {
    const size_t n = g.nodes().size(), nv = g.values().size();
    flops_.resize(n);
    for (const Node& nd : g.nodes()) flops_[nd.id] = node_flops(g, nd);
    bytes_.resize(nv);
    numel_.resize(nv);
    for (const Value& v : g.values()) {
      numel_[v.id] = v.type.is_static() ? v.type.numel() : -1;
      bytes_[v.id] = v.type.is_static() ? static_cast<int64_t>(v.type.nbytes()) : 0;
    }
    order_ = chain_order();
    in_.assign(n, -1);
    ftype_.resize(n);
    uf_.resize(n);
    reads_.assign(nv, 0);
    read_stamp_.assign(nv, -1);
  }

  FusionPlan run() {
    const int n = static_cast<int>(order_.size());
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> best(n + 1, inf);
    std::vector<int> from(n + 1, -1);
    best[0] = 0;
    for (int i = 0; i < n; ++i) {
      open();
      for (int j = i; j < n && j < i + kWindow; ++j) {
        if (!add(order_[j])) break;
        if (!legal()) continue;
        double c = best[i] + cost().total;
        // On a tie the later start wins: earlier kernels keep their successors (epilogues)
        // rather than later kernels taking them as prologues.
        if (c <= best[j + 1] * (1 + 1e-12)) {
          best[j + 1] = c;
          from[j + 1] = i;
        }
      }
    }
    std::vector<int> group_of(n, -1);
    block_start_.assign(n, 0);
    block_end_.assign(n, 0);
    for (int j = n; j > 0; j = from[j]) {
      if (from[j] < 0) throw InternalError("dp planner: no partition reaches op " + std::to_string(j));
      for (int k = from[j]; k < j; ++k) {
        group_of[order_[k]] = order_[from[j]];
        block_start_[order_[k]] = from[j];
        block_end_[order_[k]] = j;
      }
    }
    baseline::Reasons reasons;
    for (auto [p, c] : ix_.edges()) reasons.add(p, c, group_of[p] == group_of[c], "dp: " + explain(p, c, group_of));
    return finalize_plan(ix_.g, "dp", group_of, {}, reasons.take());
  }

 private:
  struct Yellow {
    NodeId p, c;
    MappingType tp, tc;
  };
  struct Cost {
    double total = 0, traffic = 0, compute = 0;
    int64_t bytes = 0, ops = 0;
  };

  const Node& node(NodeId n) const { return ix_.node(n); }
  const std::string& name(NodeId n) const { return ix_.name(n); }
  bool inside(NodeId n) const { return n >= 0 && in_[n] == stamp_; }

  // Kahn's algorithm, preferring a ready consumer of the op placed last, then the lowest id.
  std::vector<NodeId> chain_order() const {
    const size_t n = ix_.g.nodes().size();
    std::vector<int> indeg(n);
    std::set<NodeId> ready;
    for (size_t i = 0; i < n; ++i)
      if ((indeg[i] = static_cast<int>(ix_.producers[i].size())) == 0) ready.insert(static_cast<NodeId>(i));
    std::vector<NodeId> out;
    NodeId last = -1;
    while (!ready.empty()) {
      NodeId pick = *ready.begin();
      if (last >= 0)
        for (NodeId c : ix_.consumers[last])
          if (ready.count(c)) { pick = c; break; }
      ready.erase(pick);
      out.push_back(pick);
      for (NodeId c : ix_.consumers[pick])
        if (--indeg[c] == 0) ready.insert(c);
      last = pick;
    }
    if (out.size() != n) throw InternalError("dp planner: the graph has a cycle");
    return out;
  }

  // ---- The open window ----------------------------------------------------------------
  void open() {
    ++stamp_;
    size_ = anchors_ = components_ = args_ = 0;
    bytes_in_ = bytes_out_ = flops_in_ = 0;
    yellow_.clear();
    failure_.clear();
  }

  int find(NodeId a) {
    while (uf_[a] != a) a = uf_[a] = uf_[uf_[a]];
    return a;
  }

  // Adds a node; false (with failure_ when explaining) if this window and every longer one
  // is illegal: a red cell or a second anchor.
  bool add(NodeId n) {
    in_[n] = stamp_;
    uf_[n] = n;
    ++size_;
    ++components_;
    const MappingType t = ix_.type[n];
    MappingType ft = t;
    for (ValueId v : node(n).inputs)
      if (written_apart(ix_.g, v) && inside(ix_.g.value(v).producer)) {
        if (explaining_) failure_ = name(n) + " reads %" + ix_.g.value(v).name + ", which its producer's kernel writes to memory in a call of its own";
        return false;
      }
    for (NodeId p : ix_.producers[n]) {
      if (!inside(p)) continue;
      const FusionRule& r = fusion_rule(ftype_[p], t);
      if (r.decision == Decision::Reject) {
        if (explaining_) failure_ = cell(p, n, ftype_[p], t);
        return false;
      }
      if (r.decision == Decision::Profile) yellow_.push_back({p, n, ftype_[p], t});
      ft = fusion_rule(ft, r.fused).fused;
      int a = find(p), b = find(n);
      if (a != b) { uf_[a] = b; --components_; }
    }
    ftype_[n] = ft;
    if (t == MappingType::ManyToMany && ++anchors_ > 1) {
      if (explaining_) failure_ = "a second Many-to-Many op (" + name(n) + ") in one kernel";
      return false;
    }
    const Node& nd = node(n);
    std::vector<ValueId> ins;
    for (ValueId v : nd.inputs)
      if (v != kNoValue && std::find(ins.begin(), ins.end(), v) == ins.end()) ins.push_back(v);
    for (ValueId v : ins) {
      if (read_stamp_[v] != stamp_) { read_stamp_[v] = stamp_; reads_[v] = 0; }
      if (inside(ix_.g.value(v).producer)) {
        // Read by every reader and not returned: no longer written.
        if (++reads_[v] == static_cast<int>(ix_.readers[v].size()) && !ix_.is_output[v]) {
          bytes_out_ -= bytes_[v];
          --args_;
        }
      } else if (reads_[v]++ == 0) {
        bytes_in_ += bytes_[v];
        ++args_;
      }
    }
    for (ValueId v : nd.outputs)
      if (ix_.is_output[v] || !ix_.readers[v].empty()) {
        bytes_out_ += bytes_[v];
        ++args_;
      }
    flops_in_ += flops_[n];
    return true;
  }

  bool removed(ValueId v) const {
    return read_stamp_[v] == stamp_ && reads_[v] == static_cast<int>(ix_.readers[v].size()) &&
           !ix_.is_output[v];
  }

  // Whether the open window is a legal block as it stands.
  bool legal() {
    if (components_ > 1) {
      if (explaining_) failure_ = "the ops between them in the DP's order are not all connected";
      return false;
    }
    if (opt_.max_kernel_args > 0 && size_ > 1 && args_ > opt_.max_kernel_args) {
      if (explaining_)
        failure_ = "the kernel would take " + std::to_string(args_) + " arguments, over the " +
                   "kernel-argument limit of " + std::to_string(opt_.max_kernel_args);
      return false;
    }
    for (const Yellow& y : yellow_) {
      const Settlement& s = settle(y);
      if (!s.fuse) {
        if (explaining_) failure_ = cell(y.p, y.c, y.tp, y.tc) + "; " + s.why;
        return false;
      }
    }
    return true;
  }

  // The yellow pair's settlement for the tensors it removes in the open window.
  const Settlement& settle(const Yellow& y) {
    PairCost pc = pair_cost(y);
    auto key = std::make_tuple(y.p, y.c, static_cast<int>(y.tp), static_cast<int>(y.tc), pc.bytes);
    auto it = settled_.find(key);
    if (it != settled_.end()) return it->second;
    Settlement s;
    if (pc.elements == 0) {
      s.why = "the tensor between them would still be written (read outside the kernel): "
              "fusing would remove nothing -> keep apart";
    } else {
      ProfileKey k{target_, node(y.p).info().name, node(y.c).info().name, y.tp, y.tc, shape_bucket(pc.elements),
                   opt_.threads};
      s = settle_yellow(db_, k, pc);
    }
    return settled_.emplace(key, s).first->second;
  }

  // The analytic estimate's inputs for a yellow pair (as the DNNFusion planner computes
  // them, for the pair alone): removed tensors between p and c, reads per element by a
  // broadcasting consumer, 2 index ops per dimension at each non-view reorganizing end,
  // and p's flops as the recomputed work.
  PairCost pair_cost(const Yellow& y) const {
    PairCost pc;
    for (ValueId v : node(y.p).outputs) {
      const auto& rs = ix_.readers[v];
      if (std::find(rs.begin(), rs.end(), y.c) == rs.end() || !removed(v)) continue;
      if (numel_[v] < 0) { pc.bytes = pc.elements = -1; return pc; }
      pc.bytes += bytes_[v];
      pc.elements += numel_[v];
    }
    if (pc.elements <= 0) return pc;
    if (y.tc == MappingType::OneToMany) {
      int64_t largest = 0;
      for (ValueId v : node(y.c).outputs) largest = std::max(largest, numel_[v]);
      pc.reads = std::max<int64_t>(1, largest / pc.elements);
    }
    for (NodeId e : {y.p, y.c}) {
      MappingType t = ix_.type[e];
      if ((t == MappingType::Reorganize || t == MappingType::Shuffle) && !is_reshape_view(node(e).op))
        pc.index_ops += 2 * static_cast<int64_t>(ix_.g.value(node(e).outputs[0]).type.shape.size());
    }
    pc.producer_flops = flops_[y.p];
    return pc;
  }

  Cost cost() {
    Cost c;
    c.bytes = bytes_in_ + bytes_out_;
    c.ops = flops_in_;
    for (const Yellow& y : yellow_) {
      PairCost pc = pair_cost(y);
      if (pc.elements > 0)
        c.ops += pc.elements * std::max<int64_t>(1, pc.reads) * pc.index_ops +
                 (std::max<int64_t>(1, pc.reads) - 1) * pc.producer_flops;
    }
    c.traffic = static_cast<double>(c.bytes) / kBytesPerSecond;
    c.compute = static_cast<double>(c.ops) / kFlopsPerSecond;
    c.total = kLaunch + c.traffic + c.compute;
    return c;
  }

  std::string cell(NodeId p, NodeId c, MappingType tp, MappingType tc) const {
    const FusionRule& r = fusion_rule(tp, tc);
    // The producer side is the fused type of p and its producers inside the kernel.
    const char* with = tp != ix_.type[p] ? " with its producers in the kernel" : "";
    return "table: " + name(p) + with + " (" + mapping_type_name(tp) + ") + " + name(c) + " (" +
           mapping_type_name(tc) + ") -> " + decision_name(r.decision) + " (" + decision_color(r.decision) +
           "): " + r.why;
  }

  std::string describe(const Cost& c) const {
    return us(c.total) + " = launch " + us(kLaunch) + " + " + std::to_string(c.bytes) + " B at 40 GB/s " +
           us(c.traffic) + " + " + std::to_string(c.ops) + " ops at 485 GFLOP/s " + us(c.compute);
  }

  // Rebuilds the window [a, b) of the order; false with failure_ if it is not a legal block.
  bool rebuild(int a, int b) {
    open();
    for (int k = a; k < b; ++k)
      if (!add(order_[k])) return false;
    return legal();
  }

  std::string explain(NodeId p, NodeId c, const std::vector<int>& group_of) {
    explaining_ = true;
    std::string why;
    int a = block_start_[p], b = block_end_[c];
    if (group_of[p] == group_of[c]) {
      rebuild(a, b);
      why = "in the cheapest partition, one kernel for " + name(order_[a]) + " .. " + name(order_[b - 1]) +
            " (cost " + describe(cost()) + "); " + cell(p, c, ix_.type[p], ix_.type[c]);
      for (const Yellow& y : yellow_)
        if (y.p == p && y.c == c) why += "; " + settle(y).why;
    } else if (b - a > kWindow) {
      why = name(p) + " and " + name(c) + " would need a window of " + std::to_string(b - a) +
            " ops in the DP's order, over its limit of " + std::to_string(kWindow);
    } else if (!rebuild(a, b)) {
      why = "no kernel from " + name(order_[a]) + " to " + name(order_[b - 1]) + " (the window holding both) "
            "is legal: " + failure_;
    } else {
      double merged = cost().total, apart = 0;
      for (int k = a; k < b; k = block_end_[order_[k]]) {
        rebuild(k, block_end_[order_[k]]);
        apart += cost().total;
      }
      why = "one kernel from " + name(order_[a]) + " to " + name(order_[b - 1]) + " would cost " + us(merged) +
            ", the chosen kernels " + us(apart) + " -> keep apart";
    }
    explaining_ = false;
    return why;
  }

  baseline::GraphIndex ix_;
  const PlanOptions& opt_;
  ProfileDb db_;
  std::string target_;
  std::vector<int64_t> flops_, bytes_, numel_;  // per node / per value
  std::vector<NodeId> order_;
  std::vector<int> block_start_, block_end_;  // per node: its block [start, end) in order_
  // The open window: per-node and per-value scratch marked by stamp_.
  int stamp_ = 0, size_ = 0, anchors_ = 0, components_ = 0, args_ = 0;
  int64_t bytes_in_ = 0, bytes_out_ = 0, flops_in_ = 0;
  std::vector<int> in_;             // per node: stamp when inside
  std::vector<MappingType> ftype_;  // per node: fused type of it and its producers inside
  std::vector<NodeId> uf_;          // per node: union-find for connectivity
  std::vector<int> reads_;          // per value: readers inside
  std::vector<int> read_stamp_;     // per value: stamp when read in the window
  std::vector<Yellow> yellow_;
  bool explaining_ = false;
  std::string failure_;
  std::map<std::tuple<NodeId, NodeId, int, int, int64_t>, Settlement> settled_;
};

}  // namespace

FusionPlan plan_dp(const Graph& g, const PlanOptions& opt) { return DpPlanner(g, opt).run(); }

}  // namespace dnnf
