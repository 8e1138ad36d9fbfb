// negative_sample: seeded negative pairs for link prediction (schema in the .cpp).
#pragma once

#include <ATen/ATen.h>

namespace gnnscale::sampling {

// Raises a clear error unless the inputs of negative_sample are well formed.
void check_negative_sample(const at::Tensor& indptr, const at::Tensor& indices,
                           const at::Tensor& sources, const at::Tensor& keys, int64_t num_nodes,
                           int64_t k, int64_t mode, int64_t max_tries);

// Raises a clear error unless edge_table is an edge_key_table: 1-D int64, a power of two slots.
void check_edge_table(const at::Tensor& table);

// Raises a clear error unless `range` (named `name`) is [lo, hi) with 0 <= lo < hi <= num_nodes.
void check_id_range(at::IntArrayRef range, int64_t num_nodes, const char* name);

}  // namespace gnnscale::sampling
