// keyed_dropout(h, p, key, ids), CPU kernel. Element (r, c) is kept when
// hash(hash(ids[r] ^ key) + c * golden) >> 40, a 24-bit uniform, is at least p * 2^24, where
// hash is splitmix64 of x + golden: bit for bit gnnscale/models/dropout.py's keep_uniform, so a
// CUDA tensor (which takes that Python path) draws the same mask. Kept elements are scaled by
// 1 / (1 - p). Rows are split into chunks claimed by the caller and helper threads.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "dropout/dropout.h"
#include "utils/parallel.h"
#include "utils/rng.h"

namespace gnnscale::dropout {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr int64_t kGrainElements = 1 << 15;  // elements per chunk (rows rounded up)

inline uint64_t hash(uint64_t x) { return mix64(x + kGolden); }

// One row: the loop vectorises (4 lanes of 64-bit hashing) when compiled for AVX2.
template <typename scalar_t>
inline void drop_row(const scalar_t* h, scalar_t* o, int64_t cols, uint64_t stream,
                     uint64_t threshold, scalar_t scale) {
  for (int64_t c = 0; c < cols; ++c) {
    const uint64_t z = hash(stream + static_cast<uint64_t>(c) * kGolden);
    const scalar_t keep = (z >> 40) >= threshold ? scalar_t(1) : scalar_t(0);
    o[c] = h[c] * keep * scale;  // as h * mask * scale: signed zeros and NaNs alike
  }
}

template <typename scalar_t>
void drop_row_default(const scalar_t* h, scalar_t* o, int64_t cols, uint64_t stream,
                      uint64_t threshold, scalar_t scale) {
  drop_row(h, o, cols, stream, threshold, scale);
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same row for CPUs with AVX2 (chosen at run time): 4.7x the scalar loop on one core.
template <typename scalar_t>
__attribute__((target("avx2"))) void drop_row_avx2(const scalar_t* h, scalar_t* o,
                                                   int64_t cols, uint64_t stream,
                                                   uint64_t threshold, scalar_t scale) {
  drop_row(h, o, cols, stream, threshold, scale);
}
#endif

template <typename scalar_t>
using RowFn = void (*)(const scalar_t*, scalar_t*, int64_t, uint64_t, uint64_t, scalar_t);

template <typename scalar_t>
RowFn<scalar_t> pick_row() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2")) return &drop_row_avx2<scalar_t>;
#endif
  return &drop_row_default<scalar_t>;
}

template <typename scalar_t, typename id_t>
void drop_impl(const scalar_t* h, scalar_t* out, int64_t rows, int64_t cols, const id_t* ids,
               uint64_t key, uint64_t threshold, scalar_t scale, int64_t threads) {
  const RowFn<scalar_t> row = pick_row<scalar_t>();
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(cols, 1));
  parallel_chunks(num_chunks(rows, grain), threads, [&](int64_t chunk) {
    const int64_t begin = chunk * grain, end = std::min(rows, begin + grain);
    for (int64_t r = begin; r < end; ++r) {
      const uint64_t id = ids == nullptr ? static_cast<uint64_t>(r)
                                         : static_cast<uint64_t>(static_cast<int64_t>(ids[r]));
      row(h + r * cols, out + r * cols, cols, hash(id ^ key), threshold, scale);
    }
  });
}

at::Tensor keyed_dropout(const at::Tensor& h_in, double p, int64_t key,
                         const std::optional<at::Tensor>& ids_in, int64_t num_threads) {
  check_keyed_dropout(h_in, p, ids_in);
  const at::Tensor h = h_in.contiguous();
  at::Tensor out = at::empty_like(h);
  // keep when u >= p in float32, u = k * 2^-24 exactly: k >= ceil(float(p) * 2^24)
  const uint64_t threshold =
      static_cast<uint64_t>(std::ceil(static_cast<double>(static_cast<float>(p)) * 16777216.0));
  const int64_t threads = resolve_threads(num_threads);
  const int64_t rows = h.size(0), cols = h.size(1);
  const uint64_t k = static_cast<uint64_t>(key);
  std::optional<at::Tensor> ids;
  if (ids_in.has_value()) ids = ids_in->contiguous();
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "keyed_dropout", [&] {
    const auto scale = static_cast<scalar_t>(1.0 / (1.0 - p));
    const scalar_t* src = h.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    if (!ids.has_value())
      drop_impl<scalar_t, int64_t>(src, dst, rows, cols, nullptr, k, threshold, scale, threads);
    else if (ids->scalar_type() == at::kLong)
      drop_impl(src, dst, rows, cols, ids->data_ptr<int64_t>(), k, threshold, scale, threads);
    else
      drop_impl(src, dst, rows, cols, ids->data_ptr<int32_t>(), k, threshold, scale, threads);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) { m.impl("keyed_dropout", &keyed_dropout); }

}  // namespace gnnscale::dropout
