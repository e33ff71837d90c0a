// The OpenCL runtime (paper §4.4 targets the mobile GPU through OpenCL): runs an OpenclModule
// (codegen/opencl_module.h, the OPENCL-ABI note) on a device. The OpenCL library is loaded at
// run time (dlopen of libOpenCL.so.1, or $DNNF_OPENCL_LIBRARY), so the CPU target works on
// machines without it; every failure is a dnnf::Error that says what to do.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/opencl_module.h"
#include "ir/graph.h"
#include "runtime/executor.h"

namespace dnnf::ocl {

struct DeviceInfo {
  std::string index;  // "platform:device"
  std::string name, vendor, version, driver, platform, type;
  int64_t compute_units = 0, max_work_group = 0, local_mem_bytes = 0, global_mem_bytes = 0, max_alloc_bytes = 0;
  int64_t base_align_bytes = 0;
  int64_t max_parameter_bytes = 0;  // CL_DEVICE_MAX_PARAMETER_SIZE: all of a kernel's arguments
  bool fp64 = false;
  bool selected = false;  // the device `select_device("")` picks
};

// Every device of every platform. Error when no OpenCL library or platform exists (with how
// to install PoCL).
std::vector<DeviceInfo> devices();

// The device `spec` names: "" = $DNNF_OPENCL_DEVICE, else the first GPU, else the first
// device; "p:d" or "d" by index; otherwise a case-insensitive substring of the name. Error
// listing the devices when nothing matches.
DeviceInfo select_device(const std::string& spec);

// How many tensors one kernel may take on this device: its argument bytes over 8-byte
// pointers, less the three every kernel has (error flag, arena, scratch). The planner's
// limit for the OpenCL target.
int64_t max_kernel_args(const DeviceInfo& d);

// What code generation needs to know of a device.
OpenclCodegenOptions codegen_options(const DeviceInfo& d);

class Executable {
 public:
  // Builds the program on the device (CompileError with the build log), allocates the
  // buffers (Error when the device cannot hold them) and uploads the constants.
  Executable(std::shared_ptr<const Graph> graph, OpenclModule module, const std::string& device);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Inputs and outputs checked as the CPU executable's; `seconds`, when given, receives
  // each launch's device time from profiling events, in launch order.
  void run(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs,
           std::vector<double>* seconds = nullptr);
  const DeviceInfo& device() const { return device_; }
  const OpenclModule& module() const { return module_; }
  double build_seconds() const { return build_seconds_; }
  bool cached() const { return cached_; }  // the program came from the disk cache

 private:
  struct Impl;
  std::shared_ptr<const Graph> graph_;
  OpenclModule module_;
  DeviceInfo device_;
  double build_seconds_ = 0;
  bool cached_ = false;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dnnf::ocl
