// Pointwise lowering (paper §4.4): the value of a tensor at a symbolic index, as C code over
// the tensors that are in memory. One-to-One operators become expressions (kept in
// registers); Reorganize, Shuffle and One-to-Many operators become index maps composed into
// the loads, so they never copy. Values are computed once per index (common subexpressions).
#pragma once
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/index.h"
#include "ir/graph.h"
#include "target/isa.h"

namespace dnnf::cg {

// A line-oriented code buffer.
struct Code {
  std::string text;
  int indent = 1;
  void line(const std::string& s);
  void open(const std::string& s) { line(s + " {"); ++indent; }
  void close(const std::string& s = "}") { --indent; line(s); }
};

// A tensor the generated code can read from memory: a block input, a constant or a value
// materialised earlier in the block.
struct Leaf {
  std::string ptr;  // C name of a `const T*`
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  TensorPtr constant;  // set for constants: one-element ones become literals
};
using Leaves = std::map<ValueId, Leaf>;

enum class Mode { Vector, Scalar };

// Thrown while emitting in vector mode when a construct needs per-lane control flow or a
// non-f32 value; the caller emits the stage again in scalar mode.
// Derives from std::exception so that one escaping by mistake still carries its reason.
struct NeedScalar : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* ctype(DType t);                   // "float", "int64_t", "bool", ...
std::string literal(double v, DType t);       // typed C literal ("0.5f", "INFINITY", ...)
std::vector<int64_t> dims_of(const Graph& g, ValueId v);

// C code for one elementwise (One-to-One) operator applied to already computed operands.
// `args` are C expressions: `vf` in vector mode (f32 only), typed scalars otherwise (`types`
// are the operand dtypes). Empty string: the op is not elementwise or not supported here.
std::string elementwise_expr(const Graph& g, const Node& n, const std::vector<std::string>& args,
                             const std::vector<DType>& types, Mode mode);

class PointwiseEmitter {
 public:
  // `inner`: the var stepped by whole vectors in vector mode (its C name is the vector's
  // first index and `n` its live lanes), -1 in scalar mode.
  PointwiseEmitter(const Graph& g, const Leaves& leaves, VarTable& vt, int inner, Mode mode,
                   Code& code);

  // The value of `v` at `idx` (one IExpr per dim of v): a C expression of type `vf` (vector
  // mode) or of v's C type. Statements it needs are appended to the code buffer.
  std::string eval(ValueId v, const std::vector<IExpr>& idx);
  // The same, always as a scalar of v's type; in vector mode idx must not depend on the
  // inner var (NeedScalar otherwise). Used for data-dependent indices (Gather).
  std::string eval_scalar(ValueId v, const std::vector<IExpr>& idx);
  // Loads and stores of a leaf at a flat index, in the current mode.
  std::string load(const Leaf& leaf, const IExpr& flat, Mode m);
  void store(const std::string& ptr, DType t, const IExpr& flat, const std::string& value);

  // Seeds the value of v at idx (an anchor's result in its epilogue).
  void define(ValueId v, const std::vector<IExpr>& idx, const std::string& expr);
  int gathers = 0;  // loads and stores that are not contiguous along the vector
  // Whether the inner var's vectors start at multiples of the vector width (true in the
  // pointwise loops of lower.cc; not in epilogues, whose tiles start where the anchor's do).
  bool aligned_vectors = false;

  Mode mode() const { return mode_; }
  VarTable& vars() { return vt_; }
  std::string fresh(const char* prefix = "t");

 private:
  std::string eval_in(ValueId v, const std::vector<IExpr>& idx, Mode m);
  std::string eval_node(const Node& n, int out, const std::vector<IExpr>& idx, Mode m);
  std::string bind(const std::string& expr, const std::string& type);
  std::string conditional(const std::string& cond_scalar, const std::string& type,
                          const std::function<std::string()>& then_fn,
                          const std::function<std::string()>& else_fn);
  std::vector<IExpr> broadcast_index(ValueId in, const std::vector<IExpr>& idx,
                                     const std::vector<int64_t>& out_dims);
  std::string vtype(DType t, Mode m) const;

  const Graph& g_;
  const Leaves& leaves_;
  VarTable& vt_;
  int inner_;
  Mode mode_;
  Code& code_;
  int counter_ = 0;
  std::vector<std::map<std::string, std::string>> scopes_;
};

}  // namespace dnnf::cg
