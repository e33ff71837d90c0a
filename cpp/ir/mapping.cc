// Node-level mapping types (paper §3, "an operator whose input/output pairs differ takes
// the most complex type").
#include "ir/mapping.h"

namespace dnnf {

// Decision: only non-constant inputs count. Broadcasting a weight (a bias [C,1,1] added
// to an activation) reads each weight element many times, but the weight is not an
// intermediate result fusion could remove, and the paper classifies bias-add and
// BatchNormalization as One-to-One.
MappingType node_mapping_type(const Graph& g, const Node& n) {
  MappingType t = n.info().mapping;
  if (t != MappingType::OneToOne || n.outputs.empty()) return t;
  const Value& out = g.value(n.outputs[0]);
  for (ValueId in : n.inputs) {
    if (in == kNoValue) continue;
    const Value& v = g.value(in);
    if (v.constant) continue;
    if (v.type.shape != out.type.shape) return MappingType::OneToMany;
  }
  return t;
}

}  // namespace dnnf
