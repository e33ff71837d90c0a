// Child processes without a shell (see process.h).
#include "runtime/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

extern char** environ;

namespace dnnf {

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s) {
  ProcessResult r;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) { r.error = std::strerror(errno); return r; }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);  // Python ignores SIGPIPE; the compiler should not inherit that
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) { ::close(fds[0]); r.error = std::strerror(rc); return r; }
  r.started = true;

  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  auto ms_left = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? int(std::min<long long>(left, 1 << 30)) : 0;
  };
  char buf[8192];
  bool eof = false;
  while (!eof) {
    pollfd p{fds[0], POLLIN, 0};
    int n = ::poll(&p, 1, ms_left());
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) { r.timed_out = true; break; }
    ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) { eof = true; break; }
    if (r.output.size() < (1u << 20)) r.output.append(buf, size_t(got));  // drain, keep 1 MB
  }
  ::close(fds[0]);
  int ws = 0;
  bool reaped = false;
  while (!r.timed_out) {  // output closed: the child is exiting (or a grandchild holds the pipe)
    pid_t w = ::waitpid(pid, &ws, WNOHANG);
    if (w == pid) { reaped = true; break; }
    if (w < 0 && errno != EINTR) break;  // reaped elsewhere: the status is unknown
    if (ms_left() == 0) r.timed_out = true;
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (r.timed_out) {
    ::kill(-pid, SIGKILL);
    while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
  }
  if (reaped) r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
  return r;
}

std::string which(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (!executable(name)) return "";
    if (name[0] == '/') return name;
    char cwd[4096];
    return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + name : name;
  }
  const char* env_path = std::getenv("PATH");
  std::string path = env_path ? env_path : "";
  if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
  std::istringstream in(path);
  for (std::string dir; std::getline(in, dir, ':');)
    if (!dir.empty() && dir[0] == '/' && executable(dir + "/" + name)) return dir + "/" + name;
  return "";
}

FileLock::FileLock(const std::string& path, double timeout_s) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
      locked_ = true;
      return;
    }
    if ((errno != EWOULDBLOCK && errno != EINTR) || std::chrono::steady_clock::now() >= until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace dnnf
