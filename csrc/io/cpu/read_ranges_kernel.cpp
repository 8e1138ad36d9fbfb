// read_ranges(fd, offsets, lengths, dest, buffer, depth, uring), CPU kernel: reads every range
// of the file into buffer[dest[i]:], `depth` requests in flight. With `uring` and a kernel
// that allows it, one io_uring (raw system calls, no liburing) per calling thread, kept for
// the next call: up to `depth` IORING_OP_READ submissions, refilled as completions arrive.
// Otherwise `depth` threads each take the next range and pread it. A short read is continued
// where it stopped; a read that returns 0 (the end of the file) ends its range. The GIL is
// released by the caller's dispatcher: the reads wait in the kernel, not on Python.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
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

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) { m.impl("read_ranges", &read_ranges); }

}  // namespace gnnscale::io
