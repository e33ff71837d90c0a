// A minimal fork-join thread pool for generated kernels: parallel_for(n_tasks, fn) over
// persistent std::thread workers (no OpenMP), with a settable thread count.
//
// Semantics: fn(task) is called once for every task in [0, n_tasks), by the calling thread
// and the pool's workers, and parallel_for returns when all have finished. Thread i first
// runs the i-th contiguous share of the tasks, in order, then takes tasks left in the other
// shares (each share hands out its next index atomically). So consecutive kernels that split
// their output the same way (rows of pixels, row blocks of a GEMM) run each part on the same
// core and read what that core's cache holds, while a thread that starts late (woken from
// sleep, preempted on a shared VM) still gets its share done by the others. A parallel_for issued from inside a task, or while another thread
// is using the pool, runs its tasks inline on the calling thread, so nesting never deadlocks.
// Workers wait actively for a while after a job (the next kernel usually follows within
// microseconds), yielding the core, then sleep on a condition variable so an idle pool costs
// no CPU.
//
// A job ends when its tasks are done, not when every worker has looked in: the caller takes
// whatever shares are left, closes the job and waits only for the workers inside it. A worker
// enters a job by counting itself in (inside_) and then checking that the job is still open;
// the caller closes it (closed_) and then waits for inside_ to drain, so (both sequentially
// consistent) a worker either is seen inside or sees the job closed and touches none of its
// state. On a loaded machine a worker the OS has not scheduled no longer holds up every kernel
// for its time slice: MobileNetV1-SSD with a compiler build beside it took 194 ms a call
// against 38 ms unloaded (2 threads, Zen 4), each of its 46 kernels waiting for the descheduled
// worker to check in.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DNNF_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define DNNF_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define DNNF_CPU_RELAX() ((void)0)
#endif

namespace dnnf {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads)
      : n_threads_(n_threads < 1 ? 1 : n_threads), shares_(new Share[n_threads_]) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_work_.notify_all();
    for (auto& t : workers_) t.join();
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // The task function type-erased at once, so that what follows is compiled once per module
  // and not once per caller's lambda: a generated module calls parallel_for from hundreds of
  // loops (MobileBERT: 338), and the copies of this body were a sizeable part of its compile.
  template <class F>
  void run(int n_tasks, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_erased(n_tasks, const_cast<void*>(static_cast<const void*>(&fn)),
               [](void* ctx, int t) { (*static_cast<Fn*>(ctx))(t); });
  }
  void run_erased(int n_tasks, void* ctx, void (*invoke)(void*, int)) {
    if (n_tasks <= 0) return;
    std::unique_lock<std::mutex> busy(run_mu_, std::try_to_lock);
    if (n_tasks == 1 || n_threads_ == 1 || in_task_() || !busy.owns_lock()) {
      for (int t = 0; t < n_tasks; ++t) invoke(ctx, t);
      return;
    }
    uint64_t job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ctx_ = ctx;
      invoke_ = invoke;
      for (int i = 0; i < n_threads_; ++i) {
        shares_[i].next.store(static_cast<int>(static_cast<long>(n_tasks) * i / n_threads_),
                              std::memory_order_relaxed);
        shares_[i].end = static_cast<int>(static_cast<long>(n_tasks) * (i + 1) / n_threads_);
      }
      job = generation_.fetch_add(1, std::memory_order_release) + 1;
    }
    cv_work_.notify_all();
    work(0);  // returns when every task has been taken (its share, then the others')
    closed_.store(job, std::memory_order_seq_cst);
    // Wait for the workers still running a task: spin first (on balanced work they finish
    // together with us), then sleep.
    for (int spin = 0; inside_.load(std::memory_order_seq_cst) != 0; ++spin) {
      if (spin < kSpin) {
        relax(spin);
      } else {
        std::unique_lock<std::mutex> lock(mu_);
        cv_done_.wait(lock, [this] { return inside_.load(std::memory_order_seq_cst) == 0; });
      }
    }
  }

 private:
  // Waiting: a few pause instructions, then sched_yield. Yielding matters on a loaded or
  // oversubscribed machine: the thread we wait for may be queued on this very core, and a
  // pure spin would hold it off for a whole time slice (a 10x slowdown on small GEMMs).
  static constexpr int kSpin = 4000;
  static void relax(int spin) {
    if (spin < 64) {
      DNNF_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }

  static bool& in_task_() {
    thread_local bool flag = false;
    return flag;
  }

  void work(int self) {
    bool& flag = in_task_();
    bool saved = flag;
    flag = true;
    for (int k = 0; k < n_threads_; ++k) {  // its own share first, then the others'
      Share& sh = shares_[(self + k) % n_threads_];
      for (int t; (t = sh.next.fetch_add(1, std::memory_order_relaxed)) < sh.end;) invoke_(ctx_, t);
    }
    flag = saved;
  }

  void worker_loop(int self) {
    in_task_() = true;
    uint64_t seen = 0;
    for (;;) {
      // Spin a little for the next job, then sleep.
      uint64_t g = generation_.load(std::memory_order_acquire);
      for (int spin = 0; g == seen && spin < kSpin; ++spin) {
        relax(spin);
        g = generation_.load(std::memory_order_acquire);
      }
      if (g == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_work_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        g = generation_.load(std::memory_order_acquire);
      }
      seen = g;
      if (stop_.load(std::memory_order_relaxed)) return;
#ifdef DNNF_POOL_TEST_LATE_WORKER  // tests/test_thread_pool.py: a worker the OS runs late
      DNNF_POOL_TEST_LATE_WORKER(self);
#endif
      inside_.fetch_add(1, std::memory_order_seq_cst);
      // Still open (and still the current job: a worker woken late may see a newer one next
      // round): then the job's state is ours to read until we count ourselves out.
      if (closed_.load(std::memory_order_seq_cst) < g && generation_.load(std::memory_order_seq_cst) == g)
        work(self);
      if (inside_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
        std::lock_guard<std::mutex> lock(mu_);
        cv_done_.notify_one();
      }
    }
  }

  const int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mu_;  // one job at a time; a second caller runs inline
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  struct alignas(64) Share {  // a thread's contiguous part of the tasks, on its own cache line
    std::atomic<int> next{0};
    int end = 0;
  };
  std::unique_ptr<Share[]> shares_;
  void* ctx_ = nullptr;
  void (*invoke_)(void*, int) = nullptr;
  std::atomic<uint64_t> closed_{0};  // the last job whose caller took all its tasks
  std::atomic<int> inside_{0};       // workers inside a job (counted in before checking it is open)
};

// The process-wide pool: DNNF_NUM_THREADS, else the hardware concurrency.
inline int default_num_threads() {
  if (const char* s = std::getenv("DNNF_NUM_THREADS")) {
    int n = std::atoi(s);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

namespace detail {
struct PoolSlot {
  std::mutex mu;
  std::shared_ptr<ThreadPool> pool;
};
inline PoolSlot& pool_slot() {
  static PoolSlot slot;
  return slot;
}
inline std::shared_ptr<ThreadPool> current_pool() {
  PoolSlot& s = pool_slot();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.pool) s.pool = std::make_shared<ThreadPool>(default_num_threads());
  return s.pool;
}
}  // namespace detail

// Replaces the pool (joins the old workers once running jobs release it).
inline void set_num_threads(int n) {
  auto& s = detail::pool_slot();
  std::shared_ptr<ThreadPool> old;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    old = std::move(s.pool);
    s.pool = std::make_shared<ThreadPool>(n < 1 ? 1 : n);
  }
}
inline int get_num_threads() { return detail::current_pool()->size(); }

template <class F>
void parallel_for(int n_tasks, F&& fn) {
  detail::current_pool()->run(n_tasks, std::forward<F>(fn));
}

}  // namespace dnnf
