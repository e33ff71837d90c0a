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

// ---- Algebraic rewriting, constant folding, BN folding (algebra.cc, fold.cc) ----------
namespace dnnf {

// One rule of the algebraic rewriting (paper §4.2, Table 3); patterns in pattern.h's language.
struct AlgebraRule {
  const char* name;
  const char* pattern;
  const char* replacement;
  const char* math;  // the identity, and when it holds
};
// The rule table, in priority order (ties in saved FLOPs go to the earlier rule).
const std::vector<AlgebraRule>& algebra_rules();
// Rewrites with the rule table to a fixpoint (at most a few sweeps). A rule fires only when
// the replacement has the same type as what it replaces and strictly fewer FLOPs (cost.h),
// or equal FLOPs and fewer operators; at each node the rule saving most wins.
Graph apply_algebraic_rules(const Graph& g);
// The same, appending the name of every rule that fired (once per firing) to `fired`.
Graph apply_algebraic_rules(const Graph& g, std::vector<std::string>& fired);

// Evaluates every node whose inputs are all constants with `eval` (which may decline by
// returning no tensors) and replaces it with the constants it computes; Shape and Size of
// statically shaped values fold without it. A node whose outputs would be larger than its
// inputs together by more than 64 KiB (Expand, Tile, ConstantOfShape, Range of a big
// tensor) is kept: materializing it would bloat the model and the fused kernel reads it
// just as well from its small inputs.
Graph fold_constants(const Graph& g, const Evaluator& eval);
// Folds inference BatchNormalization, and Mul/Add/Sub/Div by per-output-channel constants,
// into the weights and bias of the Conv (any dims, groups, with or without bias) or Gemm
// (transB 0/1) that produces their input, when that Conv/Gemm has no other consumer.
// Weights are recomputed in double and stored in their dtype (f32/f64).
Graph fold_batch_norm(const Graph& g);

// A Conv (group 1) whose input is x * s, with s a computed per-channel scale that broadcasts
// along the input channels only (the squeeze-and-excitation gate), becomes Conv(x, W * s):
// conv is linear in each input channel, so scaling the channel's input scales its weights.
// Taken where the weights are smaller than half the activation (the weights are then
// scaled and packed on every call instead of the activation being scaled), and only when
// nothing else reads x * s.
Graph fold_input_scale(const Graph& g);

}  // namespace dnnf
