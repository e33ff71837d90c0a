// Compile-and-cache of generated kernels (see compiler.h): compiler discovery, the per-user
// object cache, dlopen, and CPU detection (child processes: process.h; SHA-256: sha256.cc;
// the cache directories: cache_dir.cc).
#include "runtime/compiler.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "ir/errors.h"
#include "runtime/compile_parts.h"
#include "runtime/prelude_units.h"
#include "runtime/process.h"

namespace dnnf {

namespace {

std::mutex prelude_seconds_mu;
double prelude_seconds = 0;

// Bump when the layout of cached objects or the meaning of a key changes.
constexpr const char* kCacheFormat = "dnnf-kernel-cache-1";
constexpr size_t kMaxDiagnostics = 4000;  // characters of compiler output in an error

// ---- Small helpers ----------------------------------------------------------------------
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string truncated(const std::string& s) {
  if (s.size() <= kMaxDiagnostics) return s;
  // Cut where a character starts, not inside one: GCC quotes names in UTF-8 (‘x’), and a cut
  // through one made the error message undecodable (a UnicodeDecodeError in Python instead of
  // the CompileError saying what failed).
  size_t cut = kMaxDiagnostics;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\n... (" + std::to_string(s.size() - cut) + " more bytes of compiler output)";
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size()))
    s.replace(i, from.size(), to);
}

// A compiler candidate: found and answering --version, or why not.
bool try_compiler(std::vector<std::string> argv, Compiler* out, std::string* why) {
  std::string path = which(argv[0]);
  if (path.empty()) { *why = "'" + argv[0] + "' was not found"; return false; }
  argv[0] = path;
  auto cmd = argv;
  cmd.push_back("--version");
  ProcessResult r = run_process(cmd, 20);
  if (!r.started || r.timed_out || r.status != 0) {
    *why = "'" + joined(argv) + " --version' " +
           (!r.started ? "could not start (" + r.error + ")"
                       : r.timed_out ? "timed out" : "failed with status " + std::to_string(r.status));
    return false;
  }
  out->argv = std::move(argv);
  out->version = r.output;
  return true;
}

}  // namespace

std::string random_tag() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(::getpid()) << 32)};
  std::lock_guard<std::mutex> lock(mu);
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(rng()));
  return s;
}

namespace {

// Whether the file holds every byte its ELF headers point at. dlopen maps the segments where
// the program headers say they are, so a library cut short on disk (a disk fault, a full disk
// in another tool) loads and then dies with SIGBUS at the first page past the end; such a
// cache entry is compiled again instead.
bool elf_complete(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  Elf64_Ehdr eh;
  bool ok = ::fstat(fd, &st) == 0 && ::pread(fd, &eh, sizeof eh, 0) == static_cast<ssize_t>(sizeof eh) &&
            std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
            eh.e_phentsize == sizeof(Elf64_Phdr);
  const uint64_t size = ok ? static_cast<uint64_t>(st.st_size) : 0;
  ok = ok && eh.e_phoff <= size && eh.e_phnum * uint64_t{sizeof(Elf64_Phdr)} <= size - eh.e_phoff;
  ok = ok && (eh.e_shoff == 0 || (eh.e_shoff <= size && eh.e_shnum * uint64_t{eh.e_shentsize} <= size - eh.e_shoff));
  for (uint16_t i = 0; ok && i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    ok = ::pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) == static_cast<ssize_t>(sizeof ph) &&
         ph.p_offset <= size && ph.p_filesz <= size - ph.p_offset;
  }
  ::close(fd);
  return ok;
}

void* load(const std::string& path, std::string* err) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    *err = e ? e : "unknown dlopen error";
  }
  return h;
}

std::shared_ptr<void> handle_of(void* h) {
  return std::shared_ptr<void>(h, [](void* p) { ::dlclose(p); });
}

}  // namespace

Compiler find_compiler() {
  static std::mutex mu;
  static std::map<std::string, Compiler> found;
  std::string dnnf_cxx = env("DNNF_CXX"), cxx = env("CXX");
  std::string key = dnnf_cxx + '\0' + cxx + '\0' + env("PATH");
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = found.find(key);
    if (it != found.end()) return it->second;
  }
  Compiler c;
  std::string why;
  bool ok = false;
  if (!split_words(dnnf_cxx).empty()) {
    ok = try_compiler(split_words(dnnf_cxx), &c, &why);
    if (!ok) why = "DNNF_CXX is set but " + why;
  } else {
    std::vector<std::string> tried;
    std::vector<std::vector<std::string>> candidates;
    if (!split_words(cxx).empty()) candidates.push_back(split_words(cxx));
    for (const char* name : {"c++", "g++", "clang++"}) candidates.push_back({name});
    for (const auto& argv : candidates) {
      std::string w;
      if ((ok = try_compiler(argv, &c, &w))) break;
      tried.push_back(w);
    }
    for (const auto& t : tried) why += (why.empty() ? "" : "; ") + t;
  }
  if (!ok)
    throw CompileError("no C++ compiler found: install g++ (Debian: apt-get install g++) or set DNNF_CXX (" +
                       why + ")");
  std::lock_guard<std::mutex> lock(mu);
  found[key] = c;
  return c;
}

void* CompiledLibrary::symbol(const std::string& name) const {
  if (!handle_) throw CompileError("symbol '" + name + "' looked up in a library that is not loaded");
  ::dlerror();
  void* p = ::dlsym(handle_.get(), name.c_str());
  if (!p) {
    const char* e = ::dlerror();
    throw CompileError("generated library " + path_ + " has no symbol '" + name + "'" +
                       (e ? std::string(" (") + e + ")" : std::string()));
  }
  return p;
}

namespace {
// Removes a directory this process made in the cache and the files in it (no subdirectories).
void remove_flat_dir(const std::string& d, const std::string& file) {
  ::unlink((d + "/" + file).c_str());
  ::rmdir(d.c_str());
}

// The directory holding `header` precompiled (GCC's <name>.gch) for this compiler and these
// flags, built on first use; "" where there is none to use (DNNF_PCH=0, a compiler other than
// GCC, or a build that failed, which is remembered for the process and never an error: the
// module then parses the header itself). The directory goes first on the include path: GCC
// takes the .gch where it is valid for the compile and otherwise reads the header from the
// prelude, so a stale or foreign .gch can cost time, never change the code. It is built in a
// private temporary directory and rename()d into place whole, so a concurrent process finds
// either none or a complete one. Keyed by the compiler, the flags (which carry the prelude's
// content hash) and the header's own text.
std::string precompiled_header(const Compiler& cc, const std::vector<std::string>& flags,
                               const std::string& header, const std::string& dir, double timeout_s) {
  if (header.empty() || env("DNNF_PCH") == "0") return "";
  if (cc.version.find("clang") != std::string::npos) return "";  // clang reads .pch differently
  std::string text;
  {
    int fd = ::open(header.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
    ::close(fd);
  }
  std::string framed;
  auto field = [&](const std::string& s) { framed += std::to_string(s.size()) + ':' + s; };
  field("dnnf-pch-1");
  field(header);
  field(text);
  for (const auto& a : cc.argv) field(a);
  field(cc.version);
  for (const auto& f : flags) field(f);
  const std::string key = sha256_hex(framed).substr(0, 32);
  const std::string name = header.substr(header.rfind('/') + 1) + ".gch";
  const std::string pdir = dir + "/pch-" + key;
  static std::mutex mu;
  static std::set<std::string> failed;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (failed.count(key)) return "";
  }
  struct stat st;
  auto built = [&] {
    return ::lstat((pdir + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
           st.st_size > 0;
  };
  if (built()) return pdir;
  // One build at a time in this process, and across processes (a lock file beside it): a
  // compile that waited uses the one just built. The wait counts as building time.
  static std::mutex building;
  std::lock_guard<std::mutex> one_build(building);
  if (built()) return pdir;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (failed.count(key)) return "";
  }
  const auto t_build = std::chrono::steady_clock::now();
  struct Timed {
    std::chrono::steady_clock::time_point t0;
    ~Timed() { add_prelude_build_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()); }
  } timed{t_build};
  FileLock across(dir + "/lock.pch-" + key, timeout_s);
  if (built()) return pdir;
  const std::string tmp = dir + "/tmp.pch." + key.substr(0, 16) + "." + std::to_string(::getpid()) + "." + random_tag();
  if (::mkdir(tmp.c_str(), 0700) != 0) return "";
  std::vector<std::string> argv = cc.argv;
  for (const char* a : {"-fPIC", "-x", "c++-header", "-o"}) argv.push_back(a);  // -fPIC as the module's
  argv.push_back(tmp + "/" + name);
  argv.push_back(header);
  argv.insert(argv.end(), flags.begin(), flags.end());
  ProcessResult r = run_process(argv, timeout_s);
  if (!r.started || r.timed_out || r.status != 0) {
    remove_flat_dir(tmp, name);
    std::lock_guard<std::mutex> lock(mu);
    failed.insert(key);
    return "";
  }
  if (::rename(tmp.c_str(), pdir.c_str()) != 0) remove_flat_dir(tmp, name);  // another process was first
  return ::lstat((pdir + "/" + name).c_str(), &st) == 0 ? pdir : "";
}

}  // namespace

void add_prelude_build_seconds(double s) {
  std::lock_guard<std::mutex> lock(prelude_seconds_mu);
  prelude_seconds += s;
}

double prelude_build_seconds() {
  std::lock_guard<std::mutex> lock(prelude_seconds_mu);
  return prelude_seconds;
}

CompiledLibrary compile_shared(const std::string& source, const std::vector<std::string>& flags,
                               double timeout_s, bool load_it, const std::string& pch_header) {
  if (timeout_s <= 0) {
    char* end = nullptr;
    std::string t = env("DNNF_COMPILE_TIMEOUT");
    double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
    timeout_s = v > 0 ? v : 300;
  }
  Compiler cc = find_compiler();
  std::string dir = cache_dir();
  std::vector<std::string> all_flags = flags;
  if (env("DNNF_SANITIZE") == "1") {
    // Generated code under AddressSanitizer + UBSan (.ci/sanitize). An instrumented library
    // only loads into a process whose ASan runtime came first (LD_PRELOAD): say so here
    // rather than let dlopen fail with the runtime's own message.
    if (!::dlsym(RTLD_DEFAULT, "__asan_init"))
      throw CompileError("DNNF_SANITIZE=1 compiles generated code with AddressSanitizer, which needs the ASan "
                         "runtime loaded first: run under LD_PRELOAD=$(g++ -print-file-name=libasan.so) "
                         "(as .ci/sanitize does), or unset DNNF_SANITIZE");
    for (const char* f : {"-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"})
      all_flags.push_back(f);
  }
  // Length-prefixed fields, so no two different inputs frame to the same bytes.
  std::string framed;
  auto field = [&](const std::string& s) { framed += std::to_string(s.size()) + ':' + s; };
  field(kCacheFormat);
  field(source);
  field(std::to_string(cc.argv.size()));
  for (const auto& a : cc.argv) field(a);
  field(cc.version);
  field(std::to_string(all_flags.size()));
  for (const auto& f : all_flags) field(f);
  std::string key = sha256_hex(framed);
  std::string so = dir + "/" + key + ".so", kept = dir + "/" + key + ".cc";

  std::string err;
  struct stat st;
  const std::vector<std::string> named = prelude_units_named(source);
  if (::lstat(so.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && elf_complete(so)) {
    if (!load_it) return CompiledLibrary(nullptr, so, true, named, {});
    if (void* h = load(so, &err)) return CompiledLibrary(handle_of(h), so, true, named, {});
    // An unloadable cached object (a disk fault, a foreign file): compile it again.
  }

  std::string tmp = dir + "/tmp." + key.substr(0, 16) + "." + std::to_string(::getpid()) + "." + random_tag();
  std::string tmp_src = tmp + ".cc", tmp_so = tmp + ".so";
  int fd = ::open(tmp_src.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw CompileError("cannot write kernel source " + tmp_src + ": " + std::strerror(errno));
  for (size_t done = 0; done < source.size();) {
    ssize_t n = ::write(fd, source.data() + done, source.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp_src.c_str());
      throw CompileError("cannot write kernel source " + tmp_src + ": " + std::strerror(e));
    }
    done += size_t(n);
  }
  ::close(fd);

  // Neither the precompiled header nor the prelude units are part of the key: with or without
  // them the object runs the same code.
  const std::string shared = pch_header.empty() ? dir : prelude_cache_dir();
  const std::string pch = precompiled_header(cc, all_flags, pch_header, shared, timeout_s);
  std::vector<std::string> units = prelude_unit_objects(cc, all_flags, named, pch_header, pch, shared, timeout_s, false);
  // Units still to build are built beside the module's own compile, which needs them only to
  // link (a plan that profiling changed named a unit the first plan did not: U-Net's module
  // waited 5.7 s for it with one CPU idle).
  const bool build_beside = units.empty() && !named.empty() && prelude_units_apply(all_flags, pch_header);
  const bool will_link = build_beside || !units.empty();  // read before the builder may write `units`
  std::thread builder;
  bool builder_done = true;
  if (build_beside) {
    builder_done = false;
    builder = std::thread([&] { units = prelude_unit_objects(cc, all_flags, named, pch_header, pch, shared, timeout_s); });
  }
  auto built_units = [&] {
    if (!builder_done) {
      builder.join();
      builder_done = true;
    }
    return units;
  };
  struct Join {
    std::function<void()> f;
    ~Join() { f(); }
  } join_on_exit{[&] { built_units(); }};
  auto command_for = [&](const std::string& pch_dir, bool link_units) {
    std::vector<std::string> argv = cc.argv;
    for (const char* a : {"-shared", "-fPIC", "-o"}) argv.push_back(a);
    argv.push_back(tmp_so);
    argv.push_back(tmp_src);
    if (link_units) argv.insert(argv.end(), units.begin(), units.end());
    if (!pch_dir.empty()) argv.push_back("-I" + pch_dir);  // before the prelude's -I
    if (link_units) argv.push_back("-DDNNF_LINK_UNITS");
    argv.insert(argv.end(), all_flags.begin(), all_flags.end());  // after the source, so -l flags link
    return argv;
  };
  // In parts, in parallel, where the source allows and the machine has CPUs for it (and as one
  // part while units are built beside it); on any failure the whole compile below runs and
  // reports (a compile error is the source's own).
  ProcessResult r;
  const int parts = compile_parts_for(source);
  std::vector<std::string> defines;
  if (!pch.empty()) defines.push_back("-I" + pch);
  if (will_link) defines.push_back("-DDNNF_LINK_UNITS");
  const bool in_parts = (parts > 1 || build_beside) &&
                        compile_in_parts(cc.argv, tmp_src, tmp_so, defines, built_units, will_link, all_flags, parts,
                                         timeout_s);
  built_units();
  bool link_units = !units.empty();
  std::vector<std::string> argv = command_for(pch, link_units);
  if (in_parts) {
    r.started = true;
    r.status = 0;
  } else {
    r = run_process(argv, timeout_s);
  }
  auto failed_with = [&](std::initializer_list<const char*> words) {
    if (!r.started || r.timed_out || r.status == 0) return false;
    for (const char* w : words)
      if (r.output.find(w) != std::string::npos) return true;
    return false;
  };
  std::string units_failed;  // why the compile with units failed where the whole one passed
  if (link_units && r.started && !r.timed_out && r.status != 0) {
    // Once more whole, so that an error is always the source's own. If that passes, a unit
    // object did not link (damaged on disk, say) or the declarations the module compiled
    // against are out of step with the units: remove them, to be built again next time.
    const std::string complaint = first_compiler_complaint(r.output);
    link_units = false;
    argv = command_for(pch, false);
    r = run_process(argv, timeout_s);
    if (r.started && !r.timed_out && r.status == 0) {
      for (const std::string& o : units) ::unlink(o.c_str());
      units_failed = complaint;
    }
  }
  if (!pch.empty() && failed_with({"PCH", ".gch"})) {
    // A .gch damaged on disk can fail a compile that the header itself would pass ("cannot read
    // PCH file"): once more without it, so that a compile error is always the source's own.
    argv = command_for("", link_units);
    r = run_process(argv, timeout_s);
  }
  // Keep the source under its key, for the error message and for debugging generated code.
  if (::rename(tmp_src.c_str(), kept.c_str()) != 0) kept = tmp_src;
  if (!units_failed.empty()) {
    std::string names;
    for (const auto& u : named) names += (names.empty() ? "" : " ") + u;
    note_prelude_unit_problem("module " + kept + " did not compile with its prelude units (" + names +
                              ") and was compiled whole: " + units_failed);
  }
  std::string command = joined(argv);
  replace_all(command, tmp_src, kept);
  if (!r.started || r.timed_out || r.status != 0) {
    ::unlink(tmp_so.c_str());
    std::string out = r.output;
    replace_all(out, tmp_src, kept);
    std::ostringstream msg;
    if (!r.started)
      msg << "the C++ compiler " << cc.argv[0] << " could not be started (" << r.error << ")";
    else if (r.timed_out)
      msg << "compiling a generated kernel timed out after " << timeout_s
          << " s (set DNNF_COMPILE_TIMEOUT to allow longer)";
    else
      msg << "compiling a generated kernel failed (exit status " << r.status << ")";
    msg << "; source kept at " << kept << "\ncommand: " << command;
    if (!out.empty()) msg << "\n" << truncated(out);
    throw CompileError(msg.str());
  }
  if (::rename(tmp_so.c_str(), so.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp_so.c_str());
    throw CompileError("cannot move compiled kernel into the cache at " + so + ": " + std::strerror(e));
  }
  std::vector<std::string> linked = link_units ? named : std::vector<std::string>{};
  if (!load_it) return CompiledLibrary(nullptr, so, false, named, std::move(linked));
  void* h = load(so, &err);
  if (!h) throw CompileError("cannot load compiled kernel " + so + " (source " + kept + "): " + err);
  return CompiledLibrary(handle_of(h), so, false, named, std::move(linked));
}

bool cpu_supports(const CpuFeatures& f, const IsaInfo& isa) {
  const std::string n = isa.name;
  if (n == "scalar") return true;
  if (n == "avx2") return f.avx2 && f.fma;
  if (n == "avx512") return f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.fma;
  if (n == "neon") return f.neon;
  return false;
}

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  bool osxsave = false, avx = false;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    f.fma = c & (1u << 12);
    osxsave = c & (1u << 27);
    avx = c & (1u << 28);
  }
  uint64_t xcr0 = 0;
  if (osxsave) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (uint64_t(hi) << 32) | lo;
  }
  // The OS must save the registers: XMM+YMM for AVX, plus opmask and ZMM for AVX-512.
  bool os_avx = avx && (xcr0 & 0x6) == 0x6, os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = os_avx && (b & (1u << 5));
    f.avx512f = os_avx512 && (b & (1u << 16));
    f.avx512dq = os_avx512 && (b & (1u << 17));
    f.avx512bw = os_avx512 && (b & (1u << 30));
    f.avx512vl = os_avx512 && (b & (1u << 31));
  }
  f.fma = f.fma && os_avx;
#elif defined(__aarch64__)
  f.neon = ::getauxval(AT_HWCAP) & HWCAP_ASIMD;
#endif
  std::vector<std::string> ladder;  // what runs here, lowest first (kIsas order)
  for (const IsaInfo& i : kIsas)
    if (cpu_supports(f, i)) ladder.push_back(i.name);
  f.isa = ladder.back();
  std::string want = env("DNNF_ISA");
  if (!want.empty()) {
    bool have = false;
    for (const auto& l : ladder) have = have || l == want;
    if (!have)
      throw Error("DNNF_ISA=" + want + (find_isa(want) ? " asks for an instruction set this CPU lacks"
                                                      : " is not an instruction set (" + isa_names() + ")") +
                  "; available here: " + joined(ladder));
    f.isa = want;
  }
  const std::vector<std::string> all = isa_compile_flags(*find_isa(f.isa));
  for (const std::string& a : all)
    if (a.rfind("-D", 0) != 0) f.flags.push_back(a);
  return f;
}

}  // namespace dnnf
