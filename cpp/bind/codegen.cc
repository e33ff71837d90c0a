// Bindings of code generation (cpp/codegen/) and of the CPU executor (cpp/runtime/executor.h):
// the generated module as a Python object, and compiled models run on NumPy arrays.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>

#include "bind/arrays.h"
#include "bind/numpy_tensor.h"
#include "bind/plan_of.h"
#include "codegen/codegen.h"
#include "ir/errors.h"
#include "runtime/executor.h"

namespace py = pybind11;
using namespace dnnf;
using namespace dnnf::bind;

namespace {

// A generated module with the graph it was generated from (its ValueIds mean nothing
// without it).
struct Generated {
  GraphPtr graph;
  GeneratedModule module;
};

py::list kernels_of(const GeneratedModule& gm) {
  py::list ks;
  for (const KernelInfo& k : gm.kernels) {
    py::dict kd;
    kd["block"] = k.block;
    kd["function"] = k.function;
    kd["stages"] = k.stages;
    kd["scratch_bytes"] = k.scratch_bytes;
    kd["passes"] = k.passes;
    kd["intermediate_bytes_written"] = k.intermediate_bytes_written;
    kd["seq_rows_stages"] = k.seq_rows_stages;
    ks.append(kd);
  }
  return ks;
}

py::dict counts_of(const GeneratedModule& gm) {
  py::dict d;
  d["kernels"] = gm.kernels_run;
  d["passes"] = gm.passes;
  d["intermediate_bytes_written"] = gm.intermediate_bytes_written;
  d["output_bytes_written"] = gm.output_bytes_written;
  return d;
}

py::dict generated_dict(const Generated& g) {
  py::dict d;
  d["source"] = g.module.source;
  d["constants"] = g.module.constants;
  d["inputs"] = g.module.inputs;
  d["outputs"] = g.module.outputs;
  d["arena_bytes"] = g.module.arena_bytes;
  d["kernels"] = kernels_of(g.module);
  d["memory"] = dict_of(*g.graph, g.module.memory);
  d["counts"] = counts_of(g.module);
  return d;
}

std::shared_ptr<Generated> generate(const py::object& graph, const py::object& plan, const std::string& isa,
                                    bool prologues = true,
                                    const std::map<ValueId, std::map<int, int64_t>>& seq_rows = {},
                                    int length_input = -1) {
  auto out = std::make_shared<Generated>();
  out->graph = graph_of(graph);
  FusionPlan p = plan_of(plan);
  CodegenOptions o;
  o.isa = isa;
  o.prologues = prologues;
  if (length_input >= static_cast<int>(out->graph->inputs().size()))
    throw Error("generate_cpu: length_input " + std::to_string(length_input) + " is not an input of the graph");
  if (length_input >= 0) {
    const Value& lv = out->graph->value(out->graph->inputs()[length_input]);
    if ((lv.type.dtype != DType::I64 && lv.type.dtype != DType::F32) || !lv.type.shape.empty())
      throw Error("generate_cpu: the length input '" + lv.name + "' must be an int64 or float32 scalar");
  }
  for (const auto& [v, axes] : seq_rows) {
    if (v < 0 || static_cast<size_t>(v) >= out->graph->values().size())
      throw Error("generate_cpu: seq_rows names value " + std::to_string(v) + ", which the graph lacks");
    const int64_t r = static_cast<int64_t>(out->graph->value(v).type.shape.size());
    for (const auto& [a, c] : axes)
      if (a < 0 || a >= r) throw Error("generate_cpu: seq_rows axis " + std::to_string(a) + " of a rank-" +
                                       std::to_string(r) + " value");
  }
  o.seq_rows = seq_rows;
  o.length_input = length_input;
  o.length_f32 = length_input >= 0 &&
                 out->graph->value(out->graph->inputs()[length_input]).type.dtype == DType::F32;
  py::gil_scoped_release unlocked;
  out->module = generate_cpu(*out->graph, p, o);
  return out;
}

// The prelude directory the Python package resolves (installed wheel or source checkout).
std::string default_prelude_dir(const std::string& given) {
  if (!given.empty()) return given;
  return py::module_::import("dnnfusion.compiler").attr("prelude_dir")().cast<std::string>();
}

std::shared_ptr<CpuExecutable> make_executable(const GraphPtr& g, GeneratedModule gm, const std::string& isa,
                                               int threads, const std::string& prelude_dir) {
  std::string dir = default_prelude_dir(prelude_dir);
  py::gil_scoped_release unlocked;  // compiling takes seconds; let other threads run
  return std::make_shared<CpuExecutable>(g, std::move(gm), isa, threads, dir);
}

py::list run(CpuExecutable& ex, const py::sequence& args, std::vector<double>* seconds = nullptr) {
  std::vector<py::array> ins = contiguous_inputs(ex.graph(), ex.module().inputs, args);
  std::vector<TensorRef> in_refs, out_refs;
  for (py::array& a : ins) {
    TensorRef r;
    r.dtype = dtype_of(a.dtype());
    for (py::ssize_t i = 0; i < a.ndim(); ++i) r.shape.push_back(a.shape(i));
    r.data = const_cast<void*>(a.data());  // read only by the generated code
    in_refs.push_back(std::move(r));
  }
  py::list outs;
  for (ValueId v : ex.module().outputs) {
    const TensorType& t = ex.graph().value(v).type;
    py::array a = aligned_array(t);
    out_refs.push_back({t.dtype, t.dims(), a.mutable_data()});
    outs.append(a);
  }
  {
    py::gil_scoped_release unlocked;
    if (seconds) {
      *seconds = ex.run_timed(in_refs, out_refs);
    } else {
      ex.run(in_refs, out_refs);
    }
  }
  return outs;
}

}  // namespace

void bind_codegen(py::module_& m) {
  py::class_<Generated, std::shared_ptr<Generated>>(m, "GeneratedModule",
      "C++ source for a fused plan (one function per block, GENERATED-ABI of codegen.h) with "
      "its constants, arena size, kernels and memory plan.")
      .def_property_readonly("graph", [](const Generated& g) { return g.graph; })
      .def_property_readonly("source", [](const Generated& g) { return g.module.source; })
      .def_property_readonly("constants", [](const Generated& g) { return g.module.constants; })
      .def_property_readonly("inputs", [](const Generated& g) { return g.module.inputs; })
      .def_property_readonly("outputs", [](const Generated& g) { return g.module.outputs; })
      .def_property_readonly("arena_bytes", [](const Generated& g) { return g.module.arena_bytes; })
      .def_property_readonly("kernels", [](const Generated& g) { return kernels_of(g.module); },
                             "One dict per block in execution order: block, function, stages, scratch_bytes, passes, intermediate_bytes_written.")
      .def_property_readonly("memory", [](const Generated& g) { return dict_of(*g.graph, g.module.memory); },
                             "The memory plan, as _core.plan_memory returns it.")
      .def_property_readonly("counts", [](const Generated& g) { return counts_of(g.module); },
                             "What the generated code does per inference, counted from its kernel plan: "
                             "kernels (functions run), passes (loop nests, transposes, anchor calls, output "
                             "copies), intermediate_bytes_written (stores to the arena and block scratch), "
                             "output_bytes_written.")
      .def("to_dict", &generated_dict)
      .def("__repr__", [](const Generated& g) {
        return "<GeneratedModule: " + std::to_string(g.module.kernels.size()) + " kernels, arena " +
               std::to_string(g.module.arena_bytes) + " bytes>";
      });

  m.def("generate_cpu", &generate, py::arg("graph"), py::arg("plan"), py::arg("isa") = "scalar",
        py::arg("prologues") = true, py::arg("seq_rows") = std::map<ValueId, std::map<int, int64_t>>{},
        py::arg("length_input") = -1,
        "Lowers every block of a fusion plan to C++ for the CPU dialect `isa` "
        "(avx512 | avx2 | neon | scalar). prologues=False materialises every GEMM operand made "
        "in its block (to measure what fused prologues save). seq_rows {value id: {axis: offset}} and "
        "length_input (an int64 scalar input L): stages writing those values compute only their first "
        "L + offset positions (dynamic=True's runtime sequence length, dnnfusion.seq_extents).");
  m.def("generate_cpu_dict", [](const py::object& graph, const py::object& plan, const std::string& isa) {
    return generated_dict(*generate(graph, plan, isa));
  }, py::arg("graph"), py::arg("plan"), py::arg("isa") = "scalar",
     "generate_cpu as plain data: source, constants, inputs, outputs, arena_bytes, kernels, memory.");
  m.def("isa_flags", &isa_flags, py::arg("isa"),
        "The compiler flags generated code for `isa` is built with (Error if this CPU lacks it).");
  m.def("compile_only", [](const Generated& gen, const std::string& isa, const std::string& prelude_dir) {
    py::gil_scoped_release unlocked;
    return compile_module_only(gen.module, isa, prelude_dir);
  }, py::arg("generated"), py::arg("isa"), py::arg("prelude_dir"),
     "Compiles a generated module for `isa` into the kernel cache without loading it, whether "
     "or not this CPU runs that ISA; returns the object's path (CompileError on failure).");
  m.def("prebuild_prelude", [](const std::string& isa, const std::string& prelude_dir,
                               const std::vector<std::string>& units) {
    py::gil_scoped_release unlocked;
    prebuild_prelude(isa, prelude_dir, units);
  }, py::arg("isa"), py::arg("prelude_dir"), py::arg("units"),
     "Builds the precompiled header and the named prelude units for modules of `isa` on this "
     "CPU into the kernel cache (python -m dnnfusion warmup).");
  m.def("module_flags", [](const std::string& isa, const std::string& prelude_dir) {
    return module_flags(isa, prelude_dir);
  }, py::arg("isa"), py::arg("prelude_dir"),
        "The compiler flags a generated module for `isa` is built with ($DNNF_OPT_LEVEL, hidden "
        "symbols, the prelude directory and its hash, the ISA's flags; Error if this CPU lacks it).");
  m.def("prelude_hash", &prelude_hash, py::arg("dir"),
        "SHA-256 over the names and contents of the prelude headers in `dir`.");

  py::class_<CpuExecutable, std::shared_ptr<CpuExecutable>>(m, "CpuExecutable",
      "A generated module compiled (or found in the kernel cache), loaded and set up; "
      "run() takes and returns NumPy arrays.")
      .def(py::init([](const py::object& graph, const Generated& gen, const std::string& isa, int threads,
                       const std::string& prelude_dir) {
        GraphPtr g = graph_of(graph);
        if (g != gen.graph)
          throw py::value_error("the generated module was generated from another graph");
        return make_executable(g, gen.module, isa, threads, prelude_dir);
      }), py::arg("graph"), py::arg("generated"), py::arg("isa"), py::arg("threads") = 0,
          py::arg("prelude_dir") = "",
          "prelude_dir: the headers generated code includes (default: dnnfusion.compiler.prelude_dir()). "
          "threads <= 0 keeps the generated code's default pool ($DNNF_NUM_THREADS or all cores).")
      .def_static("from_source", [](const py::object& graph, const std::string& source,
                                    const std::vector<ValueId>& constants, int64_t arena_bytes,
                                    const std::string& isa, int threads, const std::string& prelude_dir) {
        // Test hook: any source that implements the GENERATED-ABI, over the graph's inputs
        // and outputs.
        GraphPtr g = graph_of(graph);
        GeneratedModule gm;
        gm.source = source;
        gm.constants = constants;
        gm.inputs = g->inputs();
        gm.outputs = g->outputs();
        gm.arena_bytes = arena_bytes;
        return make_executable(g, std::move(gm), isa, threads, prelude_dir);
      }, py::arg("graph"), py::arg("source"), py::arg("constants") = std::vector<ValueId>{},
         py::arg("arena_bytes") = 0, py::arg("isa") = "scalar", py::arg("threads") = 0,
         py::arg("prelude_dir") = "")
      .def("run", [](CpuExecutable& ex, const py::sequence& args) { return run(ex, args); },
           py::arg("inputs"),
           "Runs the model on a sequence of NumPy arrays (graph input order) and returns its "
           "outputs. TypeError for a wrong count or a non-array, DTypeError/ShapeError for a "
           "mismatch; nothing is cast.")
      .def("run_timed", [](CpuExecutable& ex, const py::sequence& args) {
        std::vector<double> seconds;
        py::list outs = run(ex, args, &seconds);
        return py::make_tuple(outs, seconds);
      }, py::arg("inputs"),
           "run() that also returns the wall time of each kernel (kernels order) and, last, "
           "of the output copies: (outputs, seconds).")
      .def("set_num_threads", &CpuExecutable::set_num_threads, py::arg("n"),
           "The thread count of the next run (<= 0: keep the current pool).")
      .def_property_readonly("num_threads", &CpuExecutable::num_threads)
      .def_property_readonly("compile_seconds", &CpuExecutable::compile_seconds)
      .def_property_readonly("cached", &CpuExecutable::cached)
      .def_property_readonly("prelude_units_named", [](const CpuExecutable& e) { return e.library().units_named(); },
                             "The prelude units (group.epilogue) the module's source names.")
      .def_property_readonly("prelude_units_linked", [](const CpuExecutable& e) { return e.library().units_linked(); },
                             "The prelude units this compile linked into the module: all it names, or none "
                             "(units off, or compiled whole); none for a module found in the cache.")
      .def_property_readonly("library_path", &CpuExecutable::library_path)
      .def_property_readonly("isa", &CpuExecutable::isa)
      .def_property_readonly("arena_bytes", [](const CpuExecutable& e) { return e.module().arena_bytes; })
      .def("__repr__", [](const CpuExecutable& e) {
        return "<CpuExecutable " + e.isa() + " " + e.library_path() + (e.cached() ? " (cached)>" : ">");
      });
}
