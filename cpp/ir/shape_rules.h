// Shape and dtype inference: one rule per operator of ops.def. Rules live in
// shape_*.cc files grouped by op family and are collected into one table; an op with no
// rule is reported by has_shape_rule() (a test walks the whole op table).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dnnf {

// What a shape rule sees: the node, its input types and constant input values, its
// attributes (ONNX names and defaults), and where it writes the output types.
class InferCtx {
 public:
  InferCtx(const Graph& g, const Node& n);

  const Node& node() const { return node_; }
  size_t num_inputs() const { return node_.inputs.size(); }
  size_t num_outputs() const { return out.size(); }
  bool has_input(size_t i) const;
  const TensorType& in(size_t i) const;  // fails if absent
  const Shape& shape(size_t i) const { return in(i).shape; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(in(i).shape.size()); }
  DType dtype(size_t i) const { return in(i).dtype; }
  // The value of input i when it is a constant, else nullptr.
  TensorPtr const_input(size_t i) const;
  // Integer contents of constant input i; fails with `what` if i is present but not constant.
  std::optional<std::vector<int64_t>> const_ints(size_t i, const char* what) const;

  bool has_attr(const std::string& k) const { return node_.has_attr(k); }
  int64_t attr_int(const std::string& k, int64_t dflt) const;
  double attr_float(const std::string& k, double dflt) const;
  std::string attr_string(const std::string& k, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& k, std::vector<int64_t> dflt = {}) const;
  TensorPtr attr_tensor(const std::string& k) const;  // nullptr if absent

  // Normalizes an axis in [-r, r) to [0, r); fails otherwise.
  int64_t axis(int64_t a, int64_t r, const char* what = "axis") const;
  // Fails when any dim of input i is symbolic (for rules that need numbers).
  std::vector<int64_t> static_dims(size_t i) const;
  [[noreturn]] void fail(const std::string& msg) const;

  std::vector<TensorType> out;  // sized to the node's output count; rules fill it

 private:
  const Graph& g_;
  const Node& node_;
};

using ShapeRule = void (*)(InferCtx&);

// Family registration: each shape_*.cc defines one of these.
struct ShapeRuleTable {
  ShapeRule rules[kNumOps] = {};
  void set(OpKind k, ShapeRule r) { rules[static_cast<size_t>(k)] = r; }
};
void add_elementwise_shape_rules(ShapeRuleTable& t);
void add_nn_shape_rules(ShapeRuleTable& t);
void add_tensor_shape_rules(ShapeRuleTable& t);
void add_index_shape_rules(ShapeRuleTable& t);

bool has_shape_rule(OpKind k);
// Runs the rule of n.op; throws ShapeError naming the node on any mismatch.
std::vector<TensorType> infer_output_types(const Graph& g, const Node& n);

// Shared helpers for rules.
// NumPy/ONNX multidirectional broadcasting of shapes; nullopt when incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Shape of an elementwise result; fails with a message naming both shapes.
Shape broadcast_all(const InferCtx& c, const std::vector<size_t>& inputs);
// "[1,2,3]", for messages.
std::string ints_str(const std::vector<int64_t>& v);
// Two dims that cannot be equal: both static and different (a symbol may be anything).
bool conflict(const Dim& a, const Dim& b);
// Checked dimension arithmetic: absurd sizes fail instead of wrapping around.
int64_t checked_add(const InferCtx& c, int64_t a, int64_t b);
int64_t checked_mul(const InferCtx& c, int64_t a, int64_t b);
// A 0/1 flag attribute; fails on any other value.
int64_t flag(const InferCtx& c, const char* name, int64_t dflt);
// Fails unless input i has a float element type.
void need_float(const InferCtx& c, size_t i, const char* what);
// Fails when input b is present and its element type differs from input a's.
void same_dtype(const InferCtx& c, size_t a, size_t b, const char* what);
// Integer contents of a required constant 1-D input.
std::vector<int64_t> const_vector(const InferCtx& c, size_t i, const char* what);
// The static shape held by a required constant 1-D input; fails on a negative entry.
Shape const_shape(const InferCtx& c, size_t i, const char* what);
// A scalar or a one-element 1-D tensor.
bool is_scalar_like(const InferCtx& c, size_t i);
// Marks `axes` (each in [-r, r)) among r axes; a repeated axis fails unless allow_repeats.
std::vector<bool> axis_set(const InferCtx& c, const std::vector<int64_t>& axes, int64_t r,
                           bool allow_repeats);

}  // namespace dnnf
