// read_ranges(fd, offsets, lengths, dest, buffer, depth, uring), CPU kernel: reads every range
// of the file into buffer[dest[i]:], `depth` requests in flight. With `uring` and a kernel
// that allows it, one io_uring (raw system calls, no liburing) per calling thread, kept for
// the next call: up to `depth` IORING_OP_READ submissions, refilled as completions arrive.
// Otherwise `depth` threads each take the next range and pread it. A short read is continued
// where it stopped; a read that returns 0 (the end of the file) ends its range. The GIL is
// released by the caller's dispatcher: the reads wait in the kernel, not on Python.
//
// read_rows(fd, rows, offset, row_bytes, block, max_run, depth, uring, out): a gather of whole
// rows (row i at file byte offset + rows[i] * row_bytes) into out[i]. The distinct blocks that
// hold them are read once each, adjacent ones as one request of at most max_run blocks, into
// per-request staging slots (aligned, O_DIRECT-ready, kept per thread), and each request's rows
// are copied out as it completes while the others are in flight: one call, no per-gather
// staging buffer, no Python work between the reads. Returns {requests, bytes read}.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "io/read_ranges.h"

#ifdef __linux__
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define GNNSCALE_URING 1
#endif

namespace gnnscale::io {
namespace {

constexpr int64_t kMaxThreads = 256;

// Reads one range to its end (or the file's), retrying short reads and EINTR; -errno on error.
int64_t pread_range(int fd, char* out, int64_t len, int64_t off) {
  int64_t done = 0;
  while (done < len) {
    const ssize_t got = ::pread(fd, out + done, static_cast<size_t>(len - done), off + done);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

int64_t read_with_threads(int fd, const int64_t* offs, const int64_t* lens, const int64_t* dest,
                          int64_t n, char* buf, int64_t depth) {
  std::atomic<int64_t> next{0}, total{0}, error{0}, error_at{-1};
  auto work = [&] {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      const int64_t got = pread_range(fd, buf + dest[i], lens[i], offs[i]);
      if (got < 0) {
        error.store(-got);
        error_at.store(offs[i]);
        return;
      }
      total.fetch_add(got);
    }
  };
  const int64_t threads = std::min<int64_t>({depth, n, kMaxThreads});
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  TORCH_CHECK(error.load() == 0, "read_ranges: pread at offset ", error_at.load(), ": ",
              std::strerror(static_cast<int>(error.load())));
  return total.load();
}

#ifdef GNNSCALE_URING
// One io_uring's rings, mapped; entries fixed when it is set up.
struct Ring {
  int fd = -1;
  unsigned entries = 0;
  void* sq_ptr = nullptr;
  void* cq_ptr = nullptr;
  size_t sq_size = 0, cq_size = 0, sqe_size = 0;
  unsigned *sq_head = nullptr, *sq_tail = nullptr, *sq_mask = nullptr, *sq_array = nullptr;
  unsigned *cq_head = nullptr, *cq_tail = nullptr, *cq_mask = nullptr;
  io_uring_sqe* sqes = nullptr;
  io_uring_cqe* cqes = nullptr;

  bool setup(unsigned want) {
    io_uring_params p;
    std::memset(&p, 0, sizeof(p));
    const long ring = syscall(__NR_io_uring_setup, want, &p);
    if (ring < 0) return false;
    fd = static_cast<int>(ring);
    entries = p.sq_entries;
    sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_size = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    const bool single = p.features & IORING_FEAT_SINGLE_MMAP;
    if (single) sq_size = cq_size = std::max(sq_size, cq_size);
    sq_ptr = mmap(nullptr, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                  IORING_OFF_SQ_RING);
    if (sq_ptr == MAP_FAILED) return teardown();
    cq_ptr = single ? sq_ptr
                    : mmap(nullptr, cq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                           fd, IORING_OFF_CQ_RING);
    if (cq_ptr == MAP_FAILED) return teardown();
    sqe_size = p.sq_entries * sizeof(io_uring_sqe);
    void* s = mmap(nullptr, sqe_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                   IORING_OFF_SQES);
    if (s == MAP_FAILED) return teardown();
    sqes = static_cast<io_uring_sqe*>(s);
    char* sq = static_cast<char*>(sq_ptr);
    char* cq = static_cast<char*>(cq_ptr);
    sq_head = reinterpret_cast<unsigned*>(sq + p.sq_off.head);
    sq_tail = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
    sq_mask = reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
    sq_array = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
    cq_head = reinterpret_cast<unsigned*>(cq + p.cq_off.head);
    cq_tail = reinterpret_cast<unsigned*>(cq + p.cq_off.tail);
    cq_mask = reinterpret_cast<unsigned*>(cq + p.cq_off.ring_mask);
    cqes = reinterpret_cast<io_uring_cqe*>(cq + p.cq_off.cqes);
    return true;
  }

  bool teardown() {
    if (sqes != nullptr) munmap(sqes, sqe_size);
    if (cq_ptr != nullptr && cq_ptr != MAP_FAILED && cq_ptr != sq_ptr) munmap(cq_ptr, cq_size);
    if (sq_ptr != nullptr && sq_ptr != MAP_FAILED) munmap(sq_ptr, sq_size);
    if (fd >= 0) close(fd);
    *this = Ring();
    return false;
  }

  ~Ring() {
    if (fd >= 0) teardown();
  }
};

// The calling thread's ring with at least `depth` entries (nullptr: io_uring is refused).
Ring* thread_ring(unsigned depth) {
  thread_local Ring ring;
  thread_local pid_t owner = 0;
  if (ring.fd >= 0 && (owner != getpid() || ring.entries < depth)) {
    if (owner == getpid()) ring.teardown();
    else ring = Ring();  // a forked child: the parent's ring is not ours to unmap
  }
  if (ring.fd < 0) {
    unsigned want = 1;
    while (want < depth) want <<= 1;
    if (!ring.setup(want)) return nullptr;
    owner = getpid();
  }
  return &ring;
}

int64_t read_with_uring(Ring& ring, int fd, const int64_t* offs, const int64_t* lens,
                        const int64_t* dest, int64_t n, char* buf, int64_t depth) {
  std::vector<int64_t> done(n, 0);
  int64_t total = 0, next = 0, inflight = 0, finished = 0;
  std::vector<int64_t> again;  // ranges to submit again (short reads, EAGAIN/EINTR)
  const int64_t limit = std::min<int64_t>(depth, ring.entries);
  auto push = [&](int64_t i) {
    const unsigned tail = *ring.sq_tail;
    const unsigned slot = tail & *ring.sq_mask;
    io_uring_sqe* sqe = &ring.sqes[slot];
    std::memset(sqe, 0, sizeof(*sqe));
    sqe->opcode = IORING_OP_READ;
    sqe->fd = fd;
    sqe->addr = reinterpret_cast<uint64_t>(buf + dest[i] + done[i]);
    sqe->len = static_cast<uint32_t>(lens[i] - done[i]);
    sqe->off = static_cast<uint64_t>(offs[i] + done[i]);
    sqe->user_data = static_cast<uint64_t>(i);
    ring.sq_array[slot] = slot;
    __atomic_store_n(ring.sq_tail, tail + 1, __ATOMIC_RELEASE);
  };
  while (finished < n) {
    unsigned queued = 0;
    while (inflight < limit && (!again.empty() || next < n)) {
      int64_t i;
      if (!again.empty()) {
        i = again.back();
        again.pop_back();
      } else {
        i = next++;
      }
      if (lens[i] == 0) {
        ++finished;
        continue;
      }
      push(i);
      ++inflight;
      ++queued;
    }
    if (inflight == 0) continue;
    (void)queued;
    const unsigned pending = *ring.sq_tail - __atomic_load_n(ring.sq_head, __ATOMIC_ACQUIRE);
    const long rc = syscall(__NR_io_uring_enter, ring.fd, pending, 1u, IORING_ENTER_GETEVENTS,
                            nullptr, 0);
    if (rc < 0 && errno != EINTR && errno != EAGAIN && errno != EBUSY)
      TORCH_CHECK(false, "read_ranges: io_uring_enter: ", std::strerror(errno));
    unsigned head = *ring.cq_head;
    const unsigned tail = __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE);
    for (; head != tail; ++head) {
      const io_uring_cqe& cqe = ring.cqes[head & *ring.cq_mask];
      const int64_t i = static_cast<int64_t>(cqe.user_data);
      --inflight;
      if (cqe.res == -EAGAIN || cqe.res == -EINTR) {
        again.push_back(i);
      } else if (cqe.res < 0) {
        __atomic_store_n(ring.cq_head, head + 1, __ATOMIC_RELEASE);
        // drain what is still in flight before reporting, so no read writes a freed buffer
        while (inflight > 0) {
          syscall(__NR_io_uring_enter, ring.fd, 0u, 1u, IORING_ENTER_GETEVENTS, nullptr, 0);
          unsigned h = *ring.cq_head;
          const unsigned t = __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE);
          inflight -= static_cast<int64_t>(t - h);
          __atomic_store_n(ring.cq_head, t, __ATOMIC_RELEASE);
        }
        TORCH_CHECK(false, "read_ranges: read at offset ", offs[i] + done[i], ": ",
                    std::strerror(-cqe.res));
      } else if (cqe.res == 0) {
        ++finished;  // the end of the file
      } else {
        done[i] += cqe.res;
        total += cqe.res;
        if (done[i] < lens[i]) again.push_back(i);
        else ++finished;
      }
    }
    __atomic_store_n(ring.cq_head, head, __ATOMIC_RELEASE);
  }
  return total;
}
#endif

// read_rows: the requests of a gather and, per request, the rows whose bytes it holds.
struct RowPlan {
  std::vector<int64_t> order;       // row indices by file position
  std::vector<int64_t> req_block;   // each request's first block
  std::vector<int64_t> req_blocks;  // and its block count
  std::vector<int64_t> req_lo, req_hi;  // rows order[lo..hi) overlap the request
};

// The distinct blocks holding the rows, in file order, cut into runs of adjacent blocks of at
// most `max_run` (as gnnscale/cache/disk.py's DiskTier.blocks and .requests, so both paths
// count the same reads).
RowPlan plan_rows(const int64_t* rows, int64_t n, int64_t offset, int64_t row_bytes,
                  int64_t block, int64_t max_run) {
  RowPlan p;
  p.order.resize(n);
  for (int64_t i = 0; i < n; ++i) p.order[i] = i;
  std::sort(p.order.begin(), p.order.end(),
            [rows](int64_t a, int64_t b) { return rows[a] < rows[b]; });
  int64_t last_block = -1, run_start = -1, run_len = 0;
  auto emit = [&] {
    if (run_len > 0) {
      p.req_block.push_back(run_start);
      p.req_blocks.push_back(run_len);
    }
  };
  for (int64_t k = 0; k < n; ++k) {
    const int64_t start = offset + rows[p.order[k]] * row_bytes;
    const int64_t first = start / block, last = (start + row_bytes - 1) / block;
    for (int64_t b = std::max(first, last_block + 1); b <= last; ++b) {
      if (run_len > 0 && b == run_start + run_len && run_len < max_run) {
        ++run_len;
      } else {
        emit();
        run_start = b;
        run_len = 1;
      }
    }
    last_block = std::max(last_block, last);
  }
  emit();
  const int64_t m = static_cast<int64_t>(p.req_block.size());
  p.req_lo.resize(m);
  p.req_hi.resize(m);
  int64_t lo = 0;
  for (int64_t r = 0; r < m; ++r) {  // rows and requests are both in file order
    const int64_t a = p.req_block[r] * block, b = a + p.req_blocks[r] * block;
    while (lo < n && offset + rows[p.order[lo]] * row_bytes + row_bytes <= a) ++lo;
    int64_t hi = lo;
    while (hi < n && offset + rows[p.order[hi]] * row_bytes < b) ++hi;
    p.req_lo[r] = lo;
    p.req_hi[r] = hi;
  }
  return p;
}

// Copies the part of each row that request r's bytes (file bytes [a, a + got) in `slot`) hold.
void copy_rows(const RowPlan& p, int64_t r, const char* slot, int64_t got, const int64_t* rows,
               int64_t offset, int64_t row_bytes, int64_t block, char* out) {
  const int64_t a = p.req_block[r] * block, b = a + got;
  for (int64_t k = p.req_lo[r]; k < p.req_hi[r]; ++k) {
    const int64_t i = p.order[k];
    const int64_t s = offset + rows[i] * row_bytes;
    const int64_t from = std::max(a, s), to = std::min(b, s + row_bytes);
    if (to > from) std::memcpy(out + i * row_bytes + (from - s), slot + (from - a), to - from);
  }
}

// Aligned staging memory for the requests in flight, kept per thread for the next call.
struct Slots {
  char* base = nullptr;
  size_t size = 0;
  char* get(size_t want) {
    if (want > size) {
      std::free(base);
      size = (want + 4095) / 4096 * 4096;
      base = static_cast<char*>(std::aligned_alloc(4096, size));
      TORCH_CHECK(base != nullptr, "read_rows: cannot allocate ", size, " bytes");
    }
    return base;
  }
  ~Slots() { std::free(base); }
};

#ifdef GNNSCALE_URING
// Each request is read into a free slot; its rows are copied out as it completes, while the
// other requests are in flight.
int64_t rows_with_uring(Ring& ring, int fd, const RowPlan& p, const int64_t* rows,
                        int64_t offset, int64_t row_bytes, int64_t block, int64_t max_run,
                        int64_t depth, char* out) {
  const int64_t m = static_cast<int64_t>(p.req_block.size());
  const int64_t limit = std::min<int64_t>({depth, static_cast<int64_t>(ring.entries), m});
  const int64_t slot_bytes = max_run * block;
  thread_local Slots slots;
  char* base = slots.get(static_cast<size_t>(limit * slot_bytes));
  std::vector<int64_t> free_slots(limit), slot_of(m, -1), done(m, 0), again;
  for (int64_t s = 0; s < limit; ++s) free_slots[s] = limit - 1 - s;
  int64_t total = 0, next = 0, inflight = 0, finished = 0;
  auto push = [&](int64_t r) {
    const unsigned tail = *ring.sq_tail;
    const unsigned idx = tail & *ring.sq_mask;
    io_uring_sqe* sqe = &ring.sqes[idx];
    std::memset(sqe, 0, sizeof(*sqe));
    sqe->opcode = IORING_OP_READ;
    sqe->fd = fd;
    sqe->addr = reinterpret_cast<uint64_t>(base + slot_of[r] * slot_bytes + done[r]);
    sqe->len = static_cast<uint32_t>(p.req_blocks[r] * block - done[r]);
    sqe->off = static_cast<uint64_t>(p.req_block[r] * block + done[r]);
    sqe->user_data = static_cast<uint64_t>(r);
    ring.sq_array[idx] = idx;
    __atomic_store_n(ring.sq_tail, tail + 1, __ATOMIC_RELEASE);
  };
  auto drain = [&] {  // wait for what is in flight, so no read writes a slot after we return
    while (inflight > 0) {
      syscall(__NR_io_uring_enter, ring.fd, 0u, 1u, IORING_ENTER_GETEVENTS, nullptr, 0);
      const unsigned h = *ring.cq_head;
      const unsigned t = __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE);
      inflight -= static_cast<int64_t>(t - h);
      __atomic_store_n(ring.cq_head, t, __ATOMIC_RELEASE);
    }
  };
  while (finished < m) {
    while (inflight < limit && (!again.empty() || next < m)) {
      int64_t r;
      if (!again.empty()) {
        r = again.back();
        again.pop_back();
      } else {
        r = next++;
        slot_of[r] = free_slots.back();
        free_slots.pop_back();
      }
      push(r);
      ++inflight;
    }
    const unsigned pending = *ring.sq_tail - __atomic_load_n(ring.sq_head, __ATOMIC_ACQUIRE);
    const long rc = syscall(__NR_io_uring_enter, ring.fd, pending, 1u, IORING_ENTER_GETEVENTS,
                            nullptr, 0);
    if (rc < 0 && errno != EINTR && errno != EAGAIN && errno != EBUSY) {
      const int err = errno;
      drain();
      TORCH_CHECK(false, "read_rows: io_uring_enter: ", std::strerror(err));
    }
    unsigned head = *ring.cq_head;
    const unsigned tail = __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE);
    for (; head != tail; ++head) {
      const io_uring_cqe& cqe = ring.cqes[head & *ring.cq_mask];
      const int64_t r = static_cast<int64_t>(cqe.user_data);
      --inflight;
      if (cqe.res == -EAGAIN || cqe.res == -EINTR) {
        again.push_back(r);
        continue;
      }
      if (cqe.res < 0) {
        __atomic_store_n(ring.cq_head, head + 1, __ATOMIC_RELEASE);
        drain();
        TORCH_CHECK(false, "read_rows: read at offset ", p.req_block[r] * block + done[r], ": ",
                    std::strerror(-cqe.res));
      }
      done[r] += cqe.res;
      total += cqe.res;
      if (cqe.res > 0 && done[r] < p.req_blocks[r] * block) {
        again.push_back(r);  // a short read: the rest of it
        continue;
      }
      copy_rows(p, r, base + slot_of[r] * slot_bytes, done[r], rows, offset, row_bytes, block,
                out);
      free_slots.push_back(slot_of[r]);
      ++finished;
    }
    __atomic_store_n(ring.cq_head, head, __ATOMIC_RELEASE);
  }
  return total;
}
#endif

// `depth` threads, each with its own slot, take the next request, pread it and copy its rows.
int64_t rows_with_threads(int fd, const RowPlan& p, const int64_t* rows, int64_t offset,
                          int64_t row_bytes, int64_t block, int64_t max_run, int64_t depth,
                          char* out) {
  const int64_t m = static_cast<int64_t>(p.req_block.size());
  const int64_t threads = std::min<int64_t>({depth, m, kMaxThreads});
  const int64_t slot_bytes = max_run * block;
  Slots slots;
  char* base = slots.get(static_cast<size_t>(threads * slot_bytes));
  std::atomic<int64_t> next{0}, total{0}, error{0}, error_at{-1};
  auto work = [&](int64_t t) {
    char* slot = base + t * slot_bytes;
    for (int64_t r = next.fetch_add(1); r < m; r = next.fetch_add(1)) {
      const int64_t got = pread_range(fd, slot, p.req_blocks[r] * block, p.req_block[r] * block);
      if (got < 0) {
        error.store(-got);
        error_at.store(p.req_block[r] * block);
        return;
      }
      copy_rows(p, r, slot, got, rows, offset, row_bytes, block, out);
      total.fetch_add(got);
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  TORCH_CHECK(error.load() == 0, "read_rows: pread at offset ", error_at.load(), ": ",
              std::strerror(static_cast<int>(error.load())));
  return total.load();
}

}  // namespace

bool io_uring_available() {
#ifdef GNNSCALE_URING
  return thread_ring(1) != nullptr;
#else
  return false;
#endif
}

int64_t read_ranges(int64_t fd, const at::Tensor& offsets, const at::Tensor& lengths,
                    const at::Tensor& dest, const at::Tensor& buffer, int64_t depth,
                    bool uring) {
  check_read_ranges(offsets, lengths, dest, buffer, depth);
  const int64_t n = offsets.numel();
  if (n == 0) return 0;
  const int64_t* offs = offsets.data_ptr<int64_t>();
  const int64_t* lens = lengths.data_ptr<int64_t>();
  const int64_t* dst = dest.data_ptr<int64_t>();
  char* buf = reinterpret_cast<char*>(buffer.data_ptr<uint8_t>());
#ifdef GNNSCALE_URING
  if (uring) {
    Ring* ring = thread_ring(static_cast<unsigned>(std::min<int64_t>(depth, 4096)));
    if (ring != nullptr)
      return read_with_uring(*ring, static_cast<int>(fd), offs, lens, dst, n, buf, depth);
  }
#endif
  return read_with_threads(static_cast<int>(fd), offs, lens, dst, n, buf, depth);
}

std::vector<int64_t> read_rows(int64_t fd, const at::Tensor& rows, int64_t offset,
                               int64_t row_bytes, int64_t block, int64_t max_run, int64_t depth,
                               bool uring, const at::Tensor& out) {
  check_read_rows(rows, offset, row_bytes, block, max_run, depth, out);
  const int64_t n = rows.numel();
  if (n == 0) return {0, 0};
  const int64_t* r = rows.data_ptr<int64_t>();
  char* dst = reinterpret_cast<char*>(out.data_ptr<uint8_t>());
  const RowPlan plan = plan_rows(r, n, offset, row_bytes, block, max_run);
  const int64_t reads = static_cast<int64_t>(plan.req_block.size());
#ifdef GNNSCALE_URING
  if (uring) {
    Ring* ring = thread_ring(static_cast<unsigned>(std::min<int64_t>(depth, 4096)));
    if (ring != nullptr)
      return {reads, rows_with_uring(*ring, static_cast<int>(fd), plan, r, offset, row_bytes,
                                     block, max_run, depth, dst)};
  }
#endif
  return {reads, rows_with_threads(static_cast<int>(fd), plan, r, offset, row_bytes, block,
                                   max_run, depth, dst)};
}

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) {
  m.impl("read_ranges", &read_ranges);
  m.impl("read_rows", &read_rows);
}

}  // namespace gnnscale::io
