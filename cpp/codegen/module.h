// The kernel plan of a whole model (paper §4.4): see module.cc.
#pragma once
#include "codegen/kernel.h"
#include "codegen/lower.h"
#include "plan/memory_plan.h"
#include "plan/plan.h"

namespace dnnf::cg {

// Lowers every block of `p` (any planner's) to its kernel plan. UnsupportedOperatorError for
// an op or dtype code generation cannot lower, naming the node; ShapeError for symbolic shapes.
ModulePlan plan_module(const Graph& g, const FusionPlan& p, const MemoryPlan& memory,
                       const LowerOptions& opt = {});

}  // namespace dnnf::cg
