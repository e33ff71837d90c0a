// What code generation hands the OpenCL runtime (paper §4.4 targets the mobile GPU through
// OpenCL): one OpenCL C program for the whole model and the launches that run it, in order.
// The OPENCL-ABI note: every launch names its kernel in `source`; its arguments are, in
// order, `args`: a graph input, output or constant is a `__global T*` to its first element
// (Value); the arena of the intermediates placed by `memory` and the block scratch are
// `__global uchar*` (Arena, Scratch) that the kernel offsets itself, exactly as the CPU
// target's Ctx does; ErrorFlag is a `__global int*` a kernel sets to a nonzero code when the
// data is invalid (an index out of range), which the runtime turns into an Error after the
// run. Tensors are contiguous row-major in their logical shape with the value's dtype.
// Shapes are static: sizes are literals in the source, so no argument carries a size. The
// runtime (cpp/runtime/opencl.h) owns every buffer: one per graph input, output and
// constant, one arena, one scratch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "ir/graph.h"
#include "plan/memory_plan.h"

namespace dnnf {

// One kernel argument.
struct OpenclArg {
  enum class Kind : uint8_t { Value, Arena, Scratch, ErrorFlag, Int, Float, LocalBytes };
  Kind kind = Kind::Value;
  ValueId value = kNoValue;  // Value: the tensor (input, output, constant or intermediate)
  int64_t i = 0;             // Int: an `int`/`long` scalar (the source says which)
  float f = 0;               // Float: a `float` scalar
  int64_t local_bytes = 0;   // LocalBytes: a `__local` buffer of this many bytes
};

// One clEnqueueNDRangeKernel.
struct OpenclLaunch {
  std::string kernel;              // the kernel's name in the program ("k12", "k12_1")
  int block = -1;                  // the plan block it belongs to
  std::vector<OpenclArg> args;
  int dims = 1;                    // 1, 2 or 3
  int64_t global[3] = {1, 1, 1};   // global work size (a multiple of local where local != 0)
  int64_t local[3] = {0, 0, 0};    // work-group size; all 0: the runtime's choice (NULL)
  int64_t local_bytes = 0;         // the __local arrays the kernel declares
};

struct OpenclModule {
  std::string source;                // one OpenCL C program
  std::string build_options;         // clBuildProgram options, e.g. "-cl-std=CL1.2"
  std::vector<ValueId> inputs;       // == graph inputs, in order
  std::vector<ValueId> outputs;      // == graph outputs, in order
  std::vector<ValueId> constants;    // uploaded once, when the executable is created
  MemoryPlan memory;                 // the intermediates, placed in one arena
  int64_t scratch_bytes = 0;         // the largest block's scratch
  std::vector<OpenclLaunch> launches;  // in execution order
  std::vector<KernelInfo> kernels;   // one per block, as the CPU module's
  // What the code does per inference, counted from the kernel plan (codegen/counts.h).
  int64_t kernels_run = 0, passes = 0, intermediate_bytes_written = 0;
  // Graph outputs no launch writes (an input, a constant or a repeated output): copied
  // from `output_sources[j]` into output j after the launches (kNoValue: written by a launch).
  std::vector<ValueId> output_sources;
};

// What code generation needs to know of the device.
struct OpenclCodegenOptions;
// Lowers every block of `p` (any planner's) to one OpenCL C program (the kernel plan of
// codegen/module.h spelled by codegen/opencl/render.cc). UnsupportedOperatorError names an
// operator or dtype the OpenCL target cannot run yet.
OpenclModule generate_opencl(const Graph& g, const FusionPlan& p, const OpenclCodegenOptions& opt);

// The GEMM tile's features (OpenclCodegenOptions::tile_features).
constexpr unsigned kTileVec = 1, kTilePrefetch = 2, kTileKFastB = 4, kTileTapMajor = 8, kTileAllFeatures = 15;

struct OpenclCodegenOptions {
  int64_t base_align_bytes = 128;   // CL_DEVICE_MEM_BASE_ADDR_ALIGN / 8: arena offsets' alignment
  int64_t max_work_group = 256;     // CL_DEVICE_MAX_WORK_GROUP_SIZE
  int64_t local_mem_bytes = 32768;  // CL_DEVICE_LOCAL_MEM_SIZE
  int max_kernel_args = 128;        // the planner's limit too (PlanOptions::max_kernel_args)
  bool fp64 = false;                // cl_khr_fp64
  // GEMMs and convolutions big enough through local-memory tiles (where the work-group and
  // local memory allow); false: one work-item per output element everywhere
  // (DNNF_OPENCL_TILING=0, for comparisons).
  bool tiled_gemm = true;
  int64_t compute_units = 1;  // CL_DEVICE_MAX_COMPUTE_UNITS: the GEMM tile's size follows the grid
  bool gpu = false;           // CL_DEVICE_TYPE_GPU: 128-wide tiles (64 accumulators per work-item)
  // The GEMM tile's side: 0 chooses per GEMM (128 on GPUs, 64, or 32: the largest that gives
  // as many work-groups as compute units); 128, 64 or 32 forces one (DNNF_OPENCL_TILING=128,
  // 64 or 32, for comparisons and tests).
  int64_t tile = 0;
  // K split across work-groups (partial tiles to scratch, then a kernel that sums them in order
  // and runs the epilogue): 0 chooses (GEMMs whose smallest tiles still leave compute units
  // idle, such as a deep convolution's 512 x 49 output), 1 never, n > 1 forces n splits where K
  // has at least n tile steps (DNNF_OPENCL_SPLIT_K, for comparisons and tests).
  int64_t split_k = 0;
  // What the GEMM tile does beyond the plain local-memory tile (kTile* bits, see
  // Renderer::tiled_gemm): all on a GPU, all but the prefetch on other devices;
  // DNNF_OPENCL_TILE_FEATURES, for comparisons and tests, sets them.
  unsigned tile_features = kTileAllFeatures;
  // Work-items per compute unit below which one item per output element leaves the device idle:
  // untiled GEMMs and convolutions with fewer outputs than compute_units times this, and a K of
  // 128 or more, take a work-group per output element, its items splitting K. A GPU's unit holds
  // 1-2K items; 256 is an eighth of that (H200, runs 10 and 11 of benchmarks/README.md: ResNet-50
  // at 64 x 64, whose last stages have 4 and 16 pixels, 3.0 -> 1.15 ms). DNNF_OPENCL_BUSY_ITEMS
  // sets it (0: never), for comparisons and tests.
  int64_t busy_items = 256;
};

}  // namespace dnnf
