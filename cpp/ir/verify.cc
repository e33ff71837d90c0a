// The ECG verifier: structural invariants, then types re-inferred and compared.
#include "ir/verify.h"

#include <vector>

#include "ir/errors.h"
#include "ir/shape_rules.h"

namespace dnnf {

void verify(const Graph& g) {
  std::vector<std::string> problems;
  auto problem = [&](std::string s) { problems.push_back(std::move(s)); };
  std::vector<bool> defined(g.values().size(), false);
  for (const Value& v : g.values()) {
    if (v.constant) {
      if (v.producer >= 0 || v.is_graph_input)
        problem("value '" + v.name + "' is a constant and also computed or an input");
      if (v.constant->type != v.type)
        problem("constant '" + v.name + "' holds " + v.constant->type.str() + " but is typed " +
                v.type.str());
      defined[v.id] = true;
    }
    if (v.is_graph_input) defined[v.id] = true;
    if (!v.constant && !v.is_graph_input && v.producer < 0)
      problem("value '" + v.name + "' has no producer");
  }
  for (const Node& n : g.nodes()) {
    std::string who = "node '" + n.name + "' (" + n.info().name + ")";
    bool inputs_ok = true;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      if (in < 0 || static_cast<size_t>(in) >= defined.size()) {
        problem(who + " reads a value id " + std::to_string(in) + " that does not exist");
        inputs_ok = false;
      } else if (!defined[in]) {
        problem(who + " reads '" + g.value(in).name + "' before it is defined (not topological, or a cycle)");
        inputs_ok = false;
      }
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      ValueId o = n.outputs[i];
      const Value& v = g.value(o);
      if (v.producer != n.id || v.producer_index != static_cast<int>(i))
        problem(who + " output " + std::to_string(i) + " '" + v.name + "' names another producer");
      if (defined[o]) problem("value '" + v.name + "' is defined twice");
      defined[o] = true;
    }
    if (!inputs_ok) continue;
    try {
      std::vector<TensorType> types = infer_output_types(g, n);
      for (size_t i = 0; i < n.outputs.size() && i < types.size(); ++i)
        if (types[i] != g.value(n.outputs[i]).type)
          problem(who + " output '" + g.value(n.outputs[i]).name + "' is typed " +
                  g.value(n.outputs[i]).type.str() + " but its shape rule gives " + types[i].str());
    } catch (const Error& e) {
      problem(e.what());
    }
  }
  if (g.outputs().empty()) problem("graph '" + g.name() + "' has no outputs");
  for (ValueId o : g.outputs())
    if (!defined[o]) problem("graph output '" + g.value(o).name + "' is never defined");
  if (problems.empty()) return;
  std::string msg = "graph '" + g.name() + "' failed verification:";
  for (const auto& p : problems) msg += "\n  - " + p;
  throw ModelFormatError(msg);
}

}  // namespace dnnf
