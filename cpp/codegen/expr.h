// Building the value of a tensor at a symbolic index as a program (kernel.h), over the
// tensors in memory (paper §4.4, intra-block optimisation). One-to-One operators become
// elementwise instructions (kept in registers); Reorganize, Shuffle and One-to-Many operators
// become index maps composed into the loads, so they never copy. Values are computed once
// per index (common subexpressions), inside the branch that needs them.
#pragma once
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/kernel.h"
#include "ir/graph.h"
#include "target/isa.h"

namespace dnnf::cg {

// A tensor the generated code can read from memory: a block input, a constant or a value
// materialised earlier in the block.
struct Leaf {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  TensorPtr constant;  // set for constants: one-element ones become literals
};
using Leaves = std::map<ValueId, Leaf>;

// Thrown while building in vector mode when a construct needs per-lane control flow or a
// non-f32 value; the caller builds the stage again in scalar mode.
// Derives from std::exception so that one escaping by mistake still carries its reason.
struct NeedScalar : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<int64_t> dims_of(const Graph& g, ValueId v);
// UnsupportedOperatorError unless generated code computes on element type t.
void require_dtype(DType t);

// Where(Less / Greater(a, b), x, y) on f32 vectors: v_select(v_cmp_lt / gt(a, b), x, y) over
// args 0-3 (a, b, x, y), for a condition that varies along the vector (a per-lane mask, such
// as dynamic=True's `position < length`), which a vector program could not read as bools.
Ew select_by_compare(OpKind cmp);

// The elementwise expression of One-to-One operator `n` over operands of `types` (`present`
// false: an omitted optional input), in `mode`. NeedScalar: no vector form (a non-f32
// operand); UnsupportedOperatorError naming the node when code generation has no form.
Ew elementwise(const Graph& g, const Node& n, const std::vector<DType>& types,
               const std::vector<bool>& present, Mode mode);

// Trilu with a computed k, over operands (column, row, k, x) in scalar mode: x where
// column - row >= k (upper) or <= k (lower), else 0, as `t`.
Ew trilu_select(bool upper, DType t);

class ExprBuilder {
 public:
  // `inner`: the var stepped by whole vectors in vector mode, -1 in scalar mode. The
  // builder appends to `prog.code` and reads `prog.vars`.
  ExprBuilder(const Graph& g, const Leaves& leaves, Program& prog);

  // The value of `v` at `idx` (one IExpr per dim of v), in the program's mode.
  Ref eval(ValueId v, const std::vector<IExpr>& idx);
  // The same, always as a scalar of v's type; in vector mode idx must not depend on the
  // inner var (NeedScalar otherwise). Used for data-dependent indices (Gather).
  Ref eval_scalar(ValueId v, const std::vector<IExpr>& idx);
  // Stores `value` into the memory of `v` at a flat index, in the program's mode.
  void store(ValueId v, const IExpr& flat, Ref value);
  // Seeds the value of v at idx: the anchor's result in its epilogue (`name` = the
  // accumulator).
  Ref define(ValueId v, const std::vector<IExpr>& idx, const std::string& name);
  // Epilogue instructions on the accumulator: v = v op x (op "mul", "add"), or v = x.
  void accumulate(const std::string& op, Ref x);
  // An f32 literal in the program's mode, spelled in place.
  Ref literal(double v);
  // An elementwise computation of already built operands, spelled in place.
  Ref compute_inline(Ew ew, std::vector<Ref> args);

  int gathers = 0;  // loads and stores that are not contiguous along the vector
  // Whether the inner var's vectors start at multiples of the vector width (true in
  // pointwise loops; not in epilogues, whose tiles start where the anchor's do).
  bool aligned_vectors = false;

  Mode mode() const { return prog_.mode; }
  VarTable& vars() { return prog_.vars; }

 private:
  Ref eval_in(ValueId v, const std::vector<IExpr>& idx, Mode m);
  Ref eval_node(const Node& n, int out, const std::vector<IExpr>& idx, Mode m);
  // A One-to-One operator's output (expr_pointwise.cc); `od` its dims.
  Ref eval_pointwise(const Node& n, int out, const std::vector<IExpr>& idx, const std::vector<int64_t>& od, Mode m);
  // Where in vector mode whose condition varies along the vector and is a Less / Greater of
  // f32 operands computed here: v_select(v_cmp(a, b), x, y); kNoRef when it is not that.
  Ref lane_select(const Node& n, const std::vector<IExpr>& idx, const std::vector<int64_t>& od);
  Ref push(Instr i);
  Ref bind(Instr i);  // a named instruction ("t<k>")
  Ref conditional(std::vector<IndexCmp> conds, DType t, Mode m, const std::function<Ref()>& then_fn,
                  const std::function<Ref()>& else_fn);
  Ref constant_literal(double v, DType t, Mode m, bool zero = false);
  std::vector<IExpr> broadcast_index(ValueId in, const std::vector<IExpr>& idx,
                                     const std::vector<int64_t>& out_dims);
  std::string key(ValueId v, Mode m, const std::vector<IExpr>& idx) const;
  std::string fresh(const char* prefix = "t");
  // A scalar index read from the data (`iv`), wrapped into [0, extent) and range-checked at
  // run time (Gather, GatherElements, GatherND); returns the name it is bound to.
  std::string wrap_index(Ref iv, int64_t extent, const char* what, const Node& n);
  // idx - base where idx < base + len is known (a Concat input's part of the axis).
  IExpr shifted(const IExpr& idx, int64_t base, int64_t len);

  const Graph& g_;
  const Leaves& leaves_;
  Program& prog_;
  int counter_ = 0;
  std::vector<std::map<std::string, Ref>> scopes_;
  std::map<std::tuple<int, int64_t, int64_t>, int> shifted_;  // (var, base, len) -> "(var - base)"
};

}  // namespace dnnf::cg
