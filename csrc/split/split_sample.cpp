// The split domain's schema and argument checks.
#include "split/split_sample.h"

#include <torch/library.h>

namespace gnnscale::split {

void check_split_sample(const at::Tensor& counts, at::TensorList edges, const at::Tensor& own_in,
                        const at::Tensor& own_part, int64_t world, int64_t rank,
                        const at::Tensor& costs) {
  TORCH_CHECK(world >= 1 && rank >= 0 && rank < world, "split_sample: bad rank/world");
  const int64_t L = static_cast<int64_t>(edges.size());
  TORCH_CHECK(counts.numel() == L + 1, "split_sample: counts needs one entry per layer + 1");
  for (const at::Tensor& e : edges)
    TORCH_CHECK(e.dim() == 2 && e.size(0) == 2, "split_sample: edges must be (2, E)");
  // counts are in sampler order (targets first): the input layer has counts[L] vertices
  const int64_t n0 = counts.to(at::kLong)[L].item<int64_t>();
  TORCH_CHECK(own_in.numel() >= n0 && own_part.numel() >= n0, "split_sample: owners too short");
  for (const at::Tensor* o : {&own_in, &own_part}) {
    if (n0 == 0) break;
    const at::Tensor head = o->reshape(-1).slice(0, 0, n0);
    TORCH_CHECK(head.min().item<int64_t>() >= 0 && head.max().item<int64_t>() < world,
                "split_sample: owner out of [0, world)");
  }
  TORCH_CHECK(costs.numel() == 3 * (L + 1), "split_sample: costs must hold 3 * (L + 1) values");
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def(
      "split_sample(Tensor counts, Tensor[] edges, Tensor own_in, Tensor own_part, int world, "
      "int rank, bool preagg, Tensor costs, int budget, int num_threads=0, bool edge_pos=False) "
      "-> Tensor[]");
  m.def(
      "split_sample_all(Tensor counts, Tensor[] edges, Tensor own_in, Tensor own_part, "
      "int world, bool preagg, Tensor costs, int budget, int num_threads=0, bool edge_pos=False) "
      "-> Tensor[]");
}

}  // namespace gnnscale::split
