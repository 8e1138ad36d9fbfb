// negative_sample's schema and argument checks (kernel: cpu/negative_sample_kernel.cpp).
#include "sampling/negative_sample.h"

#include <torch/library.h>

namespace gnnscale::sampling {

void check_negative_sample(const at::Tensor& indptr, const at::Tensor& indices,
                           const at::Tensor& sources, const at::Tensor& keys, int64_t num_nodes,
                           int64_t k, int64_t mode, int64_t max_tries) {
  for (const at::Tensor* t : {&indptr, &indices, &sources, &keys})
    TORCH_CHECK(t->device().is_cpu() && t->dim() == 1,
                "negative_sample: indptr, indices, sources and keys must be 1-D CPU tensors");
  TORCH_CHECK(num_nodes >= 1, "negative_sample: num_nodes must be >= 1, got ", num_nodes);
  TORCH_CHECK(k >= 1, "negative_sample: k (negatives per positive) must be >= 1, got ", k);
  TORCH_CHECK(mode == 0 || mode == 1, "negative_sample: mode must be 0 (uniform) or 1 "
              "(per source), got ", mode);
  TORCH_CHECK(max_tries >= 1, "negative_sample: max_tries must be >= 1, got ", max_tries);
  TORCH_CHECK(keys.scalar_type() == at::kLong, "negative_sample: keys must be int64, got ",
              keys.scalar_type());
  TORCH_CHECK(sources.scalar_type() == at::kLong, "negative_sample: sources must be int64, got ",
              sources.scalar_type());
  TORCH_CHECK(mode == 0 || sources.numel() == keys.numel(),
              "negative_sample: per-source mode needs one source per key (", sources.numel(),
              " sources, ", keys.numel(), " keys)");
  if (mode == 1 && sources.numel() > 0) {
    const int64_t lo = sources.min().item<int64_t>(), hi = sources.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < num_nodes, "negative_sample: sources hold ids in [", lo, ", ",
                hi, "] but there are ", num_nodes, " nodes");
  }
  if (indptr.numel() > 0) {  // edges to reject: a CSC graph over the same nodes
    TORCH_CHECK(indptr.scalar_type() == at::kLong, "negative_sample: indptr must be int64");
    TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
                "negative_sample: indices must be int64 or int32, got ", indices.scalar_type());
    TORCH_CHECK(indptr.numel() == num_nodes + 1, "negative_sample: indptr has ", indptr.numel(),
                " entries for ", num_nodes, " nodes (num_nodes + 1 expected)");
    TORCH_CHECK(indptr[0].item<int64_t>() == 0 && indptr[-1].item<int64_t>() == indices.numel(),
                "negative_sample: indptr must run from 0 to the number of indices");
  }
}

void check_edge_table(const at::Tensor& table) {
  TORCH_CHECK(table.device().is_cpu() && table.dim() == 1 && table.scalar_type() == at::kLong,
              "negative_sample: edge_table must be a 1-D int64 CPU tensor (edge_key_table)");
  const int64_t n = table.numel();
  TORCH_CHECK(n >= 2 && (n & (n - 1)) == 0, "negative_sample: edge_table must have a power of "
              "two >= 2 slots (edge_key_table), got ", n);
}

void check_id_range(at::IntArrayRef range, int64_t num_nodes, const char* name) {
  TORCH_CHECK(range.size() == 2 && 0 <= range[0] && range[0] < range[1] &&
                  range[1] <= num_nodes,
              "negative_sample: ", name, " must be [lo, hi) with 0 <= lo < hi <= num_nodes (",
              num_nodes, "), got ", range);
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def(
      "negative_sample(Tensor indptr, Tensor indices, Tensor sources, Tensor keys, "
      "int num_nodes, int k, int mode, int seed, int max_tries=64, int num_threads=0, "
      "Tensor? edge_table=None, int[]? src_range=None, int[]? dst_range=None) "
      "-> (Tensor, Tensor)");
  m.def("edge_key_table(Tensor indptr, Tensor indices) -> Tensor");
}

}  // namespace gnnscale::sampling
