#include "runtime/compile_parts.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "codegen/codegen.h"
#include "runtime/process.h"

namespace dnnf {

constexpr long kKernelsPerPart = 48;

int compile_parts_for(const std::string& source) {
  if (source.find(kPartsGuard) == std::string::npos) return 1;
  if (const char* e = std::getenv("DNNF_COMPILE_PARTS"); e && *e) {
    char* end = nullptr;
    const long n = std::strtol(e, &end, 10);
    if (end && *end == '\0' && n >= 1) return static_cast<int>(std::min(n, 64L));
  }
  long cpus = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  long kernels = 0;
  for (size_t at = source.find("\n#if DNNF_PART == "); at != std::string::npos;
       at = source.find("\n#if DNNF_PART == ", at + 1))
    ++kernels;
  // A part costs a compiler start, the precompiled header and the template instances its
  // kernels share with other parts: U-Net's 32 kernels compiled in 3.0 s whole and 2.6 s in two
  // parts, ViT's 113 in 3.8 and 2.7, MobileBERT's 392 in 12.7 and 8.0 (2 CPUs).
  return static_cast<int>(std::max(1L, std::min({cpus, 8L, kernels / kKernelsPerPart})));
}

bool compile_in_parts(const std::vector<std::string>& cc, const std::string& src, const std::string& so,
                      const std::vector<std::string>& defines,
                      const std::function<std::vector<std::string>()>& link, bool need_link,
                      const std::vector<std::string>& flags, int parts, double timeout_s) {
  std::vector<std::string> objs;
  for (int i = 0; i < parts; ++i) objs.push_back(so + ".part" + std::to_string(i) + ".o");
  std::vector<char> ok(static_cast<size_t>(parts), 0);
  auto build = [&](int i) {
    std::vector<std::string> argv = cc;
    for (const char* a : {"-c", "-fPIC", "-o"}) argv.push_back(a);
    argv.push_back(objs[static_cast<size_t>(i)]);
    argv.push_back(src);
    argv.insert(argv.end(), defines.begin(), defines.end());
    if (parts > 1) {
      argv.push_back("-DDNNF_PARTS=" + std::to_string(parts));
      argv.push_back("-DDNNF_PART=" + std::to_string(i));
    }
    argv.insert(argv.end(), flags.begin(), flags.end());
    const ProcessResult r = run_process(argv, timeout_s);
    ok[static_cast<size_t>(i)] = r.started && !r.timed_out && r.status == 0;
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < parts; ++i) threads.emplace_back(build, i);
  build(0);
  for (auto& t : threads) t.join();
  bool all = std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
  const std::vector<std::string> units = link();
  if (need_link && units.empty()) all = false;
  if (all) {
    std::vector<std::string> argv = cc;
    for (const char* a : {"-shared", "-fPIC", "-o"}) argv.push_back(a);
    argv.push_back(so);
    argv.insert(argv.end(), objs.begin(), objs.end());
    argv.insert(argv.end(), units.begin(), units.end());
    argv.insert(argv.end(), flags.begin(), flags.end());
    const ProcessResult r = run_process(argv, timeout_s);
    all = r.started && !r.timed_out && r.status == 0;
  }
  for (const std::string& o : objs) ::unlink(o.c_str());
  if (!all) ::unlink(so.c_str());
  return all;
}

}  // namespace dnnf
