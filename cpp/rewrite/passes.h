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
// just as well from its small inputs. A One-to-One op whose outputs have no more elements than
// its largest input (DequantizeLinear or Cast of an int8 weight) folds whatever the bytes.
Graph fold_constants(const Graph& g, const Evaluator& eval);
inline constexpr size_t kFoldSlackBytes = 64 * 1024;  // the 64 KiB above
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

// Horizontal fusion as a rewrite (siblings.cc): MatMuls that read one f32 input (rank >= 2)
// with constant 2-D weights (attention's Q, K and V projections) become one MatMul over the
// weights side by side, so one GEMM reads the input once. The next operators of the
// siblings move onto the wide result while every sibling applies the same One-to-One
// operator (same attributes) with operands that line up: the same value broadcast along
// the output's last axis, or constants as long as the sibling along it, put side by side.
// A Slice per sibling gives its part back (a view for the anchors reading it).
Graph combine_sibling_matmuls(const Graph& g);
// x -> MatMul(x, W) (+ b) (-> Reshape/Transpose...) * c, with W and b constants, c a finite
// scalar constant and each value read only by the next, becomes MatMul(x, W * c) (+ b * c)
// (-> ...): the scale is applied to the weights once (attention's 1/sqrt(d), which the
// algebraic rules move onto the query, then costs nothing at run time). Gemm too (its B
// and C), and through one Split along the last axis (GPT-2's one projection for Q, K and
// V), which scales only that part's columns.
Graph fold_matmul_scale(const Graph& g);
// A Split becomes a Slice per part (statically shaped): each part is then a view of its own
// that the anchor reading it can own, where a Split shared by the blocks of its parts makes
// the block holding it write the parts the others read (GPT-2's one Q/K/V projection).
Graph split_to_slices(const Graph& g);

}  // namespace dnnf

// ---- Inter-block layout (layout.cc, paper §4.4) ----------------------------------------
namespace dnnf {

enum class LayoutMode { Auto, Nchw, Nhwc };

// What select_layout decided: one row per region of convolutions and the elementwise
// operators joining them, with the cost model's estimates.
struct LayoutRegion {
  int convs = 0;
  double gain_us = 0, cost_us = 0;  // estimated conv time saved; transposes at the border
  bool nhwc = false;
};
struct LayoutReport {
  std::vector<LayoutRegion> regions;
  int convs_nhwc = 0, transposes_in = 0, transposes_out = 0, roi_aligns_nhwc = 0;
};

// The geometry the layout cost model reads (pixels include the batch).
struct ConvGeometry {
  int64_t C = 1, M = 1, group = 1, taps = 1, stride = 1, in_pixels = 1, out_pixels = 1, batch = 1;
  bool winograd = false;  // a 3x3 plane, stride and dilation 1 in it, one group (conv_winograd.h)
};
// Estimated microseconds of a convolution channels first (nhwc false) or last.
double layout_conv_us(const ConvGeometry& c, bool nhwc);
// Estimated microseconds of transposing a tensor of `numel` f32 elements.
double layout_transpose_us(int64_t numel);

// A ConvTranspose whose windows do not overlap (2-D, f32, one group, constant weights, kernel
// == strides == s in both axes, no dilation, padding or output padding: U-Net's 2x2 stride-2
// up-convolutions) is a 1x1 Conv to s * s * M channels, weight[(a*s + b)*M + m, c] =
// W[c, m, a, b] and the bias repeated s * s times, followed by a DepthToSpace (DCR) of block
// s (conv_transpose.cc). The block s, 0 where n is not such a ConvTranspose:
int64_t pointwise_up_conv_block(const Graph& g, const Node& n);
struct PointwiseUpConv {
  int64_t s = 0;            // 0: not such a ConvTranspose
  TensorPtr weight, bias;   // the 1x1 Conv's; bias null where the ConvTranspose has none
};
PointwiseUpConv pointwise_up_conv(const Graph& g, const Node& n);

// Chooses per region whether its convolutions run channels last. Regions are Convs (f32,
// 1 to 3 spatial dims, group 1 or depthwise; pointwise_up_conv's ConvTransposes, which become
// NhwcConv and a DepthToSpace there) joined through One-to-One operators along the
// data path (and through Concats in Nhwc mode), and the global pools reading them (which become ReduceMean/ReduceMax over the
// spatial axes, so a squeeze-and-excitation gate stays channels last). A region goes channels last when the estimated gain of its convolutions
// exceeds the estimated cost of the Transposes at its border (Auto), always (Nhwc, which
// also takes other grouped convs), or never (Nchw). Channels-last regions read NhwcConv
// and transposed broadcast operands (constants are permuted here); one Transpose back to
// channels first is left for each value the rest of the graph or the outputs read.
Graph select_layout(const Graph& g, LayoutMode mode, LayoutReport* report = nullptr);

}  // namespace dnnf
