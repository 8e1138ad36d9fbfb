// A small pool of helper threads for parallel_chunks (see parallel.h).
#include "utils/parallel.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GNNSCALE_PAUSE() _mm_pause()
#else
#define GNNSCALE_PAUSE() ((void)0)
#endif

namespace gnnscale {
namespace {

constexpr int64_t kMaxHelpers = 255;
// How long an idle helper (or a caller waiting for a helper's chunk) spins before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(50);

// One parallel_chunks call. Shared with the helpers, which may still hold it after it returned.
struct Job {
  const std::function<void(int64_t)>* fn = nullptr;  // valid while done < n
  int64_t n = 0;
  int64_t max_helpers = 0;
  std::atomic<int64_t> next{0};      // next chunk to claim
  std::atomic<int32_t> pending{0};   // chunks claimed and not finished, + 1 until all claimed
  std::atomic<int64_t> joined{0};    // helpers that took part
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;

  // Claims and runs chunks until none are left. A claim is announced in `pending` before it
  // is made (both sequentially consistent), so once the caller has seen every chunk claimed
  // and dropped its own count, pending == 0 means every chunk has finished.
  void work() {
    while (true) {
      pending.fetch_add(1);
      const int64_t c = next.fetch_add(1);
      if (c < n && !failed.load(std::memory_order_relaxed)) {
        try {
          (*fn)(c);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
          failed.store(true, std::memory_order_relaxed);
        }
      }
      if (pending.fetch_sub(1) == 1) pending.notify_all();
      if (c >= n) return;
    }
  }
};

class Pool {
 public:
  // Makes sure at least `helpers` helper threads exist (never more than kMaxHelpers).
  void grow(int64_t helpers) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (static_cast<int64_t>(count_) < std::min(helpers, kMaxHelpers)) {
      std::thread(&Pool::helper_loop, this).detach();
      ++count_;
    }
  }

  void post(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      current_ = job;
    }
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
  }

  void retire(const std::shared_ptr<Job>& job) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (current_ == job) current_.reset();
  }

 private:
  void helper_loop() {
    uint32_t seen = generation_.load(std::memory_order_acquire);
    while (true) {
      const auto until = std::chrono::steady_clock::now() + kSpin;
      uint32_t now = generation_.load(std::memory_order_acquire);
      while (now == seen && std::chrono::steady_clock::now() < until) {
        for (int k = 0; k < 64; ++k) GNNSCALE_PAUSE();
        now = generation_.load(std::memory_order_acquire);
      }
      if (now == seen) {
        generation_.wait(seen, std::memory_order_acquire);
        now = generation_.load(std::memory_order_acquire);
      }
      seen = now;
      std::shared_ptr<Job> job;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        job = current_;
      }
      if (!job || job->joined.fetch_add(1, std::memory_order_relaxed) >= job->max_helpers)
        continue;
      job->work();
    }
  }

  std::mutex mutex_;
  std::shared_ptr<Job> current_;
  std::atomic<uint32_t> generation_{0};
  int64_t count_ = 0;
};

// The process's pool; a forked child (which has none of the parent's threads) makes its own.
Pool& pool() {
  static std::mutex mutex;
  static Pool* instance = nullptr;  // leaked on purpose: detached helpers outlive statics
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (instance == nullptr || owner != getpid()) {
    instance = new Pool();
    owner = getpid();
  }
  return *instance;
}

thread_local int64_t waited_ns = 0;

// Waits until no chunk is pending: spins briefly, then sleeps on the counter.
void wait_idle(Job& job) {
  const auto start = std::chrono::steady_clock::now();
  const auto until = std::chrono::steady_clock::now() + kSpin;
  int32_t left = job.pending.load(std::memory_order_acquire);
  while (left != 0 && std::chrono::steady_clock::now() < until) {
    for (int k = 0; k < 64; ++k) GNNSCALE_PAUSE();
    left = job.pending.load(std::memory_order_acquire);
  }
  while (left != 0) {
    job.pending.wait(left, std::memory_order_acquire);
    left = job.pending.load(std::memory_order_acquire);
  }
  waited_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int64_t helper_wait_ns() { return waited_ns; }

int64_t ContentionGuard::threads(int64_t requested) {
  if (requested <= 1) return requested;
  int left = serial_calls_left_.load(std::memory_order_relaxed);
  while (left > 0)
    if (serial_calls_left_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed))
      return 1;
  return requested;
}

void ContentionGuard::report(int64_t threads, int64_t elapsed_ns, int64_t waited_ns) {
  if (threads > 1 && waited_ns * 5 > elapsed_ns)
    serial_calls_left_.store(kBackoffCalls, std::memory_order_relaxed);
}

int64_t resolve_threads(int64_t requested) {
  return requested > 0 ? requested : std::max<int64_t>(1, at::get_num_threads());
}

void parallel_chunks(int64_t n, int64_t threads, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (threads <= 1 || n == 1) {
    for (int64_t c = 0; c < n; ++c) fn(c);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->max_helpers = std::min(threads, n) - 1;
  job->pending.store(1, std::memory_order_relaxed);  // the caller's claim on "not all claimed"
  Pool& p = pool();
  p.grow(job->max_helpers);
  p.post(job);
  job->work();
  // every chunk is claimed now: drop the caller's extra count, then wait for helpers' chunks
  if (job->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) wait_idle(*job);
  p.retire(job);
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace gnnscale
