// The pairs domain's schemas and argument checks (kernels: cpu/pair_product_kernel.cpp).
#include "pairs/pair_product.h"

#include <torch/library.h>

namespace gnnscale::pairs {

void check_pair_product(const at::Tensor& rows, const at::Tensor& src, const at::Tensor& dst,
                        const at::Tensor& grad) {
  TORCH_CHECK(rows.device().is_cpu() && src.device().is_cpu() && dst.device().is_cpu(),
              "pair_product: rows, src and dst must be CPU tensors");
  TORCH_CHECK(rows.dim() == 2, "pair_product: rows must be 2-D (rows x width), got shape ",
              rows.sizes());
  TORCH_CHECK(rows.scalar_type() == at::kFloat || rows.scalar_type() == at::kDouble,
              "pair_product: rows must be float32 or float64, got ", rows.scalar_type());
  TORCH_CHECK(src.dim() == 1 && dst.dim() == 1 && src.numel() == dst.numel(),
              "pair_product: src and dst must be 1-D and as long as each other, got ",
              src.sizes(), " and ", dst.sizes());
  TORCH_CHECK(src.scalar_type() == at::kLong && dst.scalar_type() == at::kLong,
              "pair_product: src and dst must be int64, got ", src.scalar_type(), " and ",
              dst.scalar_type());
  const int64_t n = rows.size(0);
  for (const at::Tensor* t : {&src, &dst}) {
    if (t->numel() == 0) continue;
    const int64_t lo = t->min().item<int64_t>(), hi = t->max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < n, "pair_product: pair ends hold ids in [", lo, ", ", hi,
                "] but rows has ", n, " rows");
  }
  if (grad.defined()) {
    TORCH_CHECK(grad.device().is_cpu() && grad.scalar_type() == rows.scalar_type(),
                "pair_product_backward: grad must be a CPU tensor of rows' dtype ",
                rows.scalar_type(), ", got ", grad.scalar_type());
    const bool dot = grad.dim() == 1 && grad.size(0) == src.numel();
    const bool full = grad.dim() == 2 && grad.size(0) == src.numel() &&
                      grad.size(1) == rows.size(1);
    TORCH_CHECK(dot || full, "pair_product_backward: grad must be [", src.numel(), "] or [",
                src.numel(), ", ", rows.size(1), "], got ", grad.sizes());
  }
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def("pair_product(Tensor rows, Tensor src, Tensor dst, bool reduce) -> Tensor");
  m.def(
      "pair_product_backward(Tensor grad, Tensor rows, Tensor src, Tensor dst, "
      "int num_threads=0) -> Tensor");
}

}  // namespace gnnscale::pairs
