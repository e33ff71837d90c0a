// Lowering of one fused block to one C++ function (paper §4.4). A block runs as stages in
// topological order: an anchor call (a Many-to-Many operator on a prelude kernel, with the
// block's following One-to-One / layout operators fused into its epilogue, applied to each
// output vector while it is in a register), or a pointwise loop nest that computes one
// materialised tensor from tensors in memory through composed index maps. Only values that
// an anchor must read from memory, values leaving the block, and anchor outputs that no
// epilogue absorbs are materialised; the others exist only in registers.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/code.h"
#include "codegen/codegen.h"
#include "codegen/expr.h"

namespace dnnf::cg {

// What the whole module shares: constants handed to dnnf_create, the State struct's members
// (pre-packed weights) and the code that fills them once.
struct ModuleState {
  std::vector<ValueId> constants;
  std::map<ValueId, int> const_index;
  std::vector<std::string> members;  // "dnnf::gemm::PackedB w3;"
  Code create;                       // statements of dnnf_create (state `st`)
  int counter = 0;
  std::set<std::string> headers;     // prelude headers beyond the always-included ones
  int constant(ValueId v);           // index in the constants array
};

// Where a value lives at run time, as a C expression of type `char*` or `const void*`
// inside a kernel (parameter `x` of type Ctx): "x.in[0]", "x.arena + 128", ...
using LocateFn = std::function<std::string(ValueId)>;

// The index of n's output as a function of an anchor's index (idx holds the indices of the
// values already in the epilogue), when n can run in that epilogue.
bool forward_index(const Graph& g, const Node& n, const std::map<ValueId, std::vector<IExpr>>& idx,
                   VarTable& vt, std::vector<IExpr>& out);

class BlockLowerer {
 public:
  BlockLowerer(const Graph& g, const Block& b, ModuleState& ms, LocateFn locate);
  // The function `static void <name>(const Ctx& x)`; fills info (stages, scratch bytes).
  std::string lower(const std::string& name, KernelInfo& info);

 private:
  bool is_anchor(const Node& n) const;
  bool has_epilogue(const Node& n) const;
  void choose_epilogue(const Node& n);
  std::string ptr(ValueId v);          // declares (once) and returns the C name of v's buffer
  std::string scratch(int64_t bytes);  // a kernel-local buffer
  void emit_pointwise(ValueId v);
  bool emit_transpose(ValueId v);
  // The epilogue for anchor `n` (output viewed as [R, C] = anchor_view(n)): a C expression
  // of an object for the kernel's `ep` parameter, and the buffer the kernel writes (`y`).
  // `pre` runs on v before the fused operators (Gemm's alpha and C, Conv's bias).
  struct EpCode {
    std::string expr;
    std::string y;
  };
  EpCode epilogue(const Node& n, const std::string& row_offset,
                  const std::function<void(ExprBuilder&)>& pre = nullptr);
  std::pair<int64_t, int64_t> anchor_view(const Node& n) const;
  void emit_anchor(const Node& n);
  void emit_matmul(const Node& n);
  void emit_gemm(const Node& n);
  void emit_library(const Node& n);  // anchors_lib.cc: conv, pools, row ops, irregular ops

  const Graph& g_;
  const Block& b_;
  ModuleState& ms_;
  LocateFn locate_;
  std::set<NodeId> inside_;
  std::set<ValueId> block_outputs_;
  std::set<ValueId> materialised_;
  std::map<ValueId, std::string> ptrs_;
  Leaves leaves_;
  Code code_;
  int64_t scratch_bytes_ = 0;
  int counter_ = 0;
  // Epilogue plan per anchor node: the fused nodes (topological) and which of their
  // outputs must be stored by it.
  struct EpiloguePlan {
    std::vector<NodeId> nodes;
    std::vector<ValueId> stores;
  };
  std::map<NodeId, EpiloguePlan> epilogues_;
  std::set<ValueId> stored_by_epilogue_;
  std::vector<std::string> stages_;
};

}  // namespace dnnf::cg
