// sample_neighbors: multi-hop neighbor sampling over a CSC graph (schema in the .cpp).
#pragma once

#include <ATen/ATen.h>

namespace gnnscale::sampling {

// Raises a clear error unless the inputs of sample_neighbors are well formed.
void check_sample_neighbors(const at::Tensor& indptr, const at::Tensor& indices,
                            const c10::optional<at::Tensor>& weights, const at::Tensor& seeds,
                            at::IntArrayRef fanouts);

}  // namespace gnnscale::sampling
