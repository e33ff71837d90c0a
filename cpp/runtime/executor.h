// The CPU executor: compiles a generated module (cpp/codegen/codegen.h) against the prelude,
// loads it, builds its state once (weights pre-packed), and runs it on checked inputs.
// It is the only caller of the GENERATED-ABI; the paper's runtime is out of its scope.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "ir/graph.h"
#include "runtime/compiler.h"

namespace dnnf {

// A caller's tensor: contiguous row-major memory of `dtype` with `shape`.
struct TensorRef {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  void* data = nullptr;
};

// Checks caller tensors against the graph values they stand for: count (Error), dtype
// (DTypeError), shape (ShapeError), each naming the value; `what` is "input" or "output".
void check_tensors(const Graph& g, const std::vector<TensorRef>& given, const std::vector<ValueId>& want,
                   const char* what);

// The compiler flags generated code needs for `isa` ("avx512" | "avx2" | "neon" |
// "scalar"): the DNNF_ISA_* macro simd.h selects the dialect by, and the target options.
// Error if this CPU cannot run code for it (code built for it would die on SIGILL).
std::vector<std::string> isa_flags(const std::string& isa);

// Every compiler argument of a generated module for `isa` beside the source: language and
// optimisation level ($DNNF_OPT_LEVEL), visibility, the prelude directory and its hash, and
// the ISA's flags. `for_this_cpu`: Error if this CPU cannot run `isa` (the default);
// without it, flags for any dialect the compiler targets (compile-only checks).
std::vector<std::string> module_flags(const std::string& isa, const std::string& prelude_dir,
                                      bool for_this_cpu = true);

// Compiles `module` for `isa` into the kernel cache without loading it, whether or not this
// CPU could run it (code for a dialect the machine lacks is still checked by the compiler).
// Returns the object's path; CompileError as compile_shared.
std::string compile_module_only(const GeneratedModule& module, const std::string& isa,
                                const std::string& prelude_dir);

// Builds the precompiled header and the prelude `units` ("gemm.1", ...) for modules of `isa`
// on this CPU into the kernel cache, as a module's first compile would (`python -m dnnfusion
// warmup`), through a module that only names them. Error for a malformed unit name;
// CompileError as compile_shared.
void prebuild_prelude(const std::string& isa, const std::string& prelude_dir, const std::vector<std::string>& units);

// The SHA-256 of every header in `dir` (names and contents, in name order). Generated code
// is compiled with it as -DDNNF_PRELUDE_HASH, because the kernel cache keys on the source
// and flags but cannot see what the source #includes.
std::string prelude_hash(const std::string& dir);

class CpuExecutable {
 public:
  // Compiles (or finds in the cache) and loads `module`, then calls dnnf_create with the
  // graph's constants. `num_threads` <= 0 keeps the generated code's default pool.
  // CompileError when the compiler fails or is missing, Error when the state cannot be built.
  CpuExecutable(std::shared_ptr<const Graph> graph, GeneratedModule module, const std::string& isa,
                int num_threads, const std::string& prelude_dir);
  ~CpuExecutable();
  CpuExecutable(const CpuExecutable&) = delete;
  CpuExecutable& operator=(const CpuExecutable&) = delete;

  // Checks every input against the graph (count: Error; dtype: DTypeError; shape:
  // ShapeError, each naming the input), writes the outputs into caller memory (checked the
  // same way), and turns a kernel's failure into Error. Calls are serialised: the arena
  // and the generated code's state are shared.
  void run(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs);
  // The same with outputs allocated here, 64-byte aligned.
  std::vector<std::shared_ptr<TensorData>> run(const std::vector<TensorRef>& inputs);
  // run() that also returns the wall time of each kernel (module().kernels order), then of
  // the final output copies, in seconds.
  std::vector<double> run_timed(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs);

  void set_num_threads(int n) { num_threads_ = n; }  // read by the next run
  int num_threads() const { return num_threads_; }

  const Graph& graph() const { return *graph_; }
  const GeneratedModule& module() const { return module_; }
  const std::string& isa() const { return isa_; }
  const std::string& library_path() const { return library_.path(); }
  bool cached() const { return library_.cached(); }     // the object came from the cache
  const CompiledLibrary& library() const { return library_; }
  double compile_seconds() const { return compile_seconds_; }  // compile_shared's wall time

 private:
  using RunFn = int (*)(void*, const void* const*, void* const*, void*, int, char*, int);
  using RunTimedFn = int (*)(void*, const void* const*, void* const*, void*, int, double*, char*, int);
  using DestroyFn = void (*)(void*);

  void check(const std::vector<TensorRef>& given, const std::vector<ValueId>& want,
             const char* what) const;
  // run() and run_timed(): seconds (kernels + 1 entries) or nullptr.
  void run_with(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs, double* seconds);

  std::shared_ptr<const Graph> graph_;
  GeneratedModule module_;
  std::string isa_;
  std::atomic<int> num_threads_{0};  // set from any thread, read by run
  CompiledLibrary library_;  // outlives state_: destroyed after ~CpuExecutable's body
  double compile_seconds_ = 0;
  void* state_ = nullptr;
  RunFn run_ = nullptr;
  RunTimedFn run_timed_ = nullptr;
  DestroyFn destroy_ = nullptr;
  std::shared_ptr<char> arena_;
  bool poison_ = false;  // $DNNF_POISON_ARENA
  std::mutex mu_;
};

}  // namespace dnnf
