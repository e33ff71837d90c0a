// A tiny pattern language for the algebraic rewrite rules of paper §4.2 (its Table 3):
// patterns and replacements are op trees written as text, matched against the ECG.
//
//   expr    := Op [ '@' label ] '(' expr { ',' expr } ')' | var | number
//   Op      := an operator name of ops.def (Add, MatMul, ReduceSum, ...)
//   var     := [sigil] name                      (name starts with a lowercase letter)
//
// Variables. A variable bound twice must bind the same value (or equal small constants).
//   a    any value; also matches an absent optional input (so `ReduceSum@r(a, ax)` covers
//        a ReduceSum without axes)
//   #c   a constant (a weight of the graph)
//   $s   a one-element constant that does not broadcast the node reading it: that node's
//        output has the shape of its other operand (so pulling $s through a reduction or a
//        MatMul cannot change which elements it scales)
//   +a   a value known to be non-negative (a constant >= 0, or the output of Relu, Abs,
//        Exp, Sqrt, Sigmoid, Softmax, ..., see known_non_negative)
// Numbers. In a pattern, a constant whose every element equals the number (any shape;
//   the type check below rejects rewrites where it broadcast). In a replacement, a
//   rank-0 constant of the root's element type.
// Operators. An unlabeled pattern op matches only nodes without attributes. A labeled
//   one (`ReduceSum@r`) matches any attributes; two pattern ops with one label must bind
//   nodes with equal attributes and equal input types ("the same operation on other
//   data"); a labeled replacement op copies the attributes of the node its label bound.
//   Commutative ops (kComm in ops.def) match their two operands in either order.
//
// Conditions every match meets (checked here, not per rule): every matched node computes
// a float type (integer Div/Reciprocal are not the real operations the rules assume), has
// one output, and apart from the root has no consumer outside the match and is not a graph
// output (else the rewrite would keep it alive and duplicate its work); no variable binds
// the output of a matched non-root node.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dnnf {

struct Pattern {
  enum class Kind : uint8_t { Op, Var, Number };
  enum class Sigil : uint8_t { Any, Const, Scalar, NonNeg };
  Kind kind = Kind::Var;
  OpKind op{};                 // Op
  std::string label;           // Op: "" when unlabeled
  std::vector<Pattern> args;   // Op
  std::string name;            // Var, without its sigil
  Sigil sigil = Sigil::Any;    // Var
  double number = 0;           // Number
};

// Parses the text above; a malformed pattern is a bug in the rule table (InternalError).
Pattern parse_pattern(const std::string& text);

struct Match {
  std::map<std::string, ValueId> vars;
  std::map<std::string, NodeId> labels;
  std::vector<NodeId> nodes;  // matched nodes, root first; a node matched twice is listed once
};

// Matches `p` with its root at node `root` of `g`; the first match in operand order.
std::optional<Match> match_pattern(const Graph& g, const Pattern& p, const Node& root);

// A replacement built on its own, in a scratch graph whose inputs and constants stand for
// the pattern's variables, so that its types (shape rules) and cost are known before the
// rewrite is committed. Sub-trees over constants only are folded on the way.
struct Instance {
  Graph scratch;
  std::map<ValueId, ValueId> leaves;  // scratch value -> the source-graph value it stands for
  ValueId result = kNoValue;          // in scratch
  int64_t flops = 0;                  // of the scratch nodes
  int ops = 0;                        // scratch nodes
};
// nullopt when a shape rule rejects the replacement (e.g. operands that do not broadcast).
std::optional<Instance> instantiate(const Pattern& replacement, const Match& m, const Graph& g,
                                    DType literal_dtype);

// Value of an elementwise arithmetic op on constant float tensors (NumPy broadcasting,
// computed in double, rounded once), or nullptr when it is not one of the few ops this
// evaluates (Add Sub Mul Div Neg Reciprocal Sqrt Abs Exp Log) or the result is large.
TensorPtr fold_arithmetic(OpKind op, const std::vector<TensorPtr>& inputs);

// A new constant of `type` (f32 or f64; nullptr otherwise) holding `xs` rounded once.
TensorPtr tensor_of_doubles(const TensorType& type, const std::vector<double>& xs);

// Whether every element of `v` is >= 0 or NaN (NaN stays NaN through the rules that ask).
bool known_non_negative(const Graph& g, ValueId v, int depth = 4);

}  // namespace dnnf
