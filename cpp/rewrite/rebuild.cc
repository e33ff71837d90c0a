// The rebuild mechanism behind every rewrite pass.
#include "rewrite/rebuild.h"

#include <algorithm>

#include "ir/errors.h"

namespace dnnf {

Rebuilder::Rebuilder(const Graph& src) : src_(src), dst_(src.name()), map_(src.values().size(), kNoValue) {
  for (ValueId in : src.inputs()) map_[in] = dst_.add_input(src.value(in).name, src.value(in).type);
  for (ValueId c : src.constants()) map_[c] = dst_.add_constant(src.value(c).name, src.value(c).constant);
}

ValueId Rebuilder::map(ValueId old) const {
  if (old == kNoValue) return kNoValue;
  ValueId v = map_.at(static_cast<size_t>(old));
  if (v == kNoValue) throw InternalError("rebuild: value '" + src_.value(old).name + "' has no image yet");
  return v;
}

std::vector<ValueId> Rebuilder::map(const std::vector<ValueId>& old) const {
  std::vector<ValueId> out;
  out.reserve(old.size());
  for (ValueId v : old) out.push_back(map(v));
  return out;
}

std::vector<ValueId> Rebuilder::copy(const Node& n) {
  std::vector<TensorType> types;
  std::vector<std::string> names;
  for (ValueId o : n.outputs) {
    types.push_back(src_.value(o).type);
    names.push_back(src_.value(o).name);
  }
  auto outs = dst_.add_node_typed(n.op, map(n.inputs), n.attrs, types, n.name, names);
  for (size_t i = 0; i < outs.size(); ++i) map_[n.outputs[i]] = outs[i];
  return outs;
}

void Rebuilder::alias(ValueId old, ValueId now) {
  if (dst_.value(now).type != src_.value(old).type)
    throw InternalError("rebuild: alias for '" + src_.value(old).name + "' has type " + dst_.value(now).type.str() +
                        ", expected " + src_.value(old).type.str());
  map_.at(static_cast<size_t>(old)) = now;
}

void Rebuilder::replace(const Node& n, const std::vector<ValueId>& outs) {
  if (outs.size() != n.outputs.size())
    throw InternalError("rebuild: replacing node '" + n.name + "' with the wrong output count");
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i] == kNoValue) continue;  // an output nothing reads (e.g. Dropout's mask)
    if (dst_.value(outs[i]).type != src_.value(n.outputs[i]).type)
      throw InternalError("rebuild: replacement for '" + src_.value(n.outputs[i]).name + "' has type " +
                          dst_.value(outs[i]).type.str() + ", expected " + src_.value(n.outputs[i]).type.str());
    map_[n.outputs[i]] = outs[i];
  }
}

// A fresh name must be free in the new graph and in the source, whose values may still be
// copied later under their own names.
bool Rebuilder::taken(const std::string& name) const {
  return dst_.find_value(name) != kNoValue || src_.find_value(name) != kNoValue;
}

ValueId Rebuilder::emit(OpKind op, const std::vector<ValueId>& inputs, Attrs attrs, const std::string& name) {
  std::string nm = name.empty() ? std::string("rw") + std::to_string(fresh_++) + "_" + op_info(op).name : name;
  while (name.empty() && taken(nm)) nm += "_";
  return dst_.add_node(op, inputs, std::move(attrs), 1, nm, {nm})[0];
}

ValueId Rebuilder::constant(TensorPtr data, const std::string& hint) {
  std::string nm;
  do nm = hint + "_" + std::to_string(fresh_++);
  while (taken(nm));
  return dst_.add_constant(nm, std::move(data));
}

Graph Rebuilder::finish() {
  std::vector<ValueId> outs;
  for (ValueId o : src_.outputs()) {
    ValueId v = map(o);
    const std::string& want = src_.value(o).name;
    const Value& got = dst_.value(v);
    bool reused = false;  // the same value already carries another output's name
    for (ValueId prev : outs) reused |= prev == v;
    if (got.name != want && !got.is_graph_input && !got.constant && !reused &&
        dst_.find_value(want) == kNoValue)
      dst_.rename_value(v, want);
    outs.push_back(v);
  }
  dst_.set_outputs(outs);
  return std::move(dst_);
}

std::vector<int> reader_counts(const Graph& g) {
  std::vector<int> readers(g.values().size(), 0);
  for (const Node& n : g.nodes())
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (n.inputs[i] != kNoValue && std::count(n.inputs.begin(), n.inputs.begin() + i, n.inputs[i]) == 0)
        ++readers[n.inputs[i]];
  return readers;
}

}  // namespace dnnf
