// The baseline fusion planners the paper compares DNNFusion with (§5): no fusion, fixed
// patterns, TVM-style post-dominator fusion, and a dynamic-programming search.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "plan/plan.h"

namespace dnnf {

FusionPlan plan_none(const Graph& g, const PlanOptions& opt);      // baselines.cc
FusionPlan plan_patterns(const Graph& g, const PlanOptions& opt);  // baselines.cc
FusionPlan plan_tvm(const Graph& g, const PlanOptions& opt);       // baselines_tvm.cc
FusionPlan plan_dp(const Graph& g, const PlanOptions& opt);        // baselines_dp.cc

namespace baseline {

// Adjacency the baselines share, built once per graph (Graph::consumers is a scan).
struct GraphIndex {
  explicit GraphIndex(const Graph& g);

  const Graph& g;
  std::vector<std::vector<NodeId>> readers;    // per value: distinct reader nodes, topological
  std::vector<std::vector<NodeId>> producers;  // per node: distinct producer nodes
  std::vector<std::vector<NodeId>> consumers;  // per node: distinct consumer nodes, topological
  std::vector<char> is_output;                 // per value: a graph output
  std::vector<MappingType> type;               // per node: node_mapping_type

  const Node& node(NodeId n) const { return g.node(n); }
  const std::string& name(NodeId n) const { return g.node(n).name; }
  // Distinct (producer, consumer) pairs, by consumer then producer.
  std::vector<std::pair<NodeId, NodeId>> edges() const;
  // Arguments of a kernel running `nodes`: distinct values read from outside (weights
  // included) and values written for later kernels or returned.
  int kernel_args(const std::vector<NodeId>& nodes) const;
};

// Collects one Reason per producer/consumer pair; the first decision recorded for a pair
// is its cause and is kept.
class Reasons {
 public:
  void add(NodeId p, NodeId c, bool fused, std::string why);
  std::vector<Reason> take();  // ordered by (producer, consumer)

 private:
  std::map<std::pair<NodeId, NodeId>, Reason> by_pair_;
};

}  // namespace baseline
}  // namespace dnnf
