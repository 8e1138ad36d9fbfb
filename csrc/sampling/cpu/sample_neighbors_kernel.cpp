// sample_neighbors, CPU kernel: multi-hop neighbor sampling over a CSC graph with hash-based
// relabeling.
//
// Hop h samples the in-neighbors of every vertex sampled so far (targets first, then each
// hop's new sources), so a layer's destinations are the first n_dst of its sources. Per hop:
//   1. count (parallel): how many neighbors each destination draws;
//   2. prefix sum of the counts -> each destination's slice of the edge list;
//   3. fill (parallel): each destination draws edge positions into its slice with an RNG
//      keyed by (seed, hop, global id) -- the sample does not depend on the thread count --
//      then the slice's positions become source ids in one prefetched streaming pass (the
//      random reads of `indices` are what bounds sampling, so they are batched and overlapped);
//   4. relabel (sequential, hash map with prefetching): global source ids -> local ids,
//      new ids in first-appearance order.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <tuple>
#include <vector>

#include "sampling/cpu/neighbor_draw.h"
#include "sampling/sample_neighbors.h"
#include "utils/id_map.h"
#include "utils/rng.h"

namespace gnnscale::sampling {
namespace {

constexpr int64_t kAhead = 16;  // prefetch distance of the latency-bound loops

// One hop: draws for destinations n_id[0, n_dst), then relabels; returns [2, E] local edges.
template <typename index_t>
at::Tensor sample_hop(const int64_t* indptr, const index_t* indices, const float* weights,
                      int64_t num_nodes, int64_t fanout, bool replace, uint64_t seed,
                      int64_t hop, std::vector<int64_t>& n_id, IdMap& map) {
  const int64_t n_dst = static_cast<int64_t>(n_id.size());
  std::vector<int64_t> offsets(n_dst + 1, 0);
  std::atomic<bool> bad_weight{false};
  at::parallel_for(0, n_dst, 512, [&](int64_t begin, int64_t end) {
    NeighborDraw draw(indptr, weights, fanout, replace);
    bool bad = false;
    for (int64_t i = begin; i < end; ++i) {
      if (i + kAhead < end) __builtin_prefetch(indptr + n_id[i + kAhead]);
      offsets[i + 1] = draw.count(n_id[i], &bad);
    }
    if (bad) bad_weight.store(true);
  });
  TORCH_CHECK(!bad_weight.load(),
              "sample_neighbors: edge weights must be non-negative and not NaN");
  for (int64_t i = 0; i < n_dst; ++i) offsets[i + 1] += offsets[i];
  const int64_t num_edges = offsets[n_dst];
  at::Tensor edges = at::empty({2, num_edges}, at::kLong);
  int64_t* src = edges.data_ptr<int64_t>();
  int64_t* dst = src + num_edges;
  at::parallel_for(0, n_dst, 512, [&](int64_t begin, int64_t end) {
    NeighborDraw draw(indptr, weights, fanout, replace);
    for (int64_t i = begin; i < end; ++i) {
      if (i + kAhead < end) __builtin_prefetch(indptr + n_id[i + kAhead]);
      const int64_t v = n_id[i];
      KeyedRng rng(seed, static_cast<uint64_t>(hop), static_cast<uint64_t>(v));
      const int64_t off = offsets[i], c = offsets[i + 1] - off;
      draw.draw(v, c, rng, src + off);
      std::fill(dst + off, dst + off + c, i);
    }
    const int64_t e_end = offsets[end];
    for (int64_t e = offsets[begin]; e < e_end; ++e) {
      if (e + kAhead < e_end) __builtin_prefetch(indices + src[e + kAhead]);
      src[e] = static_cast<int64_t>(indices[src[e]]);
    }
  });
  map.reserve(std::min(map.size() + num_edges, num_nodes));
  for (int64_t e = 0; e < num_edges; ++e) {
    if (e + kAhead < num_edges) map.prefetch(src[e + kAhead]);
    const int64_t g = src[e];
    TORCH_CHECK(g >= 0 && g < num_nodes, "sample_neighbors: the graph's indices hold id ", g,
                " outside [0, ", num_nodes, ")");
    bool inserted;
    src[e] = map.insert(g, static_cast<int64_t>(n_id.size()), &inserted);
    if (inserted) n_id.push_back(g);
  }
  return edges;
}

std::tuple<at::Tensor, at::Tensor, std::vector<at::Tensor>> sample_neighbors(
    const at::Tensor& indptr_in, const at::Tensor& indices_in,
    const c10::optional<at::Tensor>& weights_in, const at::Tensor& seeds_in,
    at::IntArrayRef fanouts, bool replace, int64_t seed) {
  check_sample_neighbors(indptr_in, indices_in, weights_in, seeds_in, fanouts);
  const at::Tensor indptr = indptr_in.contiguous();
  const at::Tensor indices = indices_in.contiguous();
  const at::Tensor seeds = seeds_in.contiguous();
  at::Tensor weights;
  if (weights_in.has_value()) weights = weights_in->contiguous();
  const float* w = weights.defined() ? weights.data_ptr<float>() : nullptr;
  const int64_t num_nodes = indptr.numel() - 1;

  const int64_t* seed_ptr = seeds.data_ptr<int64_t>();
  std::vector<int64_t> n_id(seed_ptr, seed_ptr + seeds.numel());
  IdMap map(seeds.numel());
  for (int64_t i = 0; i < seeds.numel(); ++i) {
    bool inserted;
    map.insert(seed_ptr[i], i, &inserted);
  }
  std::vector<int64_t> counts{seeds.numel()};
  std::vector<at::Tensor> edges;
  for (size_t h = 0; h < fanouts.size(); ++h) {
    const uint64_t s = static_cast<uint64_t>(seed);
    if (indices.scalar_type() == at::kLong)
      edges.push_back(sample_hop(indptr.data_ptr<int64_t>(), indices.data_ptr<int64_t>(), w,
                                 num_nodes, fanouts[h], replace, s, h, n_id, map));
    else
      edges.push_back(sample_hop(indptr.data_ptr<int64_t>(), indices.data_ptr<int32_t>(), w,
                                 num_nodes, fanouts[h], replace, s, h, n_id, map));
    counts.push_back(static_cast<int64_t>(n_id.size()));
  }
  at::Tensor n_id_t = at::empty({static_cast<int64_t>(n_id.size())}, at::kLong);
  std::copy(n_id.begin(), n_id.end(), n_id_t.data_ptr<int64_t>());
  at::Tensor counts_t = at::empty({static_cast<int64_t>(counts.size())}, at::kLong);
  std::copy(counts.begin(), counts.end(), counts_t.data_ptr<int64_t>());
  return {n_id_t, counts_t, edges};
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) { m.impl("sample_neighbors", &sample_neighbors); }

}  // namespace gnnscale::sampling
