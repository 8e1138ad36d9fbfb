// The io domain: read_ranges, many file ranges read with many requests in flight (the feature
// store's disk tier, gnnscale/cache/disk.py).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace gnnscale::io {

// Raises a clear error unless the ranges (offsets, lengths, dest: int64, one entry a range)
// fit `buffer` (a contiguous uint8 CPU tensor).
void check_read_ranges(const at::Tensor& offsets, const at::Tensor& lengths,
                       const at::Tensor& dest, const at::Tensor& buffer, int64_t depth);

// Raises a clear error unless `rows` (int64) and `out` (uint8, rows.numel() * row_bytes) fit.
void check_read_rows(const at::Tensor& rows, int64_t offset, int64_t row_bytes, int64_t block,
                     int64_t max_run, int64_t depth, const at::Tensor& out);

// Whether this kernel lets the process set up an io_uring (a seccomp filter or
// kernel.io_uring_disabled may forbid it): read_ranges then uses its pread threads.
bool io_uring_available();

}  // namespace gnnscale::io
