// parallel_chunks: run fn(c) for every chunk c in [0, n) on the calling thread and up to
// `threads - 1` helper threads that claim chunks dynamically.
//
// The caller always takes part and can finish every chunk alone, so no call waits for a thread
// to be scheduled: it waits only for chunks a helper has started. Helpers that arrive late find
// nothing left and go back to sleep; idle helpers spin briefly (so that the phases of one op
// reach them quickly) and then sleep on a futex, never holding a core that another process
// needs. This replaces OpenMP fork-join regions, whose joins (and GOMP's spinning barriers)
// wait for every thread and stall for a whole time slice when one core is busy elsewhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace gnnscale {

// Threads an op uses when its caller passes `requested` (<= 0: at::get_num_threads()).
int64_t resolve_threads(int64_t requested);

// Calls fn(c) once for every c in [0, n), in any order, on at most `threads` threads (the
// caller included); returns when all calls have returned, rethrowing the first exception.
void parallel_chunks(int64_t n, int64_t threads, const std::function<void(int64_t)>& fn);

// Nanoseconds the calling thread has spent, in all its parallel_chunks calls so far, waiting
// for chunks that helpers had started (a measure of contention: a helper that is not running).
int64_t helper_wait_ns();

// Guards an op against contention: with several threads requested, the op runs them unless a
// recent call of the same guard spent over a fifth of its time waiting for helpers (a core
// busy elsewhere); then the next kBackoffCalls calls run on the caller alone, never slower
// than one thread, and the call after them tries the threads again.
class ContentionGuard {
 public:
  static constexpr int kBackoffCalls = 32;
  // The threads to use now, out of `threads` requested.
  int64_t threads(int64_t requested);
  // Reports a call that ran on `threads` threads for `elapsed_ns`, `waited_ns` of it waiting.
  void report(int64_t threads, int64_t elapsed_ns, int64_t waited_ns);

 private:
  std::atomic<int> serial_calls_left_{0};
};

// The number of chunks of at most `grain` items that cover `items` (0 when there are none).
inline int64_t num_chunks(int64_t items, int64_t grain) { return (items + grain - 1) / grain; }

}  // namespace gnnscale
