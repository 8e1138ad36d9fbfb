// The deps domain's schemas and argument checks.
#include "deps/hybrid_plan.h"

#include <torch/library.h>

namespace gnnscale::deps {

void check_greedy(const at::Tensor& recompute_cost, const at::Tensor& comm_cost,
                  const std::optional<at::Tensor>& mem_bytes) {
  const int64_t n = recompute_cost.numel();
  TORCH_CHECK(comm_cost.numel() == 1 || comm_cost.numel() == n,
              "hybrid_greedy: comm_cost needs one value or one per candidate (", n, "), got ",
              comm_cost.numel());
  TORCH_CHECK(!mem_bytes || mem_bytes->numel() == n,
              "hybrid_greedy: mem_bytes needs one value per candidate (", n, "), got ",
              mem_bytes ? mem_bytes->numel() : 0);
}

void check_graph_ids(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& ids,
                     const char* op) {
  TORCH_CHECK(indptr.dim() == 1 && indptr.numel() >= 1 && indptr.scalar_type() == at::kLong,
              op, ": indptr must be a 1-D int64 CSC pointer (num_nodes + 1 entries)");
  TORCH_CHECK(indices.dim() == 1 &&
                  (indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt),
              op, ": indices must be 1-D int64 or int32");
  const int64_t n = indptr.numel() - 1;
  TORCH_CHECK(ids.dim() == 1 && ids.scalar_type() == at::kLong, op, ": ids must be 1-D int64");
  if (ids.numel() > 0)
    TORCH_CHECK(ids.min().item<int64_t>() >= 0 && ids.max().item<int64_t>() < n, op,
                ": id out of [0, num_nodes)");
}

void check_subtree(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& cand,
                   at::TensorList ok) {
  check_graph_ids(indptr, indices, cand, "subtree");
  const int64_t n = indptr.numel() - 1;
  TORCH_CHECK(!ok.empty(), "subtree: needs one availability mask per layer 0..k");
  for (const at::Tensor& m : ok)
    TORCH_CHECK(m.dim() == 1 && m.numel() == n && m.scalar_type() == at::kBool,
                "subtree: every availability mask must be a bool tensor of num_nodes entries");
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def(
      "hybrid_greedy(Tensor recompute_cost, Tensor comm_cost, Tensor? mem_bytes, "
      "float? budget, float mu) -> Tensor");
  m.def(
      "subtree_costs(Tensor indptr, Tensor indices, Tensor cand, Tensor[] ok, int[] dims, "
      "Tensor layer_costs, int edge_bytes, int num_threads=0) -> (Tensor, Tensor)");
  m.def(
      "subtree_rows(Tensor indptr, Tensor indices, Tensor cand, Tensor take, Tensor[] ok, "
      "int num_threads=0) -> Tensor[]");
  m.def(
      "in_edges(Tensor indptr, Tensor indices, Tensor ids, int num_threads=0) -> "
      "(Tensor, Tensor)");
  m.def("needed_mask(Tensor indptr, Tensor indices, Tensor ids) -> Tensor");
}

}  // namespace gnnscale::deps
