// Bindings of the runtime stage (cpp/runtime/): compile-and-cache of generated code and CPU
// features.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <vector>

#include "bind/plan_of.h"
#include "codegen/prelude/nms.h"
#include "ir/errors.h"
#include "ir/graph.h"
#include "plan/plan.h"
#include "runtime/compiler.h"

namespace py = pybind11;
using namespace dnnf;
using namespace dnnf::bind;

void bind_runtime(py::module_& m) {
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
  m.def("prelude_cache_dir", &prelude_cache_dir,
        "Where the precompiled header and prelude units live: $DNNF_PRELUDE_CACHE_DIR, else the kernel cache.");
  m.def("sha256_hex", [](const py::bytes& b) { return sha256_hex(std::string(b)); });

  // The prelude's NonMaxSuppression (codegen/prelude/nms.h, the kernel generated code would call)
  // for the host tail (dnnfusion/host_tail.py): same arithmetic as the oracle, in C++.
  using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
  m.def("nms_f32", [](F32 boxes, F32 scores, long max_per_class, float iou_threshold,
                      std::optional<float> score_threshold, int center_point_box) {
    if (boxes.ndim() != 3 || boxes.shape(2) != 4 || scores.ndim() != 3 || scores.shape(0) != boxes.shape(0) ||
        scores.shape(2) != boxes.shape(1))
      throw ShapeError("NonMaxSuppression: boxes must be [num_batches, n, 4] and scores [num_batches, classes, n]");
    if (center_point_box != 0 && center_point_box != 1)
      throw ShapeError("NonMaxSuppression: center_point_box must be 0 or 1");
    const long B = boxes.shape(0), n = boxes.shape(1), classes = scores.shape(1);
    std::vector<int64_t> sel(static_cast<size_t>(irr::nms_capacity(B, classes, n, max_per_class)) * 3);
    const float st = score_threshold.value_or(0.f);
    long rows;
    {
      py::gil_scoped_release free;
      rows = irr::nms_f32(B, classes, n, boxes.data(), scores.data(), max_per_class, iou_threshold,
                          score_threshold ? &st : nullptr, center_point_box, sel.data());
    }
    py::array_t<int64_t> out({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(3)});
    std::copy(sel.begin(), sel.begin() + rows * 3, out.mutable_data());
    return out;
  }, py::arg("boxes"), py::arg("scores"), py::arg("max_per_class"), py::arg("iou_threshold"),
     py::arg("score_threshold"), py::arg("center_point_box"),
     "NonMaxSuppression on float32 boxes [B, n, 4] and scores [B, classes, n]: the selected (batch, class, box) rows.");

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

  m.def("isas", [] {
    CpuFeatures f = cpu_features();
    py::list out;
    for (const IsaInfo& i : kIsas) {
      py::dict d;
      d["name"] = i.name;
      d["macro"] = i.macro;
      d["flags"] = isa_compile_flags(i);
      d["lanes"] = i.lanes;
      d["arch"] = i.arch;
      d["needs"] = i.needs;
      d["hardware"] = cpu_supports(f, i);  // this CPU runs it, whatever $DNNF_ISA says
      out.append(d);
    }
    return out;
  }, "The instruction-set table (cpp/target/isa.h), lowest first: name, macro, flags, lanes, arch, "
     "needs, and whether this CPU's hardware runs it.");

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

  m.def("hint_prelude_units", &hint_prelude_units, py::arg("units"),
        "Prelude units (group.epilogue) a later compile will likely name: a compile that builds "
        "units it lacks builds these too, on the CPUs it leaves idle; [] clears them.");
  m.def("prelude_unit_problems", &prelude_unit_problems,
        "What went wrong with prelude units in this process, oldest first, one line each: a unit "
        "the compiler rejected, or a module compiled whole because it did not compile with its "
        "units. Correct results either way, at the cost of compile time.");
  m.def("prelude_build_seconds", &prelude_build_seconds,
        "Seconds this process spent building the precompiled header and prelude units (caches "
        "every later compile reuses), included in the compile times that built them.");
  m.def("compile_shared", [](const std::string& source, const std::vector<std::string>& flags, double timeout_s,
                             const std::string& pch_header) {
    py::gil_scoped_release unlocked;  // compiling takes seconds; let other threads run
    return compile_shared(source, flags, timeout_s, true, pch_header);
  }, py::arg("source"), py::arg("flags") = std::vector<std::string>{}, py::arg("timeout_s") = 0.0,
     py::arg("pch_header") = std::string(),
     "Compiles C++ source to a shared object in the per-user cache and loads it "
     "(timeout_s 0: $DNNF_COMPILE_TIMEOUT or 300 s; pch_header: a header the source includes "
     "first, precompiled into the cache once per compiler and flags).");

}
