// The CPU executor (executor.h): flags, prelude hash, compile-and-load, and checked runs over
// the GENERATED-ABI of cpp/codegen/codegen.h.
#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/prelude/large_alloc.h"
#include "ir/errors.h"
#include "runtime/prelude_units.h"

namespace dnnf {

namespace {

constexpr int kErrLen = 4096;
constexpr size_t kAlign = 64;  // the arena promise of the ABI; also what SIMD loads like

std::string type_str(DType dt, const std::vector<int64_t>& shape) {
  TensorType t;
  t.dtype = dt;
  for (int64_t d : shape) t.shape.push_back(Dim(d));
  return t.str();
}

// The arena and outputs: 64-byte aligned, on huge pages from 2 MiB (large_alloc.h: the
// kernels stream activations through them).
std::shared_ptr<char> aligned_bytes(size_t n) {
  static_assert(kAlign == 64, "alloc_aligned aligns to 64 bytes");
  void* p;
  try {
    p = alloc_aligned(std::max(kAlign, n));
  } catch (const std::bad_alloc&) {
    throw Error("cannot allocate " + std::to_string(n) + " bytes");
  }
  return std::shared_ptr<char>(static_cast<char*>(p), [](char* q) { std::free(q); });
}

}  // namespace

std::vector<std::string> isa_flags(const std::string& isa) {
  const IsaInfo* info = find_isa(isa);
  if (!info) throw Error("unknown instruction set '" + isa + "' (expected " + isa_names() + ")");
  CpuFeatures f = cpu_features();
  if (!cpu_supports(f, *info))
    throw Error("instruction set '" + isa + "' needs " + info->needs + ", which this CPU lacks (best here: " +
                f.isa + ")");
  return isa_compile_flags(*info);
}

std::string prelude_hash(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> headers;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".h") headers.push_back(it->path());
  if (ec || headers.empty())
    throw CompileError("the prelude directory " + dir + " has no headers" +
                       (ec ? " (" + ec.message() + ")" : std::string()) +
                       "; generated code cannot be compiled without them");
  std::sort(headers.begin(), headers.end());
  std::string all;
  for (const fs::path& p : headers) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream body;
    body << in.rdbuf();
    if (!in) throw CompileError("cannot read prelude header " + p.string());
    std::string name = p.filename().string(), text = body.str();
    // Length-prefixed, so moving text between two headers changes the hash.
    all += std::to_string(name.size()) + ":" + name + std::to_string(text.size()) + ":" + text;
  }
  return sha256_hex(all);
}

std::vector<std::string> module_flags(const std::string& isa, const std::string& prelude_dir,
                                      bool for_this_cpu) {
  // $DNNF_OPT_LEVEL (0-3, default 3) trades run-time speed for compile time, e.g. in tests
  // that compile hundreds of small modules; it is part of the cache key like every flag.
  std::string opt = "-O3";
  if (const char* lv = std::getenv("DNNF_OPT_LEVEL"); lv && *lv) {
    if (std::string(lv).size() != 1 || lv[0] < '0' || lv[0] > '3')
      throw Error(std::string("DNNF_OPT_LEVEL must be 0, 1, 2 or 3, not '") + lv + "'");
    opt = std::string("-O") + lv;
  }
  // Hidden visibility and no STB_GNU_UNIQUE: the prelude's function-local statics (GEMM
  // blocking, thread pool, scratch) must stay private to each module. With the default
  // unique binding every module in the process shared the first one's, whatever its ISA
  // (an AVX2 module's blocking used by an AVX-512 one overran its packing buffers).
  std::vector<std::string> flags = {"-std=c++17", opt, "-ffp-contract=off", "-pthread",
                                    "-fvisibility=hidden", "-fvisibility-inlines-hidden",
                                    "-fno-gnu-unique",
                                    "-I" + prelude_dir,
                                    "-DDNNF_PRELUDE_HASH=" + prelude_hash(prelude_dir)};
  std::vector<std::string> target;
  if (for_this_cpu) {
    target = isa_flags(isa);
  } else {
    const IsaInfo* info = find_isa(isa);
    if (!info) throw Error("unknown instruction set '" + isa + "' (expected " + isa_names() + ")");
    target = isa_compile_flags(*info);
  }
  flags.insert(flags.end(), target.begin(), target.end());
  return flags;
}

std::string compile_module_only(const GeneratedModule& module, const std::string& isa,
                                const std::string& prelude_dir) {
  return compile_shared(module.source, module_flags(isa, prelude_dir, false), 0, false,
                        prelude_dir + "/" + kModuleCommonHeader).path();
}

void prebuild_prelude(const std::string& isa, const std::string& prelude_dir, const std::vector<std::string>& units) {
  std::string line = kPreludeUnitsLine;
  for (const std::string& u : units) line += " " + u;
  const std::string source = "// dnnfusion warmup: the precompiled header and prelude units\n" + line +
                             "\n#include \"" + kModuleCommonHeader +
                             "\"\nextern \"C\" int dnnf_warmup(void) { return 0; }\n";
  if (prelude_units_named(source).size() != units.size())
    throw Error("prelude unit names are group.kind, e.g. gemm.1 (got:" + line.substr(line.find(':') + 1) + ")");
  compile_shared(source, module_flags(isa, prelude_dir), 0, false, prelude_dir + "/" + kModuleCommonHeader);
}

CpuExecutable::CpuExecutable(std::shared_ptr<const Graph> graph, GeneratedModule module,
                             const std::string& isa, int num_threads, const std::string& prelude_dir)
    : graph_(std::move(graph)), module_(std::move(module)), isa_(isa), num_threads_(num_threads) {
  const Graph& g = *graph_;
  if (module_.inputs != g.inputs() || module_.outputs != g.outputs())
    throw InternalError("generated module's inputs/outputs are not the graph's");
  std::vector<const void*> constants;
  for (ValueId v : module_.constants) {
    const Value& val = g.value(v);
    if (!val.constant) throw InternalError("generated module lists '" + val.name + "' as a constant");
    constants.push_back(val.constant->data);
  }

  std::vector<std::string> flags = module_flags(isa, prelude_dir);
  auto t0 = std::chrono::steady_clock::now();
  library_ = compile_shared(module_.source, flags, 0, true, prelude_dir + "/" + kModuleCommonHeader);
  compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int abi = library_.function<int (*)()>("dnnf_abi_version")();
  if (abi != kGeneratedAbiVersion)
    throw InternalError("generated module " + library_.path() + " has ABI version " + std::to_string(abi) +
                        "; this runtime speaks version " + std::to_string(kGeneratedAbiVersion));
  auto create = library_.function<void* (*)(const void* const*, int, char*, int)>("dnnf_create");
  run_ = library_.function<RunFn>("dnnf_run");
  run_timed_ = library_.function<RunTimedFn>("dnnf_run_timed");
  destroy_ = library_.function<DestroyFn>("dnnf_destroy");
  arena_ = aligned_bytes(static_cast<size_t>(module_.arena_bytes));
  // $DNNF_POISON_ARENA=1 (tests): the arena and the outputs are filled with 0xff bytes (NaN
  // floats, -1 integers) before every run, so that a kernel reading memory no kernel of
  // this run wrote shows in its results (dynamic=True's uncomputed padded rows, seq_rows.h).
  const char* poison = std::getenv("DNNF_POISON_ARENA");
  poison_ = poison && poison[0] == '1';

  char err[kErrLen] = {0};
  state_ = create(constants.empty() ? nullptr : constants.data(), num_threads_, err, kErrLen);
  if (!state_) throw Error(std::string("cannot set up the compiled model: ") + err);
}

CpuExecutable::~CpuExecutable() {
  if (state_ && destroy_) destroy_(state_);
}

void check_tensors(const Graph& g, const std::vector<TensorRef>& given, const std::vector<ValueId>& want,
                   const char* what) {
  if (given.size() != want.size()) {
    std::string names;
    for (ValueId v : want) names += (names.empty() ? "" : ", ") + g.value(v).name;
    throw Error("the model takes " + std::to_string(want.size()) + " " + what + "s (" + names + "), got " +
                std::to_string(given.size()));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const Value& v = g.value(want[i]);
    const TensorRef& t = given[i];
    std::vector<int64_t> dims = v.type.dims();
    std::string msg = std::string(what) + " '" + v.name + "': expected " + v.type.str() + ", got " +
                      type_str(t.dtype, t.shape);
    if (t.dtype != v.type.dtype) throw DTypeError(msg);
    if (t.shape != dims) throw ShapeError(msg);
    if (!t.data && v.type.nbytes() > 0) throw Error(std::string(what) + " '" + v.name + "' has no data");
  }
}

void CpuExecutable::check(const std::vector<TensorRef>& given, const std::vector<ValueId>& want,
                          const char* what) const {
  check_tensors(*graph_, given, want, what);
}

void CpuExecutable::run_with(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs,
                             double* seconds) {
  check(inputs, module_.inputs, "input");
  check(outputs, module_.outputs, "output");
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const TensorRef& t : inputs) in.push_back(t.data);
  for (const TensorRef& t : outputs) out.push_back(t.data);
  char err[kErrLen] = {0};
  std::lock_guard<std::mutex> lock(mu_);
  if (poison_) {
    std::memset(arena_.get(), 0xff, static_cast<size_t>(module_.arena_bytes));
    for (size_t i = 0; i < outputs.size(); ++i)
      if (out[i]) std::memset(out[i], 0xff, graph_->value(module_.outputs[i]).type.nbytes());
  }
  int rc = seconds ? run_timed_(state_, in.data(), out.data(), arena_.get(), num_threads_, seconds, err, kErrLen)
                   : run_(state_, in.data(), out.data(), arena_.get(), num_threads_, err, kErrLen);
  if (rc != 0) throw Error(std::string("the compiled model failed: ") + (err[0] ? err : "no message"));
}

void CpuExecutable::run(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs) {
  run_with(inputs, outputs, nullptr);
}

std::vector<double> CpuExecutable::run_timed(const std::vector<TensorRef>& inputs,
                                             const std::vector<TensorRef>& outputs) {
  std::vector<double> seconds(module_.kernels.size() + 1, 0.0);
  run_with(inputs, outputs, seconds.data());
  return seconds;
}

std::vector<std::shared_ptr<TensorData>> CpuExecutable::run(const std::vector<TensorRef>& inputs) {
  std::vector<std::shared_ptr<TensorData>> result;
  std::vector<TensorRef> outs;
  for (ValueId v : module_.outputs) {
    const TensorType& type = graph_->value(v).type;
    auto t = std::make_shared<TensorData>();
    t->type = type;
    std::shared_ptr<char> mem = aligned_bytes(type.nbytes());
    t->data = mem.get();
    t->owner = mem;
    outs.push_back({type.dtype, type.dims(), mem.get()});
    result.push_back(std::move(t));
  }
  run(inputs, outs);
  return result;
}

}  // namespace dnnf
