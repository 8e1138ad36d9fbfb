// The dropout domain's schemas and argument checks.
#include "dropout/dropout.h"

#include <torch/library.h>

namespace gnnscale::dropout {

void check_keyed_dropout(const at::Tensor& h, double p, const std::optional<at::Tensor>& ids) {
  TORCH_CHECK(h.device().is_cpu(), "keyed_dropout: h must be a CPU tensor");
  TORCH_CHECK(h.dim() == 2, "keyed_dropout: h must be 2-D (rows x channels), got shape ",
              h.sizes());
  TORCH_CHECK(h.scalar_type() == at::kFloat || h.scalar_type() == at::kDouble,
              "keyed_dropout: h must be float32 or float64, got ", h.scalar_type());
  TORCH_CHECK(p >= 0.0 && p < 1.0, "keyed_dropout: p must be in [0, 1), got ", p);
  if (ids.has_value()) {
    TORCH_CHECK(ids->device().is_cpu() && ids->dim() == 1,
                "keyed_dropout: ids must be a 1-D CPU tensor");
    TORCH_CHECK(ids->scalar_type() == at::kLong || ids->scalar_type() == at::kInt,
                "keyed_dropout: ids must be int64 or int32, got ", ids->scalar_type());
    TORCH_CHECK(ids->numel() == h.size(0), "keyed_dropout: got ", ids->numel(),
                " row ids for ", h.size(0), " rows");
  }
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def("keyed_dropout(Tensor h, float p, int key, Tensor? ids=None, int num_threads=0) -> Tensor");
}

}  // namespace gnnscale::dropout
