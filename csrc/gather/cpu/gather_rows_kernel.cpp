// gather_rows(table, ids), CPU kernel: out[i] = table[ids[i]], with software prefetching of the
// rows a few iterations ahead (random rows defeat the hardware prefetcher). Chunks of rows are
// claimed dynamically by the caller and helper threads (utils/parallel.h), so a thread that
// shares a busy core takes fewer chunks instead of holding up the others.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "gather/cpu/huge_pages.h"
#include "gather/gather_rows.h"
#include "utils/parallel.h"

namespace gnnscale::gather {
namespace {

constexpr int64_t kAhead = 8;        // rows prefetched ahead of the copy
constexpr int64_t kMaxLines = 32;    // prefetch at most this many cache lines per row
constexpr int64_t kGrain = 1024;     // rows per chunk

template <typename id_t>
void gather_impl(const char* table, int64_t num_rows, int64_t row_bytes, const id_t* ids,
                 int64_t n, char* out, int64_t threads) {
  std::atomic<bool> bad{false};
  const int64_t lines = std::min<int64_t>((row_bytes + 63) / 64, kMaxLines);
  parallel_chunks(num_chunks(n, kGrain), threads, [&](int64_t c) {
    const int64_t begin = c * kGrain, end = std::min(n, begin + kGrain);
    for (int64_t i = begin; i < std::min(end, begin + kAhead); ++i) {
      const int64_t r = static_cast<int64_t>(ids[i]);
      if (r >= 0 && r < num_rows)
        for (int64_t l = 0; l < lines; ++l) __builtin_prefetch(table + r * row_bytes + l * 64);
    }
    for (int64_t i = begin; i < end; ++i) {
      if (i + kAhead < end) {
        const int64_t r = static_cast<int64_t>(ids[i + kAhead]);
        if (r >= 0 && r < num_rows)
          for (int64_t l = 0; l < lines; ++l) __builtin_prefetch(table + r * row_bytes + l * 64);
      }
      const int64_t r = static_cast<int64_t>(ids[i]);
      if (r < 0 || r >= num_rows) {
        bad.store(true, std::memory_order_relaxed);
        continue;
      }
      std::memcpy(out + i * row_bytes, table + r * row_bytes, row_bytes);
    }
  });
  if (bad.load()) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = static_cast<int64_t>(ids[i]);
      TORCH_CHECK(r >= 0 && r < num_rows, "gather_rows: ids[", i, "] = ", r,
                  " is out of range for a table with ", num_rows, " rows");
    }
  }
}

// Fills `out` (contiguous, right shape and dtype) with table[ids].
void gather_into(const at::Tensor& table_in, const at::Tensor& ids_in, at::Tensor& out,
                 int64_t num_threads) {
  const int64_t threads = resolve_threads(num_threads);
  const at::Tensor table = table_in.contiguous();
  const at::Tensor ids = ids_in.contiguous();
  const int64_t num_rows = table.size(0);
  const int64_t row_bytes =
      num_rows == 0 ? 0 : static_cast<int64_t>(table.nbytes()) / num_rows;
  const char* src = static_cast<const char*>(table.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  if (ids.scalar_type() == at::kLong)
    gather_impl(src, num_rows, row_bytes, ids.data_ptr<int64_t>(), ids.numel(), dst, threads);
  else
    gather_impl(src, num_rows, row_bytes, ids.data_ptr<int32_t>(), ids.numel(), dst, threads);
}

at::Tensor gather_rows(const at::Tensor& table, const at::Tensor& ids, int64_t num_threads) {
  check_gather_rows(table, ids);
  at::Tensor out = at::empty(gather_shape(table, ids), table.options());
  advise_huge_pages(out);
  gather_into(table, ids, out, num_threads);
  return out;
}

at::Tensor& gather_rows_out(const at::Tensor& table, const at::Tensor& ids, at::Tensor& out,
                            int64_t num_threads) {
  check_gather_out(table, ids, out);
  gather_into(table, ids, out, num_threads);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) {
  m.impl("gather_rows", &gather_rows);
  m.impl("gather_rows_out", &gather_rows_out);
}

}  // namespace gnnscale::gather
