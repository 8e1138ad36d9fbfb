// The deps domain: the hybrid planner's greedy step and the per-candidate subtrees of
// fullgraph's bottom-up Algorithm 4 (schemas and checks in hybrid_plan.cpp).
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace gnnscale::deps {

// Raises a clear error unless hybrid_greedy's inputs are well formed.
void check_greedy(const at::Tensor& recompute_cost, const at::Tensor& comm_cost,
                  const std::optional<at::Tensor>& mem_bytes);

// Raises a clear error (naming `op`) unless indptr/indices are a CSC graph and ids lie in it.
void check_graph_ids(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& ids,
                     const char* op);

// Raises a clear error unless the graph, candidates and masks of a subtree op are well formed.
void check_subtree(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& cand,
                   at::TensorList ok);

}  // namespace gnnscale::deps
