// The Extended Computational Graph (paper §3): values with static (or symbolic) types,
// nodes in topological order, constants held by reference, and per intermediate tensor
// whether fusion can remove it.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/attr.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace dnnf {

using ValueId = int32_t;
using NodeId = int32_t;
constexpr ValueId kNoValue = -1;  // an absent optional input

struct Value {
  ValueId id = kNoValue;
  std::string name;
  TensorType type;
  NodeId producer = -1;    // -1: a graph input or a constant
  int producer_index = 0;  // which output of the producer
  TensorPtr constant;      // set for constants (weights)
  bool is_graph_input = false;
};

struct Node {
  NodeId id = -1;
  OpKind op{};
  std::string name;
  std::vector<ValueId> inputs;  // kNoValue marks an absent optional input
  std::vector<ValueId> outputs;
  Attrs attrs;

  const OpInfo& info() const { return op_info(op); }
  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // Building. Names must be unique among values; an empty name gets a generated one.
  ValueId add_input(const std::string& name, TensorType type);
  ValueId add_constant(const std::string& name, TensorPtr data);
  // Adds a node and infers its output types with the op's shape rule; a node the rule
  // rejects raises ShapeError naming the node, and leaves the graph unchanged.
  std::vector<ValueId> add_node(OpKind op, const std::vector<ValueId>& inputs, Attrs attrs,
                                int num_outputs, const std::string& name = "",
                                const std::vector<std::string>& output_names = {});
  // Adds a node with given output types (the text parser); verify() re-infers and compares.
  std::vector<ValueId> add_node_typed(OpKind op, const std::vector<ValueId>& inputs, Attrs attrs,
                                      const std::vector<TensorType>& output_types,
                                      const std::string& name,
                                      const std::vector<std::string>& output_names);
  void set_outputs(const std::vector<ValueId>& outputs);
  // Renames a value; fails if the name is taken. Passes use it to keep graph outputs'
  // names stable when a rewrite replaces the value that carried them.
  void rename_value(ValueId id, const std::string& name);

  // Reading.
  const Value& value(ValueId id) const;
  const Node& node(NodeId id) const;
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }  // topological order
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId> constants() const;
  ValueId find_value(const std::string& name) const;  // kNoValue if absent
  // Nodes reading `id`, in topological order (a node reading it twice is listed once).
  std::vector<NodeId> consumers(ValueId id) const;
  bool is_graph_output(ValueId id) const;
  // Whether fusion may remove the tensor: an intermediate produced by a node, not a
  // graph output. (Whether a given plan does remove it depends on its consumers.)
  bool is_removable(ValueId id) const;

 private:
  ValueId new_value(const std::string& name, TensorType type);

  std::string name_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_, outputs_;
  std::unordered_map<std::string, ValueId> by_name_;
};

}  // namespace dnnf
