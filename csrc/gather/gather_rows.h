// The gather domain: gather_rows (+ its out= variant) and advise_huge_pages.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace gnnscale::gather {

// Raises a clear error unless `table` and `ids` can be gathered from.
void check_gather_rows(const at::Tensor& table, const at::Tensor& ids);

// Raises a clear error unless `out` can receive table[ids].
void check_gather_out(const at::Tensor& table, const at::Tensor& ids, const at::Tensor& out);

// The shape of table[ids].
std::vector<int64_t> gather_shape(const at::Tensor& table, const at::Tensor& ids);

}  // namespace gnnscale::gather
