// advise_huge_pages, shared by the gather kernel (its fresh outputs ask for huge pages too).
#pragma once

#include <ATen/ATen.h>

namespace gnnscale::gather {

bool advise_huge_pages(const at::Tensor& t);

}  // namespace gnnscale::gather
