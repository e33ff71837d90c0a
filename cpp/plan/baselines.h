// The baseline fusion planners the paper compares DNNFusion with (§5): no fusion, fixed
// patterns, TVM-style post-dominator fusion, and a dynamic-programming search.
#pragma once
#include "plan/plan.h"

namespace dnnf {

FusionPlan plan_none(const Graph& g, const PlanOptions& opt);
FusionPlan plan_patterns(const Graph& g, const PlanOptions& opt);
FusionPlan plan_tvm(const Graph& g, const PlanOptions& opt);
FusionPlan plan_dp(const Graph& g, const PlanOptions& opt);

}  // namespace dnnf
