// Compile-and-cache of generated kernels: finds a C++ compiler, builds a shared object into a
// per-user cache keyed by a hash of everything that shapes the object, and dlopens it.
// See "Safety of generated code" in ARCHITECTURE.md; the paper leaves this part out.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "target/isa.h"

namespace dnnf {

// The C++ compiler used for generated code: `argv` is the command prefix (a compiler named
// in $DNNF_CXX or $CXX may carry options, split on whitespace, never through a shell).
struct Compiler {
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::string version;            // its `--version` output, part of every cache key
};

// $DNNF_CXX, else $CXX, else c++, g++, clang++ on PATH; each must answer `--version`. A
// $DNNF_CXX that does not run is an error (it is an explicit request); a broken $CXX falls
// through to PATH, since CXX is often set for other builds. None: CompileError "no C++
// compiler found: ...". The answer is remembered per (DNNF_CXX, CXX, PATH).
Compiler find_compiler();

// A loaded shared object. Copies share one dlopen handle; the library is unloaded when the
// last copy goes, so keep a copy beside any function pointer taken from it.
class CompiledLibrary {
 public:
  CompiledLibrary() = default;
  CompiledLibrary(std::shared_ptr<void> handle, std::string path, bool cached, std::vector<std::string> units_named = {},
                  std::vector<std::string> units_linked = {})
      : handle_(std::move(handle)), path_(std::move(path)), cached_(cached), units_named_(std::move(units_named)),
        units_linked_(std::move(units_linked)) {}

  const std::string& path() const { return path_; }
  bool cached() const { return cached_; }  // found in the cache, not compiled now
  bool loaded() const { return handle_ != nullptr; }
  // The prelude units the source names, and those this compile linked into the object (all of
  // them, or none where units do not apply or it compiled the source whole; empty also for an
  // object found in the cache, whose compile is not known).
  const std::vector<std::string>& units_named() const { return units_named_; }
  const std::vector<std::string>& units_linked() const { return units_linked_; }
  // The address of an exported (extern "C") symbol; CompileError if it is missing.
  void* symbol(const std::string& name) const;
  template <class Fn>
  Fn function(const std::string& name) const { return reinterpret_cast<Fn>(symbol(name)); }

 private:
  std::shared_ptr<void> handle_;
  std::string path_;
  bool cached_ = false;
  std::vector<std::string> units_named_, units_linked_;
};

// Compiles `source` with `<compiler> -shared -fPIC <flags>` and loads it (RTLD_NOW |
// RTLD_LOCAL). The object lives in cache_dir() under the SHA-256 of (format version,
// source, compiler argv and version, flags); a hit skips the compiler. A miss compiles into
// a uniquely named temporary file and rename()s it into place, so a concurrent process sees
// either no object or a whole one, and racing compiles of one source both succeed. The
// source is kept beside the object as <key>.cc. Errors, timeouts (`timeout_s`, default
// $DNNF_COMPILE_TIMEOUT or 300 s) and unloadable objects raise CompileError with the
// compiler's diagnostics and the kept source's path. `load_it` false: compile (or find)
// the object but do not load it (code for an ISA this CPU lacks); the library is not loaded.
// `pch_header` (a path; GCC only, off with DNNF_PCH=0): a header the source includes first,
// precompiled once per compiler and flags into the cache (pch-<key>/) and found there before
// the header itself; generated modules' common headers take a second of each compile to parse.
// Prelude units (codegen/prelude/prelude_units.h; DNNF_PRELUDE_UNITS=0 turns them off): a
// source whose second line is "// dnnf-prelude-units: <group>.<0-2> ..." and that includes
// `pch_header` first, with flags carrying -DDNNF_PRELUDE_HASH, gets each named unit compiled
// once per compiler and flags into units-<key>/ in the cache (missing ones several at once)
// and linked into it, and is compiled with -DDNNF_LINK_UNITS, under which it declares the
// units' instances extern; a unit that does not build, or a link that fails, compiles the
// source whole instead (a failed link also removes the unit objects, to be built again).
// Both fallbacks are correct but cost the module's compile its units' time again: each is
// noted in prelude_unit_problems() with the compiler's first complaint.
CompiledLibrary compile_shared(const std::string& source, const std::vector<std::string>& flags,
                               double timeout_s = 0, bool load_it = true, const std::string& pch_header = "");

// Prelude units a later compile in this process will likely name (a model's first plan,
// while profiling compiles its candidates, which name fewer): a compile that builds units it
// lacks builds these too, in the same batch on the CPUs it leaves idle, so that the model's
// own compile finds them. Names as on the units line (others are ignored); {} clears them.
void hint_prelude_units(const std::vector<std::string>& units);

// What went wrong with prelude units in this process, oldest first: a unit that the compiler
// rejected, or a module that did not compile with its units and was compiled whole (a unit
// object damaged on disk, or declarations out of step with the units: a dnnfusion bug). One
// line each, with the compiler's first error; compile() turns new ones into a warning.
std::vector<std::string> prelude_unit_problems();

// Seconds this process has spent in compile_shared building the precompiled header and
// prelude units (machine-wide caches every later compile reuses), so that callers timing a
// compile can tell its own cost from that (profiling.py's budget).
double prelude_build_seconds();
void add_prelude_build_seconds(double seconds);  // where the header or units are built

// $DNNF_CACHE_DIR/kernels, else $XDG_CACHE_HOME/dnnfusion/kernels, else
// ~/.cache/dnnfusion/kernels; created mode 0700. CompileError if the directory is not the
// user's own: owned by someone else, writable by group or others, a symlink, or inside a
// parent owned by another user (root excepted) or world-writable without the sticky bit.
std::string cache_dir();

// Where the precompiled header (pch-<key>/) and the prelude units (units-<key>/) live:
// $DNNF_PRELUDE_CACHE_DIR (an absolute path, checked and created as cache_dir() is) where
// set, so that several kernel caches (a test suite's private ones, one per project) share
// one build of them, else cache_dir(). Both are keyed by compiler, flags and prelude text,
// and built into private temporaries rename()d into place, so sharing is safe.
std::string prelude_cache_dir();

// The SHA-256 of `data` as 64 lowercase hex digits (FIPS 180-4; written here so the core
// needs no crypto library). Exposed for tests against hashlib.
std::string sha256_hex(const std::string& data);

// The best SIMD instruction set this CPU and OS support, detected at run time, and the
// compiler flags that target it. $DNNF_ISA may force a lower one (tests of the scalar and
// AVX2 dialects on an AVX-512 machine); naming one the CPU lacks, or an unknown name, is an
// Error.
struct CpuFeatures {
  std::string isa;                 // "avx512" | "avx2" | "neon" | "scalar"
  std::vector<std::string> flags;  // e.g. {"-mavx2", "-mfma"}
  bool avx2 = false, fma = false, avx512f = false, avx512bw = false, avx512dq = false,
       avx512vl = false, neon = false;  // what the hardware has, whatever $DNNF_ISA says
};
CpuFeatures cpu_features();
// Whether this hardware (whatever $DNNF_ISA says) runs code built for `isa`.
bool cpu_supports(const CpuFeatures& f, const IsaInfo& isa);

}  // namespace dnnf
