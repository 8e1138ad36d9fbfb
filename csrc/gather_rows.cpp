// gather_rows(table, ids): out[i] = table[ids[i]], parallel over rows, with software
// prefetching of the rows a few iterations ahead (random rows defeat the hardware prefetcher).
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <ATen/ATen.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace gnnscale {
namespace {

constexpr int64_t kAhead = 8;        // rows prefetched ahead of the copy
constexpr int64_t kMaxLines = 32;    // prefetch at most this many cache lines per row

template <typename id_t>
void gather_impl(const char* table, int64_t num_rows, int64_t row_bytes, const id_t* ids,
                 int64_t n, char* out) {
  std::atomic<bool> bad{false};
  const int64_t lines = std::min<int64_t>((row_bytes + 63) / 64, kMaxLines);
  at::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
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

void check_inputs(const at::Tensor& table, const at::Tensor& ids) {
  TORCH_CHECK(table.device().is_cpu() && ids.device().is_cpu(),
              "gather_rows: table and ids must be CPU tensors");
  TORCH_CHECK(table.dim() >= 1, "gather_rows: table must have at least one dimension");
  TORCH_CHECK(ids.dim() == 1, "gather_rows: ids must be 1-D, got shape ", ids.sizes());
  TORCH_CHECK(ids.scalar_type() == at::kLong || ids.scalar_type() == at::kInt,
              "gather_rows: ids must be int64 or int32, got ", ids.scalar_type());
}

std::vector<int64_t> out_shape(const at::Tensor& table, const at::Tensor& ids) {
  std::vector<int64_t> shape(table.sizes().begin(), table.sizes().end());
  shape[0] = ids.numel();
  return shape;
}

// Fills `out` (contiguous, right shape and dtype) with table[ids].
void gather_into(const at::Tensor& table_in, const at::Tensor& ids_in, at::Tensor& out) {
  const at::Tensor table = table_in.contiguous();
  const at::Tensor ids = ids_in.contiguous();
  const int64_t num_rows = table.size(0);
  const int64_t row_bytes =
      num_rows == 0 ? 0 : static_cast<int64_t>(table.nbytes()) / num_rows;
  const char* src = static_cast<const char*>(table.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  if (ids.scalar_type() == at::kLong)
    gather_impl(src, num_rows, row_bytes, ids.data_ptr<int64_t>(), ids.numel(), dst);
  else
    gather_impl(src, num_rows, row_bytes, ids.data_ptr<int32_t>(), ids.numel(), dst);
}

// Asks for transparent huge pages (where the kernel leaves them to madvise) on the 2 MiB
// aligned interior of a large tensor's memory; a hint only, true when the kernel took it. On
// pages not yet touched it cuts first-touch page faults 512-fold, and a table on huge pages
// makes random row reads miss the TLB far less often.
bool advise_huge_pages(const at::Tensor& t) {
#ifdef __linux__
  constexpr uintptr_t kHuge = uintptr_t{1} << 21;
  if (!t.device().is_cpu() || t.nbytes() < 4 * kHuge) return false;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t lo = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (begin + t.nbytes()) & ~(kHuge - 1);
  return hi > lo && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0;
#else
  return false;
#endif
}

at::Tensor gather_rows(const at::Tensor& table, const at::Tensor& ids) {
  check_inputs(table, ids);
  at::Tensor out = at::empty(out_shape(table, ids), table.options());
  advise_huge_pages(out);
  gather_into(table, ids, out);
  return out;
}

at::Tensor& gather_rows_out(const at::Tensor& table, const at::Tensor& ids, at::Tensor& out) {
  check_inputs(table, ids);
  const std::vector<int64_t> shape = out_shape(table, ids);
  TORCH_CHECK(out.device().is_cpu() && out.scalar_type() == table.scalar_type() &&
                  out.sizes().vec() == shape && out.is_contiguous(),
              "gather_rows: out must be a contiguous CPU tensor of dtype ", table.scalar_type(),
              " and shape ", at::IntArrayRef(shape), ", got ", out.scalar_type(), " ",
              out.sizes());
  gather_into(table, ids, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) {
  m.impl("gather_rows", &gather_rows);
  m.impl("gather_rows_out", &gather_rows_out);
  m.impl("advise_huge_pages", &advise_huge_pages);
}

}  // namespace gnnscale
