// The split domain's schema and argument checks.
#include "split/split_sample.h"

#include <torch/library.h>

#include <algorithm>
#include <cstdint>

namespace gnnscale::split {
namespace {

// Whether the first n owners lie in [0, world). The owners as the wrappers pass them (int32,
// contiguous) are read in place, in one loop the compiler vectorises: two dispatched
// reductions would cost a good part of a small split.
bool owners_in_range(const at::Tensor& own, int64_t n, int64_t world) {
  if (n > 0 && own.scalar_type() == at::kInt && own.dim() == 1 && own.is_contiguous()) {
    const int32_t* v = own.data_ptr<int32_t>();
    const int32_t top = static_cast<int32_t>(std::min<int64_t>(world - 1, INT32_MAX));
    bool out = false;
    for (int64_t j = 0; j < n; ++j) out |= (v[j] < 0) | (v[j] > top);
    return !out;
  }
  const at::Tensor head = own.reshape(-1).slice(0, 0, n);
  return head.min().item<int64_t>() >= 0 && head.max().item<int64_t>() < world;
}

}  // namespace

void check_split_sample(const at::Tensor& counts, at::TensorList edges, const at::Tensor& own_in,
                        const at::Tensor& own_part, int64_t world, int64_t rank,
                        const at::Tensor& costs, bool preagg, bool read_in) {
  TORCH_CHECK(world >= 1 && rank >= 0 && rank < world, "split_sample: bad rank/world");
  TORCH_CHECK(!(preagg && read_in),
              "split_sample: read_in (every rank reads its inputs) excludes preagg (which "
              "ships averaged input rows)");
  const int64_t L = static_cast<int64_t>(edges.size());
  TORCH_CHECK(counts.numel() == L + 1, "split_sample: counts needs one entry per layer + 1");
  for (const at::Tensor& e : edges)
    TORCH_CHECK(e.dim() == 2 && e.size(0) == 2, "split_sample: edges must be (2, E)");
  // counts are in sampler order (targets first): the input layer has counts[L] vertices
  const int64_t n0 = counts.scalar_type() == at::kLong && counts.dim() == 1
                         ? counts.data_ptr<int64_t>()[L * counts.stride(0)]
                         : counts.to(at::kLong)[L].item<int64_t>();
  TORCH_CHECK(own_in.numel() >= n0 && own_part.numel() >= n0, "split_sample: owners too short");
  for (const at::Tensor* o : {&own_in, &own_part}) {
    if (n0 == 0) break;
    TORCH_CHECK(owners_in_range(*o, n0, world), "split_sample: owner out of [0, world)");
  }
  TORCH_CHECK(costs.numel() == 3 * (L + 1) || costs.numel() == 3 * (L + 1) + 1,
              "split_sample: costs must hold 3 * (L + 1) values (and optionally the fixed "
              "seconds of one exchange)");
}

TORCH_LIBRARY_FRAGMENT(gnnscale, m) {
  m.def(
      "split_sample(Tensor counts, Tensor[] edges, Tensor own_in, Tensor own_part, int world, "
      "int rank, bool preagg, Tensor costs, int budget, int num_threads=0, bool edge_pos=False, "
      "bool read_in=False) -> Tensor[]");
  m.def(
      "split_sample_all(Tensor counts, Tensor[] edges, Tensor own_in, Tensor own_part, "
      "int world, bool preagg, Tensor costs, int budget, int num_threads=0, bool edge_pos=False, "
      "bool read_in=False) -> Tensor[]");
}

}  // namespace gnnscale::split
