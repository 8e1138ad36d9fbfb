// split_sample: the online split of one shared mini-batch sample over ranks (schema in the .cpp).
#pragma once

#include <ATen/ATen.h>

namespace gnnscale::split {

// Raises a clear error unless the inputs of split_sample are well formed.
void check_split_sample(const at::Tensor& counts, at::TensorList edges, const at::Tensor& own_in,
                        const at::Tensor& own_part, int64_t world, int64_t rank,
                        const at::Tensor& costs, bool preagg, bool read_in);

}  // namespace gnnscale::split
