// Code generation for the CPU (paper §4.4): every block of a fusion plan becomes one C++
// function over the prelude's SIMD vocabulary; the whole model becomes one translation unit
// with a small C ABI that the runtime (cpp/runtime/executor.h) compiles, caches and calls.
//
// The generated module's ABI (the GENERATED-ABI note; executor.cc relies on it). Modules are
// compiled with hidden visibility and -fno-gnu-unique, so these five functions must be
// declared with default visibility (the generator's DNNF_EXPORT):
//   extern "C" int   dnnf_abi_version(void);                      // == kGeneratedAbiVersion
//   extern "C" void* dnnf_create(const void* const* constants, int num_threads, char* err,
//                                int errlen);
//       constants[i] is the data of GeneratedModule::constants[i] (row-major, the value's
//       dtype), alive for the state's lifetime; weights are pre-packed here, once, on a pool
//       of num_threads (<= 0: the current pool), as dnnf_run's. Returns the model state, or
//       nullptr with a message in err.
//   extern "C" void  dnnf_destroy(void* state);
//   extern "C" int   dnnf_run(void* state, const void* const* inputs, void* const* outputs,
//                             void* arena, int num_threads, char* err, int errlen);
//       inputs[i]: graph input i (GeneratedModule::inputs order), contiguous, right dtype;
//       outputs[j]: preallocated graph output j; arena: arena_bytes, 64-byte aligned.
//       num_threads <= 0 keeps the current pool. Returns 0, or nonzero with err filled
//       (a kernel that throws, e.g. a Gather index out of range). One call at a time per
//       state (the arena is the caller's; the runtime serialises calls).
//   extern "C" int   dnnf_run_timed(void* state, const void* const* inputs, void* const* outputs,
//                                   void* arena, int num_threads, double* seconds, char* err, int errlen);
//       dnnf_run that also writes the wall time of kernel i to seconds[i] (kernels order)
//       and of the final output copies to seconds[kernels.size()].
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "plan/plan.h"
#include "plan/memory_plan.h"

namespace dnnf {

inline constexpr int kGeneratedAbiVersion = 3;

// The prelude header a generated CPU module includes first, which the runtime precompiles.
inline constexpr const char* kModuleCommonHeader = "module_common.h";
// The line (second in the source) naming the prelude units a CPU module links, e.g.
// "// dnnf-prelude-units: gemm.1 reduce.0" (prelude/prelude_units.h); compile_shared builds
// and links them, and the header that defines them is the module's first include.
inline constexpr const char* kPreludeUnitsLine = "// dnnf-prelude-units:";
inline constexpr const char* kPreludeUnitSources = "prelude_unit_sources.h";
// A CPU module's kernels compile whole, or split into DNNF_PARTS translation units compiled
// in parallel and linked (runtime/compiler.cc), each defining the kernels of part DNNF_PART
// and part 0 the entry points; compile_shared splits a source that has this guard.
inline constexpr const char* kPartsGuard =
    "#ifndef DNNF_PARTS\n#define DNNF_PARTS 1\n#define DNNF_PART 0\n#endif\n";

struct CodegenOptions {
  // The dialect: "avx512" | "avx2" | "neon" | "scalar". The emitted text is the same for the
  // CPU dialects (they differ in the prelude header the -DDNNF_ISA_* macro selects, i.e.
  // vector width and spellings), so `isa` only goes into comments and the stats; the
  // runtime picks the flags.
  std::string isa = "scalar";
  // Fused GEMM prologues (A computed while packed); off only to measure what they save.
  bool prologues = true;
  // compile(..., dynamic=True)'s runtime sequence length (dnnfusion/seq_extents.py): values
  // whose positions from L + offset on, along each listed axis, no valid output reads, and
  // the graph input holding L (an int64 scalar). Stages writing such a value compute only
  // their first L + offset positions where the stage's form allows (cg::SeqRows).
  std::map<ValueId, std::map<int, int64_t>> seq_rows;
  int length_input = -1;
  bool length_f32 = false;  // L is a float32 scalar (else int64)
};

// What one fused block became.
struct KernelInfo {
  int block = -1;
  std::string function;             // e.g. "k12"
  std::vector<std::string> stages;  // one line per stage, e.g. "gemm 128x768x768 +epilogue(3 ops)"
  int64_t scratch_bytes = 0;        // kernel-local buffers (materialised inside the block)
  int64_t passes = 0;               // stages run (codegen/counts.h)
  int64_t intermediate_bytes_written = 0;  // stored to the arena and scratch per inference
  int seq_rows_stages = 0;          // stages whose rows follow the runtime sequence length
};

struct GeneratedModule {
  std::string source;               // one translation unit; includes prelude headers by name
  std::vector<ValueId> constants;   // the order of dnnf_create's constants array
  std::vector<ValueId> inputs;      // == graph inputs, in order
  std::vector<ValueId> outputs;     // == graph outputs, in order
  int64_t arena_bytes = 0;
  MemoryPlan memory;
  std::vector<KernelInfo> kernels;  // one per block, in execution order
  // What the code does per inference, counted from the kernel plan (codegen/counts.h).
  int64_t kernels_run = 0, passes = 0, intermediate_bytes_written = 0, output_bytes_written = 0;
};

// Lowers every block of `p` (any planner's) to C++. UnsupportedOperatorError for an op or
// dtype the code generator cannot lower, naming the node; ShapeError for symbolic shapes.
GeneratedModule generate_cpu(const Graph& g, const FusionPlan& p, const CodegenOptions& opt);

}  // namespace dnnf
