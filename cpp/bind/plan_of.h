// Shared by the runtime and codegen bindings: graphs and fusion plans from their Python
// wrappers, and memory plans to and from plain dicts.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <vector>

#include "ir/graph.h"
#include "plan/plan.h"
#include "plan/memory_plan.h"

namespace dnnf::bind {

namespace py = pybind11;
using GraphPtr = std::shared_ptr<Graph>;

// A _core.Graph, or anything holding one as `.graph` (dnnfusion.ECG).
inline GraphPtr graph_of(const py::object& o) {
  if (py::isinstance<Graph>(o)) return o.cast<GraphPtr>();
  if (py::hasattr(o, "graph")) return graph_of(o.attr("graph"));
  throw py::type_error("expected a dnnfusion ECG or _core.Graph");
}

// The blocks of a _core.FusionPlan, or of anything holding one as `.core`
// (dnnfusion.plan.FusionPlan), rebuilt from the plain data the plan bindings expose.
inline FusionPlan plan_of(const py::object& o) {
  if (py::hasattr(o, "core")) return plan_of(o.attr("core"));
  if (!py::hasattr(o, "blocks") || !py::hasattr(o, "block_of"))
    throw py::type_error("expected a dnnfusion FusionPlan or _core.FusionPlan");
  FusionPlan p;
  p.block_of = o.attr("block_of").cast<std::vector<int>>();
  for (py::handle h : o.attr("blocks")) {
    py::dict d = h.cast<py::dict>();
    Block b;
    b.id = d["id"].cast<int>();
    b.nodes = d["nodes"].cast<std::vector<NodeId>>();
    b.inputs = d["inputs"].cast<std::vector<ValueId>>();
    b.outputs = d["outputs"].cast<std::vector<ValueId>>();
    p.blocks.push_back(std::move(b));
  }
  return p;
}

inline py::dict dict_of(const Graph& g, const MemoryPlan& m) {
  py::dict d;
  d["alignment"] = m.alignment;
  d["run_alignment"] = m.run_alignment;
  d["arena_bytes"] = m.arena_bytes;
  d["intermediate_bytes"] = m.intermediate_bytes;
  d["naive_bytes"] = m.naive_bytes;
  d["peak_bytes"] = m.peak_bytes;
  py::list bufs;
  for (const BufferSlot& s : m.buffers) {
    py::dict b;
    b["value"] = s.value;
    b["name"] = g.value(s.value).name;
    b["offset"] = s.offset;
    b["size"] = s.size;
    b["first"] = s.first;
    b["last"] = s.last;
    b["within"] = s.within;  // -1: a buffer of its own
    b["shares"] = s.shares;  // -1: not in place of another tensor
    b["row"] = s.row;        // 0: contiguous; else rows of `row` bytes, `stride` apart
    b["stride"] = s.stride;
    bufs.append(b);
  }
  d["buffers"] = bufs;
  return d;
}

inline MemoryPlan memory_plan_of(const py::dict& d) {
  MemoryPlan m;
  m.alignment = d["alignment"].cast<int64_t>();
  m.run_alignment = d.contains("run_alignment") ? d["run_alignment"].cast<int64_t>() : m.alignment;
  m.arena_bytes = d["arena_bytes"].cast<int64_t>();
  for (py::handle h : d["buffers"]) {
    py::dict b = h.cast<py::dict>();
    BufferSlot s;
    s.value = b["value"].cast<ValueId>();
    s.offset = b["offset"].cast<int64_t>();
    s.size = b["size"].cast<int64_t>();
    s.first = b["first"].cast<int>();
    s.last = b["last"].cast<int>();
    if (b.contains("within")) s.within = b["within"].cast<ValueId>();
    if (b.contains("shares")) s.shares = b["shares"].cast<ValueId>();
    if (b.contains("row")) s.row = b["row"].cast<int64_t>();
    if (b.contains("stride")) s.stride = b["stride"].cast<int64_t>();
    m.buffers.push_back(s);
  }
  return m;
}

}  // namespace dnnf::bind
