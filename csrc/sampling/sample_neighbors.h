// sample_neighbors: multi-hop neighbor sampling over a CSC graph (schema in the .cpp).
#pragma once

#include <ATen/ATen.h>

namespace gnnscale::sampling {

// Raises a clear error unless the inputs of sample_neighbors are well formed.
void check_sample_neighbors(const at::Tensor& indptr, const at::Tensor& indices,
                            const c10::optional<at::Tensor>& weights, const at::Tensor& seeds,
                            at::IntArrayRef fanouts);

// Raises a clear error unless type_per_edge and the [hops, num_edge_types] fanout table of
// typed sampling are well formed.
void check_typed_fanouts(const at::Tensor& type_per_edge, const at::Tensor& indices,
                         at::IntArrayRef fanouts, int64_t num_edge_types);

}  // namespace gnnscale::sampling
