// Test driver for tests/test_codegen_neon.py: linked into one binary with a generated module
// (GENERATED-ABI of cpp/codegen/codegen.h), cross-compiled for AArch64 with -DDNNF_ISA_NEON
// and run under qemu-aarch64 as `driver <in> <out>`.
//
// <in> (little-endian int64 words, each buffer padded to 8 bytes):
//   abi_version arena_bytes num_threads
//   n_constants { nbytes, bytes }...   (GeneratedModule::constants order)
//   n_inputs    { nbytes, bytes }...   (graph input order)
//   n_outputs   { nbytes }...          (graph output order)
// <out>: the outputs' bytes, one after another.
// stdout: "isa=<dialect> lanes=<W> threads=<pool size>" after a successful run.
// Exit codes: 0 ok; 2 bad usage or input file; 3 dnnf_run failed; 4 dnnf_create failed;
// 5 ABI version mismatch. Failures print the module's message on stderr.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "parallel.h"
#include "simd.h"

#if !defined(__aarch64__) || !defined(DNNF_ISA_NEON)
#error "this driver tests the NEON dialect: build it for AArch64 with -DDNNF_ISA_NEON"
#endif

extern "C" int dnnf_abi_version(void);
extern "C" void* dnnf_create(const void* const* constants, int num_threads, char* err, int errlen);
extern "C" void dnnf_destroy(void* state);
extern "C" int dnnf_run(void* state, const void* const* inputs, void* const* outputs, void* arena,
                        int num_threads, char* err, int errlen);

namespace {

constexpr int kErrLen = 4096;

[[noreturn]] void fail(int code, const char* what, const char* msg) {
  std::fprintf(stderr, "%s: %s\n", what, msg);
  std::exit(code);
}

struct Buf {
  void* p = nullptr;
  int64_t n = 0;
};

// 64-byte aligned, at least 64 bytes (the ABI's arena promise; also used for every tensor).
void* aligned(int64_t n, unsigned char fill) {
  size_t size = static_cast<size_t>(n < 64 ? 64 : (n + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, size);
  if (!p) fail(2, "driver", "out of memory");
  std::memset(p, fill, size);
  return p;
}

int64_t word(std::FILE* f) {
  int64_t v;
  if (std::fread(&v, 8, 1, f) != 1) fail(2, "driver", "truncated input file");
  return v;
}

std::vector<Buf> buffers(std::FILE* f, bool with_data) {
  std::vector<Buf> out(static_cast<size_t>(word(f)));
  for (Buf& b : out) {
    b.n = word(f);
    // Outputs start as 0xFF bytes (NaN / -1): an element the module never writes shows.
    b.p = aligned(b.n, with_data ? 0 : 0xFF);
    if (with_data) {
      int64_t padded = (b.n + 7) / 8 * 8;
      if (b.n && std::fread(b.p, 1, static_cast<size_t>(b.n), f) != static_cast<size_t>(b.n))
        fail(2, "driver", "truncated tensor data");
      for (int64_t k = b.n; k < padded; ++k) std::fgetc(f);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) fail(2, "usage", "driver <in> <out>");
  std::FILE* in = std::fopen(argv[1], "rb");
  if (!in) fail(2, "driver", "cannot open the input file");
  const int64_t abi = word(in), arena_bytes = word(in), threads = word(in);
  std::vector<Buf> consts = buffers(in, true), inputs = buffers(in, true), outputs = buffers(in, false);
  std::fclose(in);

  if (dnnf_abi_version() != abi) fail(5, "dnnf_abi_version", "the module speaks another ABI version");
  std::vector<const void*> cptr, iptr;
  std::vector<void*> optr;
  for (const Buf& b : consts) cptr.push_back(b.p);
  for (const Buf& b : inputs) iptr.push_back(b.p);
  for (const Buf& b : outputs) optr.push_back(b.p);
  void* arena = aligned(arena_bytes, 0xA5);  // garbage: the module must not rely on zeroed memory

  char err[kErrLen] = {0};
  void* state = dnnf_create(cptr.empty() ? nullptr : cptr.data(), static_cast<int>(threads), err, kErrLen);
  if (!state) fail(4, "dnnf_create failed", err[0] ? err : "no message");
  int rc = dnnf_run(state, iptr.data(), optr.data(), arena, static_cast<int>(threads), err, kErrLen);
  if (rc != 0) {
    dnnf_destroy(state);
    fail(3, "dnnf_run failed", err[0] ? err : "no message");
  }
  dnnf_destroy(state);

  std::FILE* out = std::fopen(argv[2], "wb");
  if (!out) fail(2, "driver", "cannot open the output file");
  for (const Buf& b : outputs)
    if (b.n && std::fwrite(b.p, 1, static_cast<size_t>(b.n), out) != static_cast<size_t>(b.n))
      fail(2, "driver", "cannot write the outputs");
  std::fclose(out);
  std::printf("isa=%s lanes=%d threads=%d\n", dnnf::simd::kIsaName, dnnf::simd::kVecWidth,
              dnnf::get_num_threads());
  return 0;
}
