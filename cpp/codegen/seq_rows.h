// compile(..., dynamic=True)'s runtime sequence length in the kernel plan: the stages whose
// rows follow L (cg::SeqRows), from the values dnnfusion/seq_extents.py proved need only
// their first L + offset positions.
#pragma once
#include <map>

#include "codegen/kernel.h"
#include "ir/graph.h"

namespace dnnf::cg {

// Sets Stage::seq (and BlockPlan::length_input) for every stage of `mp` that writes one value
// of `rows` in a form that can stop early: a loop (its outer rows, a guard on a row index
// var, or a flat prefix), an f32 GEMM whose M is the sequence, a Softmax / LogSoftmax /
// LayerNormalization whose rows are. Other stages compute every position, as before.
// Returns the number of stages set.
int limit_sequence_rows(const Graph& g, ModulePlan& mp, const std::map<ValueId, std::map<int, int64_t>>& rows,
                        int length_input, bool length_f32);

}  // namespace dnnf::cg
