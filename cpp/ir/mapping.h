// The mapping type of a node in its graph (paper §3). The op table gives each op's class;
// a node can be more complex than its class, e.g. an elementwise op that broadcasts a
// computed tensor up to a larger output maps one element to many.
#pragma once
#include "ir/graph.h"

namespace dnnf {

MappingType node_mapping_type(const Graph& g, const Node& n);

}  // namespace dnnf
