// The rewrite passes of paper §4.2, each a function from graph to graph. compile.cc runs
// them in order; the bindings expose each one so they can be run and tested one at a time.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dnnf {

// Computes a node's outputs from constant inputs. The core has no kernels of its own
// before code generation, so the caller supplies one (the bindings pass the NumPy
// reference interpreter).
using Evaluator = std::function<std::vector<TensorPtr>(const Node&, const std::vector<TensorPtr>&)>;

// Removes nodes whose outputs nothing uses (graph outputs are used).
Graph eliminate_dead_code(const Graph& g);
// Merges nodes with the same op, inputs and attributes.
Graph eliminate_common_subexpressions(const Graph& g);
// Removes nodes that compute their input: Identity, inference Dropout, Reshape/Expand to
// the same shape, Transpose by the identity permutation, Cast to the same type, Squeeze/
// Unsqueeze/Flatten/Slice/Pad that change nothing, Concat of one input.
Graph remove_identities(const Graph& g);
// Collapses chains of Reshape/Flatten/Squeeze/Unsqueeze into one Reshape and chains of
// Transpose into one Transpose (or nothing).
Graph merge_layout_chains(const Graph& g);

}  // namespace dnnf
