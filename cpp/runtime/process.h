// Child processes for the kernel compiler (compiler.cc): run without a shell, output captured,
// a timeout that kills the whole process group; and finding an executable on PATH.
#pragma once
#include <string>
#include <vector>

namespace dnnf {

struct ProcessResult {
  bool started = false;
  bool timed_out = false;
  int status = -1;     // exit status; 128 + signal if killed by one
  std::string output;  // stdout and stderr together (the first MiB)
  std::string error;   // why it did not start
};

// Runs argv[0] (an absolute path) with argv, no shell, stdin from /dev/null, stdout and
// stderr captured. The child leads its own process group, so a timeout kills the compiler
// driver and the cc1plus/as/ld it started, and nothing else.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s);

// An advisory lock (flock) on `path`, created mode 0600 if missing, held until destruction:
// processes that would build the same cache entry (the precompiled header, a batch of prelude
// units) take turns, and the second finds the first's result instead of building it again
// beside it. Waits at most `timeout_s` (the holder's own compile is bounded by the same
// timeout); where the file cannot be opened or the wait runs out it holds nothing, which
// costs a duplicate build, never a failure. The lock dies with its process.
class FileLock {
 public:
  FileLock(const std::string& path, double timeout_s);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return locked_; }

 private:
  int fd_ = -1;
  bool locked_ = false;
};

// An executable's absolute path: a name with a slash as given (made absolute), else the
// first match on PATH. Empty if there is none.
std::string which(const std::string& name);

}  // namespace dnnf
