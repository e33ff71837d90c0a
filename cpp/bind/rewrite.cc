// Bindings of the rewrite stage (cpp/rewrite/): every pass callable on its own.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "ir/graph.h"
#include "rewrite/cost.h"
#include "rewrite/passes.h"

namespace py = pybind11;
using namespace dnnf;

void bind_rewrite(py::module_& m) {
  using GraphPtr = std::shared_ptr<Graph>;
  auto pass = [&m](const char* name, Graph (*fn)(const Graph&), const char* doc) {
    m.def(name, [fn](const Graph& g) { return std::make_shared<Graph>(fn(g)); }, doc);
  };
  pass("eliminate_dead_code", eliminate_dead_code, "Removes nodes whose outputs are unused.");
  pass("eliminate_common_subexpressions", eliminate_common_subexpressions,
       "Merges nodes with equal op, inputs and attributes.");
  pass("remove_identities", remove_identities, "Removes nodes that return their input unchanged.");
  pass("merge_layout_chains", merge_layout_chains,
       "Collapses Reshape/Squeeze/Unsqueeze/Flatten chains and Transpose chains.");
  m.def("graph_flops", [](const Graph& g) { return graph_flops(g); }, "FLOPs of the whole graph.");
  m.def("node_flops", [](const GraphPtr& g, int node_id) { return node_flops(*g, g->node(node_id)); });
}
