// sample_neighbors: multi-hop neighbor sampling over a CSC graph with hash-based relabeling.
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
#include <cmath>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "common.h"

namespace gnnscale {
namespace {

constexpr int64_t kFloydMax = 64;   // Floyd's subset sampling up to this fanout
constexpr int64_t kAhead = 16;  // prefetch distance of the latency-bound loops

// Draws the neighbors (as edge positions) of one destination for one hop. Scratch buffers are
// per instance, so each parallel chunk uses its own.
class NeighborDraw {
 public:
  NeighborDraw(const int64_t* indptr, const float* weights, int64_t fanout, bool replace)
      : indptr_(indptr), weights_(weights), fanout_(fanout), replace_(replace) {}

  // Number of neighbors `v` draws; sets *bad_weight when a weight is negative or NaN.
  int64_t count(int64_t v, bool* bad_weight) const {
    const int64_t deg = indptr_[v + 1] - indptr_[v];
    if (fanout_ < 0) return deg;
    int64_t avail = deg;
    if (weights_ != nullptr) {
      avail = 0;
      for (int64_t e = indptr_[v]; e < indptr_[v + 1]; ++e) {
        const float w = weights_[e];
        if (!(w >= 0.f)) *bad_weight = true;
        avail += w > 0.f;
      }
    }
    if (replace_) return avail > 0 ? fanout_ : 0;
    return std::min(fanout_, avail);
  }

  // Writes the edge positions (into `indices`) of the `c` neighbors `v` draws to `out`.
  void draw(int64_t v, int64_t c, KeyedRng& rng, int64_t* out) {
    const int64_t start = indptr_[v];
    const int64_t deg = indptr_[v + 1] - start;
    if (c == 0) return;
    if (fanout_ < 0) return copy_all(start, deg, out);
    if (weights_ == nullptr) {
      if (replace_) {
        for (int64_t k = 0; k < c; ++k) out[k] = start + rng.below(deg);
      } else if (c == deg) {
        copy_all(start, deg, out);
      } else if (c <= kFloydMax) {
        floyd(start, deg, c, rng, out);
      } else {
        partial_shuffle(start, deg, c, rng, out);
      }
      return;
    }
    const float* w = weights_ + start;
    if (replace_) return weighted_with_replacement(start, w, deg, c, rng, out);
    weighted_without_replacement(start, w, deg, c, rng, out);
  }

 private:
  static void copy_all(int64_t start, int64_t deg, int64_t* out) {
    for (int64_t k = 0; k < deg; ++k) out[k] = start + k;
  }

  // Floyd's algorithm: a uniform c-subset of [0, deg) in O(c^2) without scratch memory.
  static void floyd(int64_t start, int64_t deg, int64_t c, KeyedRng& rng, int64_t* out) {
    int64_t pos[kFloydMax];
    int64_t m = 0;
    for (int64_t j = deg - c; j < deg; ++j) {
      int64_t t = rng.below(j + 1);
      for (int64_t k = 0; k < m; ++k)
        if (pos[k] == t) {
          t = j;
          break;
        }
      pos[m++] = t;
    }
    for (int64_t k = 0; k < c; ++k) out[k] = start + pos[k];
  }

  // The first c steps of a Fisher-Yates shuffle of the positions.
  void partial_shuffle(int64_t start, int64_t deg, int64_t c, KeyedRng& rng, int64_t* out) {
    perm_.resize(deg);
    for (int64_t k = 0; k < deg; ++k) perm_[k] = k;
    for (int64_t k = 0; k < c; ++k) {
      std::swap(perm_[k], perm_[k + rng.below(deg - k)]);
      out[k] = start + perm_[k];
    }
  }

  // Efraimidis-Spirakis: keep the c largest keys log(u) / w (zero weights never drawn).
  void weighted_without_replacement(int64_t start, const float* w, int64_t deg, int64_t c,
                                    KeyedRng& rng, int64_t* out) {
    heap_.clear();
    const auto greater = std::greater<std::pair<double, int64_t>>();
    for (int64_t k = 0; k < deg; ++k) {
      if (!(w[k] > 0.f)) continue;
      const double key = std::log(rng.open01()) / static_cast<double>(w[k]);
      if (static_cast<int64_t>(heap_.size()) < c) {
        heap_.emplace_back(key, k);
        std::push_heap(heap_.begin(), heap_.end(), greater);
      } else if (key > heap_.front().first) {
        std::pop_heap(heap_.begin(), heap_.end(), greater);
        heap_.back() = {key, k};
        std::push_heap(heap_.begin(), heap_.end(), greater);
      }
    }
    for (int64_t k = 0; k < c; ++k) out[k] = start + heap_[k].second;
  }

  // Inverse-CDF draws: binary search of u * total in the cumulative weights.
  void weighted_with_replacement(int64_t start, const float* w, int64_t deg, int64_t c,
                                 KeyedRng& rng, int64_t* out) {
    cum_.resize(deg);
    double total = 0.0;
    for (int64_t k = 0; k < deg; ++k) cum_[k] = total += std::max(0.f, w[k]);
    for (int64_t k = 0; k < c; ++k) {
      const double x = (1.0 - rng.open01()) * total;  // in [0, total)
      int64_t p = std::upper_bound(cum_.begin(), cum_.end(), x) - cum_.begin();
      out[k] = start + std::min(p, deg - 1);
    }
  }

  const int64_t* indptr_;
  const float* weights_;
  int64_t fanout_;
  bool replace_;
  std::vector<int64_t> perm_;
  std::vector<double> cum_;
  std::vector<std::pair<double, int64_t>> heap_;
};

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

void check_inputs(const at::Tensor& indptr, const at::Tensor& indices,
                  const c10::optional<at::Tensor>& weights, const at::Tensor& seeds,
                  at::IntArrayRef fanouts) {
  for (const at::Tensor* t : {&indptr, &indices, &seeds})
    TORCH_CHECK(t->device().is_cpu() && t->dim() == 1,
                "sample_neighbors: indptr, indices and seeds must be 1-D CPU tensors");
  TORCH_CHECK(indptr.scalar_type() == at::kLong, "sample_neighbors: indptr must be int64, got ",
              indptr.scalar_type());
  TORCH_CHECK(indptr.numel() >= 1, "sample_neighbors: indptr needs num_nodes + 1 entries");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "sample_neighbors: indices must be int64 or int32, got ", indices.scalar_type());
  TORCH_CHECK(indptr[-1].item<int64_t>() == indices.numel(), "sample_neighbors: indptr[-1] = ",
              indptr[-1].item<int64_t>(), " but indices has ", indices.numel(), " entries");
  TORCH_CHECK(seeds.scalar_type() == at::kLong, "sample_neighbors: seeds must be int64, got ",
              seeds.scalar_type());
  TORCH_CHECK(!fanouts.empty(), "sample_neighbors: fanouts is empty; give one fanout per layer");
  for (int64_t f : fanouts)
    TORCH_CHECK(f >= -1, "sample_neighbors: fanouts must be -1 (all neighbors) or >= 0, got ",
                f);
  if (weights.has_value()) {
    const at::Tensor& w = *weights;
    TORCH_CHECK(w.device().is_cpu() && w.dim() == 1 && w.numel() == indices.numel(),
                "sample_neighbors: weights must be a 1-D CPU tensor with one entry per edge (",
                indices.numel(), "), got shape ", w.sizes());
    TORCH_CHECK(w.scalar_type() == at::kFloat, "sample_neighbors: weights must be float32, got ",
                w.scalar_type());
  }
  const int64_t num_nodes = indptr.numel() - 1;
  if (seeds.numel() > 0) {
    const int64_t lo = seeds.min().item<int64_t>(), hi = seeds.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < num_nodes, "sample_neighbors: seeds hold ids in [", lo, ", ",
                hi, "] but the graph has ", num_nodes, " nodes (ids must be in [0, ",
                num_nodes, "))");
  }
}

std::tuple<at::Tensor, at::Tensor, std::vector<at::Tensor>> sample_neighbors(
    const at::Tensor& indptr_in, const at::Tensor& indices_in,
    const c10::optional<at::Tensor>& weights_in, const at::Tensor& seeds_in,
    at::IntArrayRef fanouts, bool replace, int64_t seed) {
  check_inputs(indptr_in, indices_in, weights_in, seeds_in, fanouts);
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

}  // namespace gnnscale
