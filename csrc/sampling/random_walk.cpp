// random_walk_top_k's schema and argument checks (kernel: cpu/random_walk_kernel.cpp).
#include "sampling/random_walk.h"

#include <torch/library.h>

namespace gnnscale::sampling {

void check_random_walk(const at::Tensor& indptr, const at::Tensor& indices,
                       const at::Tensor& targets, int64_t num_walks, int64_t walk_length,
                       int64_t top_k) {
  for (const at::Tensor* t : {&indptr, &indices, &targets})
    TORCH_CHECK(t->device().is_cpu() && t->dim() == 1,
                "random_walk_top_k: indptr, indices and targets must be 1-D CPU tensors");
  TORCH_CHECK(indptr.scalar_type() == at::kLong, "random_walk_top_k: indptr must be int64, got ",
              indptr.scalar_type());
  TORCH_CHECK(indptr.numel() >= 1, "random_walk_top_k: indptr needs num_nodes + 1 entries");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "random_walk_top_k: indices must be int64 or int32, got ", indices.scalar_type());
  TORCH_CHECK(indptr[0].item<int64_t>() == 0 && indptr[-1].item<int64_t>() == indices.numel(),
              "random_walk_top_k: indptr must run from 0 to the number of indices (",
              indices.numel(), "), got ", indptr[0].item<int64_t>(), " .. ",
              indptr[-1].item<int64_t>());
  if (indptr.numel() > 1)
    TORCH_CHECK((indptr.slice(0, 1) >= indptr.slice(0, 0, -1)).all().item<bool>(),
                "random_walk_top_k: indptr must be non-decreasing");
  TORCH_CHECK(targets.scalar_type() == at::kLong, "random_walk_top_k: targets must be int64, got ",
              targets.scalar_type());
  TORCH_CHECK(num_walks >= 1, "random_walk_top_k: num_walks must be >= 1, got ", num_walks);
  TORCH_CHECK(walk_length >= 1, "random_walk_top_k: walk_length must be >= 1, got ",
              walk_length);
  TORCH_CHECK(top_k >= 1, "random_walk_top_k: top_k must be >= 1, got ", top_k);
  TORCH_CHECK(num_walks <= (int64_t{1} << 20) && walk_length <= (int64_t{1} << 20),
              "random_walk_top_k: num_walks and walk_length must be at most 2^20");
  const int64_t num_nodes = indptr.numel() - 1;
  if (targets.numel() > 0) {
    const int64_t lo = targets.min().item<int64_t>(), hi = targets.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < num_nodes, "random_walk_top_k: targets hold ids in [", lo, ", ",
                hi, "] but the graph has ", num_nodes, " nodes (ids must be in [0, ", num_nodes,
                "))");
  }
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def(
      "random_walk_top_k(Tensor indptr, Tensor indices, Tensor targets, int num_walks, "
      "int walk_length, int top_k, int seed, int hop, int num_threads=0) "
      "-> (Tensor, Tensor, Tensor)");
}

}  // namespace gnnscale::sampling
