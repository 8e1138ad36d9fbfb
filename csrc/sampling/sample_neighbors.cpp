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

std::vector<int64_t> check_typed_runs(at::TensorList runs, int64_t num_nodes,
                                      at::IntArrayRef fanouts, int64_t num_edge_types) {
  TORCH_CHECK(runs.size() == 4, "sample_neighbors: typed_runs must be [runs, node_type_offset, "
              "run_ptr, run_types] (typed_runs), got ", runs.size(), " tensors");
  for (const at::Tensor& t : runs)
    TORCH_CHECK(t.device().is_cpu() && t.dim() == 1,
                "sample_neighbors: typed_runs must hold 1-D CPU tensors");
  TORCH_CHECK(runs[0].scalar_type() == at::kInt, "sample_neighbors: the run table must be "
              "int32, got ", runs[0].scalar_type());
  for (int i = 1; i < 4; ++i)
    TORCH_CHECK(runs[i].scalar_type() == at::kLong, "sample_neighbors: node_type_offset, "
                "run_ptr and run_types must be int64");
  TORCH_CHECK(num_edge_types >= 1, "sample_neighbors: num_edge_types must be >= 1, got ",
              num_edge_types);
  TORCH_CHECK(static_cast<int64_t>(fanouts.size()) % num_edge_types == 0,
              "sample_neighbors: typed fanouts must be a [hops, num_edge_types] table (",
              num_edge_types, " entries a hop), got ", fanouts.size(), " entries");
  const at::Tensor off = runs[1].contiguous(), ptr = runs[2].contiguous(),
                   types = runs[3].contiguous();
  const int64_t node_types = off.numel() - 1;
  TORCH_CHECK(node_types >= 1 && ptr.numel() == node_types + 1,
              "sample_neighbors: node_type_offset and run_ptr need num_node_types + 1 entries");
  const int64_t* o = off.data_ptr<int64_t>();
  const int64_t* p = ptr.data_ptr<int64_t>();
  TORCH_CHECK(o[0] == 0 && o[node_types] == num_nodes && p[0] == 0 &&
                  p[node_types] == types.numel(),
              "sample_neighbors: node_type_offset must run from 0 to num_nodes (", num_nodes,
              ") and run_ptr from 0 to the length of run_types");
  std::vector<int64_t> base(node_types);
  int64_t rows = 0;
  for (int64_t d = 0; d < node_types; ++d) {
    TORCH_CHECK(o[d + 1] >= o[d] && p[d + 1] >= p[d],
                "sample_neighbors: node_type_offset and run_ptr must not decrease");
    base[d] = rows;
    rows += (o[d + 1] - o[d]) * (p[d + 1] - p[d]);
  }
  TORCH_CHECK(runs[0].numel() == rows, "sample_neighbors: the run table has ", runs[0].numel(),
              " entries, its layout needs ", rows, " (build it with typed_runs)");
  if (types.numel() > 0) {
    const int64_t lo = types.min().item<int64_t>(), hi = types.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < num_edge_types, "sample_neighbors: run_types hold edge types "
                "in [", lo, ", ", hi, "], outside [0, ", num_edge_types, ")");
  }
  return base;
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def(
      "sample_neighbors(Tensor indptr, Tensor indices, Tensor? weights, Tensor seeds, "
      "int[] fanouts, bool replace, int seed, int num_threads=0, bool return_edge_ids=False, "
      "Tensor? type_runs=None, Tensor? node_type_offset=None, Tensor? run_ptr=None, "
      "Tensor? run_types=None, int num_edge_types=0) "
      "-> (Tensor, Tensor, Tensor[], Tensor[])");
}

}  // namespace gnnscale::sampling
