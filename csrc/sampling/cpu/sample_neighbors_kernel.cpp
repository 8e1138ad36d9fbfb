// sample_neighbors, CPU kernel: multi-hop neighbor sampling over a CSC graph with a parallel,
// hash-based relabel.
//
// Hop h samples the in-neighbors of every vertex sampled so far (targets first, then each
// hop's new sources), so a layer's destinations are the first n_dst of its sources. Each hop
// runs two parallel_chunks calls (utils/parallel.h: the caller and helper threads claim chunks
// of destinations dynamically; nobody waits for a thread that has not started a chunk):
//   1. count: how many neighbors each destination draws, and each chunk's total; a prefix sum
//      over the chunk totals places every chunk in the edge list;
//   2. draw and relabel: each destination draws edge positions into its slice with an RNG
//      keyed by (seed, hop, global id) -- the sample does not depend on the thread count --,
//      then the positions become global ids in one prefetched streaming pass (the random reads
//      of `indices` bound sampling). A drawn chunk is relabeled (global -> local ids through
//      a hash map, new ids in order of first appearance) as soon as every chunk before it is:
//      whichever thread finds the next chunk ready relabels it while the others draw, so the
//      sequential relabel overlaps the parallel draws and gives exactly the ids of one pass.
//      Asked for edge ids, a hop draws the positions into its own int64 [E] tensor (the edges'
//      global ids: an edge's CSC position is its id) and resolves them from there; not asked,
//      it draws into the source row and resolves in place, as without the option.
//
// Typed sampling (a run table given): fanouts is a [hops, num_edge_types] table, and each
// destination draws fanout[h][t] of its in-edges of type t, from that type's run of its
// in-edges (they are sorted by edge type), independently per type with an RNG keyed by
// (seed, hop, global id, type): the stream of type 0 is the homogeneous one, so a one-type
// table draws what the plain fanouts draw. -1 takes every edge of the type, 0 none. The runs
// come from a table built once per graph (gnnscale/ops/sampling.py typed_runs): for a vertex
// v of node type d, one int32 per edge type that can enter d (run_types[run_ptr[d] ..
// run_ptr[d + 1]), ascending), the end of that type's run relative to indptr[v]; so a
// destination's runs are one read of a row beside its indptr (prefetched like it), instead of
// a binary search over its in-edges' types (a few dependent random reads a destination: about
// twice the time of the homogeneous hop on hetero_sim; with the table a one-type table costs
// 7-14% over it). Without a table the hops run the homogeneous code, compiled apart (a template flag), so
// it pays nothing for the option.
// A ContentionGuard (utils/parallel.h) falls back to one thread for a while when helpers were
// found descheduled (a core busy elsewhere), so the sampler is never slower than one thread.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
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
constexpr int64_t kDstGrain = 256;  // destinations per chunk

constexpr uint64_t kTypeSalt = 0xA0761D6478BD642FULL;  // keys each edge type's draws apart

// The graph and the options shared by every hop; typed sampling sets the rest.
template <typename index_t>
struct Graph {
  const int64_t* indptr;
  const index_t* indices;
  const float* weights;
  int64_t num_nodes;
  bool replace;
  uint64_t seed;
  int64_t threads;
  const int32_t* runs = nullptr;          // the run table (file comment)
  const int64_t* node_off = nullptr;      // node_type_offset [num_node_types + 1]
  const int64_t* run_ptr = nullptr;       // [num_node_types + 1] into run_types
  const int64_t* run_types = nullptr;     // the edge types entering each node type
  const int64_t* run_base = nullptr;      // where each node type's rows start in runs
  int64_t num_node_types = 0;
  const int64_t* type_fanouts = nullptr;  // [hops, num_types], row-major
  const uint64_t* type_seeds = nullptr;   // the RNG seed of each edge type's draws
  int64_t num_types = 0;
};

// A destination's runs: `k` edge types `types` and their run ends relative to its indptr.
struct Runs {
  const int32_t* ends;
  const int64_t* types;
  int64_t k;
};

template <typename index_t>
inline Runs runs_of(const Graph<index_t>& g, int64_t v) {
  const int64_t* at = std::upper_bound(g.node_off + 1, g.node_off + g.num_node_types, v);
  const int64_t d = at - (g.node_off + 1);
  const int64_t k = g.run_ptr[d + 1] - g.run_ptr[d];
  return {g.runs + g.run_base[d] + (v - g.node_off[d]) * k, g.run_types + g.run_ptr[d], k};
}

// The seed of edge type t's draws: `seed` itself for type 0 (the homogeneous stream).
uint64_t type_seed(uint64_t seed, int64_t t) {
  return t == 0 ? seed : mix64(seed ^ (kTypeSalt * static_cast<uint64_t>(t)));
}

// Typed sampling reads each destination's row of the run table besides its indptr: prefetch
// both, kAhead destinations ahead.
template <typename index_t>
inline void prefetch_typed(const Graph<index_t>& g, const int64_t* n_id, int64_t i,
                           int64_t end) {
  if (i + kAhead >= end) return;
  const int64_t v = n_id[i + kAhead];
  __builtin_prefetch(g.indptr + v);
  __builtin_prefetch(runs_of(g, v).ends);
}

// Typed count of `v` in a hop (`fan`: the hop's row of the table); sets *bad_runs when v's
// runs do not cover its in-edges in order.
template <typename index_t>
int64_t typed_count(const Graph<index_t>& g, const int64_t* fan, const NeighborDraw& draw,
                    int64_t v, bool* bad_weight, bool* bad_runs) {
  const int64_t start = g.indptr[v], end = g.indptr[v + 1];
  const Runs r = runs_of(g, v);
  int64_t total = 0, lo = start;
  for (int64_t j = 0; j < r.k; ++j) {
    const int64_t hi = start + r.ends[j], f = fan[r.types[j]];
    if (hi < lo || hi > end) break;
    if (f != 0) total += draw.count_range(lo, hi, f, bad_weight);
    lo = hi;
  }
  if (lo != end) *bad_runs = true;
  return total;
}

// Typed draw of `v` in hop `hop`: each type's edges after the previous type's, at `out`.
template <typename index_t>
void typed_draw(const Graph<index_t>& g, int64_t hop, NeighborDraw& draw, int64_t v,
                int64_t* out) {
  const int64_t* fan = g.type_fanouts + hop * g.num_types;
  const int64_t start = g.indptr[v];
  const Runs r = runs_of(g, v);
  bool unused = false;
  int64_t lo = start;
  for (int64_t j = 0; j < r.k; ++j) {
    const int64_t hi = start + r.ends[j], t = r.types[j];
    if (fan[t] != 0) {
      const int64_t c = draw.count_range(lo, hi, fan[t], &unused);
      KeyedRng rng(g.type_seeds[t], static_cast<uint64_t>(hop), static_cast<uint64_t>(v));
      draw.draw_range(lo, hi, fan[t], c, rng, out);
      out += c;
    }
    lo = hi;
  }
}

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

// Phase 2 for one chunk of destinations: draw edge positions (into `eid` when edge ids are
// asked for, else into `src`), then resolve them to global ids in `src`; returns the end of
// the chunk's edges.
template <bool kTyped, typename index_t>
int64_t draw_chunk(const Graph<index_t>& g, int64_t fanout, int64_t hop, const int64_t* n_id,
                   Range dsts, const int64_t* counts, int64_t off, int64_t* src, int64_t* dst,
                   int64_t* eid) {
  NeighborDraw draw(g.indptr, g.weights, fanout, g.replace);
  int64_t* pos = eid != nullptr ? eid : src;
  const int64_t first_edge = off;
  for (int64_t i = dsts.begin; i < dsts.end; ++i) {
    if constexpr (kTyped) prefetch_typed(g, n_id, i, dsts.end);
    else if (i + kAhead < dsts.end) __builtin_prefetch(g.indptr + n_id[i + kAhead]);
    const int64_t v = n_id[i], c = counts[i];
    if constexpr (kTyped) {
      typed_draw(g, hop, draw, v, pos + off);
    } else {
      KeyedRng rng(g.seed, static_cast<uint64_t>(hop), static_cast<uint64_t>(v));
      draw.draw(v, c, rng, pos + off);
    }
    std::fill(dst + off, dst + off + c, i);
    off += c;
  }
  const int64_t end = off;
  for (int64_t e = first_edge; e < end; ++e) {
    if (e + kAhead < end) __builtin_prefetch(g.indices + pos[e + kAhead]);
    src[e] = static_cast<int64_t>(g.indices[pos[e]]);
  }
  return end;
}

void check_id(int64_t id, int64_t num_nodes) {
  TORCH_CHECK(id >= 0 && id < num_nodes, "sample_neighbors: the graph's indices hold id ", id,
              " outside [0, ", num_nodes, ")");
}

// Relabels the edges of drawn chunks in chunk order, one chunk at a time, on whichever thread
// finds the next chunk ready (see the file comment): global ids -> local ids, new ids appended
// to n_id (reserved beforehand, so threads reading its first n_dst entries are undisturbed).
class OrderedRelabel {
 public:
  OrderedRelabel(int64_t n_chunks, const int64_t* chunk_off, int64_t num_edges,
                 int64_t num_nodes, int64_t* src, std::vector<int64_t>& n_id,
                 ConcurrentIdMap& map)
      : n_(n_chunks), off_(chunk_off), num_edges_(num_edges), num_nodes_(num_nodes), src_(src),
        n_id_(n_id), map_(map), ready_(new std::atomic<uint8_t>[n_chunks]) {
    for (int64_t c = 0; c < n_chunks; ++c) ready_[c].store(0, std::memory_order_relaxed);
  }

  // Chunk c is drawn: relabel what is ready, unless another thread is at it (it will see c).
  void drawn(int64_t c) {
    ready_[c].store(1);
    advance();
  }

  // Every chunk is drawn and no other thread works on the hop any more: relabel the rest.
  void finish() {
    advance();
    TORCH_INTERNAL_ASSERT(next_.load() == n_, "sample_neighbors: relabel left chunks behind");
  }

 private:
  void advance() {
    while (true) {
      if (busy_.exchange(true)) return;
      int64_t c = next_.load(std::memory_order_relaxed);
      for (; c < n_ && ready_[c].load(); ++c) relabel(c);
      next_.store(c, std::memory_order_relaxed);
      busy_.store(false);
      // a chunk drawn after our check but before we let go found us busy: take it now
      if (!(c < n_ && ready_[c].load())) return;
    }
  }

  void relabel(int64_t c) {
    const int64_t end = c + 1 < n_ ? off_[c + 1] : num_edges_;
    for (int64_t e = off_[c]; e < end; ++e) {
      if (e + kAhead < end) map_.prefetch(src_[e + kAhead]);
      const int64_t id = src_[e];
      check_id(id, num_nodes_);
      bool inserted;
      src_[e] = map_.insert_serial(id, static_cast<int64_t>(n_id_.size()), &inserted);
      if (inserted) {
        n_id_.push_back(id);
        map_.grow_size(1);
      }
    }
  }

  const int64_t n_;
  const int64_t* off_;
  const int64_t num_edges_, num_nodes_;
  int64_t* src_;
  std::vector<int64_t>& n_id_;
  ConcurrentIdMap& map_;
  std::unique_ptr<std::atomic<uint8_t>[]> ready_;
  std::atomic<bool> busy_{false};
  std::atomic<int64_t> next_{0};
};

// One hop: draws for destinations n_id[0, n_dst), then relabels; returns [2, E] local edges
// (and, when `e_ids` is given, appends the hop's int64 [E] edge ids to it). kTyped: the
// per-type fanouts of g's table, row `hop` (`fanout` unused).
template <bool kTyped, typename index_t>
at::Tensor sample_hop(const Graph<index_t>& g, int64_t fanout, int64_t hop,
                      std::vector<int64_t>& n_id, ConcurrentIdMap& map,
                      std::vector<at::Tensor>* e_ids) {
  const int64_t n_dst = static_cast<int64_t>(n_id.size());
  // 1. count
  std::vector<int64_t> counts(n_dst);
  const int64_t n_dc = num_chunks(n_dst, kDstGrain);
  std::vector<int64_t> chunk_off(n_dc);
  std::atomic<bool> bad_weight{false}, bad_types{false};
  parallel_chunks(n_dc, g.threads, [&](int64_t c) {
    const Range r = chunk_range(c, kDstGrain, n_dst);
    NeighborDraw draw(g.indptr, g.weights, fanout, g.replace);
    bool bad = false, bad_type = false;
    int64_t total = 0;
    for (int64_t i = r.begin; i < r.end; ++i) {
      if constexpr (kTyped) prefetch_typed(g, n_id.data(), i, r.end);
      else if (i + kAhead < r.end) __builtin_prefetch(g.indptr + n_id[i + kAhead]);
      if constexpr (kTyped)
        counts[i] = typed_count(g, g.type_fanouts + hop * g.num_types, draw, n_id[i], &bad,
                                &bad_type);
      else
        counts[i] = draw.count(n_id[i], &bad);
      total += counts[i];
    }
    chunk_off[c] = total;
    if (bad) bad_weight.store(true);
    if (bad_type) bad_types.store(true);
  });
  TORCH_CHECK(!bad_weight.load(),
              "sample_neighbors: edge weights must be non-negative and not NaN");
  TORCH_CHECK(!bad_types.load(), "sample_neighbors: the run table does not cover every "
              "destination's in-edges in order: build it with typed_runs from the same graph");
  const int64_t num_edges = exclusive_scan(chunk_off);
  // 2. draw and relabel
  at::Tensor edges = at::empty({2, num_edges}, at::kLong);
  int64_t* src = edges.data_ptr<int64_t>();
  int64_t* dst = src + num_edges;
  int64_t* eid = nullptr;
  if (e_ids != nullptr) {
    e_ids->push_back(at::empty({num_edges}, at::kLong));
    eid = e_ids->back().data_ptr<int64_t>();
  }
  map.reserve(std::min(map.size() + num_edges, g.num_nodes), g.threads);
  n_id.reserve(n_dst + std::min(num_edges, g.num_nodes));
  const int64_t* dst_ids = n_id.data();
  OrderedRelabel relabel(n_dc, chunk_off.data(), num_edges, g.num_nodes, src, n_id, map);
  parallel_chunks(n_dc, g.threads, [&](int64_t c) {
    draw_chunk<kTyped>(g, fanout, hop, dst_ids, chunk_range(c, kDstGrain, n_dst), counts.data(),
               chunk_off[c], src, dst, eid);
    relabel.drawn(c);
  });
  relabel.finish();
  return edges;
}

template <typename index_t>
std::vector<at::Tensor> sample_hops(const Graph<index_t>& g, at::IntArrayRef fanouts,
                                    std::vector<int64_t>& n_id, ConcurrentIdMap& map,
                                    std::vector<int64_t>& counts,
                                    std::vector<at::Tensor>* e_ids) {
  std::vector<at::Tensor> edges;
  const bool typed = g.runs != nullptr;
  const int64_t hops = static_cast<int64_t>(fanouts.size()) / (typed ? g.num_types : 1);
  for (int64_t h = 0; h < hops; ++h) {
    edges.push_back(typed ? sample_hop<true>(g, 0, h, n_id, map, e_ids)
                          : sample_hop<false>(g, fanouts[h], h, n_id, map, e_ids));
    counts.push_back(static_cast<int64_t>(n_id.size()));
  }
  return edges;
}

at::Tensor to_tensor(const std::vector<int64_t>& v) {
  at::Tensor t = at::empty({static_cast<int64_t>(v.size())}, at::kLong);
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t;
}

std::tuple<at::Tensor, at::Tensor, std::vector<at::Tensor>, std::vector<at::Tensor>>
sample_neighbors(const at::Tensor& indptr_in, const at::Tensor& indices_in,
                 const c10::optional<at::Tensor>& weights_in, const at::Tensor& seeds_in,
                 at::IntArrayRef fanouts, bool replace, int64_t seed, int64_t num_threads,
                 bool return_edge_ids, const c10::optional<at::Tensor>& type_runs,
                 const c10::optional<at::Tensor>& node_type_offset,
                 const c10::optional<at::Tensor>& run_ptr,
                 const c10::optional<at::Tensor>& run_types, int64_t num_edge_types) {
  check_sample_neighbors(indptr_in, indices_in, weights_in, seeds_in, fanouts);
  const bool typed = type_runs.has_value();
  std::vector<at::Tensor> runs;  // the run table, node_type_offset, run_ptr, run_types
  std::vector<int64_t> run_base;
  if (typed) {
    TORCH_CHECK(node_type_offset.has_value() && run_ptr.has_value() && run_types.has_value(),
                "sample_neighbors: typed sampling needs type_runs, node_type_offset, run_ptr "
                "and run_types (typed_runs)");
    runs = {type_runs->contiguous(), node_type_offset->contiguous(), run_ptr->contiguous(),
            run_types->contiguous()};
    run_base = check_typed_runs(runs, indptr_in.numel() - 1, fanouts, num_edge_types);
  }
  const at::Tensor indptr = indptr_in.contiguous();
  const at::Tensor indices = indices_in.contiguous();
  const at::Tensor seeds = seeds_in.contiguous();
  at::Tensor weights;
  if (weights_in.has_value()) weights = weights_in->contiguous();
  const float* w = weights.defined() ? weights.data_ptr<float>() : nullptr;
  const int64_t num_nodes = indptr.numel() - 1;
  static ContentionGuard guard;
  const int64_t threads = guard.threads(resolve_threads(num_threads));
  const auto start = std::chrono::steady_clock::now();
  const int64_t waited_before = helper_wait_ns();

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
  std::vector<at::Tensor> edges, e_ids;
  std::vector<at::Tensor>* want_ids = return_edge_ids ? &e_ids : nullptr;
  const uint64_t s = static_cast<uint64_t>(seed);
  const int64_t* ip = indptr.data_ptr<int64_t>();
  std::vector<uint64_t> type_seeds;
  for (int64_t t = 0; typed && t < num_edge_types; ++t) type_seeds.push_back(type_seed(s, t));
  const auto run = [&](auto g) {
    if (typed) {
      g.runs = runs[0].data_ptr<int32_t>();
      g.node_off = runs[1].data_ptr<int64_t>();
      g.run_ptr = runs[2].data_ptr<int64_t>();
      g.run_types = runs[3].data_ptr<int64_t>();
      g.run_base = run_base.data();
      g.num_node_types = runs[1].numel() - 1;
      g.type_fanouts = fanouts.data();
      g.type_seeds = type_seeds.data();
      g.num_types = num_edge_types;
    }
    return sample_hops(g, fanouts, n_id, map, counts, want_ids);
  };
  if (indices.scalar_type() == at::kLong)
    edges = run(Graph<int64_t>{ip, indices.data_ptr<int64_t>(), w, num_nodes, replace, s,
                               threads});
  else
    edges = run(Graph<int32_t>{ip, indices.data_ptr<int32_t>(), w, num_nodes, replace, s,
                               threads});
  guard.report(threads,
               std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - start).count(),
               helper_wait_ns() - waited_before);
  return {to_tensor(n_id), to_tensor(counts), edges, e_ids};
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) { m.impl("sample_neighbors", &sample_neighbors); }

}  // namespace gnnscale::sampling
