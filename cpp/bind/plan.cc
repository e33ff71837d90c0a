// Bindings of the plan stage (cpp/plan/): the fusion table, the planners, plans as plain
// data for dnnfusion/plan.py, and the profiling database's read/write path.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <memory>

#include "bind/plan_of.h"
#include "ir/errors.h"
#include "ir/graph.h"
#include "plan/memory_plan.h"
#include "plan/plan.h"
#include "plan/profile_db.h"

namespace py = pybind11;
using namespace dnnf;

namespace {

using GraphPtr = std::shared_ptr<Graph>;

// A plan with the graph it partitions, so node ids stay meaningful.
struct PlanRef {
  GraphPtr g;
  FusionPlan p;
};

MappingType mapping_of(const py::dict& d, const char* key) {
  std::string s = py::str(d[key]);
  auto t = parse_mapping_type(s);
  if (!t) throw ModelFormatError(std::string("profile entry: '") + key + "' is '" + s + "', not a mapping type");
  return *t;
}

ProfileEntry entry_of(const py::dict& d) {
  for (const char* k : {"target", "producer", "consumer", "producer_type", "consumer_type", "bucket",
                        "fused_ms", "unfused_ms"})
    if (!d.contains(k)) throw ModelFormatError(std::string("profile entry: missing key '") + k + "'");
  ProfileEntry e;
  e.key.target = py::str(d["target"]);
  e.key.producer_op = py::str(d["producer"]);
  e.key.consumer_op = py::str(d["consumer"]);
  e.key.producer_type = mapping_of(d, "producer_type");
  e.key.consumer_type = mapping_of(d, "consumer_type");
  e.key.bucket = py::str(d["bucket"]);
  if (d.contains("threads") && !d["threads"].is_none()) {
    e.key.threads = d["threads"].cast<int>();
    if (e.key.threads < 0) throw ModelFormatError("profile entry: threads must be a non-negative integer");
  }
  e.fused_ms = d["fused_ms"].cast<double>();
  e.unfused_ms = d["unfused_ms"].cast<double>();
  if (!(std::isfinite(e.fused_ms) && e.fused_ms > 0 && std::isfinite(e.unfused_ms) && e.unfused_ms > 0))
    throw ModelFormatError("profile entry: fused_ms and unfused_ms must be positive milliseconds");
  if (d.contains("noise_ms")) {
    e.noise_ms = d["noise_ms"].cast<double>();
    if (!(std::isfinite(e.noise_ms) && e.noise_ms >= 0))
      throw ModelFormatError("profile entry: noise_ms must be a non-negative number of milliseconds");
  }
  if (d.contains("how")) e.how = py::str(d["how"]);
  // Written now: measured on this generator's code unless the entry says otherwise.
  e.generator = kProfileGenerator;
  if (d.contains("generator")) {
    e.generator = d["generator"].cast<int>();
    if (e.generator < 0) throw ModelFormatError("profile entry: generator must be a non-negative integer");
  }
  return e;
}

py::dict dict_of(const ProfileEntry& e) {
  py::dict d;
  d["target"] = e.key.target;
  d["producer"] = e.key.producer_op;
  d["consumer"] = e.key.consumer_op;
  d["producer_type"] = mapping_type_name(e.key.producer_type);
  d["consumer_type"] = mapping_type_name(e.key.consumer_type);
  d["bucket"] = e.key.bucket;
  if (e.key.threads > 0) d["threads"] = e.key.threads;
  d["fused_ms"] = e.fused_ms;
  d["unfused_ms"] = e.unfused_ms;
  if (e.noise_ms > 0) d["noise_ms"] = e.noise_ms;  // optional fields: only when set
  if (!e.how.empty()) d["how"] = e.how;
  d["generator"] = e.generator;
  return d;
}

}  // namespace

void bind_plan(py::module_& m) {
  m.attr("PROFILE_GENERATOR") = kProfileGenerator;
  m.def("fusion_table", [] {
    const MappingType all[] = {MappingType::OneToOne, MappingType::Reorganize, MappingType::Shuffle,
                               MappingType::OneToMany, MappingType::ManyToMany};
    py::list rows;
    for (MappingType a : all)
      for (MappingType b : all) {
        const FusionRule& r = fusion_rule(a, b);
        py::dict d;
        d["first"] = mapping_type_name(a);
        d["second"] = mapping_type_name(b);
        d["fused"] = mapping_type_name(r.fused);
        d["decision"] = decision_name(r.decision);
        d["color"] = decision_color(r.decision);
        d["why"] = r.why;
        rows.append(d);
      }
    return rows;
  }, "The 5x5 mapping-type fusion table (cpp/plan/fusion_table.cc): one dict per cell.");

  py::class_<PlanRef>(m, "FusionPlan")
      .def_property_readonly("planner", [](const PlanRef& r) { return r.p.planner; })
      .def_property_readonly("block_of", [](const PlanRef& r) { return r.p.block_of; })
      .def_property_readonly("blocks", [](const PlanRef& r) {
        py::list out;
        for (const Block& b : r.p.blocks) {
          py::dict d;
          d["id"] = b.id;
          d["nodes"] = b.nodes;
          d["seed"] = b.seed < 0 ? py::object(py::none()) : py::object(py::int_(b.seed));
          d["fused_type"] = mapping_type_name(b.fused_type);
          d["inputs"] = b.inputs;
          d["outputs"] = b.outputs;
          out.append(d);
        }
        return out;
      }, "One dict per block: id, nodes (node ids), seed, fused_type, inputs, outputs (value ids).")
      .def_property_readonly("reasons", [](const PlanRef& r) {
        py::list out;
        for (const Reason& x : r.p.reasons) {
          py::dict d;
          d["producer"] = x.producer;
          d["consumer"] = x.consumer;
          d["fused"] = x.fused;
          d["why"] = x.why;
          if (x.yellow) {
            py::dict k;
            k["producer_type"] = mapping_type_name(x.yellow_producer_type);
            k["consumer_type"] = mapping_type_name(x.yellow_consumer_type);
            k["bucket"] = x.yellow_bucket;
            d["profile_key"] = k;
          } else {
            d["profile_key"] = py::none();
          }
          out.append(d);
        }
        return out;
      })
      .def_property_readonly("stats", [](const PlanRef& r) {
        py::dict d;
        d["operators_before"] = r.p.stats.operators_before;
        d["kernels_after"] = r.p.stats.kernels_after;
        d["intermediates_removed"] = r.p.stats.intermediates_removed;
        d["intermediate_bytes_removed"] = r.p.stats.intermediate_bytes_removed;
        return d;
      })
      .def("to_json", [](const PlanRef& r) { return plan_to_json(*r.g, r.p); })
      .def("to_dot", [](const PlanRef& r) { return plan_to_dot(*r.g, r.p); });

  m.def("plan_fusion", [](const GraphPtr& g, const std::string& planner, const std::string& target,
                          bool horizontal, const std::vector<std::string>& profile_dbs,
                          int max_kernel_args, int threads) {
    if (threads < 0) throw Error("plan_fusion: threads must be non-negative");
    PlanOptions opt;
    opt.threads = threads;
    opt.planner = planner;
    opt.target = target;
    opt.horizontal = horizontal;
    opt.profile_dbs = profile_dbs;
    opt.max_kernel_args = max_kernel_args;
    return PlanRef{g, plan_fusion(*g, opt)};
  }, py::arg("graph"), py::arg("planner") = "dnnfusion", py::arg("target") = "cpu",
     py::arg("horizontal") = false, py::arg("profile_dbs") = std::vector<std::string>{},
     py::arg("max_kernel_args") = 0, py::arg("threads") = 0,
     "Plans fusion for a graph (cpp/plan/plan.h, PlanOptions).");

  m.def("finalize_plan", [](const GraphPtr& g, const std::vector<int>& group_of,
                            const std::vector<NodeId>& seeds, const std::string& planner) {
    return PlanRef{g, finalize_plan(*g, planner, group_of, seeds, {})};
  }, py::arg("graph"), py::arg("group_of"), py::arg("seeds") = std::vector<NodeId>{},
     py::arg("planner") = "manual",
     "Blocks from a node -> group assignment, checked (InternalError if not a valid plan).");
  m.def("would_create_cycle", [](const GraphPtr& g, const std::vector<int>& group_of, int a, int b) {
    if (group_of.size() != g->nodes().size())
      throw Error("group_of needs one label per node");
    return would_create_cycle(*g, group_of, a, b);
  });

  m.def("expand_min_bytes", &expand_min_bytes,
        "Expanded tensors of at most this many bytes stay apart from the depthwise convolution "
        "that reads them (twice the L2, or $DNNF_EXPAND_MIN_BYTES).");
  m.def("profile_target_key", &profile_target_key, py::arg("target") = "cpu",
        "The target part of a profiling-database key for this machine.");
  m.def("shape_bucket", &shape_bucket);
  m.def("read_profile_db", [](const std::string& path) {
    py::list out;
    ProfileDb db = ProfileDb::load(path);
    for (const ProfileEntry& e : db.entries()) out.append(dict_of(e));
    return out;
  }, "Reads a profiling database (JSON lines); ModelFormatError if it is malformed.");
  m.def("write_profile_db", [](const std::string& path, const py::list& entries, bool merge) {
    ProfileDb db;
    if (merge) {
      // Merging into a file that does not exist yet starts an empty database.
      if (FILE* f = std::fopen(path.c_str(), "rb")) {
        std::fclose(f);
        db = ProfileDb::load(path);
      }
    }
    for (py::handle h : entries) db.add(entry_of(h.cast<py::dict>()));
    db.save(path);
  }, py::arg("path"), py::arg("entries"), py::arg("merge") = true,
     "Adds entries (replacing equal keys) and writes the database atomically.");

  m.def("plan_memory", [](const py::object& graph, const py::object& plan, int64_t alignment,
                          const std::vector<std::pair<ValueId, ValueId>>& in_place, int64_t run_alignment,
                          const std::vector<ValueId>& row_writers) {
    GraphPtr g = bind::graph_of(graph);
    FusionPlan p = bind::plan_of(plan);
    return bind::dict_of(*g, plan_memory(*g, p, alignment, true, in_place, run_alignment, row_writers));
  }, py::arg("graph"), py::arg("plan"), py::arg("alignment") = 64,
     py::arg("in_place") = std::vector<std::pair<ValueId, ValueId>>{}, py::arg("run_alignment") = 0,
     py::arg("row_writers") = std::vector<ValueId>{},
     "Arena offsets for the intermediate tensors of a fusion plan: alignment, run_alignment, arena_bytes, "
     "intermediate_bytes, naive_bytes, peak_bytes, and buffers (value, name, offset, size, first, last, "
     "within, shares, row, stride). in_place: (y, r) value pairs y may be written in place of r. "
     "run_alignment: where a Concat's input may start in its bytes (0: alignment; the CPU generator uses 1). "
     "row_writers: values whose kernels can write them as rows of a Concat's bytes (a channels-last "
     "Concat's inputs are placed so only then).");
  m.def("check_memory_plan", [](const py::object& graph, const py::object& plan, const py::dict& mem) {
    GraphPtr g = bind::graph_of(graph);
    check_memory_plan(*g, bind::plan_of(plan), bind::memory_plan_of(mem));
  }, py::arg("graph"), py::arg("plan"), py::arg("memory_plan"),
     "InternalError unless no two tensors live at the same time overlap in the arena.");
}
