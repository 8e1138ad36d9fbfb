// sample_neighbors, CPU kernel: multi-hop neighbor sampling over a CSC graph with a parallel,
// hash-based relabel.
//
// Hop h samples the in-neighbors of every vertex sampled so far (targets first, then each
// hop's new sources), so a layer's destinations are the first n_dst of its sources. Each hop
// runs five phases; each is one parallel_chunks call (utils/parallel.h: the caller and helper
// threads claim chunks dynamically; nobody waits for a thread that is not running):
//   1. count (chunks of destinations): how many neighbors each destination draws, and each
//      chunk's total; a prefix sum over the chunk totals places every chunk in the edge list;
//   2. draw (same chunks): each destination draws edge positions into its slice with an RNG
//      keyed by (seed, hop, global id) -- the sample does not depend on the thread count --,
//      the positions become global ids in one prefetched streaming pass (the random reads of
//      `indices` bound sampling), and every id is looked up in (or inserted into) the
//      concurrent id map: an id known from earlier hops becomes its local id at once, a new one
//      lowers the map's record of its first edge position;
//   3. firsts (chunks of edges): the edges that hold their id's first position, counted per
//      chunk; a prefix sum gives each chunk's first new local id;
//   4. assign: new ids get local ids in order of first appearance (exactly the order of a
//      sequential relabel), and n_id grows by them;
//   5. rewrite: the edges of new ids take their local ids.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <tuple>
#include <vector>

#include "sampling/cpu/neighbor_draw.h"
#include "sampling/sample_neighbors.h"
#include "utils/concurrent_id_map.h"
#include "utils/parallel.h"
#include "utils/rng.h"

namespace gnnscale::sampling {
namespace {

constexpr int64_t kAhead = 16;          // prefetch distance of the latency-bound loops
constexpr int64_t kDstGrain = 256;      // destinations per chunk (phases 1, 2)
constexpr int64_t kEdgeGrain = 1 << 14; // edges per chunk (phases 3-5)

// The graph and the options shared by every hop.
template <typename index_t>
struct Graph {
  const int64_t* indptr;
  const index_t* indices;
  const float* weights;
  int64_t num_nodes;
  bool replace;
  uint64_t seed;
  int64_t threads;
};

// Exclusive prefix sum in place; returns the total.
int64_t exclusive_scan(std::vector<int64_t>& v) {
  int64_t run = 0;
  for (int64_t& x : v) {
    const int64_t c = x;
    x = run;
    run += c;
  }
  return run;
}

// A chunk's range [begin, end) of `items` in chunks of `grain`.
struct Range {
  int64_t begin, end;
};
Range chunk_range(int64_t c, int64_t grain, int64_t items) {
  return {c * grain, std::min(items, (c + 1) * grain)};
}

// Phase 2 for one chunk of destinations: draw, resolve ids, look them up in the map. Leaves
// src[e] = local id (known id) or -(slot + 1) (id new in this hop), cand[e] = 1 where edge e
// lowered its new id's first position.
template <typename index_t>
void draw_chunk(const Graph<index_t>& g, int64_t fanout, int64_t hop, const int64_t* n_id,
                Range dsts, const int64_t* counts, int64_t off, int64_t* src, int64_t* dst,
                uint8_t* cand, ConcurrentIdMap& map) {
  NeighborDraw draw(g.indptr, g.weights, fanout, g.replace);
  const int64_t first_edge = off;
  for (int64_t i = dsts.begin; i < dsts.end; ++i) {
    if (i + kAhead < dsts.end) __builtin_prefetch(g.indptr + n_id[i + kAhead]);
    const int64_t v = n_id[i], c = counts[i];
    KeyedRng rng(g.seed, static_cast<uint64_t>(hop), static_cast<uint64_t>(v));
    draw.draw(v, c, rng, src + off);
    std::fill(dst + off, dst + off + c, i);
    off += c;
  }
  const int64_t end = off;
  for (int64_t e = first_edge; e < end; ++e) {
    if (e + kAhead < end) __builtin_prefetch(g.indices + src[e + kAhead]);
    src[e] = static_cast<int64_t>(g.indices[src[e]]);
  }
  for (int64_t e = first_edge; e < end; ++e) {
    if (e + kAhead < end) map.prefetch(src[e + kAhead]);
    const int64_t id = src[e];
    TORCH_CHECK(id >= 0 && id < g.num_nodes, "sample_neighbors: the graph's indices hold id ",
                id, " outside [0, ", g.num_nodes, ")");
    const int64_t slot = map.insert(id);
    const int64_t value = map.value(slot);
    if (value < ConcurrentIdMap::kNew) {
      src[e] = value;
      cand[e] = 0;
    } else {
      src[e] = -(slot + 1);
      cand[e] = map.lower_first(slot, e);
    }
  }
}

// One hop: draws for destinations n_id[0, n_dst), then relabels; returns [2, E] local edges.
template <typename index_t>
at::Tensor sample_hop(const Graph<index_t>& g, int64_t fanout, int64_t hop,
                      std::vector<int64_t>& n_id, ConcurrentIdMap& map) {
  const int64_t n_dst = static_cast<int64_t>(n_id.size());
  // 1. count
  std::vector<int64_t> counts(n_dst);
  const int64_t n_dc = num_chunks(n_dst, kDstGrain);
  std::vector<int64_t> chunk_off(n_dc);
  std::atomic<bool> bad_weight{false};
  parallel_chunks(n_dc, g.threads, [&](int64_t c) {
    const Range r = chunk_range(c, kDstGrain, n_dst);
    NeighborDraw draw(g.indptr, g.weights, fanout, g.replace);
    bool bad = false;
    int64_t total = 0;
    for (int64_t i = r.begin; i < r.end; ++i) {
      if (i + kAhead < r.end) __builtin_prefetch(g.indptr + n_id[i + kAhead]);
      counts[i] = draw.count(n_id[i], &bad);
      total += counts[i];
    }
    chunk_off[c] = total;
    if (bad) bad_weight.store(true);
  });
  TORCH_CHECK(!bad_weight.load(),
              "sample_neighbors: edge weights must be non-negative and not NaN");
  const int64_t num_edges = exclusive_scan(chunk_off);
  // 2. draw and look up
  at::Tensor edges = at::empty({2, num_edges}, at::kLong);
  int64_t* src = edges.data_ptr<int64_t>();
  int64_t* dst = src + num_edges;
  std::vector<uint8_t> cand(num_edges);
  map.reserve(std::min(map.size() + num_edges, g.num_nodes), g.threads);
  parallel_chunks(n_dc, g.threads, [&](int64_t c) {
    draw_chunk(g, fanout, hop, n_id.data(), chunk_range(c, kDstGrain, n_dst), counts.data(),
               chunk_off[c], src, dst, cand.data(), map);
  });
  // 3. firsts
  const int64_t n_ec = num_chunks(num_edges, kEdgeGrain);
  std::vector<int64_t> chunk_new(n_ec);
  parallel_chunks(n_ec, g.threads, [&](int64_t c) {
    const Range r = chunk_range(c, kEdgeGrain, num_edges);
    int64_t fresh = 0;
    for (int64_t e = r.begin; e < r.end; ++e)
      if (cand[e]) {
        cand[e] = map.value(-src[e] - 1) == ConcurrentIdMap::kNew + e;
        fresh += cand[e];
      }
    chunk_new[c] = fresh;
  });
  const int64_t n_old = n_dst;
  const int64_t n_new = exclusive_scan(chunk_new);
  n_id.resize(n_old + n_new);
  // 4. assign
  parallel_chunks(n_ec, g.threads, [&](int64_t c) {
    const Range r = chunk_range(c, kEdgeGrain, num_edges);
    int64_t id = n_old + chunk_new[c];
    for (int64_t e = r.begin; e < r.end; ++e)
      if (cand[e]) {
        const int64_t slot = -src[e] - 1;
        map.set_value(slot, id);
        n_id[id] = map.key(slot);
        src[e] = id++;
      }
  });
  map.grow_size(n_new);
  // 5. rewrite
  parallel_chunks(n_ec, g.threads, [&](int64_t c) {
    const Range r = chunk_range(c, kEdgeGrain, num_edges);
    for (int64_t e = r.begin; e < r.end; ++e) {
      if (e + kAhead < r.end && src[e + kAhead] < 0) map.prefetch_slot(-src[e + kAhead] - 1);
      if (src[e] < 0) src[e] = map.value(-src[e] - 1);
    }
  });
  return edges;
}

template <typename index_t>
std::vector<at::Tensor> sample_hops(const Graph<index_t>& g, at::IntArrayRef fanouts,
                                    std::vector<int64_t>& n_id, ConcurrentIdMap& map,
                                    std::vector<int64_t>& counts) {
  std::vector<at::Tensor> edges;
  for (size_t h = 0; h < fanouts.size(); ++h) {
    edges.push_back(sample_hop(g, fanouts[h], static_cast<int64_t>(h), n_id, map));
    counts.push_back(static_cast<int64_t>(n_id.size()));
  }
  return edges;
}

at::Tensor to_tensor(const std::vector<int64_t>& v) {
  at::Tensor t = at::empty({static_cast<int64_t>(v.size())}, at::kLong);
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t;
}

std::tuple<at::Tensor, at::Tensor, std::vector<at::Tensor>> sample_neighbors(
    const at::Tensor& indptr_in, const at::Tensor& indices_in,
    const c10::optional<at::Tensor>& weights_in, const at::Tensor& seeds_in,
    at::IntArrayRef fanouts, bool replace, int64_t seed, int64_t num_threads) {
  check_sample_neighbors(indptr_in, indices_in, weights_in, seeds_in, fanouts);
  const at::Tensor indptr = indptr_in.contiguous();
  const at::Tensor indices = indices_in.contiguous();
  const at::Tensor seeds = seeds_in.contiguous();
  at::Tensor weights;
  if (weights_in.has_value()) weights = weights_in->contiguous();
  const float* w = weights.defined() ? weights.data_ptr<float>() : nullptr;
  const int64_t num_nodes = indptr.numel() - 1;
  const int64_t threads = resolve_threads(num_threads);

  const int64_t* seed_ptr = seeds.data_ptr<int64_t>();
  std::vector<int64_t> n_id(seed_ptr, seed_ptr + seeds.numel());
  ConcurrentIdMap map;
  map.reserve(std::max<int64_t>(1, seeds.numel()), 1);
  for (int64_t i = 0; i < seeds.numel(); ++i) {  // a repeated seed keeps its first local id
    const int64_t slot = map.insert(seed_ptr[i]);
    if (map.value(slot) == ConcurrentIdMap::kUnset) {
      map.set_value(slot, i);
      map.grow_size(1);
    }
  }
  std::vector<int64_t> counts{seeds.numel()};
  std::vector<at::Tensor> edges;
  const uint64_t s = static_cast<uint64_t>(seed);
  const int64_t* ip = indptr.data_ptr<int64_t>();
  if (indices.scalar_type() == at::kLong)
    edges = sample_hops(Graph<int64_t>{ip, indices.data_ptr<int64_t>(), w, num_nodes, replace, s,
                                       threads}, fanouts, n_id, map, counts);
  else
    edges = sample_hops(Graph<int32_t>{ip, indices.data_ptr<int32_t>(), w, num_nodes, replace, s,
                                       threads}, fanouts, n_id, map, counts);
  return {to_tensor(n_id), to_tensor(counts), edges};
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) { m.impl("sample_neighbors", &sample_neighbors); }

}  // namespace gnnscale::sampling
