// Bindings of the rewrite stage (cpp/rewrite/): every pass callable on its own.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bind/numpy_tensor.h"
#include "ir/graph.h"
#include "rewrite/cost.h"
#include "rewrite/passes.h"

namespace py = pybind11;
using namespace dnnf;

void bind_rewrite_folding(py::module_& m);  // below: algebra, constant and BN folding

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
  bind_rewrite_folding(m);
}

namespace {

// Wraps a Python callable `fn(op, inputs, attrs, num_outputs) -> list of arrays` (the
// signature of dnnfusion.reference.run_node) as an Evaluator. NotImplementedError from it
// means "cannot evaluate this node": the node is kept, not folded.
Evaluator python_evaluator(py::object fn) {
  return [fn](const Node& n, const std::vector<TensorPtr>& ins) -> std::vector<TensorPtr> {
    py::list args;
    for (const TensorPtr& t : ins) args.append(t ? py::object(array_from_tensor(t)) : py::object(py::none()));
    py::dict attrs;
    for (const auto& [k, a] : n.attrs) attrs[py::str(k)] = attr_to_py(a);
    py::object res;
    try {
      res = fn(n.info().name, args, attrs, n.outputs.size());
    } catch (py::error_already_set& e) {
      if (e.matches(PyExc_NotImplementedError)) return {};
      throw;
    }
    std::vector<TensorPtr> outs;
    for (py::handle h : res) outs.push_back(tensor_from_array(py::array::ensure(h)));
    return outs;
  };
}

}  // namespace

void bind_rewrite_folding(py::module_& m) {
  m.def("algebra_rules", [] {
    py::list rows;
    for (const AlgebraRule& r : algebra_rules())
      rows.append(py::make_tuple(r.name, r.pattern, r.replacement, r.math));
    return rows;
  }, "The algebraic rule table: (name, pattern, replacement, math) per rule, in priority order.");
  m.def("apply_algebraic_rules", [](const Graph& g) { return std::make_shared<Graph>(apply_algebraic_rules(g)); },
        "Rewrites with the algebraic rules to a fixpoint, only where FLOPs drop.");
  m.def("apply_algebraic_rules_traced", [](const Graph& g) {
    std::vector<std::string> fired;
    auto out = std::make_shared<Graph>(apply_algebraic_rules(g, fired));
    return py::make_tuple(out, fired);
  }, "Like apply_algebraic_rules; also returns the names of the rules that fired, once per firing.");
  m.def("fold_constants", [](const Graph& g, py::object evaluator) {
    return std::make_shared<Graph>(fold_constants(g, python_evaluator(std::move(evaluator))));
  }, py::arg("graph"), py::arg("evaluator"),
     "Folds nodes whose inputs are constants; evaluator(op, inputs, attrs, num_outputs) computes them.");
  m.def("fold_batch_norm", [](const Graph& g) { return std::make_shared<Graph>(fold_batch_norm(g)); },
        "Folds BatchNormalization and per-channel Mul/Add/Sub/Div into the preceding Conv/Gemm.");
  m.def("fold_input_scale", [](const Graph& g) { return std::make_shared<Graph>(fold_input_scale(g)); },
        "Folds a computed per-input-channel scale (x * s) into the following Conv's weights.");
  m.def("fold_matmul_scale", [](const Graph& g) { return std::make_shared<Graph>(fold_matmul_scale(g)); },
        "MatMul(x, W) (+ b) (-> layout ops) * c -> MatMul(x, W * c) (+ b * c) for a constant scalar c.");
  m.def("split_to_slices", [](const Graph& g) { return std::make_shared<Graph>(split_to_slices(g)); },
        "A Split becomes a Slice per part, each a view its reader's block can own.");
  m.def("combine_sibling_matmuls", [](const Graph& g) { return std::make_shared<Graph>(combine_sibling_matmuls(g)); },
        "MatMuls of one input with constant weights -> one MatMul over the weights side by side, "
        "the same elementwise steps after each moved onto it, and a Slice per sibling.");
  m.def("select_layout", [](const Graph& g, const std::string& mode) {
    LayoutMode lm;
    if (mode == "auto") lm = LayoutMode::Auto;
    else if (mode == "nchw") lm = LayoutMode::Nchw;
    else if (mode == "nhwc") lm = LayoutMode::Nhwc;
    else throw py::value_error("layout must be 'auto', 'nchw' or 'nhwc', got '" + mode + "'");
    LayoutReport rep;
    auto out = std::make_shared<Graph>(select_layout(g, lm, &rep));
    py::list regions;
    for (const LayoutRegion& r : rep.regions) {
      py::dict d;
      d["convs"] = r.convs;
      d["gain_us"] = r.gain_us;
      d["cost_us"] = r.cost_us;
      d["nhwc"] = r.nhwc;
      regions.append(d);
    }
    py::dict report;
    report["regions"] = regions;
    report["convs_nhwc"] = rep.convs_nhwc;
    report["transposes_in"] = rep.transposes_in;
    report["roi_aligns_nhwc"] = rep.roi_aligns_nhwc;
    report["transposes_out"] = rep.transposes_out;
    return py::make_tuple(out, report);
  }, py::arg("graph"), py::arg("mode") = "auto",
     "Inter-block layout: runs regions of convolutions channels last where the cost model says "
     "it pays; returns (graph, report).");
  m.def("layout_conv_us", [](int64_t C, int64_t M, int64_t group, int64_t taps, int64_t stride,
                             int64_t in_pixels, int64_t out_pixels, bool nhwc) {
    ConvGeometry c{C, M, group, taps, stride, in_pixels, out_pixels, 1};
    return layout_conv_us(c, nhwc);
  }, py::arg("C"), py::arg("M"), py::arg("group"), py::arg("taps"), py::arg("stride"),
     py::arg("in_pixels"), py::arg("out_pixels"), py::arg("nhwc"),
     "The layout cost model's estimated microseconds for one convolution.");
}
