// Bindings of the runtime stage (cpp/runtime/): compile-and-cache of generated code, CPU
// features, and the memory plan as plain data.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "ir/errors.h"
#include "ir/graph.h"
#include "plan/plan.h"
#include "codegen/codegen.h"
#include "runtime/compiler.h"
#include "runtime/memory_plan.h"

namespace py = pybind11;
using namespace dnnf;

namespace {

using GraphPtr = std::shared_ptr<Graph>;

// A _core.Graph, or anything holding one as `.graph` (dnnfusion.ECG).
GraphPtr graph_of(const py::object& o) {
  if (py::isinstance<Graph>(o)) return o.cast<GraphPtr>();
  if (py::hasattr(o, "graph")) return graph_of(o.attr("graph"));
  throw py::type_error("expected a dnnfusion ECG or _core.Graph");
}

// The blocks of a _core.FusionPlan, or of anything holding one as `.core`
// (dnnfusion.plan.FusionPlan), rebuilt from the plain data the plan bindings expose.
FusionPlan plan_of(const py::object& o) {
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

py::dict dict_of(const Graph& g, const MemoryPlan& m) {
  py::dict d;
  d["alignment"] = m.alignment;
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
    bufs.append(b);
  }
  d["buffers"] = bufs;
  return d;
}

MemoryPlan memory_plan_of(const py::dict& d) {
  MemoryPlan m;
  m.alignment = d["alignment"].cast<int64_t>();
  m.arena_bytes = d["arena_bytes"].cast<int64_t>();
  for (py::handle h : d["buffers"]) {
    py::dict b = h.cast<py::dict>();
    BufferSlot s;
    s.value = b["value"].cast<ValueId>();
    s.offset = b["offset"].cast<int64_t>();
    s.size = b["size"].cast<int64_t>();
    s.first = b["first"].cast<int>();
    s.last = b["last"].cast<int>();
    m.buffers.push_back(s);
  }
  return m;
}

}  // namespace

void bind_runtime(py::module_& m) {
  // The generated module as plain data (the executor binding wraps the same thing).
  m.def("generate_cpu_dict", [](const py::object& graph, const py::object& plan, const std::string& isa) {
    GraphPtr g = graph_of(graph);
    FusionPlan p = plan_of(plan);
    CodegenOptions o;
    o.isa = isa;
    GeneratedModule gm = generate_cpu(*g, p, o);
    py::dict d;
    d["source"] = gm.source;
    d["constants"] = gm.constants;
    d["inputs"] = gm.inputs;
    d["outputs"] = gm.outputs;
    d["arena_bytes"] = gm.arena_bytes;
    py::list ks;
    for (const KernelInfo& k : gm.kernels) {
      py::dict kd;
      kd["block"] = k.block;
      kd["function"] = k.function;
      kd["stages"] = k.stages;
      kd["scratch_bytes"] = k.scratch_bytes;
      ks.append(kd);
    }
    d["kernels"] = ks;
    d["memory"] = dict_of(*g, gm.memory);
    return d;
  }, py::arg("graph"), py::arg("plan"), py::arg("isa") = "scalar",
     "C++ source for a fused plan (one function per block) with its constants and arena size.");

  m.def("find_compiler", [] {
    Compiler c = find_compiler();
    py::dict d;
    d["argv"] = c.argv;
    d["path"] = c.argv[0];
    d["version"] = c.version;
    return d;
  }, "The C++ compiler for generated code ($DNNF_CXX, $CXX, c++, g++, clang++): argv, path, version.");

  m.def("kernel_cache_dir", &cache_dir,
        "The per-user kernel cache directory, created and checked (CompileError if not private).");
  m.def("sha256_hex", [](const py::bytes& b) { return sha256_hex(std::string(b)); });

  m.def("cpu_features", [] {
    CpuFeatures f = cpu_features();
    py::dict d;
    d["isa"] = f.isa;
    d["flags"] = f.flags;
    for (auto [k, v] : {std::pair<const char*, bool>{"avx2", f.avx2}, {"fma", f.fma}, {"avx512f", f.avx512f},
                        {"avx512bw", f.avx512bw}, {"avx512dq", f.avx512dq}, {"avx512vl", f.avx512vl},
                        {"neon", f.neon}})
      d[k] = v;
    return d;
  }, "The best ISA of this CPU (avx512 | avx2 | neon | scalar, lowered by $DNNF_ISA), its compiler flags "
     "and the hardware feature bits.");

  py::class_<CompiledLibrary>(m, "Library")
      .def_property_readonly("path", &CompiledLibrary::path)
      .def_property_readonly("cached", &CompiledLibrary::cached)
      .def("has_symbol", [](const CompiledLibrary& l, const std::string& name) {
        try { l.symbol(name); return true; } catch (const CompileError&) { return false; }
      })
      .def("symbol_address", [](const CompiledLibrary& l, const std::string& name) {
        return reinterpret_cast<uintptr_t>(l.symbol(name));
      }, "The address of an exported symbol (for ctypes); valid while this Library lives.")
      .def("call_f32_unary", [](const CompiledLibrary& l, const std::string& name,
                                const py::array_t<float, py::array::c_style>& in, py::array& out) {
        // Test hook: calls `extern "C" void name(const float* in, float* out, int64_t n)`.
        using Fn = void (*)(const float*, float*, int64_t);
        auto fn = l.function<Fn>(name);
        if (!out.dtype().is(py::dtype::of<float>()) || !(out.flags() & py::array::c_style) || !out.writeable())
          throw py::type_error("out must be a writable C-contiguous float32 array");
        if (out.size() != in.size()) throw py::value_error("in and out must have the same number of elements");
        const float* src = in.data();
        float* dst = static_cast<float*>(out.mutable_data());
        int64_t n = in.size();
        py::gil_scoped_release unlocked;
        fn(src, dst, n);
      }, py::arg("symbol"), py::arg("input"), py::arg("output"),
         "Calls extern \"C\" void symbol(const float*, float*, int64_t n) on two float32 arrays.")
      .def("__repr__", [](const CompiledLibrary& l) {
        return "<Library " + l.path() + (l.cached() ? " (cached)>" : ">");
      });

  m.def("compile_shared", [](const std::string& source, const std::vector<std::string>& flags, double timeout_s) {
    py::gil_scoped_release unlocked;  // compiling takes seconds; let other threads run
    return compile_shared(source, flags, timeout_s);
  }, py::arg("source"), py::arg("flags") = std::vector<std::string>{}, py::arg("timeout_s") = 0.0,
     "Compiles C++ source to a shared object in the per-user cache and loads it "
     "(timeout_s 0: $DNNF_COMPILE_TIMEOUT or 300 s).");

  m.def("plan_memory", [](const py::object& graph, const py::object& plan, int64_t alignment) {
    GraphPtr g = graph_of(graph);
    FusionPlan p = plan_of(plan);
    return dict_of(*g, plan_memory(*g, p, alignment));
  }, py::arg("graph"), py::arg("plan"), py::arg("alignment") = 64,
     "Arena offsets for the intermediate tensors of a fusion plan: alignment, arena_bytes, "
     "intermediate_bytes, naive_bytes, peak_bytes, and buffers (value, name, offset, size, first, last).");
  m.def("check_memory_plan", [](const py::object& graph, const py::object& plan, const py::dict& mem) {
    GraphPtr g = graph_of(graph);
    check_memory_plan(*g, plan_of(plan), memory_plan_of(mem));
  }, py::arg("graph"), py::arg("plan"), py::arg("memory_plan"),
     "InternalError unless no two tensors live at the same time overlap in the arena.");
}
