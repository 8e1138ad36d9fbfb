// The io domain's schemas and argument checks.
#include "io/read_ranges.h"

#include <torch/library.h>

namespace gnnscale::io {

void check_read_ranges(const at::Tensor& offsets, const at::Tensor& lengths,
                       const at::Tensor& dest, const at::Tensor& buffer, int64_t depth) {
  for (const at::Tensor* t : {&offsets, &lengths, &dest}) {
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kLong && t->dim() == 1 &&
                    t->is_contiguous(),
                "read_ranges: offsets, lengths and dest must be contiguous 1-D int64 CPU "
                "tensors");
    TORCH_CHECK(t->numel() == offsets.numel(),
                "read_ranges: offsets, lengths and dest must have one entry a range");
  }
  TORCH_CHECK(buffer.device().is_cpu() && buffer.scalar_type() == at::kByte &&
                  buffer.is_contiguous(),
              "read_ranges: buffer must be a contiguous uint8 CPU tensor");
  TORCH_CHECK(depth >= 1, "read_ranges: depth must be >= 1, got ", depth);
  if (offsets.numel()) {
    TORCH_CHECK((offsets.min().item<int64_t>() >= 0) && (lengths.min().item<int64_t>() >= 0) &&
                    (dest.min().item<int64_t>() >= 0),
                "read_ranges: offsets, lengths and dest must be >= 0");
    TORCH_CHECK((dest + lengths).max().item<int64_t>() <= buffer.numel(),
                "read_ranges: a range ends past the buffer");
  }
}

void check_read_rows(const at::Tensor& rows, int64_t offset, int64_t row_bytes, int64_t block,
                     int64_t max_run, int64_t depth, const at::Tensor& out) {
  TORCH_CHECK(rows.device().is_cpu() && rows.scalar_type() == at::kLong && rows.dim() == 1 &&
                  rows.is_contiguous(),
              "read_rows: rows must be a contiguous 1-D int64 CPU tensor");
  TORCH_CHECK(out.device().is_cpu() && out.scalar_type() == at::kByte && out.is_contiguous(),
              "read_rows: out must be a contiguous uint8 CPU tensor");
  TORCH_CHECK(offset >= 0 && row_bytes > 0 && block > 0 && max_run >= 1 && depth >= 1,
              "read_rows: offset >= 0, row_bytes, block, max_run and depth >= 1 needed");
  TORCH_CHECK(out.numel() == rows.numel() * row_bytes,
              "read_rows: out must hold rows.numel() * row_bytes bytes");
  if (rows.numel())
    TORCH_CHECK(rows.min().item<int64_t>() >= 0, "read_rows: rows must be >= 0");
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def(
      "read_ranges(int fd, Tensor offsets, Tensor lengths, Tensor dest, Tensor(a!) buffer, "
      "int depth=64, bool uring=True) -> int");
  m.def(
      "read_rows(int fd, Tensor rows, int offset, int row_bytes, int block, int max_run, "
      "int depth, bool uring, Tensor(a!) out) -> int[]");
  m.def("io_uring_available() -> bool", &io_uring_available);
}

}  // namespace gnnscale::io
