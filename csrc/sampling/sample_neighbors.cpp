// The sampling domain's schemas and the argument checks its kernels share.
#include "sampling/sample_neighbors.h"

#include <torch/library.h>

namespace gnnscale::sampling {

void check_sample_neighbors(const at::Tensor& indptr, const at::Tensor& indices,
                            const c10::optional<at::Tensor>& weights, const at::Tensor& seeds,
                            at::IntArrayRef fanouts) {
  for (const at::Tensor* t : {&indptr, &indices, &seeds})
    TORCH_CHECK(t->device().is_cpu() && t->dim() == 1,
                "sample_neighbors: indptr, indices and seeds must be 1-D CPU tensors");
  TORCH_CHECK(indptr.scalar_type() == at::kLong, "sample_neighbors: indptr must be int64, got ",
              indptr.scalar_type());
  TORCH_CHECK(indptr.numel() >= 1, "sample_neighbors: indptr needs num_nodes + 1 entries");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "sample_neighbors: indices must be int64 or int32, got ", indices.scalar_type());
  TORCH_CHECK(indptr[-1].item<int64_t>() == indices.numel(), "sample_neighbors: indptr[-1] = ",
              indptr[-1].item<int64_t>(), " but indices has ", indices.numel(), " entries");
  TORCH_CHECK(seeds.scalar_type() == at::kLong, "sample_neighbors: seeds must be int64, got ",
              seeds.scalar_type());
  TORCH_CHECK(!fanouts.empty(), "sample_neighbors: fanouts is empty; give one fanout per layer");
  for (int64_t f : fanouts)
    TORCH_CHECK(f >= -1, "sample_neighbors: fanouts must be -1 (all neighbors) or >= 0, got ",
                f);
  if (weights.has_value()) {
    const at::Tensor& w = *weights;
    TORCH_CHECK(w.device().is_cpu() && w.dim() == 1 && w.numel() == indices.numel(),
                "sample_neighbors: weights must be a 1-D CPU tensor with one entry per edge (",
                indices.numel(), "), got shape ", w.sizes());
    TORCH_CHECK(w.scalar_type() == at::kFloat, "sample_neighbors: weights must be float32, got ",
                w.scalar_type());
  }
  const int64_t num_nodes = indptr.numel() - 1;
  if (seeds.numel() > 0) {
    const int64_t lo = seeds.min().item<int64_t>(), hi = seeds.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < num_nodes, "sample_neighbors: seeds hold ids in [", lo, ", ",
                hi, "] but the graph has ", num_nodes, " nodes (ids must be in [0, ",
                num_nodes, "))");
  }
}

void check_typed_fanouts(const at::Tensor& type_per_edge, const at::Tensor& indices,
                         at::IntArrayRef fanouts, int64_t num_edge_types) {
  TORCH_CHECK(type_per_edge.device().is_cpu() && type_per_edge.dim() == 1 &&
                  type_per_edge.numel() == indices.numel(),
              "sample_neighbors: type_per_edge must be a 1-D CPU tensor with one entry per edge (",
              indices.numel(), "), got shape ", type_per_edge.sizes());
  TORCH_CHECK(type_per_edge.scalar_type() == at::kShort,
              "sample_neighbors: type_per_edge must be int16, got ", type_per_edge.scalar_type());
  TORCH_CHECK(num_edge_types >= 1 && num_edge_types <= 32768,
              "sample_neighbors: num_edge_types must be in [1, 32768], got ", num_edge_types);
  TORCH_CHECK(static_cast<int64_t>(fanouts.size()) % num_edge_types == 0,
              "sample_neighbors: typed fanouts must be a [hops, num_edge_types] table (",
              num_edge_types, " entries a hop), got ", fanouts.size(), " entries");
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def(
      "sample_neighbors(Tensor indptr, Tensor indices, Tensor? weights, Tensor seeds, "
      "int[] fanouts, bool replace, int seed, int num_threads=0, bool return_edge_ids=False, "
      "Tensor? type_per_edge=None, int num_edge_types=0) "
      "-> (Tensor, Tensor, Tensor[], Tensor[])");
}

}  // namespace gnnscale::sampling
