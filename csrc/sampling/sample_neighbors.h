// sample_neighbors: multi-hop neighbor sampling over a CSC graph (schema in the .cpp).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace gnnscale::sampling {

// Raises a clear error unless the inputs of sample_neighbors are well formed.
void check_sample_neighbors(const at::Tensor& indptr, const at::Tensor& indices,
                            const c10::optional<at::Tensor>& weights, const at::Tensor& seeds,
                            at::IntArrayRef fanouts);

// Raises a clear error unless the run table of typed sampling (int32 runs, int64
// node_type_offset, run_ptr, run_types: see cpu/sample_neighbors_kernel.cpp) fits a graph of
// num_nodes nodes and the fanouts are a [hops, num_edge_types] table; returns where each node
// type's rows start in the runs.
std::vector<int64_t> check_typed_runs(at::TensorList runs, int64_t num_nodes,
                                      at::IntArrayRef fanouts, int64_t num_edge_types);

}  // namespace gnnscale::sampling
