// pair_product and its backward, CPU kernels: the rows of P pairs (src[p], dst[p]) of a
// [N, D] table, multiplied element by element (reduce=false: [P, D]) or summed to one dot
// product a pair (reduce=true: [P]), without gathering either end's [P, D] rows first.
//
// Bits: the product is rows[src] * rows[dst], element by element, as torch's mul of the two
// gathered tensors; the dot products are torch's own sum over the last dimension (at::sum_out)
// of that product, a chunk of pairs at a time (a row's sum does not depend on how many rows the
// chunk holds), so both are torch's `(rows[src] * rows[dst])[.sum(-1)]` bit for bit.
// The backward of the pair's two index-and-multiply ops is, in autograd, two scatters
// (index_put_ with accumulate: each row's contributions added in pair order, from zero) whose
// results are then added: A + B. Here each row r sums its contributions as a src end (pairs in
// order: grad[p] * rows[dst[p]]) into a, as a dst end (grad[p] * rows[src[p]]) into b, and
// writes a + b: the same operations in the same order, so the same bits, with no [P, D]
// temporary; rows are spread over threads (whatever their number, the same result), each pair
// list found by a stable counting sort of the pairs by row.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "pairs/pair_product.h"
#include "utils/parallel.h"

// A fused multiply-add would round once where autograd rounds twice: keep them apart.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace gnnscale::pairs {
namespace {

// Elements of a chunk of the forward's products: below torch's grain (32768), so torch's sum of
// a chunk runs on this thread alone, never forking and joining its pool (a stall per chunk on
// a busy host); a row's sum is the same bits whatever the chunk or thread count.
constexpr int64_t kChunkElements = 1 << 14;
constexpr int64_t kGrainElements = 1 << 14;  // row elements a backward chunk writes

// The pairs of each row as a stable counting sort: pairs of row r are order[ptr[r]:ptr[r+1]],
// ascending.
void by_row(const int64_t* ends, int64_t pairs, int64_t rows, std::vector<int64_t>& ptr,
            std::vector<int64_t>& order) {
  ptr.assign(rows + 1, 0);
  for (int64_t p = 0; p < pairs; ++p) ++ptr[ends[p] + 1];
  for (int64_t r = 0; r < rows; ++r) ptr[r + 1] += ptr[r];
  order.resize(pairs);
  std::vector<int64_t> at(ptr.begin(), ptr.end() - 1);
  for (int64_t p = 0; p < pairs; ++p) order[at[ends[p]]++] = p;
}

template <typename scalar_t>
void multiply(const scalar_t* r, const int64_t* src, const int64_t* dst, int64_t begin,
              int64_t end, int64_t width, scalar_t* out) {
  for (int64_t p = begin; p < end; ++p) {
    const scalar_t* u = r + src[p] * width;
    const scalar_t* v = r + dst[p] * width;
    scalar_t* o = out + (p - begin) * width;
    for (int64_t k = 0; k < width; ++k) o[k] = u[k] * v[k];
  }
}

at::Tensor pair_product(const at::Tensor& rows_in, const at::Tensor& src_in,
                        const at::Tensor& dst_in, bool reduce) {
  check_pair_product(rows_in, src_in, dst_in, at::Tensor());
  const at::Tensor rows = rows_in.contiguous(), src = src_in.contiguous(),
                   dst = dst_in.contiguous();
  const int64_t pairs = src.numel(), width = rows.size(1);
  if (!reduce) {
    at::Tensor out = at::empty({pairs, width}, rows.options());
    AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "pair_product", [&] {
      multiply(rows.data_ptr<scalar_t>(), src.data_ptr<int64_t>(), dst.data_ptr<int64_t>(), 0,
               pairs, width, out.data_ptr<scalar_t>());
    });
    return out;
  }
  at::Tensor out = at::empty({pairs}, rows.options());
  if (pairs == 0) return out;
  const int64_t chunk = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(width, 1));
  at::Tensor buf = at::empty({std::min(pairs, chunk), width}, rows.options());
  for (int64_t begin = 0; begin < pairs; begin += chunk) {
    const int64_t end = std::min(pairs, begin + chunk);
    AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "pair_product", [&] {
      multiply(rows.data_ptr<scalar_t>(), src.data_ptr<int64_t>(), dst.data_ptr<int64_t>(),
               begin, end, width, buf.data_ptr<scalar_t>());
    });
    at::Tensor part = out.narrow(0, begin, end - begin);
    at::sum_out(part, buf.narrow(0, 0, end - begin), {1});
  }
  return out;
}

template <typename scalar_t>
void backward_rows(const scalar_t* grad, bool dot, const scalar_t* r, const int64_t* src,
                   const int64_t* dst, const std::vector<int64_t>& sptr,
                   const std::vector<int64_t>& sorder, const std::vector<int64_t>& dptr,
                   const std::vector<int64_t>& dorder, int64_t rows, int64_t width,
                   scalar_t* out, int64_t threads) {
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(width, 1));
  parallel_chunks(num_chunks(rows, grain), threads, [&](int64_t c) {
    std::vector<scalar_t> a(width), b(width);
    const int64_t end = std::min(rows, (c + 1) * grain);
    for (int64_t row = c * grain; row < end; ++row) {
      // a: the row as a src end (grad times the dst's row); b: as a dst end
      for (int side = 0; side < 2; ++side) {
        scalar_t* acc = side == 0 ? a.data() : b.data();
        const std::vector<int64_t>& ptr = side == 0 ? sptr : dptr;
        const std::vector<int64_t>& order = side == 0 ? sorder : dorder;
        const int64_t* other = side == 0 ? dst : src;
        std::fill(acc, acc + width, scalar_t(0));
        for (int64_t q = ptr[row]; q < ptr[row + 1]; ++q) {
          const int64_t p = order[q];
          const scalar_t* x = r + other[p] * width;
          if (dot) {
            const scalar_t g = grad[p];
            for (int64_t k = 0; k < width; ++k) acc[k] += g * x[k];
          } else {
            const scalar_t* g = grad + p * width;
            for (int64_t k = 0; k < width; ++k) acc[k] += g[k] * x[k];
          }
        }
      }
      scalar_t* o = out + row * width;
      for (int64_t k = 0; k < width; ++k) o[k] = a[k] + b[k];
    }
  });
}

at::Tensor pair_product_backward(const at::Tensor& grad_in, const at::Tensor& rows_in,
                                 const at::Tensor& src_in, const at::Tensor& dst_in,
                                 int64_t num_threads) {
  check_pair_product(rows_in, src_in, dst_in, grad_in);
  const at::Tensor rows = rows_in.contiguous(), src = src_in.contiguous(),
                   dst = dst_in.contiguous(), grad = grad_in.contiguous();
  const int64_t n = rows.size(0), width = rows.size(1), pairs = src.numel();
  std::vector<int64_t> sptr, sorder, dptr, dorder;
  by_row(src.data_ptr<int64_t>(), pairs, n, sptr, sorder);
  by_row(dst.data_ptr<int64_t>(), pairs, n, dptr, dorder);
  at::Tensor out = at::empty({n, width}, rows.options());
  static ContentionGuard guard;
  const int64_t threads = guard.threads(resolve_threads(num_threads));
  const int64_t waited_before = helper_wait_ns();
  const auto start = std::chrono::steady_clock::now();
  AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "pair_product_backward", [&] {
    backward_rows(grad.data_ptr<scalar_t>(), grad.dim() == 1, rows.data_ptr<scalar_t>(),
                  src.data_ptr<int64_t>(), dst.data_ptr<int64_t>(), sptr, sorder, dptr, dorder,
                  n, width, out.data_ptr<scalar_t>(), threads);
  });
  guard.report(threads,
               std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - start).count(),
               helper_wait_ns() - waited_before);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) {
  m.impl("pair_product", &pair_product);
  m.impl("pair_product_backward", &pair_product_backward);
}

}  // namespace gnnscale::pairs
