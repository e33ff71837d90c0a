"""The generated kernels' thread pool (cpp/codegen/prelude/parallel.h).

parallel_for(n, fn) must call fn once for every task, whatever the task count and thread
count; thread i starts on its own contiguous share (checked with tasks long enough that both
threads surely run) and then takes what is left of the
others' shares, so a thread that is slow (here: one that sleeps in its first task) has its
share finished by the others; a parallel_for issued from inside a task, or from a second
thread while the pool is busy, runs inline. The pool has no SIMD: one host build.

Under oversubscription (busy threads beside the pool) a job ends when its tasks are done, not
when every worker has looked in; thousands of back-to-back jobs check that no task is lost or
run twice and that a worker waking late never touches a finished job, built once plainly and
once with ThreadSanitizer (which reports any race on the jobs' state).
"""
from __future__ import annotations

import shutil
import subprocess

from native_toolchain import CXX, PRELUDE

DRIVER = r"""
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include "parallel.h"
using namespace dnnf;

static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { ++fails; std::printf("FAIL: " __VA_ARGS__); std::printf("\n"); } } while (0)

int main() {
  for (int T : {1, 2, 3, 4}) {
    set_num_threads(T);
    for (int n : {0, 1, 2, 3, 5, 7, 8, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      parallel_for(n, [&](int t) { hits[t].fetch_add(1); });
      for (int t = 0; t < n; ++t) CHECK(hits[t].load() == 1, "T=%d n=%d task %d ran %d times", T, n, t, hits[t].load());
    }
    // Nested: inner loops run inline, every (outer, inner) pair once.
    std::vector<std::atomic<int>> pairs(12 * 9);
    parallel_for(12, [&](int o) { parallel_for(9, [&](int i) { pairs[o * 9 + i].fetch_add(1); }); });
    for (int k = 0; k < 12 * 9; ++k) CHECK(pairs[k].load() == 1, "T=%d nested pair %d ran %d times", T, k, pairs[k].load());
    // Two callers at once: the second runs inline, both complete.
    std::vector<std::atomic<int>> a(500), b(500);
    std::thread other([&] { parallel_for(500, [&](int t) { b[t].fetch_add(1); }); });
    parallel_for(500, [&](int t) { a[t].fetch_add(1); });
    other.join();
    for (int t = 0; t < 500; ++t) CHECK(a[t].load() == 1 && b[t].load() == 1, "T=%d concurrent task %d", T, t);
  }
  // A slow thread's share is taken by the others: the caller (thread 0) sleeps in its first
  // task, so the worker finishes its own share and then the caller's remaining tasks.
  set_num_threads(2);
  std::atomic<int> seq{0};
  std::vector<int> order(16, -1);
  parallel_for(1, [](int) {});  // wake the worker once
  std::atomic<bool> first{true};
  parallel_for(16, [&](int t) {
    if (t == 0 && first.exchange(false)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    order[t] = seq.fetch_add(1);
  });
  for (int t = 0; t < 16; ++t) CHECK(order[t] >= 0, "slow share: task %d never ran", t);
  // Task 0 ran last (after its 200 ms sleep); every other task, including the caller's share
  // 1..7, was done by the worker meanwhile.
  CHECK(order[0] == 15, "slow share: task 0 finished at position %d, not last", order[0]);
  // Shares: with tasks long enough that both threads are surely running (50 ms each), the
  // caller runs tasks 0..3 and the worker 4..7 (a dynamic queue would interleave them).
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<int> by_caller(8, -1);
  parallel_for(8, [&](int t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    by_caller[t] = std::this_thread::get_id() == caller;
  });
  for (int t = 0; t < 8; ++t) CHECK(by_caller[t] == (t < 4), "shares: task %d ran on the %s", t, by_caller[t] ? "caller" : "worker");
  std::printf("%s\n", fails ? "FAILED" : "OK");
  return fails ? 1 : 0;
}
"""


def test_every_task_once_shares_and_stealing(tmp_path):
    src = tmp_path / "pool.cc"
    src.write_text(DRIVER)
    exe = tmp_path / "pool"
    subprocess.run([CXX, "-std=c++17", "-O2", "-pthread", "-Wall", "-Werror", f"-I{PRELUDE}", str(src),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr


STRESS = r"""
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>
// Built with -DDNNF_POOL_TEST_LATE_WORKER(i)=late_worker(i): now and then a worker pauses
// between seeing a job and counting itself in, as one the OS has not scheduled would, so that
// it wakes into a job the caller has finished or into a newer one.
static void late_worker(int) {
  thread_local unsigned s = 12345;
  s = s * 1103515245u + 12345u;
  if ((s >> 16) % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds((s >> 8) % 50));
}
#include "parallel.h"
using namespace dnnf;

// Many jobs back to back, of every size, while busy threads oversubscribe the cores so that
// workers are descheduled mid-job, wake late into a newer job, or miss jobs entirely: every
// task of every job must run exactly once, each job's tasks before parallel_for returns, and
// nothing may touch a finished job's state (the counters of a job are checked after it, while
// later jobs run; a stale worker running an old task would bump a checked counter).
int main() {
  int fails = 0;
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (int i = 0; i < 4; ++i)
    hogs.emplace_back([&] { volatile unsigned long x = 0; while (!stop.load(std::memory_order_relaxed)) x = x + 1; });
  std::mt19937 rng(7);
  for (int T : {2, 3}) {
    set_num_threads(T);
    std::vector<std::vector<int>> done(64);
    for (int job = 0; job < 20000; ++job) {
      const int n = 1 + static_cast<int>(rng() % 40);
      std::vector<int>& hits = done[job % 64];
      hits.assign(n, 0);
      std::atomic<int> ran{0};
      const bool slow = rng() % 500 == 0;
      parallel_for(n, [&](int t) {
        if (slow && t == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++hits[t];  // one writer per task: a second run would be a data race TSan reports
        ran.fetch_add(1, std::memory_order_relaxed);
      });
      if (ran.load() != n) { ++fails; std::printf("FAIL: T=%d job %d ran %d of %d tasks\n", T, job, ran.load(), n); }
      for (int t = 0; t < n; ++t)
        if (hits[t] != 1) { ++fails; std::printf("FAIL: T=%d job %d task %d ran %d times\n", T, job, t, hits[t]); break; }
      if (fails > 5) break;
    }
  }
  stop = true;
  for (auto& h : hogs) h.join();
  std::printf("%s\n", fails ? "FAILED" : "OK");
  return fails ? 1 : 0;
}
"""


def _build_and_run(tmp_path, name, flags, env=None):
    src = tmp_path / f"{name}.cc"
    src.write_text(STRESS)
    exe = tmp_path / name
    subprocess.run([CXX, "-std=c++17", "-pthread", "-Wall", "-Werror", *flags, "-DDNNF_POOL_TEST_LATE_WORKER(i)=late_worker(i)",
                    f"-I{PRELUDE}", str(src), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    # ThreadSanitizer's runtime wants a fixed address layout on kernels with high mmap
    # randomization; setarch -R gives it one (util-linux, on every Debian).
    cmd = [shutil.which("setarch") or "setarch", "-R", str(exe)] if "-fsanitize=thread" in flags else [str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK") and "ThreadSanitizer" not in r.stderr, \
        r.stdout[-3000:] + r.stderr[-3000:]


def test_oversubscribed_jobs_run_every_task_once(tmp_path):
    _build_and_run(tmp_path, "stress", ["-O2"])


def test_oversubscribed_jobs_have_no_data_race_under_tsan(tmp_path):
    import os

    _build_and_run(tmp_path, "stress_tsan", ["-O1", "-g", "-fsanitize=thread"],
                   env={**os.environ, "TSAN_OPTIONS": "halt_on_error=1"})
