// Bindings of the ECG (cpp/ir/): the op table, graphs, values and nodes, text form,
// verifier. Values and nodes are handles (graph + id) so they never dangle.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "ir/errors.h"
#include "ir/graph.h"
#include "ir/mapping.h"
#include "ir/shape_rules.h"
#include "ir/text.h"
#include "ir/verify.h"
#include "bind/numpy_tensor.h"

namespace py = pybind11;
using namespace dnnf;

namespace {

using GraphPtr = std::shared_ptr<Graph>;
struct ValueRef { GraphPtr g; ValueId id; const Value& v() const { return g->value(id); } };
struct NodeRef { GraphPtr g; NodeId id; const Node& n() const { return g->node(id); } };

std::vector<ValueRef> value_refs(const GraphPtr& g, const std::vector<ValueId>& ids) {
  std::vector<ValueRef> l;
  for (ValueId v : ids) l.push_back({g, v});
  return l;
}

TensorType type_of(const std::string& dtype, const py::sequence& dims) {
  auto dt = parse_dtype(dtype);
  if (!dt) throw DTypeError("unknown element type '" + dtype + "'");
  TensorType t;
  t.dtype = *dt;
  for (py::handle d : dims) {
    if (py::isinstance<py::str>(d)) {
      std::string s = d.cast<std::string>();
      if (s.empty()) throw ShapeError("a symbolic dimension needs a non-empty name");
      t.shape.push_back(Dim::sym(s));
    } else {
      int64_t v = d.cast<int64_t>();
      if (v < 0) throw ShapeError("dimension " + std::to_string(v) + " is negative");
      t.shape.push_back(Dim(v));
    }
  }
  return t;
}

py::tuple dims_of(const Shape& s) {
  py::tuple out(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    out[i] = s[i].is_static() ? py::object(py::int_(s[i].value)) : py::object(py::str(s[i].symbol));
  return out;
}

Attr attr_from_py(const std::string& key, py::handle h) {
  if (py::isinstance<py::bool_>(h)) return Attr::of_int(h.cast<bool>() ? 1 : 0);
  if (py::isinstance<py::int_>(h)) return Attr::of_int(h.cast<int64_t>());
  if (py::isinstance<py::float_>(h)) return Attr::of_float(h.cast<double>());
  if (py::isinstance<py::str>(h)) return Attr::of_string(h.cast<std::string>());
  if (py::isinstance<py::array>(h)) return Attr::of_tensor(tensor_from_array(h.cast<py::array>()));
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    auto seq = h.cast<py::sequence>();
    bool any_float = false, any_str = false;
    for (py::handle e : seq) {
      any_float |= py::isinstance<py::float_>(e);
      any_str |= py::isinstance<py::str>(e);
    }
    if (any_str) return Attr::of_strings(seq.cast<std::vector<std::string>>());
    if (any_float) return Attr::of_floats(seq.cast<std::vector<double>>());
    return Attr::of_ints(seq.cast<std::vector<int64_t>>());
  }
  throw ModelFormatError("attribute '" + key + "' has an unsupported Python type " +
                         std::string(py::str(py::type::of(h))));
}

OpKind op_by_name(const std::string& op) {
  auto k = op_from_name(op);
  if (!k) throw UnsupportedOperatorError("unknown operator '" + op + "'");
  return *k;
}

py::object value_or_none(const GraphPtr& g, ValueId id) {
  if (id == kNoValue) return py::none();
  return py::cast(ValueRef{g, id});
}

}  // namespace

void bind_ir(py::module_& m) {
  m.def("op_table", [] {
    py::list rows;
    for (int i = 0; i < kNumOps; ++i) {
      const OpInfo& o = op_info(static_cast<OpKind>(i));
      py::dict r;
      r["name"] = o.name;
      r["onnx_name"] = o.onnx_name;
      r["mapping"] = mapping_type_name(o.mapping);
      r["min_inputs"] = o.min_inputs;
      r["max_inputs"] = o.max_inputs;
      r["min_outputs"] = o.min_outputs;
      r["max_outputs"] = o.max_outputs;
      r["commutative"] = o.commutative();
      r["associative"] = o.associative();
      r["distributive"] = o.distributive();
      r["internal"] = o.internal();
      r["has_shape_rule"] = has_shape_rule(o.kind);
      rows.append(r);
    }
    return rows;
  }, "One dict per row of cpp/ir/ops.def, with whether the op has a shape rule.");

  py::class_<ValueRef>(m, "Value")
      .def_property_readonly("id", [](const ValueRef& r) { return r.id; })
      .def_property_readonly("name", [](const ValueRef& r) { return r.v().name; })
      .def_property_readonly("dtype", [](const ValueRef& r) { return dtype_name(r.v().type.dtype); })
      .def_property_readonly("shape", [](const ValueRef& r) { return dims_of(r.v().type.shape); })
      .def_property_readonly("type", [](const ValueRef& r) { return r.v().type.str(); })
      .def_property_readonly("is_constant", [](const ValueRef& r) { return bool(r.v().constant); })
      .def_property_readonly("is_input", [](const ValueRef& r) { return r.v().is_graph_input; })
      .def_property_readonly("removable", [](const ValueRef& r) { return r.g->is_removable(r.id); },
                             "Whether fusion may remove this tensor (an intermediate result).")
      .def_property_readonly("producer", [](const ValueRef& r) -> py::object {
        NodeId p = r.v().producer;
        return p < 0 ? py::none() : py::cast(NodeRef{r.g, p});
      })
      .def("numpy", [](const ValueRef& r) {
        if (!r.v().constant) throw Error("value '" + r.v().name + "' is not a constant");
        return array_from_tensor(r.v().constant);
      }, "A read-only view of a constant's data (no copy).")
      .def("__eq__", [](const ValueRef& a, const ValueRef& b) { return a.g == b.g && a.id == b.id; })
      .def("__hash__", [](const ValueRef& r) { return std::hash<const void*>()(r.g.get()) ^ r.id; })
      .def("__repr__", [](const ValueRef& r) { return "<Value %" + r.v().name + ": " + r.v().type.str() + ">"; });

  py::class_<NodeRef>(m, "Node")
      .def_property_readonly("id", [](const NodeRef& r) { return r.id; })
      .def_property_readonly("op", [](const NodeRef& r) { return std::string(r.n().info().name); })
      .def_property_readonly("name", [](const NodeRef& r) { return r.n().name; })
      .def_property_readonly("mapping_type", [](const NodeRef& r) {
        return std::string(mapping_type_name(node_mapping_type(*r.g, r.n())));
      })
      .def_property_readonly("inputs", [](const NodeRef& r) {
        py::list l;
        for (ValueId v : r.n().inputs) l.append(value_or_none(r.g, v));
        return l;
      })
      .def_property_readonly("outputs", [](const NodeRef& r) {
        py::list l;
        for (ValueId v : r.n().outputs) l.append(ValueRef{r.g, v});
        return l;
      })
      .def_property_readonly("attrs", [](const NodeRef& r) {
        py::dict d;
        for (const auto& [k, a] : r.n().attrs) d[py::str(k)] = attr_to_py(a);
        return d;
      })
      .def("__repr__", [](const NodeRef& r) { return "<Node " + r.n().name + ": " + r.n().info().name + ">"; });

  py::class_<Graph, GraphPtr>(m, "Graph")
      .def(py::init<std::string>(), py::arg("name") = "main")
      .def_property("name", &Graph::name, &Graph::set_name)
      .def("add_input", [](const GraphPtr& g, const std::string& name, const std::string& dtype,
                           const py::sequence& shape) {
        return ValueRef{g, g->add_input(name, type_of(dtype, shape))};
      }, py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def("add_constant", [](const GraphPtr& g, const std::string& name, py::handle data) {
        py::array arr = py::array::ensure(data);
        if (!arr) throw ModelFormatError("constant '" + name + "' is not array-like");
        return ValueRef{g, g->add_constant(name, tensor_from_array(arr))};
      }, py::arg("name"), py::arg("data"), "Adds a constant; C-contiguous arrays are not copied.")
      .def("add_node", [](const GraphPtr& g, const std::string& op, const py::sequence& inputs,
                          const py::dict& attrs, int num_outputs, const std::string& name,
                          const std::vector<std::string>& output_names) {
        std::vector<ValueId> ins;
        for (py::handle h : inputs) {
          if (h.is_none()) { ins.push_back(kNoValue); continue; }
          auto r = h.cast<ValueRef>();
          if (r.g != g) throw ModelFormatError("node '" + name + "': input from another graph");
          ins.push_back(r.id);
        }
        Attrs as;
        for (auto [k, v] : attrs) {
          std::string key = py::str(k);
          as[key] = attr_from_py(key, v);
        }
        py::list outs;
        for (ValueId v : g->add_node(op_by_name(op), ins, std::move(as), num_outputs, name, output_names))
          outs.append(ValueRef{g, v});
        return outs;
      }, py::arg("op"), py::arg("inputs"), py::arg("attrs") = py::dict(), py::arg("num_outputs") = 1,
         py::arg("name") = "", py::arg("output_names") = std::vector<std::string>{},
         "Adds a node and infers its output types; returns the output values.")
      .def("set_outputs", [](const GraphPtr& g, const std::vector<ValueRef>& outs) {
        std::vector<ValueId> ids;
        for (const auto& r : outs) {
          if (r.g != g) throw ModelFormatError("graph output from another graph");
          ids.push_back(r.id);
        }
        g->set_outputs(ids);
      })
      .def_property_readonly("inputs", [](const GraphPtr& g) { return value_refs(g, g->inputs()); })
      .def_property_readonly("outputs", [](const GraphPtr& g) { return value_refs(g, g->outputs()); })
      .def_property_readonly("constants",
                             [](const GraphPtr& g) { return value_refs(g, g->constants()); })
      .def_property_readonly("nodes", [](const GraphPtr& g) {
        std::vector<NodeRef> l;
        for (const Node& n : g->nodes()) l.push_back({g, n.id});
        return l;
      })
      .def_property_readonly("values", [](const GraphPtr& g) {
        std::vector<ValueRef> l;
        for (const Value& v : g->values()) l.push_back({g, v.id});
        return l;
      })
      .def("value", [](const GraphPtr& g, const std::string& name) -> py::object {
        ValueId v = g->find_value(name);
        return v == kNoValue ? py::none() : py::cast(ValueRef{g, v});
      })
      .def("consumers", [](const GraphPtr& g, const ValueRef& r) {
        std::vector<NodeRef> l;
        for (NodeId n : g->consumers(r.id)) l.push_back({g, n});
        return l;
      })
      .def("to_text", [](const Graph& g, bool elide) { return print_graph(g, elide); },
           py::arg("elide_constants") = false)
      .def("verify", [](const Graph& g) { verify(g); })
      .def("__len__", [](const Graph& g) { return g.nodes().size(); });

  m.def("parse_text", [](const std::string& text, const py::object& constants) {
        if (constants.is_none()) return std::make_shared<Graph>(parse_graph(text));
        ElidedConstants elided;
        for (auto item : py::cast<py::dict>(constants)) {
          auto name = py::cast<std::string>(item.first);
          py::array arr = py::array::ensure(item.second);
          if (!arr) throw ModelFormatError("constant '" + name + "' is not array-like");
          elided[name] = tensor_from_array(arr);
        }
        return std::make_shared<Graph>(parse_graph(text, &elided));
      }, py::arg("text"), py::arg("constants") = py::none(),
        "Parses the canonical text form back into a graph; `constants` (name -> array) "
        "stand for the constants printed as `<elided>`.");
}
