// Bindings of the OpenCL target: devices, generation (codegen/opencl_module.h) and the runtime
// (runtime/opencl.h), with the same run()/run_timed() surface as the CPU executable.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>

#include "bind/arrays.h"
#include "bind/plan_of.h"
#include "codegen/opencl/renderer.h"
#include "codegen/opencl_module.h"
#include "runtime/opencl.h"

namespace py = pybind11;
using namespace dnnf;
using namespace dnnf::bind;

namespace {

struct OclGenerated {
  GraphPtr graph;
  OpenclModule module;
  ocl::DeviceInfo device;
};

py::dict device_dict(const ocl::DeviceInfo& d) {
  py::dict o;
  o["index"] = d.index;
  o["name"] = d.name;
  o["vendor"] = d.vendor;
  o["version"] = d.version;
  o["driver"] = d.driver;
  o["platform"] = d.platform;
  o["type"] = d.type;
  o["compute_units"] = d.compute_units;
  o["max_work_group"] = d.max_work_group;
  o["local_mem_bytes"] = d.local_mem_bytes;
  o["global_mem_bytes"] = d.global_mem_bytes;
  o["max_alloc_bytes"] = d.max_alloc_bytes;
  o["base_align_bytes"] = d.base_align_bytes;
  o["fp64"] = d.fp64;
  o["max_parameter_bytes"] = d.max_parameter_bytes;
  o["max_kernel_args"] = ocl::max_kernel_args(d);
  o["selected"] = d.selected;
  return o;
}

py::list launches_of(const OpenclModule& m) {
  py::list out;
  for (const OpenclLaunch& l : m.launches) {
    py::dict d;
    d["kernel"] = l.kernel;
    d["block"] = l.block;
    d["dims"] = l.dims;
    d["global"] = std::vector<int64_t>(l.global, l.global + l.dims);
    d["local_bytes"] = l.local_bytes;
    out.append(d);
  }
  return out;
}

py::list kernels_of(const OpenclModule& m) {
  py::list ks;
  for (const KernelInfo& k : m.kernels) {
    py::dict kd;
    kd["block"] = k.block;
    kd["function"] = k.function;
    kd["stages"] = k.stages;
    kd["scratch_bytes"] = k.scratch_bytes;
    kd["passes"] = k.passes;
    kd["intermediate_bytes_written"] = k.intermediate_bytes_written;
    ks.append(kd);
  }
  return ks;
}

class OclExecutable {
 public:
  OclExecutable(const OclGenerated& gen, const std::string& device)
      : gen_(gen), ex_(std::make_unique<ocl::Executable>(gen.graph, gen.module, device)) {}

  py::list run(const py::sequence& args, std::vector<double>* seconds) {
    const Graph& g = *gen_.graph;
    std::vector<py::array> ins = contiguous_inputs(g, gen_.module.inputs, args);
    std::vector<TensorRef> in_refs, out_refs;
    for (py::array& a : ins) {
      TensorRef r;
      r.dtype = dtype_of(a.dtype());
      for (py::ssize_t i = 0; i < a.ndim(); ++i) r.shape.push_back(a.shape(i));
      r.data = const_cast<void*>(a.data());
      in_refs.push_back(std::move(r));
    }
    py::list outs;
    for (ValueId v : gen_.module.outputs) {
      const TensorType& t = g.value(v).type;
      py::array a = aligned_array(t);
      out_refs.push_back({t.dtype, t.dims(), a.mutable_data()});
      outs.append(a);
    }
    std::vector<double> per_launch;
    {
      py::gil_scoped_release unlocked;
      ex_->run(in_refs, out_refs, seconds ? &per_launch : nullptr);
    }
    if (seconds) {  // per block (its launches summed), then the output reads (not timed: 0)
      seconds->assign(gen_.module.kernels.size() + 1, 0.0);
      std::map<int, size_t> slot;
      for (size_t i = 0; i < gen_.module.kernels.size(); ++i) slot[gen_.module.kernels[i].block] = i;
      for (size_t i = 0; i < per_launch.size(); ++i) (*seconds)[slot[gen_.module.launches[i].block]] += per_launch[i];
    }
    return outs;
  }
  const ocl::Executable& exe() const { return *ex_; }

 private:
  OclGenerated gen_;
  std::unique_ptr<ocl::Executable> ex_;
};

}  // namespace

void bind_opencl(py::module_& m) {
  m.def("opencl_devices", [] {
    py::list out;
    for (const ocl::DeviceInfo& d : ocl::devices()) out.append(device_dict(d));
    return out;
  }, "Every OpenCL device of every platform as a dict (index 'p:d', name, vendor, limits, selected). "
     "Error when no OpenCL library, platform or device exists.");
  m.def("opencl_select_device", [](const std::string& spec) { return device_dict(ocl::select_device(spec)); },
        py::arg("device") = "",
        "The device `device` names ('' = $DNNF_OPENCL_DEVICE, else the first GPU, else the first device), as a "
        "dict; Error listing the devices when nothing matches.");

  py::class_<OclGenerated, std::shared_ptr<OclGenerated>>(m, "OpenclModule",
      "An OpenCL C program for a fused plan: one kernel per stage of each block, and its launches.")
      .def_property_readonly("source", [](const OclGenerated& g) { return g.module.source; })
      .def_property_readonly("kernels", [](const OclGenerated& g) { return kernels_of(g.module); })
      .def_property_readonly("launches", [](const OclGenerated& g) { return launches_of(g.module); })
      .def_property_readonly("device", [](const OclGenerated& g) { return device_dict(g.device); })
      .def_property_readonly("arena_bytes", [](const OclGenerated& g) {
        return g.module.memory.arena_bytes + g.module.scratch_bytes;
      })
      .def_property_readonly("counts", [](const OclGenerated& g) {
        py::dict d;
        d["kernels"] = g.module.kernels_run;
        d["passes"] = g.module.passes;
        d["intermediate_bytes_written"] = g.module.intermediate_bytes_written;
        d["launches"] = g.module.launches.size();
        return d;
      });

  m.def("opencl_gemm_tile", [](int64_t M, int64_t N, int64_t K, int64_t batch, bool conv, int64_t compute_units, bool gpu,
                               int64_t max_work_group, int64_t local_mem_bytes) {
    OpenclCodegenOptions o;
    o.compute_units = compute_units;
    o.gpu = gpu;
    o.max_work_group = max_work_group;
    o.local_mem_bytes = local_mem_bytes;
    const cg::opencl::TileChoice t = cg::opencl::choose_tile(o, M, N, K, batch, conv);
    return py::make_tuple(t.side, t.splits);
  }, py::arg("M"), py::arg("N"), py::arg("K"), py::arg("batch"), py::arg("conv"), py::arg("compute_units"), py::arg("gpu"),
     py::arg("max_work_group") = 1024, py::arg("local_mem_bytes") = 49152,
     "The OpenCL GEMM tile's side and K splits code generation chooses for C[batch](M x N) over K on a device with "
     "these properties (0, 0: not tiled), without the device: for tests and tuning.");

  m.def("generate_opencl", [](const py::object& graph, const py::object& plan, const std::string& device) {
    auto out = std::make_shared<OclGenerated>();
    out->graph = graph_of(graph);
    FusionPlan p = plan_of(plan);
    out->device = ocl::select_device(device);
    const OpenclCodegenOptions opt = ocl::codegen_options(out->device);
    py::gil_scoped_release unlocked;
    out->module = generate_opencl(*out->graph, p, opt);
    return out;
  }, py::arg("graph"), py::arg("plan"), py::arg("device") = "",
     "Lowers every block of a fusion plan to OpenCL C for `device` ('' = $DNNF_OPENCL_DEVICE or the first "
     "GPU, else the first device; 'p:d', or part of its name).");

  py::class_<OclExecutable, std::shared_ptr<OclExecutable>>(m, "OpenclExecutable",
      "A generated OpenCL module built on its device with its buffers; run() takes and returns NumPy arrays.")
      .def(py::init([](const OclGenerated& gen, const std::string& device) {
        py::gil_scoped_release unlocked;  // the OpenCL compiler takes seconds
        return std::make_shared<OclExecutable>(gen, device.empty() ? gen.device.index : device);
      }), py::arg("generated"), py::arg("device") = "")
      .def("run", [](OclExecutable& e, const py::sequence& args) { return e.run(args, nullptr); }, py::arg("inputs"))
      .def("run_timed", [](OclExecutable& e, const py::sequence& args) {
        std::vector<double> seconds;
        py::list outs = e.run(args, &seconds);
        return py::make_tuple(outs, seconds);
      }, py::arg("inputs"),
           "run() with each block's device time from OpenCL profiling events (its launches summed) and, "
           "last, 0 for the output reads: (outputs, seconds).")
      .def("set_num_threads", [](OclExecutable&, int) {}, py::arg("n"), "No effect: the device runs the kernels.")
      .def_property_readonly("device", [](const OclExecutable& e) { return device_dict(e.exe().device()); })
      .def_property_readonly("build_seconds", [](const OclExecutable& e) { return e.exe().build_seconds(); })
      .def_property_readonly("cached", [](const OclExecutable& e) { return e.exe().cached(); })
      .def_property_readonly("library_path", [](const OclExecutable&) { return std::string(); });
}
