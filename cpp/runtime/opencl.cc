// The OpenCL runtime; see opencl.h. Entry points are resolved with dlsym from the library
// loaded at run time; the headers only give their types.
#include "runtime/opencl.h"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "ir/errors.h"
#include "runtime/compiler.h"

#if __has_include(<CL/cl.h>)
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001  // cl_khr_icd: the loader found no platform
#endif
#define DNNF_HAVE_OPENCL 1
#else
#define DNNF_HAVE_OPENCL 0
#endif

namespace dnnf::ocl {

namespace {

const char* kInstall =
    "install an OpenCL driver, e.g. PoCL for the CPU (Debian/Ubuntu: apt-get install pocl-opencl-icd "
    "ocl-icd-libopencl1), or a GPU vendor's driver; DNNF_OPENCL_DEVICE selects a device";

}  // namespace

#if DNNF_HAVE_OPENCL

namespace {

// The entry points used, resolved once.
struct Api {
#define DNNF_CL(name) decltype(&::name) name = nullptr;
  DNNF_CL(clGetPlatformIDs) DNNF_CL(clGetPlatformInfo) DNNF_CL(clGetDeviceIDs) DNNF_CL(clGetDeviceInfo)
  DNNF_CL(clCreateContext) DNNF_CL(clCreateCommandQueue) DNNF_CL(clCreateBuffer)
  DNNF_CL(clCreateProgramWithSource) DNNF_CL(clBuildProgram) DNNF_CL(clGetProgramBuildInfo)
  DNNF_CL(clCreateKernel) DNNF_CL(clSetKernelArg) DNNF_CL(clEnqueueNDRangeKernel)
  DNNF_CL(clEnqueueWriteBuffer) DNNF_CL(clEnqueueReadBuffer) DNNF_CL(clFinish)
  DNNF_CL(clGetEventProfilingInfo) DNNF_CL(clReleaseEvent) DNNF_CL(clReleaseKernel) DNNF_CL(clReleaseProgram)
  DNNF_CL(clReleaseMemObject) DNNF_CL(clReleaseCommandQueue) DNNF_CL(clReleaseContext)
  DNNF_CL(clGetKernelWorkGroupInfo) DNNF_CL(clCreateProgramWithBinary) DNNF_CL(clGetProgramInfo)
#undef DNNF_CL
};

const Api& api() {
  static std::mutex mu;
  static std::unique_ptr<Api> a;
  static std::string failed;
  std::lock_guard<std::mutex> lock(mu);
  if (a) return *a;
  if (!failed.empty()) throw Error(failed);
  const char* env = std::getenv("DNNF_OPENCL_LIBRARY");
  std::vector<std::string> names = env && *env ? std::vector<std::string>{env}
                                               : std::vector<std::string>{"libOpenCL.so.1", "libOpenCL.so"};
  void* h = nullptr;
  std::string why;
  for (const std::string& n : names) {
    h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) break;
    const char* e = dlerror();
    why += (why.empty() ? "" : "; ") + std::string(e ? e : n);
  }
  if (!h) {
    failed = "no OpenCL library could be loaded (" + why + "): " + kInstall;
    throw Error(failed);
  }
  auto out = std::make_unique<Api>();
  bool ok = true;
  std::string missing;
#define DNNF_CL(name)                                                                   \
  out->name = reinterpret_cast<decltype(out->name)>(dlsym(h, #name));                   \
  if (!out->name) {                                                                     \
    ok = false;                                                                         \
    missing += std::string(missing.empty() ? "" : ", ") + #name;                        \
  }
  DNNF_CL(clGetPlatformIDs) DNNF_CL(clGetPlatformInfo) DNNF_CL(clGetDeviceIDs) DNNF_CL(clGetDeviceInfo)
  DNNF_CL(clCreateContext) DNNF_CL(clCreateCommandQueue) DNNF_CL(clCreateBuffer)
  DNNF_CL(clCreateProgramWithSource) DNNF_CL(clBuildProgram) DNNF_CL(clGetProgramBuildInfo)
  DNNF_CL(clCreateKernel) DNNF_CL(clSetKernelArg) DNNF_CL(clEnqueueNDRangeKernel)
  DNNF_CL(clEnqueueWriteBuffer) DNNF_CL(clEnqueueReadBuffer) DNNF_CL(clFinish)
  DNNF_CL(clGetEventProfilingInfo) DNNF_CL(clReleaseEvent) DNNF_CL(clReleaseKernel) DNNF_CL(clReleaseProgram)
  DNNF_CL(clReleaseMemObject) DNNF_CL(clReleaseCommandQueue) DNNF_CL(clReleaseContext)
  DNNF_CL(clGetKernelWorkGroupInfo) DNNF_CL(clCreateProgramWithBinary) DNNF_CL(clGetProgramInfo)
#undef DNNF_CL
  if (!ok) {
    failed = "the OpenCL library lacks " + missing + " (an OpenCL 1.2 ICD loader is needed): " + kInstall;
    throw Error(failed);
  }
  a = std::move(out);
  return *a;
}

const char* code_name(cl_int e) {
  switch (e) {
#define C(x) \
  case x: return #x;
    C(CL_DEVICE_NOT_FOUND) C(CL_DEVICE_NOT_AVAILABLE) C(CL_COMPILER_NOT_AVAILABLE)
    C(CL_MEM_OBJECT_ALLOCATION_FAILURE) C(CL_OUT_OF_RESOURCES) C(CL_OUT_OF_HOST_MEMORY)
    C(CL_BUILD_PROGRAM_FAILURE) C(CL_INVALID_VALUE) C(CL_INVALID_PLATFORM) C(CL_INVALID_DEVICE)
    C(CL_INVALID_CONTEXT) C(CL_INVALID_COMMAND_QUEUE) C(CL_INVALID_MEM_OBJECT) C(CL_INVALID_PROGRAM)
    C(CL_INVALID_KERNEL_NAME) C(CL_INVALID_KERNEL) C(CL_INVALID_ARG_INDEX) C(CL_INVALID_ARG_VALUE)
    C(CL_INVALID_ARG_SIZE) C(CL_INVALID_KERNEL_ARGS) C(CL_INVALID_WORK_DIMENSION)
    C(CL_INVALID_WORK_GROUP_SIZE) C(CL_INVALID_WORK_ITEM_SIZE) C(CL_INVALID_GLOBAL_WORK_SIZE)
    C(CL_INVALID_BUFFER_SIZE) C(CL_INVALID_OPERATION) C(CL_INVALID_BUILD_OPTIONS)
    C(CL_PLATFORM_NOT_FOUND_KHR)
#undef C
    default: return "an OpenCL error";
  }
}

void check(cl_int e, const std::string& what) {
  if (e == CL_SUCCESS) return;
  std::string msg = "OpenCL: " + what + " failed with " + code_name(e) + " (" + std::to_string(e) + ")";
  if (e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES || e == CL_OUT_OF_HOST_MEMORY)
    msg += ": the device is out of memory or resources";
  throw Error(msg);
}

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (api().clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  api().clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  api().clGetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}

struct Found {
  DeviceInfo info;
  cl_platform_id platform;
  cl_device_id device;
};

std::vector<Found> enumerate() {
  const Api& a = api();
  cl_uint np = 0;
  cl_int e = a.clGetPlatformIDs(0, nullptr, &np);
  if (e == CL_PLATFORM_NOT_FOUND_KHR || np == 0)
    throw Error(std::string("no OpenCL platform is installed: ") + kInstall);
  check(e, "clGetPlatformIDs");
  std::vector<cl_platform_id> ps(np);
  check(a.clGetPlatformIDs(np, ps.data(), nullptr), "clGetPlatformIDs");
  std::vector<Found> out;
  for (cl_uint p = 0; p < np; ++p) {
    char pname[256] = {0};
    a.clGetPlatformInfo(ps[p], CL_PLATFORM_NAME, sizeof pname - 1, pname, nullptr);
    cl_uint nd = 0;
    if (a.clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> ds(nd);
    check(a.clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr), "clGetDeviceIDs");
    for (cl_uint k = 0; k < nd; ++k) {
      Found f{DeviceInfo{}, ps[p], ds[k]};
      DeviceInfo& i = f.info;
      i.index = std::to_string(p) + ":" + std::to_string(k);
      i.platform = pname;
      i.name = device_string(ds[k], CL_DEVICE_NAME);
      i.vendor = device_string(ds[k], CL_DEVICE_VENDOR);
      i.version = device_string(ds[k], CL_DEVICE_VERSION);
      i.driver = device_string(ds[k], CL_DRIVER_VERSION);
      const cl_device_type t = device_value<cl_device_type>(ds[k], CL_DEVICE_TYPE);
      i.type = t & CL_DEVICE_TYPE_GPU ? "gpu" : t & CL_DEVICE_TYPE_CPU ? "cpu" : t & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator" : "other";
      i.compute_units = device_value<cl_uint>(ds[k], CL_DEVICE_MAX_COMPUTE_UNITS);
      i.max_work_group = static_cast<int64_t>(device_value<size_t>(ds[k], CL_DEVICE_MAX_WORK_GROUP_SIZE));
      i.local_mem_bytes = static_cast<int64_t>(device_value<cl_ulong>(ds[k], CL_DEVICE_LOCAL_MEM_SIZE));
      i.global_mem_bytes = static_cast<int64_t>(device_value<cl_ulong>(ds[k], CL_DEVICE_GLOBAL_MEM_SIZE));
      i.max_alloc_bytes = static_cast<int64_t>(device_value<cl_ulong>(ds[k], CL_DEVICE_MAX_MEM_ALLOC_SIZE));
      i.base_align_bytes = std::max<int64_t>(64, device_value<cl_uint>(ds[k], CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8);
      i.fp64 = device_value<cl_device_fp_config>(ds[k], CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
      i.max_parameter_bytes = static_cast<int64_t>(device_value<size_t>(ds[k], CL_DEVICE_MAX_PARAMETER_SIZE));
      out.push_back(std::move(f));
    }
  }
  if (out.empty()) throw Error(std::string("no OpenCL device is available on any platform: ") + kInstall);
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Found pick(std::vector<Found> all, std::string spec) {
  if (spec.empty()) {
    const char* env = std::getenv("DNNF_OPENCL_DEVICE");
    spec = env ? env : "";
  }
  size_t chosen = 0;
  if (spec.empty()) {
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].info.type == "gpu") {
        chosen = i;
        break;
      }
  } else {
    bool found = false;
    for (size_t i = 0; i < all.size() && !found; ++i) {
      const DeviceInfo& d = all[i].info;
      if (d.index == spec || (spec.find(':') == std::string::npos && d.index == "0:" + spec) ||
          lower(d.name).find(lower(spec)) != std::string::npos) {
        chosen = i;
        found = true;
      }
    }
    if (!found) {
      std::string list;
      for (const Found& f : all) list += "\n  " + f.info.index + "  " + f.info.name + " (" + f.info.platform + ")";
      throw Error("no OpenCL device matches '" + spec + "' (DNNF_OPENCL_DEVICE or device=): the devices are" + list);
    }
  }
  all[chosen].info.selected = true;
  return all[chosen];
}

}  // namespace

std::vector<DeviceInfo> devices() {
  std::vector<Found> all = enumerate();
  std::vector<DeviceInfo> out;
  std::string sel;
  try {
    sel = pick(all, "").info.index;
  } catch (const Error&) {  // $DNNF_OPENCL_DEVICE names nothing: list them all unselected
  }
  for (Found& f : all) {
    f.info.selected = f.info.index == sel;
    out.push_back(f.info);
  }
  return out;
}

DeviceInfo select_device(const std::string& spec) { return pick(enumerate(), spec).info; }

struct Executable::Impl {
  cl_context ctx = nullptr;
  cl_command_queue q = nullptr;
  cl_program prog = nullptr;
  std::vector<cl_kernel> kernels;  // one per launch
  std::map<ValueId, cl_mem> values;  // graph inputs, outputs, constants
  cl_mem arena = nullptr, scratch = nullptr, err = nullptr;
  std::mutex mu;

  ~Impl() {
    if (!ctx) return;
    const Api& a = api();
    for (cl_kernel k : kernels) a.clReleaseKernel(k);
    for (auto& [v, m] : values) a.clReleaseMemObject(m);
    for (cl_mem m : {arena, scratch, err})
      if (m) a.clReleaseMemObject(m);
    if (prog) a.clReleaseProgram(prog);
    if (q) a.clReleaseCommandQueue(q);
    a.clReleaseContext(ctx);
  }

  cl_mem buffer(const DeviceInfo& d, int64_t bytes, const std::string& what) {
    if (bytes > d.max_alloc_bytes)
      throw Error("OpenCL: " + what + " needs " + std::to_string(bytes) + " bytes, more than the device's largest "
                  "allocation (" + std::to_string(d.max_alloc_bytes) + " bytes on " + d.name + ")");
    cl_int e = CL_SUCCESS;
    cl_mem m = api().clCreateBuffer(ctx, CL_MEM_READ_WRITE, static_cast<size_t>(std::max<int64_t>(bytes, 4)), nullptr, &e);
    check(e, "allocating " + what + " (" + std::to_string(bytes) + " bytes)");
    return m;
  }
};

// " in kernel k3_0 (line L)" when the build log's first error names a line of `source` inside a
// kernel, else "". Clang-based compilers write "FILE:LINE:COL: error: ..." (NVIDIA's) or
// "error: FILE:LINE:COL: ..." (PoCL's).
static std::string kernel_at_first_error(const std::string& source, const std::string& log) {
  static const std::regex at(R"(:(\d{1,8}):\d+:\s*(?:fatal )?error|error:\s*\S*?:(\d{1,8}):\d+:)");
  std::smatch m;
  if (!std::regex_search(log, m, at)) return "";
  const size_t line = std::stoul(m[1].matched ? m[1].str() : m[2].str());
  if (!line) return "";
  std::string kernel;
  size_t pos = 0;
  for (size_t l = 1; l <= line && pos < source.size(); ++l) {
    const size_t end = std::min(source.find('\n', pos), source.size());
    const std::string text = source.substr(pos, end - pos);
    constexpr const char* kHead = "__kernel void ";
    if (text.rfind(kHead, 0) == 0) kernel = text.substr(14, text.find('(') - 14);
    pos = end + 1;
  }
  return kernel.empty() ? "" : " in kernel " + kernel + " (line " + std::to_string(line) + ")";
}

int64_t max_kernel_args(const DeviceInfo& d) {
  return std::max<int64_t>(1, d.max_parameter_bytes / 8 - 3);
}

OpenclCodegenOptions codegen_options(const DeviceInfo& d) {
  OpenclCodegenOptions o;
  o.base_align_bytes = d.base_align_bytes;
  o.max_work_group = d.max_work_group;
  o.local_mem_bytes = d.local_mem_bytes;
  o.fp64 = d.fp64;
  o.max_kernel_args = static_cast<int>(max_kernel_args(d));
  const char* tiling = std::getenv("DNNF_OPENCL_TILING");
  const std::string t = tiling ? tiling : "";
  o.tiled_gemm = t != "0";
  o.compute_units = d.compute_units;
  o.gpu = d.type == "gpu";
  if (t == "32" || t == "64" || t == "128") o.tile = std::stoi(t);
  // A count from the environment: digits only, at most `digits` of them, else what to give.
  auto count = [](const char* name, size_t digits, const std::string& give, int64_t* out) {
    const char* e = std::getenv(name);
    if (!e || !*e) return;
    const std::string v = e;
    if (v.size() > digits || v.find_first_not_of("0123456789") != std::string::npos)
      throw CompileError(std::string(name) + " is '" + v + "': give " + give);
    *out = std::stoll(v);
  };
  count("DNNF_OPENCL_SPLIT_K", 3, "0 (choose per GEMM), 1 (never split K) or a number of splits up to 999", &o.split_k);
  count("DNNF_OPENCL_BUSY_ITEMS", 6,
        "the work-items per compute unit below which untiled GEMMs and convolutions take a work-group per output "
        "(0: never), up to 999999",
        &o.busy_items);
  // The prefetch hides a GPU's memory latency; a CPU device runs a work-group as loops, where it
  // only keeps values alive across barriers (PoCL's builds of such tiles took 2-4x longer).
  if (!o.gpu) o.tile_features &= ~kTilePrefetch;
  if (const char* tf = std::getenv("DNNF_OPENCL_TILE_FEATURES"); tf && *tf) {
    // A comma-separated list of the tile's features to keep ("none": the plain tile).
    static const std::pair<const char*, unsigned> kNames[] = {
        {"vec", kTileVec}, {"prefetch", kTilePrefetch}, {"kfast_b", kTileKFastB}, {"tap_major", kTileTapMajor}};
    const std::string v = tf;
    o.tile_features = 0;
    size_t at = 0;
    while (v != "none" && at <= v.size()) {
      const size_t comma = std::min(v.find(',', at), v.size());
      const std::string name = v.substr(at, comma - at);
      bool known = false;
      for (const auto& [n, bit] : kNames)
        if (name == n) {
          o.tile_features |= bit;
          known = true;
        }
      if (!known)
        throw CompileError("DNNF_OPENCL_TILE_FEATURES names '" + name + "': give 'none' or a comma-separated list of "
                           "vec, prefetch, kfast_b and tap_major");
      at = comma + 1;
    }
  }
  return o;
}

Executable::Executable(std::shared_ptr<const Graph> graph, OpenclModule module, const std::string& device)
    : graph_(std::move(graph)), module_(std::move(module)), impl_(std::make_unique<Impl>()) {
  const Api& a = api();
  Found f = pick(enumerate(), device);
  device_ = f.info;
  Impl& m = *impl_;
  cl_int e = CL_SUCCESS;
  m.ctx = a.clCreateContext(nullptr, 1, &f.device, nullptr, nullptr, &e);
  check(e, "clCreateContext on " + device_.name);
  m.q = a.clCreateCommandQueue(m.ctx, f.device, CL_QUEUE_PROFILING_ENABLE, &e);
  check(e, "clCreateCommandQueue");
  // DNNF_OPENCL_BUILD_OPTIONS: the user's options after the module's (e.g. -cl-mad-enable).
  if (const char* extra = std::getenv("DNNF_OPENCL_BUILD_OPTIONS"); extra && *extra)
    module_.build_options += std::string(" ") + extra;
  // The program: from the disk cache (the device's binary, keyed by the device, its driver,
  // the build options and the source), else built from source and then cached. A cache
  // entry that does not load or build is rebuilt from source; no cache directory, no cache.
  const auto t0 = std::chrono::steady_clock::now();
  std::string path;
  try {
    path = cache_dir() + "/ocl-" +
           sha256_hex(device_.name + "\n" + device_.vendor + "\n" + device_.driver + "\n" + device_.version + "\n" +
                      device_.platform + "\n" + module_.build_options + "\n" + module_.source) + ".bin";
  } catch (const Error&) {
    path.clear();
  }
  if (!path.empty()) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string bin = buf.str();
    if (in && !bin.empty()) {
      const unsigned char* ptr = reinterpret_cast<const unsigned char*>(bin.data());
      const size_t n = bin.size();
      cl_int status = CL_SUCCESS;
      m.prog = a.clCreateProgramWithBinary(m.ctx, 1, &f.device, &n, &ptr, &status, &e);
      if (e == CL_SUCCESS && status == CL_SUCCESS &&
          a.clBuildProgram(m.prog, 1, &f.device, module_.build_options.c_str(), nullptr, nullptr) == CL_SUCCESS) {
        cached_ = true;
      } else if (m.prog) {
        a.clReleaseProgram(m.prog);
        m.prog = nullptr;
      }
    }
  }
  if (!cached_) {
    const char* src = module_.source.c_str();
    const size_t len = module_.source.size();
    m.prog = a.clCreateProgramWithSource(m.ctx, 1, &src, &len, &e);
    check(e, "clCreateProgramWithSource");
    e = a.clBuildProgram(m.prog, 1, &f.device, module_.build_options.c_str(), nullptr, nullptr);
    if (e != CL_SUCCESS) {
      size_t n = 0;
      a.clGetProgramBuildInfo(m.prog, f.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      if (n) a.clGetProgramBuildInfo(m.prog, f.device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      if (log.size() > 4000) log = log.substr(0, 4000) + "\n...";
      throw CompileError("OpenCL: building the generated program on " + device_.name + " failed (" + code_name(e) +
                         ")" + kernel_at_first_error(module_.source, log) + "; the build log:\n" + log);
    }
    size_t n = 0;
    if (!path.empty() && a.clGetProgramInfo(m.prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, nullptr) == CL_SUCCESS && n) {
      std::string bin(n, '\0');
      unsigned char* ptr = reinterpret_cast<unsigned char*>(bin.data());
      if (a.clGetProgramInfo(m.prog, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) == CL_SUCCESS) {
        // Written whole under a private name, then renamed: readers never see a partial file.
        const std::string tmp = path + ".tmp." + std::to_string(::getpid());
        std::ofstream out(tmp, std::ios::binary);
        out.write(bin.data(), static_cast<std::streamsize>(bin.size()));
        out.close();
        if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
      }
    }
  }
  build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Buffers: graph inputs, outputs, constants and the sources of output copies, one each
  // (constants uploaded now); the arena; the scratch.
  const Graph& g = *graph_;
  std::vector<ValueId> need = module_.inputs;
  need.insert(need.end(), module_.outputs.begin(), module_.outputs.end());
  need.insert(need.end(), module_.constants.begin(), module_.constants.end());
  for (ValueId v : module_.output_sources)
    if (v != kNoValue) need.push_back(v);
  for (ValueId v : need) {
    if (m.values.count(v)) continue;
    const Value& val = g.value(v);
    m.values[v] = m.buffer(device_, static_cast<int64_t>(val.type.nbytes()), "tensor '" + val.name + "'");
    if (val.constant && val.type.nbytes() > 0)
      check(a.clEnqueueWriteBuffer(m.q, m.values[v], CL_TRUE, 0, val.type.nbytes(), val.constant->data, 0, nullptr,
                                   nullptr),
            "uploading constant '" + val.name + "'");
  }
  m.arena = m.buffer(device_, module_.memory.arena_bytes, "the arena of intermediates");
  m.scratch = m.buffer(device_, module_.scratch_bytes, "the block scratch");
  m.err = m.buffer(device_, 4, "the error flag");
  // Kernels and their arguments, set once.
  for (const OpenclLaunch& l : module_.launches) {
    cl_kernel k = a.clCreateKernel(m.prog, l.kernel.c_str(), &e);
    check(e, "clCreateKernel(" + l.kernel + ")");
    m.kernels.push_back(k);
    int64_t local = l.local_bytes;  // its __local arrays and __local arguments together
    for (size_t i = 0; i < l.args.size(); ++i) {
      const OpenclArg& arg = l.args[i];
      const std::string what = "setting argument " + std::to_string(i) + " of kernel " + l.kernel;
      switch (arg.kind) {
        case OpenclArg::Kind::Value: {
          auto it = m.values.find(arg.value);
          if (it == m.values.end()) throw InternalError("opencl: a launch names a value without a buffer");
          check(a.clSetKernelArg(k, static_cast<cl_uint>(i), sizeof(cl_mem), &it->second), what);
          break;
        }
        case OpenclArg::Kind::Arena: check(a.clSetKernelArg(k, static_cast<cl_uint>(i), sizeof(cl_mem), &m.arena), what); break;
        case OpenclArg::Kind::Scratch: check(a.clSetKernelArg(k, static_cast<cl_uint>(i), sizeof(cl_mem), &m.scratch), what); break;
        case OpenclArg::Kind::ErrorFlag: check(a.clSetKernelArg(k, static_cast<cl_uint>(i), sizeof(cl_mem), &m.err), what); break;
        case OpenclArg::Kind::Int: {
          const cl_long v = arg.i;
          check(a.clSetKernelArg(k, static_cast<cl_uint>(i), sizeof v, &v), what);
          break;
        }
        case OpenclArg::Kind::Float: check(a.clSetKernelArg(k, static_cast<cl_uint>(i), sizeof(float), &arg.f), what); break;
        case OpenclArg::Kind::LocalBytes:
          local += arg.local_bytes;
          check(a.clSetKernelArg(k, static_cast<cl_uint>(i), static_cast<size_t>(arg.local_bytes), nullptr), what);
          break;
      }
    }
    if (local > device_.local_mem_bytes)  // a module generated for another device
      throw Error("OpenCL: kernel " + l.kernel + " needs " + std::to_string(local) +
                  " bytes of local memory, more than the " + std::to_string(device_.local_mem_bytes) + " of " +
                  device_.name + "; generate the module for this device");
    int64_t wg = 1;
    for (int d = 0; d < l.dims; ++d) wg *= std::max<int64_t>(1, l.local[d]);
    if (wg > device_.max_work_group)
      throw Error("OpenCL: kernel " + l.kernel + " asks for work-groups of " + std::to_string(wg) + " items; " +
                  device_.name + " allows " + std::to_string(device_.max_work_group));
  }
}

Executable::~Executable() = default;

void Executable::run(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs,
                     std::vector<double>* seconds) {
  const Api& a = api();
  check_tensors(*graph_, inputs, module_.inputs, "input");
  check_tensors(*graph_, outputs, module_.outputs, "output");
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  const cl_int zero = 0;
  check(a.clEnqueueWriteBuffer(m.q, m.err, CL_FALSE, 0, sizeof zero, &zero, 0, nullptr, nullptr), "clearing the error flag");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t bytes = graph_->value(module_.inputs[i]).type.nbytes();
    if (bytes)
      check(a.clEnqueueWriteBuffer(m.q, m.values[module_.inputs[i]], CL_FALSE, 0, bytes, inputs[i].data, 0, nullptr, nullptr),
            "uploading input '" + graph_->value(module_.inputs[i]).name + "'");
  }
  std::vector<cl_event> events(module_.launches.size(), nullptr);
  for (size_t i = 0; i < module_.launches.size(); ++i) {
    const OpenclLaunch& l = module_.launches[i];
    size_t global[3], local[3];
    bool has_local = false;
    for (int d = 0; d < l.dims; ++d) {
      global[d] = static_cast<size_t>(l.global[d]);
      local[d] = static_cast<size_t>(l.local[d]);
      has_local = has_local || l.local[d] != 0;
    }
    check(a.clEnqueueNDRangeKernel(m.q, m.kernels[i], static_cast<cl_uint>(l.dims), nullptr, global,
                                   has_local ? local : nullptr, 0, nullptr, seconds ? &events[i] : nullptr),
          "launching kernel " + l.kernel);
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    const ValueId v = module_.output_sources.size() > j && module_.output_sources[j] != kNoValue
                          ? module_.output_sources[j] : module_.outputs[j];
    const size_t bytes = graph_->value(module_.outputs[j]).type.nbytes();
    if (bytes)
      check(a.clEnqueueReadBuffer(m.q, m.values.at(v), CL_FALSE, 0, bytes, outputs[j].data, 0, nullptr, nullptr),
            "reading output '" + graph_->value(module_.outputs[j]).name + "'");
  }
  cl_int flag = 0;
  check(a.clEnqueueReadBuffer(m.q, m.err, CL_TRUE, 0, sizeof flag, &flag, 0, nullptr, nullptr), "reading the error flag");
  check(a.clFinish(m.q), "clFinish");
  if (seconds) {
    seconds->assign(events.size(), 0.0);
    for (size_t i = 0; i < events.size(); ++i) {
      cl_ulong s = 0, t = 0;
      a.clGetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_START, sizeof s, &s, nullptr);
      a.clGetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_END, sizeof t, &t, nullptr);
      (*seconds)[i] = static_cast<double>(t - s) * 1e-9;
      a.clReleaseEvent(events[i]);
    }
  }
  if (flag != 0)
    throw Error("the compiled model failed: an index computed from the data (Gather, GatherElements, ScatterND, ...) "
                "is out of range");
}

#else  // built without the OpenCL headers

namespace {
[[noreturn]] void unavailable() {
  throw Error(std::string("this dnnfusion was built without the OpenCL headers (Debian: apt-get install "
                          "opencl-headers ocl-icd-opencl-dev, then reinstall dnnfusion); ") + kInstall);
}
}  // namespace

std::vector<DeviceInfo> devices() { unavailable(); }
DeviceInfo select_device(const std::string&) { unavailable(); }
OpenclCodegenOptions codegen_options(const DeviceInfo&) { unavailable(); }
struct Executable::Impl {};
Executable::Executable(std::shared_ptr<const Graph> graph, OpenclModule module, const std::string&)
    : graph_(std::move(graph)), module_(std::move(module)) {
  unavailable();
}
Executable::~Executable() = default;
void Executable::run(const std::vector<TensorRef>&, const std::vector<TensorRef>&, std::vector<double>*) {
  unavailable();
}

#endif

}  // namespace dnnf::ocl
