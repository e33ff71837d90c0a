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

// An executable's absolute path: a name with a slash as given (made absolute), else the
// first match on PATH. Empty if there is none.
std::string which(const std::string& name);

}  // namespace dnnf
