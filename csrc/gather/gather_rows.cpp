// The gather domain's schemas and argument checks.
#include "gather/gather_rows.h"

#include <torch/library.h>

namespace gnnscale::gather {

void check_gather_rows(const at::Tensor& table, const at::Tensor& ids) {
  TORCH_CHECK(table.device().is_cpu() && ids.device().is_cpu(),
              "gather_rows: table and ids must be CPU tensors");
  TORCH_CHECK(table.dim() >= 1, "gather_rows: table must have at least one dimension");
  TORCH_CHECK(ids.dim() == 1, "gather_rows: ids must be 1-D, got shape ", ids.sizes());
  TORCH_CHECK(ids.scalar_type() == at::kLong || ids.scalar_type() == at::kInt,
              "gather_rows: ids must be int64 or int32, got ", ids.scalar_type());
}

std::vector<int64_t> gather_shape(const at::Tensor& table, const at::Tensor& ids) {
  std::vector<int64_t> shape(table.sizes().begin(), table.sizes().end());
  shape[0] = ids.numel();
  return shape;
}

void check_gather_out(const at::Tensor& table, const at::Tensor& ids, const at::Tensor& out) {
  check_gather_rows(table, ids);
  const std::vector<int64_t> shape = gather_shape(table, ids);
  TORCH_CHECK(out.device().is_cpu() && out.scalar_type() == table.scalar_type() &&
                  out.sizes().vec() == shape && out.is_contiguous(),
              "gather_rows: out must be a contiguous CPU tensor of dtype ", table.scalar_type(),
              " and shape ", at::IntArrayRef(shape), ", got ", out.scalar_type(), " ",
              out.sizes());
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def("gather_rows(Tensor table, Tensor ids, int num_threads=0) -> Tensor");
  m.def(
      "gather_rows_out(Tensor table, Tensor ids, Tensor(a!) out, int num_threads=0) -> "
      "Tensor(a!)");
  m.def("advise_huge_pages(Tensor t) -> bool");
}

}  // namespace gnnscale::gather
