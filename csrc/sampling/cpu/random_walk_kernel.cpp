// random_walk_top_k, CPU kernel: for every target, `num_walks` walks of `walk_length` steps
// along in-edges; the `top_k` vertices visited most often (the target itself excluded, ties by
// the smaller id) are its neighbours, with their visit counts (PinSAGE's importance weights).
//
// Walk w of target v in hop h draws from KeyedRng(mix64(seed ^ kWalkSalt) + w, h, v)
// (utils/rng.h): each step at vertex u takes in-edge indptr[u] + below(deg(u)); a walk reaching
// a vertex without in-edges stops there. The draw is a pure function of (seed, hop, target,
// walk), whatever the thread count. Two parallel_chunks calls over chunks of targets:
//   1. walk and rank: each target's kept neighbours go to its fixed slots of a scratch buffer;
//   2. after a prefix sum over the chunk totals, each chunk copies its slots into the outputs.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <tuple>
#include <utility>
#include <vector>

#include "sampling/random_walk.h"
#include "utils/parallel.h"
#include "utils/rng.h"

namespace gnnscale::sampling {
namespace {

constexpr int64_t kTargetGrain = 64;  // targets per chunk
constexpr uint64_t kWalkSalt = 0x7A3D1E5B9C4F2861ULL;  // keeps walks apart from other samplers

struct Walks {
  const int64_t* indptr;
  int64_t num_nodes;
  int64_t num_walks, walk_length, top_k, slots;
  uint64_t seed_base;  // mix64(seed ^ kWalkSalt)
  uint64_t hop;
};

// Walks from target v; writes its kept (vertex, count) pairs to slots, returns how many.
// `visits` is scratch; sets *bad when an index lies outside [0, num_nodes).
template <typename index_t>
int64_t walk_target(const Walks& g, const index_t* indices, int64_t v,
                    std::vector<int64_t>& visits,
                    std::vector<std::pair<int64_t, int64_t>>& ranked, int64_t* out_vertex,
                    int64_t* out_count, bool* bad) {
  visits.clear();
  for (int64_t w = 0; w < g.num_walks; ++w) {
    KeyedRng rng(g.seed_base + static_cast<uint64_t>(w), g.hop, static_cast<uint64_t>(v));
    int64_t cur = v;
    for (int64_t s = 0; s < g.walk_length; ++s) {
      const int64_t start = g.indptr[cur], deg = g.indptr[cur + 1] - start;
      if (deg == 0) break;
      const int64_t next = static_cast<int64_t>(indices[start + rng.below(deg)]);
      if (next < 0 || next >= g.num_nodes) {
        *bad = true;
        return 0;
      }
      cur = next;
      if (cur != v) visits.push_back(cur);
    }
  }
  std::sort(visits.begin(), visits.end());
  ranked.clear();  // (-count, vertex): most visited first, then the smaller id
  for (size_t i = 0; i < visits.size();) {
    size_t j = i;
    while (j < visits.size() && visits[j] == visits[i]) ++j;
    ranked.emplace_back(-static_cast<int64_t>(j - i), visits[i]);
    i = j;
  }
  const int64_t kept = std::min<int64_t>(g.top_k, static_cast<int64_t>(ranked.size()));
  std::partial_sort(ranked.begin(), ranked.begin() + kept, ranked.end());
  for (int64_t k = 0; k < kept; ++k) {
    out_vertex[k] = ranked[k].second;
    out_count[k] = -ranked[k].first;
  }
  return kept;
}

template <typename index_t>
std::tuple<at::Tensor, at::Tensor, at::Tensor> run(const Walks& g, const index_t* indices,
                                                   const int64_t* targets, int64_t n,
                                                   int64_t threads) {
  std::vector<int64_t> slot_vertex(n * g.slots), slot_count(n * g.slots), kept(n);
  const int64_t n_chunks = num_chunks(n, kTargetGrain);
  std::vector<int64_t> chunk_off(n_chunks);
  std::atomic<bool> bad_index{false};
  parallel_chunks(n_chunks, threads, [&](int64_t c) {
    std::vector<int64_t> visits;
    visits.reserve(g.num_walks * g.walk_length);
    std::vector<std::pair<int64_t, int64_t>> ranked;
    bool bad = false;
    int64_t total = 0;
    const int64_t end = std::min(n, (c + 1) * kTargetGrain);
    for (int64_t i = c * kTargetGrain; i < end && !bad; ++i) {
      kept[i] = walk_target(g, indices, targets[i], visits, ranked,
                            slot_vertex.data() + i * g.slots, slot_count.data() + i * g.slots,
                            &bad);
      total += kept[i];
    }
    chunk_off[c] = total;
    if (bad) bad_index.store(true);
  });
  TORCH_CHECK(!bad_index.load(), "random_walk_top_k: the graph's indices hold ids outside [0, ",
              g.num_nodes, ")");
  int64_t num_out = 0;
  for (int64_t& off : chunk_off) {
    const int64_t c = off;
    off = num_out;
    num_out += c;
  }
  at::Tensor owner = at::empty({num_out}, at::kLong), vertex = at::empty({num_out}, at::kLong),
             count = at::empty({num_out}, at::kLong);
  int64_t *o = owner.data_ptr<int64_t>(), *v = vertex.data_ptr<int64_t>(),
          *k = count.data_ptr<int64_t>();
  parallel_chunks(n_chunks, threads, [&](int64_t c) {
    int64_t pos = chunk_off[c];
    const int64_t end = std::min(n, (c + 1) * kTargetGrain);
    for (int64_t i = c * kTargetGrain; i < end; ++i) {
      std::fill(o + pos, o + pos + kept[i], i);
      std::copy_n(slot_vertex.data() + i * g.slots, kept[i], v + pos);
      std::copy_n(slot_count.data() + i * g.slots, kept[i], k + pos);
      pos += kept[i];
    }
  });
  return {owner, vertex, count};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> random_walk_top_k(
    const at::Tensor& indptr_in, const at::Tensor& indices_in, const at::Tensor& targets_in,
    int64_t num_walks, int64_t walk_length, int64_t top_k, int64_t seed, int64_t hop,
    int64_t num_threads) {
  check_random_walk(indptr_in, indices_in, targets_in, num_walks, walk_length, top_k);
  const at::Tensor indptr = indptr_in.contiguous(), indices = indices_in.contiguous(),
                   targets = targets_in.contiguous();
  const Walks g{indptr.data_ptr<int64_t>(), indptr.numel() - 1, num_walks, walk_length, top_k,
                std::min(top_k, num_walks * walk_length),
                mix64(static_cast<uint64_t>(seed) ^ kWalkSalt), static_cast<uint64_t>(hop)};
  static ContentionGuard guard;
  const int64_t threads = guard.threads(resolve_threads(num_threads));
  const auto start = std::chrono::steady_clock::now();
  const int64_t waited_before = helper_wait_ns();
  const int64_t* t = targets.data_ptr<int64_t>();
  auto out = indices.scalar_type() == at::kLong
                 ? run(g, indices.data_ptr<int64_t>(), t, targets.numel(), threads)
                 : run(g, indices.data_ptr<int32_t>(), t, targets.numel(), threads);
  guard.report(threads,
               std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - start).count(),
               helper_wait_ns() - waited_before);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) { m.impl("random_walk_top_k", &random_walk_top_k); }

}  // namespace gnnscale::sampling
