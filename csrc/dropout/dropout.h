// The dropout domain: keyed_dropout, inverted dropout whose mask is a pure function of
// (key, row id, column), so it needs no stored mask and replicas draw the same one.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace gnnscale::dropout {

// Raises a clear error unless `h` (and `ids`, when given) can be dropped out.
void check_keyed_dropout(const at::Tensor& h, double p, const std::optional<at::Tensor>& ids);

}  // namespace gnnscale::dropout
