// FLOP cost of operators and graphs: what the algebraic rewrites minimize (paper §4.2
// chooses among equivalent forms by their computation count).
#pragma once
#include <cstdint>

#include "ir/graph.h"

namespace dnnf {

// Floating-point operations of one node (multiply-add = 2). Data movement ops cost 0;
// transcendental functions count as a few flops each (see cost.cc for the table).
int64_t node_flops(const Graph& g, const Node& n);
int64_t graph_flops(const Graph& g);

}  // namespace dnnf
