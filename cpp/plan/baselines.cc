// TEMPORARY placeholder until the baseline planners land; replaced by their author.
#include "plan/baselines.h"

#include "ir/errors.h"

namespace dnnf {

FusionPlan plan_none(const Graph&, const PlanOptions&) {
  throw UnsupportedOperatorError("planner none not built yet");
}
FusionPlan plan_patterns(const Graph&, const PlanOptions&) {
  throw UnsupportedOperatorError("planner patterns not built yet");
}
FusionPlan plan_tvm(const Graph&, const PlanOptions&) {
  throw UnsupportedOperatorError("planner tvm not built yet");
}
FusionPlan plan_dp(const Graph&, const PlanOptions&) {
  throw UnsupportedOperatorError("planner dp not built yet");
}

}  // namespace dnnf
