// Lowering of one fused block to its kernel plan (paper §4.4). A block runs as stages in
// topological order: an anchor call (a Many-to-Many operator on a kernel of the anchor table,
// with the block's following One-to-One / layout operators fused into its epilogue, applied
// to each output vector while it is in a register), or a pointwise loop nest that computes
// one materialised tensor from tensors in memory through composed index maps. Only values
// that an anchor must read from memory, values leaving the block, and anchor outputs that no
// epilogue absorbs are materialised; the others exist only in registers. Lowering decides;
// the renderers (cpu/, opencl/) spell. GEMM operands computed while packed: prologue.cc.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/expr.h"
#include "codegen/kernel.h"
#include "codegen/views.h"
#include "plan/memory_plan.h"
#include "plan/plan.h"

namespace dnnf::cg {

// The element count of a static shape (1 for a scalar).
inline int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// What the whole module shares while its blocks are lowered: the constants in the order the
// runtime hands them over, and the weights packed once.
struct ModuleState {
  std::vector<ValueId> constants;
  std::map<ValueId, int> const_index;
  std::vector<PackedConstant> packed;
  int constant(ValueId v);  // index in the constants array
  int pack(PackedConstant p);  // its packed slot (one per constant and layout)
};

// Where a value outside the block lives (a block input or output).
using LocateFn = std::function<Location(ValueId)>;

// What a target's kernels make a fused prologue cost (the recomputation trade-off of paper
// §4.3): the CPU GEMM packs A once, so a computed A costs its producers once and saves a pass
// over memory; a GEMM kernel that evaluates each A[m, k] E > 1 times (the OpenCL kernels: once
// per tile column, N / tile, or untiled once per output column, N) recomputes its producers
// E - 1 times more, so there an A made by arithmetic is fused only where that adds at most an
// eighth of the GEMM's own arithmetic ((E - 1) * ops <= N / 4, per element of A), and a view
// is never made a prologue.
struct LowerOptions {
  // E for C[batch](M x N); empty: 1 (A packed once).
  std::function<int64_t(int64_t M, int64_t N, int64_t batch)> gemm_a_evaluations;
  bool gemm_prologues = true;  // off: every GEMM operand made in the block is materialised
  // A Concat along the channels feeding channels-first convolutions read in place, a pointer per
  // input (the OpenCL renderer's; the CPU target reads channels-last Concats in place, and its
  // channels-first convolutions one buffer).
  bool nchw_conv_segments = false;
  // Where a value made in a block may start in an assembled Concat's bytes: the memory plan's
  // MemoryPlan::run_alignment (the arena's alignment unless the target says otherwise).
  int64_t concat_run_alignment = 64;
  // A spatial mean of a depthwise convolution's stored output in its block is taken by the
  // convolution as it stores each output row (AnchorStage::reduced_by; the CPU renderer's).
  bool conv_means = false;
  // A pointwise convolution of the block whose output only a depthwise convolution of the block
  // reads is computed by that convolution's call, rows at a time (AnchorStage::expand; the CPU
  // renderer's conv_nhwc_expand_f32, expand_rows.cc).
  bool expand_rows = false;
  // A scatter whose data is made in the block and read by it alone updates that data in place
  // (BlockLowerer::scatter_in_place: one buffer for both, the kernel copies nothing).
  bool scatters_in_place = false;
};

// The index of n's output as a function of an anchor's index (idx holds the indices of the
// values already in the epilogue), when n can run in that epilogue.
bool forward_index(const Graph& g, const Node& n, const std::map<ValueId, std::vector<IExpr>>& idx,
                   VarTable& vt, std::vector<IExpr>& out);

class BlockLowerer {
 public:
  BlockLowerer(const Graph& g, const Block& b, ModuleState& ms, LocateFn locate, LowerOptions opt = {});
  BlockPlan lower();

  // For the anchor table (anchors.cc).
  const Graph& graph() const { return g_; }
  ModuleState& module() { return ms_; }
  bool block_output(ValueId v) const { return block_outputs_.count(v) > 0; }
  bool has_epilogue_plan(const Node& n) const { return epilogues_.count(n.id) > 0; }
  int fused_ops(const Node& n) const;
  // The epilogue of anchor `n` over its [R, C] view: `pre` builds what runs on the
  // accumulator before the fused operators (Gemm's alpha and C, Conv's bias). Sets the
  // stage's `y` (the buffer the kernel stores) and `ep`.
  void epilogue(const Node& n, AnchorStage& st, const std::function<void(ExprBuilder&)>& pre = nullptr);
  // An anchor input read in place through strides from another value's memory (a GEMM
  // operand made by Transpose/Reshape), or nullptr: then the input's own buffer holds it.
  const StridedView* strided(ValueId v) const;
  // A convolution's input that is a Concat along the channels, read in place (channels last;
  // channels first where LowerOptions::nchw_conv_segments): the concatenated values, or nullptr.
  const std::vector<ValueId>* segments(ValueId v) const;
  // GEMM anchor n's A computed while packed (a fused prologue): sets gc's a_computed, a_prog.
  void gemm_prologue(const Node& n, GemmCall& gc);
  // Where a value the block names lies (set before the stages are emitted).
  const Location& location(ValueId v) const;
  // A channels-last convolution's x made here by the layout's Transpose of a channels-first
  // value in memory, which the convolution reads instead (ConvShape::planar_x); else kNoValue.
  ValueId planar(ValueId x) const;
  // Whether v is computed by a depthwise convolution from its pointwise producer, rows at a
  // time, and never stored (expand_rows.cc).
  bool streamed(ValueId v) const { return streamed_.count(v) > 0; }

 private:
  bool is_anchor(const Node& n) const;
  void choose_epilogue(const Node& n);
  int64_t scratch(int64_t bytes);  // a kernel-local buffer's offset
  void emit_pointwise(ValueId v);
  bool emit_transpose(ValueId v);
  void emit_anchor(const Node& n);
  bool mean_by_conv(const Node& n);  // conv_mean.cc
  void find_expansions();            // expand_rows.cc
  void expand_into(const Node& d);   // expand_rows.cc
  void find_view(ValueId x, const std::set<NodeId>& in_epilogue);
  void find_segments(ValueId x, const std::set<NodeId>& in_epilogue);
  void find_assembly(const Node& cat, const std::set<NodeId>& in_epilogue);
  void find_planar(const Node& conv, const std::set<NodeId>& in_epilogue);
  // Whether scatter n may update its data in place: data is made in this block, read by n
  // alone and kept nowhere else, so n's output can take data's bytes and skip the copy.
  bool scatter_in_place(const Node& n) const;
  void find_prologue(const Node& n, const std::set<NodeId>& in_epilogue);
  bool build_prologue(const Node& n, const Leaves& leaves, Program& prog, int* ops) const;
  // Whether v is in memory when the block's anchors run, or can be (a value of a pointwise
  // loop of this block outside any epilogue).
  bool in_memory(ValueId v) const;
  bool can_materialise(ValueId v, const std::set<NodeId>& in_epilogue) const;
  // Whether u, a value of this block, is stored by a channels-last convolution's own store (its
  // output, or the one value its elementwise epilogue stores), so it can go to rows of a Concat.
  bool conv_stores_rows(ValueId u) const;
  void check_rows() const;  // every value in rows is written and read as conv_stores_rows says

  const Graph& g_;
  const Block& b_;
  ModuleState& ms_;
  LocateFn locate_;
  LowerOptions opt_;
  std::set<NodeId> inside_;
  std::set<ValueId> block_outputs_;
  std::set<ValueId> materialised_;
  Leaves leaves_;
  BlockPlan plan_;
  // Epilogue plan per anchor node: the fused nodes (topological) and which of their
  // outputs must be stored by it.
  struct EpiloguePlan {
    std::vector<NodeId> nodes;
    std::vector<ValueId> stores;
  };
  std::map<NodeId, EpiloguePlan> epilogues_;
  std::set<ValueId> stored_by_epilogue_;
  // Anchor inputs that are views of a value in memory (not materialised themselves).
  std::map<ValueId, StridedView> views_;
  std::map<ValueId, std::vector<ValueId>> segments_;
  // Concats assembled in place (find_assembly): x -> each input this block makes and where it
  // lies in x (bytes; rows for a channels-last Concat).
  std::map<ValueId, std::vector<std::pair<ValueId, ConcatPart>>> assembled_;
  std::map<ValueId, Location> where_;  // lower() step 3
  std::map<ValueId, ValueId> planar_;  // find_planar: x -> the channels-first value it transposes
  // GEMM A operands computed while packed (never in memory).
  std::set<ValueId> prologues_;
  // find_expansions: depthwise conv -> the pointwise conv whose output it computes, and those
  // outputs (never in memory).
  std::map<NodeId, NodeId> expand_;
  std::set<ValueId> streamed_;
};

// The anchor table (anchors.cc): one row per Many-to-Many operator code generation runs on
// a kernel: the [R, C] view its epilogue sees, whether it takes one, and how its call is
// lowered.
struct AnchorRow {
  OpKind op;
  AnchorKind kind;
  bool (*takes_epilogue)(const Node& n);  // fused operators after it run in its epilogue
  std::pair<int64_t, int64_t> (*view)(const Graph& g, const Node& n);
  void (*lower)(BlockLowerer& bl, const Node& n, Stage& st);
};
// The row of `op`, or nullptr.
const AnchorRow* anchor_row(OpKind op);

}  // namespace dnnf::cg
