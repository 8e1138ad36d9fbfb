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

#include <cstdint>
#include <functional>

namespace gnnscale {

// Threads an op uses when its caller passes `requested` (<= 0: at::get_num_threads()).
int64_t resolve_threads(int64_t requested);

// Calls fn(c) once for every c in [0, n), in any order, on at most `threads` threads (the
// caller included); returns when all calls have returned, rethrowing the first exception.
void parallel_chunks(int64_t n, int64_t threads, const std::function<void(int64_t)>& fn);

// The number of chunks of at most `grain` items that cover `items` (0 when there are none).
inline int64_t num_chunks(int64_t items, int64_t grain) { return (items + grain - 1) / grain; }

}  // namespace gnnscale
