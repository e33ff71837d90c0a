// Helpers shared by the rows of the anchor table (anchors.cc, anchors_lib.cc; paper §4.4): the
// arguments of an anchor kernel and the checks every anchor makes.
#pragma once
#include <string>
#include <vector>

#include "codegen/lower.h"

namespace dnnf::cg {

int64_t prod(const std::vector<int64_t>& d, size_t from, size_t to);
AnchorArg int_arg(int64_t v, bool bare = false);  // bare: spelled as an int, else a long
AnchorArg float_arg(double v, DType t = DType::F32);
AnchorArg bool_arg(bool v);
AnchorArg buffer_arg(ValueId v);  // kNoValue: an omitted optional buffer
AnchorArg kind_arg(AnchorArg::Kind k);
// UnsupportedOperatorError unless every input is f32 (MatMul, Gemm), or f32 or an integer
// constant (the other anchors).
void need_f32(const Graph& g, const Node& n);
void need_f32_library(const Graph& g, const Node& n);
// " +epilogue" or " +epilogue(N ops)" when n's block fused operators into its epilogue.
std::string epilogue_label(const BlockLowerer& bl, const Node& n, bool count);

}  // namespace dnnf::cg
