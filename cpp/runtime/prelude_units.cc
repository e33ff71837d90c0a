// Prelude units (codegen/prelude/prelude_units.h): reading a module's units line, building
// the unit objects into the kernel cache, and the hints compile() gives (runtime/compiler.h).
#include "runtime/prelude_units.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "codegen/codegen.h"
#include "runtime/process.h"

namespace dnnf {

namespace {

// group.epilogue: [a-z]+ '.' [0-2], nothing else (names reach file names and a source).
bool valid_unit(const std::string& u) {
  const size_t dot = u.find('.');
  bool ok = dot != std::string::npos && dot > 0 && dot + 2 == u.size() && u[dot + 1] >= '0' && u[dot + 1] <= '2';
  for (size_t i = 0; ok && i < dot; ++i) ok = u[i] >= 'a' && u[i] <= 'z';
  return ok;
}

std::mutex g_hint_mu;
std::vector<std::string> g_hints;  // hint_prelude_units

std::mutex g_problem_mu;
std::vector<std::string> g_problems;  // prelude_unit_problems

}  // namespace

std::string first_compiler_complaint(const std::string& output) {
  std::string first, line;
  std::istringstream in(output);
  while (std::getline(in, line)) {
    // The driver's summary ("collect2: error: ld returned 1") and include traces say nothing.
    if (line.empty() || line.rfind("collect2:", 0) == 0 || line.rfind("In file included", 0) == 0 ||
        line.rfind("                 from", 0) == 0)
      continue;
    if (first.empty()) first = line;
    if (line.find("error") != std::string::npos) {
      first = line;
      break;
    }
  }
  if (first.empty()) return "no output";
  return first.size() > 300 ? first.substr(0, 300) + "..." : first;
}

void note_prelude_unit_problem(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_problem_mu);
  g_problems.push_back(what);
}

std::vector<std::string> prelude_unit_problems() {
  std::lock_guard<std::mutex> lock(g_problem_mu);
  return g_problems;
}

// The units a module source names on its second line ("gemm.1 reduce.0"); none where the line
// is absent or malformed (then the module compiles whole, as any other source).
std::vector<std::string> prelude_units_named(const std::string& source) {
  const size_t first = source.find('\n');
  if (first == std::string::npos) return {};
  const size_t end = source.find('\n', first + 1);
  const std::string line = source.substr(first + 1, end == std::string::npos ? std::string::npos : end - first - 1);
  const std::string tag = kPreludeUnitsLine;
  if (line.compare(0, tag.size(), tag) != 0) return {};
  std::vector<std::string> units;
  std::istringstream words(line.substr(tag.size()));
  for (std::string w; words >> w;) units.push_back(w);
  for (const std::string& u : units)
    if (!valid_unit(u)) return {};
  return units;
}

// The object files of `units` for this compiler and these flags, each built on first use
// (several at once, up to the CPUs this process may use) into units-<key>/ in the cache and
// rename()d into place; empty when any cannot be built (remembered for the process), and then
// the module compiles whole. Only for flags that carry the prelude's content hash, which the
// key then covers, and a module that includes `header` first. Unit sources are three lines
// written here from names prelude_units_named() checked.
bool prelude_units_apply(const std::vector<std::string>& flags, const std::string& header) {
  if (header.empty() || (std::getenv("DNNF_PRELUDE_UNITS") && std::string(std::getenv("DNNF_PRELUDE_UNITS")) == "0"))
    return false;
  bool hashed = false;
  for (const auto& f : flags) hashed = hashed || f.rfind("-DDNNF_PRELUDE_HASH=", 0) == 0;
  return hashed;
}

// A GEMM unit of one kind (gemm, gemmb, gemmpro: prelude_units.h) is served by gemmall of its
// epilogue, which holds all three, where that one is named too, hinted or built (in udir):
// profiling's candidates name single kinds where the model's module names gemmall, and
// building both compiled the GEMM micro-kernels twice (MobileBERT's first compile: 16.2 s of
// prelude units instead of 10.4). gemmall's object defines every symbol the other declares.
static std::vector<std::string> served_units(const std::vector<std::string>& named, const std::string& udir) {
  std::vector<std::string> hints;
  {
    std::lock_guard<std::mutex> lock(g_hint_mu);
    hints = g_hints;
  }
  std::vector<std::string> out;
  struct stat st;
  for (const std::string& u : named) {
    std::string use = u;
    const size_t dot = u.find('.');
    const std::string group = u.substr(0, dot);
    if (group == "gemm" || group == "gemmb" || group == "gemmpro") {
      const std::string all = "gemmall" + u.substr(dot);
      if (std::find(named.begin(), named.end(), all) != named.end() ||
          std::find(hints.begin(), hints.end(), all) != hints.end() ||
          ::lstat((udir + "/" + all + ".o").c_str(), &st) == 0)
        use = all;
    }
    if (std::find(out.begin(), out.end(), use) == out.end()) out.push_back(use);
  }
  return out;
}

std::vector<std::string> prelude_unit_objects(const Compiler& cc, const std::vector<std::string>& flags,
                                      const std::vector<std::string>& named, const std::string& header,
                                      const std::string& pch_dir, const std::string& dir, double timeout_s,
                                      bool build) {
  if (named.empty() || !prelude_units_apply(flags, header)) return {};
  std::vector<std::string> compile_flags;  // what a compile without linking takes
  for (const auto& f : flags)
    if (f.rfind("-l", 0) != 0 && f.rfind("-L", 0) != 0 && f.rfind("-Wl,", 0) != 0) compile_flags.push_back(f);
  std::string framed;
  auto field = [&](const std::string& s) { framed += std::to_string(s.size()) + ':' + s; };
  field("dnnf-units-1");
  field(header);
  for (const auto& a : cc.argv) field(a);
  field(cc.version);
  for (const auto& f : compile_flags) field(f);
  const std::string key = sha256_hex(framed).substr(0, 32);
  const std::string udir = dir + "/units-" + key;
  const std::vector<std::string> units = served_units(named, udir);
  static std::mutex mu;
  static std::set<std::string> failed;
  std::vector<std::string> objects, missing;
  struct stat st;
  for (const std::string& u : units) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (failed.count(key + "/" + u)) return {};
    }
    objects.push_back(udir + "/" + u + ".o");
    if (!(::lstat(objects.back().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
          st.st_size > 0))
      missing.push_back(u);
  }
  if (missing.empty()) return objects;
  if (!build) return {};
  // One batch at a time in this process (profiling builds its candidates on two threads):
  // a compile that waited finds what the other built, instead of building it again beside it.
  static std::mutex building;
  std::lock_guard<std::mutex> one_batch(building);
  // And one at a time across processes (a lock file per key): the second finds what the first
  // built. The wait counts as building time.
  const auto t_batch = std::chrono::steady_clock::now();
  FileLock across(dir + "/lock.units-" + key, timeout_s);
  missing.erase(std::remove_if(missing.begin(), missing.end(),
                               [&](const std::string& u) {
                                 const std::string o = udir + "/" + u + ".o";
                                 return ::lstat(o.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                                        st.st_uid == ::geteuid() && st.st_size > 0;
                               }),
                missing.end());
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& u : units)
      if (failed.count(key + "/" + u)) return {};
  }
  if (missing.empty()) {  // built while this one waited, by this process or another
    add_prelude_build_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_batch).count());
    return objects;
  }
  // Hinted units (hint_prelude_units) this cache lacks are built in the same batch, after the
  // missing ones, on CPUs the batch leaves idle; only the missing ones decide the result.
  const size_t needed = missing.size();
  {
    std::lock_guard<std::mutex> hint_lock(g_hint_mu);
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& h : g_hints) {
      const std::string o = udir + "/" + h + ".o";
      if (std::find(units.begin(), units.end(), h) != units.end() || failed.count(key + "/" + h) ||
          std::find(missing.begin(), missing.end(), h) != missing.end() || ::lstat(o.c_str(), &st) == 0)
        continue;
      missing.push_back(h);
    }
  }
  if (::mkdir(udir.c_str(), 0700) != 0 && errno != EEXIST) return {};
  if (::lstat(udir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) return {};
  const std::string include = header.substr(header.rfind('/') + 1);
  std::vector<char> ok(missing.size(), 0);
  std::mutex next_mu;
  size_t next = 0;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(next_mu);
        if (next >= missing.size()) return;
        i = next++;
      }
      const std::string& u = missing[i];
      const size_t dot = u.find('.');
      const std::string tmp = dir + "/tmp.unit." + key.substr(0, 16) + "." + u + "." + std::to_string(::getpid()) +
                              "." + random_tag();
      const std::string text = "#include \"" + include + "\"\n#include \"" + kPreludeUnitSources +
                               "\"\nDNNF_UNIT_DEFINE(" + u.substr(0, dot) + ", " + u.substr(dot + 1) + ")\n";
      int fd = ::open((tmp + ".cc").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0) continue;
      const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      ::close(fd);
      std::vector<std::string> argv = cc.argv;
      for (const char* a : {"-c", "-fPIC", "-o"}) argv.push_back(a);
      argv.push_back(tmp + ".o");
      argv.push_back(tmp + ".cc");
      if (!pch_dir.empty()) argv.push_back("-I" + pch_dir);
      argv.insert(argv.end(), compile_flags.begin(), compile_flags.end());
      ProcessResult r;
      if (written) r = run_process(argv, timeout_s);
      ::unlink((tmp + ".cc").c_str());
      if (written && r.started && !r.timed_out && r.status == 0 &&
          ::rename((tmp + ".o").c_str(), (udir + "/" + u + ".o").c_str()) == 0) {
        ok[i] = 1;
      } else {
        ::unlink((tmp + ".o").c_str());
        // The compiler rejecting a unit is a fault in the prelude (or the compiler), worth
        // saying; a file that could not be written or moved is the disk's.
        if (written && r.started && !r.timed_out && r.status != 0)
          note_prelude_unit_problem("prelude unit " + u + " did not compile, so modules naming it compile whole: " +
                                    first_compiler_complaint(r.output));
      }
    }
  };
  unsigned cpus = std::thread::hardware_concurrency();
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) cpus = static_cast<unsigned>(CPU_COUNT(&set));
  const size_t n = std::max<size_t>(1, std::min<size_t>(missing.size(), cpus));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  add_prelude_build_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_batch).count());
  bool all = true;
  for (size_t i = 0; i < missing.size(); ++i)
    if (!ok[i]) {
      if (i < needed) all = false;
      std::lock_guard<std::mutex> lock(mu);
      failed.insert(key + "/" + missing[i]);
    }
  return all ? objects : std::vector<std::string>{};
}


void hint_prelude_units(const std::vector<std::string>& units) {
  std::lock_guard<std::mutex> lock(g_hint_mu);
  g_hints.clear();
  for (const std::string& u : units)
    if (valid_unit(u)) g_hints.push_back(u);
}

}  // namespace dnnf
