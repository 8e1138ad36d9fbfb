// pair_product: the link decoder's rows of pairs, gathered and multiplied in one pass (schema in
// the .cpp).
#pragma once

#include <ATen/ATen.h>

namespace gnnscale::pairs {

// Raises a clear error unless rows (2-D float) and the pair ends src, dst (1-D int64, ids in
// [0, rows.size(0)), as many of each) are well formed; grad, when defined, must be [P] or
// [P, rows.size(1)] of rows' dtype.
void check_pair_product(const at::Tensor& rows, const at::Tensor& src, const at::Tensor& dst,
                        const at::Tensor& grad);

}  // namespace gnnscale::pairs
