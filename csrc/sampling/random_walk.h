// random_walk_top_k: PinSAGE random-walk neighbourhoods over a CSC graph (schema in the .cpp).
#pragma once

#include <ATen/ATen.h>

namespace gnnscale::sampling {

// Raises a clear error unless the inputs of random_walk_top_k are well formed.
void check_random_walk(const at::Tensor& indptr, const at::Tensor& indices,
                       const at::Tensor& targets, int64_t num_walks, int64_t walk_length,
                       int64_t top_k);

}  // namespace gnnscale::sampling
