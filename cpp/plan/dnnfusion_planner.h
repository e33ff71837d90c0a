// The DNNFusion planner's state and steps (plan_dnnfusion, plan.h), shared by its two source
// files: dnnfusion_planner.cc grows blocks (seeds, successors, predecessors, horizontal
// fusion) and dnnfusion_join.cc decides whether one candidate joins a block (the mapping-type
// table's cell and its exceptions, the profiling database for yellow cells, cycles, the
// kernel-argument limit) and records the reason either way. Internal to cpp/plan.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/mapping.h"
#include "plan/plan.h"
#include "plan/profile_db.h"

namespace dnnf::planner_detail {

constexpr MappingType kO2O = MappingType::OneToOne;
constexpr MappingType kM2M = MappingType::ManyToMany;

inline int64_t numel_of(const Graph& g, ValueId v) {
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

  FusionPlan run();

 private:
  const Node& node(NodeId id) const { return g_.node(id); }
  const std::string& name(NodeId id) const { return g_.node(id).name; }
  bool in(int grp, NodeId n) const { return group_of_[n] == grp; }

  std::vector<NodeId> producers(NodeId c) const;

  int64_t output_bytes(NodeId n) const;

  // Step I: the One-to-One op with the smallest intermediate result among unplanned ops;
  // when none is left, the smallest of the others, ops that only re-index last (seed_rank).
  // Ties go to the earlier op.
  NodeId pick_seed() const;

  // One-to-One ops seed first (the paper's step I); then anchors and other ops; ops that
  // only re-index last: a view read in place by an anchor costs nothing, so a block grown
  // from it around anchors would write what they could have read in place.
  int seed_rank(NodeId n) const;

  // Steps II and III for one block, repeated until it stops changing; deferred
  // Many-to-Many successors (prologues) are tried when nothing else joins.
  void grow(int grp);

  bool grow_successors(int grp, std::vector<std::pair<NodeId, NodeId>>& deferred);

  static bool re_indexes(OpKind k);

  // A successor that only re-indexes a value the block writes anyway (it is also read
  // outside the block) or that is itself a view of memory the block reads, on the way to
  // Many-to-Many ops only: joining it would write its result as well, while the anchors it
  // leads to read it in place from the value (codegen/views.h). A widened Q/K/V
  // projection's parts are such views.
  bool view_left_for_reader(int grp, NodeId m, NodeId c);

  // The paper tries one predecessor at a time: after each join the block's fused type may
  // change, so the remaining candidates are re-evaluated against the new block.
  bool grow_predecessors(int grp);

  // A Many-to-Many member of the block that reads `p` (fusing p would be its prologue),
  // directly or through members that only re-index (re_indexes: views of p's result, as a
  // widened Q/K/V projection's parts are); -1 if none.
  NodeId feeds_anchor(int grp, NodeId p) const;

  // Whether every reader of p's outputs inside block `grp` is a Concat (and one is).
  bool only_concats_read(int grp, NodeId p) const;

  // An unplanned Many-to-Many op that `p` could follow as an epilogue: found walking up
  // through unplanned One-to-One producers. -1 if none.
  NodeId epilogue_anchor(NodeId p) const;

  // Values crossing between the block and a candidate, split into those the join removes
  // (every reader inside afterwards, not a graph output) and those still written.
  struct Crossing {
    int64_t bytes = 0, elements = 0;  // removed; -1 when a size is symbolic
    std::vector<ValueId> removed, kept;
    std::vector<NodeId> removed_readers;  // readers of removed values on the consumer side
  };
  Crossing crossing(int grp, NodeId cand) const;

  // Distinct values the block would take as kernel arguments: inputs read from outside
  // (weights included) and outputs read outside or returned.
  int kernel_args(int grp, NodeId extra, int other_grp = -1) const;

  std::string value_list(const std::vector<ValueId>& vs) const;

  // Tries to add `cand` (the producer `p` or the consumer `c` of the edge p -> c, the
  // other end being in the block) to block `grp`. Records the reason either way.
  bool try_join(int grp, NodeId p, NodeId c, NodeId cand);

  // Edges between a candidate and the block, in either direction.
  std::vector<std::pair<NodeId, NodeId>> edges_between(int grp, NodeId cand) const;

  // A rejected candidate: the decision holds for every edge between it and the block.
  bool refuse(int grp, NodeId cand, NodeId p, NodeId c, const std::string& why);

  ProfileKey profile_key(NodeId p, NodeId c, MappingType tp, MappingType tc, int64_t elements) const;

  // The analytic estimate's inputs (formula in profile_db.cc):
  //  reads: a One-to-Many consumer side reads each removed element (its largest output /
  //    removed elements) times; other consumers read each once (Many-to-Many anchors run on
  //    packed micro-kernels that read each operand element once per packing).
  //  index_ops: 2 per dimension (a divide and a modulo) for each non-view Reorganize or
  //    Shuffle op at either end of a removed tensor.
  //  producer_flops: the flops of the producer side, recomputed per extra read.
  PairCost pair_cost(int grp, NodeId cand, const Crossing& x, MappingType consumer_type) const;

  void join(int grp, NodeId cand, MappingType fused);

  bool reject(NodeId p, NodeId c, std::string why);
  // Tags the reason of a yellow pair with the profiling key it looked up.
  void mark_yellow(NodeId p, NodeId c, const ProfileKey& key);
  void record(NodeId p, NodeId c, bool fused, std::string why);
  // The other end of the edge is already in another block. The first decision about an
  // edge is its cause, so this never overwrites one.
  void note_other_block(NodeId p, NodeId c, NodeId planned);

  // Horizontal fusion: Many-to-Many siblings of the same op reading one non-constant value
  // (the Q/K/V projections) share one kernel, which reads the shared input once.
  void fuse_horizontally();

  // Expansions (expanded_by_anchor.cc): a depthwise convolution's block takes the block of
  // the pointwise convolution that makes its input, when that block is the convolution and
  // its epilogue only; the depthwise kernel computes those rows itself.
  void fuse_expansions();

  // Whether a node of group `b` reads a value produced in group `a`.
  bool depends(int a, int b) const;

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
  std::set<NodeId> expanded_;                  // pointwise convolutions joined as a depthwise one's input (fuse_expansions)
  std::vector<std::vector<NodeId>> readers_;   // per value: consumer nodes
  std::map<std::pair<NodeId, NodeId>, Reason> reasons_;
  std::vector<NodeId> seeds_;
};

}  // namespace dnnf::planner_detail
