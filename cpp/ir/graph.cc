// Building and reading the ECG.
#include "ir/graph.h"

#include <algorithm>

#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf {

namespace {

// A static type whose byte size does not fit in 62 bits describes no tensor any machine can
// hold, and its element count would overflow the int64 arithmetic of every later pass.
void check_size(const std::string& name, const TensorType& t) {
  if (!t.is_static()) return;
  int64_t bytes = static_cast<int64_t>(dtype_size(t.dtype));
  for (const Dim& d : t.shape) {
    const int64_t v = d.value;
    if (v < 0) continue;  // reported by the shape checks that know the op
    if (__builtin_mul_overflow(bytes, v, &bytes) || bytes > (int64_t{1} << 62))
      throw ShapeError("value '" + name + "' of type " + t.str() +
                       " would hold more than 2^62 bytes; no tensor can be that large");
  }
}

}  // namespace

ValueId Graph::new_value(const std::string& name, TensorType type) {
  auto id = static_cast<ValueId>(values_.size());
  std::string n = name.empty() ? "t" + std::to_string(id) : name;
  while (name.empty() && by_name_.count(n)) n += "_";
  if (by_name_.count(n))
    throw ModelFormatError("value name '" + n + "' is defined twice in graph '" + name_ + "'");
  check_size(n, type);
  Value v;
  v.id = id;
  v.name = n;
  v.type = std::move(type);
  values_.push_back(std::move(v));
  by_name_[n] = id;
  return id;
}

ValueId Graph::add_input(const std::string& name, TensorType type) {
  ValueId id = new_value(name, std::move(type));
  values_[id].is_graph_input = true;
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_constant(const std::string& name, TensorPtr data) {
  if (!data || (!data->data && data->type.numel() != 0))
    throw ModelFormatError("constant '" + name + "' has no data");
  if (!data->type.is_static())
    throw ModelFormatError("constant '" + name + "' has a symbolic shape");
  ValueId id = new_value(name, data->type);
  values_[id].constant = std::move(data);
  return id;
}

static void check_arity(const OpInfo& info, size_t n_in, size_t n_out, const std::string& name) {
  auto who = [&] { return "node '" + name + "' (" + info.name + "): "; };
  if (static_cast<int>(n_in) < info.min_inputs ||
      (info.max_inputs >= 0 && static_cast<int>(n_in) > info.max_inputs))
    throw ShapeError(who() + "takes " + std::to_string(info.min_inputs) + ".." +
                     (info.max_inputs < 0 ? std::string("n") : std::to_string(info.max_inputs)) +
                     " inputs, got " + std::to_string(n_in));
  if (static_cast<int>(n_out) < info.min_outputs ||
      (info.max_outputs >= 0 && static_cast<int>(n_out) > info.max_outputs))
    throw ShapeError(who() + "produces " + std::to_string(info.min_outputs) + ".." +
                     (info.max_outputs < 0 ? std::string("n") : std::to_string(info.max_outputs)) +
                     " outputs, " + std::to_string(n_out) + " requested");
}

// The next node of g, not yet added: id, op, name ("<Op>_<id>" when empty), inputs and
// attributes, with its arity checked for num_outputs outputs and every input id checked;
// its outputs are left empty.
static Node next_node(const Graph& g, OpKind op, const std::vector<ValueId>& inputs, Attrs attrs,
                      size_t num_outputs, const std::string& name) {
  Node n;
  n.id = static_cast<NodeId>(g.nodes().size());
  n.op = op;
  n.name = name.empty() ? std::string(op_info(op).name) + "_" + std::to_string(n.id) : name;
  n.inputs = inputs;
  n.attrs = std::move(attrs);
  check_arity(op_info(op), inputs.size(), num_outputs, n.name);
  for (ValueId in : inputs)
    if (in != kNoValue) g.value(in);  // throws for dangling ids
  return n;
}

std::vector<ValueId> Graph::add_node(OpKind op, const std::vector<ValueId>& inputs, Attrs attrs,
                                     int num_outputs, const std::string& name,
                                     const std::vector<std::string>& output_names) {
  size_t n_out = static_cast<size_t>(std::max(num_outputs, 0));
  Node probe = next_node(*this, op, inputs, std::move(attrs), n_out, name);
  probe.outputs.assign(n_out, kNoValue);
  std::vector<TensorType> types = infer_output_types(*this, probe);
  return add_node_typed(op, inputs, std::move(probe.attrs), types, probe.name, output_names);
}

std::vector<ValueId> Graph::add_node_typed(OpKind op, const std::vector<ValueId>& inputs,
                                           Attrs attrs, const std::vector<TensorType>& output_types,
                                           const std::string& name,
                                           const std::vector<std::string>& output_names) {
  Node n = next_node(*this, op, inputs, std::move(attrs), output_types.size(), name);
  // Validate all output names before creating any value, so a failure leaves no trace.
  for (size_t i = 0; i < output_names.size() && i < output_types.size(); ++i)
    if (!output_names[i].empty() && by_name_.count(output_names[i]))
      throw ModelFormatError("value name '" + output_names[i] + "' is defined twice in graph '" +
                             name_ + "'");
  for (size_t i = 0; i < output_types.size(); ++i) {
    std::string oname = i < output_names.size() ? output_names[i] : "";
    ValueId v = new_value(oname, output_types[i]);
    values_[v].producer = n.id;
    values_[v].producer_index = static_cast<int>(i);
    n.outputs.push_back(v);
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

void Graph::set_outputs(const std::vector<ValueId>& outputs) {
  for (ValueId v : outputs) value(v);
  outputs_ = outputs;
}

void Graph::rename_value(ValueId id, const std::string& name) {
  Value& v = values_.at(static_cast<size_t>(id));
  if (v.name == name) return;
  if (name.empty() || by_name_.count(name))
    throw InternalError("rename_value: name '" + name + "' is empty or taken");
  by_name_.erase(v.name);
  v.name = name;
  by_name_[name] = id;
}

const Value& Graph::value(ValueId id) const {
  if (id < 0 || static_cast<size_t>(id) >= values_.size())
    throw InternalError("graph '" + name_ + "': no value with id " + std::to_string(id));
  return values_[id];
}

const Node& Graph::node(NodeId id) const {
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size())
    throw InternalError("graph '" + name_ + "': no node with id " + std::to_string(id));
  return nodes_[id];
}

std::vector<ValueId> Graph::constants() const {
  std::vector<ValueId> out;
  for (const Value& v : values_)
    if (v.constant) out.push_back(v.id);
  return out;
}

ValueId Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoValue : it->second;
}

std::vector<NodeId> Graph::consumers(ValueId id) const {
  std::vector<NodeId> out;
  for (const Node& n : nodes_)
    if (std::find(n.inputs.begin(), n.inputs.end(), id) != n.inputs.end()) out.push_back(n.id);
  return out;
}

bool Graph::is_graph_output(ValueId id) const {
  return std::find(outputs_.begin(), outputs_.end(), id) != outputs_.end();
}

bool Graph::is_removable(ValueId id) const {
  const Value& v = value(id);
  return v.producer >= 0 && !is_graph_output(id);
}

}  // namespace dnnf
