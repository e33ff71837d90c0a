// The kernel cache's directory and the prelude's (compiler.h: cache_dir, prelude_cache_dir):
// found from the environment, created mode 0700, and refused unless only the user can write
// to them, since dnnfusion loads compiled code from there.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/compiler.h"

#include "ir/errors.h"

namespace dnnf {

namespace {

std::string cache_env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      throw CompileError("cannot create kernel cache directory " + part + ": " + std::strerror(errno));
  }
}

std::string mode_str(mode_t mode) {
  char m[8];
  std::snprintf(m, sizeof m, "%04o", unsigned(mode & 07777));
  return m;
}

void reject_cache(const std::string& dir, const std::string& why, const char* var = "DNNF_CACHE_DIR") {
  throw CompileError("refusing to use kernel cache directory " + dir + ": " + why +
                     ". dnnfusion only loads compiled code from a directory that only you can "
                     "write; fix its owner/permissions or set " + var + " to a private directory");
}

// `dir` (= base + "/kernels" or a directory named by the user) created mode 0700 and checked
// to be the user's own, as cache_dir() documents.
std::string checked_cache_dir(const std::string& base, const std::string& dir, const char* var) {
  make_dirs(dir);
  uid_t me = ::geteuid();
  struct stat st;
  // The parent: another user (root excepted) or anyone, without the sticky bit, could swap
  // the kernels directory for one of their own.
  if (::stat(base.c_str(), &st) != 0) reject_cache(base, std::strerror(errno), var);
  if (st.st_uid != me && st.st_uid != 0)
    reject_cache(base, "it is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(me) + ")", var);
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
    reject_cache(base, "it is world-writable without the sticky bit (mode " + mode_str(st.st_mode) + ")", var);
  if (::lstat(dir.c_str(), &st) != 0) reject_cache(dir, std::strerror(errno), var);
  if (!S_ISDIR(st.st_mode)) reject_cache(dir, "it is not a directory (a symlink?)", var);
  if (st.st_uid != me)
    reject_cache(dir, "it is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(me) + ")", var);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    reject_cache(dir, std::string("it is writable by ") + ((st.st_mode & S_IWOTH) ? "others" : "its group") +
                          " (mode " + mode_str(st.st_mode) + ")", var);
  return dir;
}
}  // namespace

std::string cache_dir() {
  std::string base;
  if (!cache_env("DNNF_CACHE_DIR").empty()) {
    base = cache_env("DNNF_CACHE_DIR");
  } else if (!cache_env("XDG_CACHE_HOME").empty() && cache_env("XDG_CACHE_HOME")[0] == '/') {
    base = cache_env("XDG_CACHE_HOME") + "/dnnfusion";
  } else {
    std::string home = cache_env("HOME");
    if (home.empty())
      if (const passwd* pw = ::getpwuid(::geteuid())) home = pw->pw_dir ? pw->pw_dir : "";
    if (home.empty()) throw CompileError("no kernel cache directory: HOME is not set; set DNNF_CACHE_DIR");
    base = home + "/.cache/dnnfusion";
  }
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return checked_cache_dir(base, base + "/kernels", "DNNF_CACHE_DIR");
}

std::string prelude_cache_dir() {
  std::string dir = cache_env("DNNF_PRELUDE_CACHE_DIR");
  if (dir.empty()) return cache_dir();
  if (dir[0] != '/') throw CompileError("DNNF_PRELUDE_CACHE_DIR must be an absolute path, not '" + dir + "'");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return checked_cache_dir(slash == 0 ? "/" : dir.substr(0, slash), dir, "DNNF_PRELUDE_CACHE_DIR");
}

}  // namespace dnnf
