// negative_sample, CPU kernel: k negative pairs for every positive, keyed by the positive's key.
//
// Positive i draws its k negatives from one counter-based stream,
// KeyedRng(mix64(seed ^ kNegSalt), 0, keys[i]) (utils/rng.h), in order: mode 0 (uniform) draws
// the source then the target uniformly over [0, num_nodes); mode 1 (per source) keeps
// sources[i] and draws the target. Each drawn endpoint is uniform over its range, [0, num_nodes)
// unless src_range / dst_range narrow it to [lo, hi) (a node type's id range on a typed graph:
// the source and destination types of the edge type); the full range draws exactly as
// without it. With a graph given (CSC, each vertex's in-neighbours sorted
// ascending), a draw that is a self loop or an edge src -> dst of the graph is drawn again, up
// to max_tries times (the last draw stands). The negatives of a key are a pure function of
// (seed, key): the same on any number of ranks and threads, whichever batch holds the key.
//
// The edge test: a binary search in dst's sorted in-neighbours, or, given an edge_key_table
// (built once per graph by edge_key_table), one probe of an open-addressing hash of the keys
// dst * num_nodes + src (linear probing, at most half full): the same answer, so the same
// negatives, with one random read where the search makes several.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "sampling/negative_sample.h"
#include "utils/parallel.h"
#include "utils/rng.h"

namespace gnnscale::sampling {
namespace {

constexpr int64_t kGrain = 256;  // positives per chunk
constexpr uint64_t kNegSalt = 0x3C6EF372FE94F82BULL;  // keeps negatives apart from other draws

// Whether src -> dst is an edge of the CSC graph (sources of dst sorted ascending).
template <typename index_t>
bool is_edge(const int64_t* indptr, const index_t* indices, int64_t src, int64_t dst) {
  const index_t* lo = indices + indptr[dst];
  const index_t* hi = indices + indptr[dst + 1];
  const index_t* at = std::lower_bound(lo, hi, static_cast<index_t>(src));
  return at != hi && static_cast<int64_t>(*at) == src;
}

constexpr int64_t kEmpty = -1;  // an unused slot of an edge_key_table

inline uint64_t slot_of(int64_t key, uint64_t mask) {
  return mix64(static_cast<uint64_t>(key)) & mask;
}

// Whether key (dst * num_nodes + src) is in the edge_key_table `table` of mask + 1 slots.
inline bool in_table(const int64_t* table, uint64_t mask, int64_t key) {
  for (uint64_t h = slot_of(key, mask);; h = (h + 1) & mask) {
    if (table[h] == key) return true;
    if (table[h] == kEmpty) return false;
  }
}

// The id ranges [lo, lo + n) the drawn sources and targets lie in.
struct Ranges {
  int64_t src_lo, src_n, dst_lo, dst_n;
};

// kRanged: a range narrows an endpoint (else both are drawn over [0, num_nodes) by the code
// that ran before ranges existed, compiled apart: ranges cost the untyped draws nothing).
template <bool kRanged, typename index_t>
void run(const int64_t* indptr, const index_t* indices, bool reject, const int64_t* sources,
         const int64_t* keys, int64_t n, int64_t num_nodes, int64_t k, int64_t mode,
         Ranges r, uint64_t seed_base, int64_t max_tries, int64_t* out_src, int64_t* out_dst,
         int64_t threads, const int64_t* table, uint64_t mask) {
  parallel_chunks(num_chunks(n, kGrain), threads, [&](int64_t c) {
    const int64_t end = std::min(n, (c + 1) * kGrain);
    for (int64_t i = c * kGrain; i < end; ++i) {
      KeyedRng rng(seed_base, 0, static_cast<uint64_t>(keys[i]));
      for (int64_t j = 0; j < k; ++j) {
        int64_t s = 0, d = 0;
        for (int64_t t = 0; t < max_tries; ++t) {
          if constexpr (kRanged) {
            s = mode == 0 ? r.src_lo + rng.below(r.src_n) : sources[i];
            d = r.dst_lo + rng.below(r.dst_n);
          } else {
            s = mode == 0 ? rng.below(num_nodes) : sources[i];
            d = rng.below(num_nodes);
          }
          if (!reject) break;
          if (s != d && !(table != nullptr ? in_table(table, mask, d * num_nodes + s)
                                           : is_edge(indptr, indices, s, d)))
            break;
        }
        out_src[i * k + j] = s;
        out_dst[i * k + j] = d;
      }
    }
  });
}

std::tuple<at::Tensor, at::Tensor> negative_sample(
    const at::Tensor& indptr_in, const at::Tensor& indices_in, const at::Tensor& sources_in,
    const at::Tensor& keys_in, int64_t num_nodes, int64_t k, int64_t mode, int64_t seed,
    int64_t max_tries, int64_t num_threads, const std::optional<at::Tensor>& edge_table,
    at::OptionalIntArrayRef src_range, at::OptionalIntArrayRef dst_range) {
  check_negative_sample(indptr_in, indices_in, sources_in, keys_in, num_nodes, k, mode,
                        max_tries);
  const auto range = [&](at::OptionalIntArrayRef r,
                         const char* name) -> std::pair<int64_t, int64_t> {
    if (!r.has_value()) return {0, num_nodes};
    check_id_range(*r, num_nodes, name);
    return {(*r)[0], (*r)[1] - (*r)[0]};
  };
  const auto [src_lo, src_n] = range(src_range, "src_range");
  const auto [dst_lo, dst_n] = range(dst_range, "dst_range");
  const Ranges ranges{src_lo, src_n, dst_lo, dst_n};
  const bool ranged = src_range.has_value() || dst_range.has_value();
  at::Tensor table;
  if (edge_table.has_value() && indptr_in.numel() > 0) {
    check_edge_table(*edge_table);
    table = edge_table->contiguous();
  }
  const int64_t* tp = table.defined() ? table.data_ptr<int64_t>() : nullptr;
  const uint64_t mask = table.defined() ? static_cast<uint64_t>(table.numel() - 1) : 0;
  const at::Tensor indptr = indptr_in.contiguous(), indices = indices_in.contiguous(),
                   sources = sources_in.contiguous(), keys = keys_in.contiguous();
  const int64_t n = keys.numel();
  at::Tensor out_src = at::empty({n * k}, at::kLong), out_dst = at::empty({n * k}, at::kLong);
  static ContentionGuard guard;
  const int64_t threads = guard.threads(resolve_threads(num_threads));
  const auto start = std::chrono::steady_clock::now();
  const int64_t waited_before = helper_wait_ns();
  const bool reject = indptr.numel() > 0;
  const uint64_t base = mix64(static_cast<uint64_t>(seed) ^ kNegSalt);
  const int64_t* src = mode == 1 ? sources.data_ptr<int64_t>() : nullptr;
  const int64_t* ip = reject ? indptr.data_ptr<int64_t>() : nullptr;
  const auto go = [&](auto ranged_flag, auto* idx) {
    run<decltype(ranged_flag)::value>(ip, idx, reject, src, keys.data_ptr<int64_t>(), n,
                                      num_nodes, k, mode, ranges, base, max_tries,
                                      out_src.data_ptr<int64_t>(), out_dst.data_ptr<int64_t>(),
                                      threads, tp, mask);
  };
  const auto go_ranged = [&](auto* idx) {
    if (ranged)
      go(std::true_type{}, idx);
    else
      go(std::false_type{}, idx);
  };
  if (!reject || indices.scalar_type() == at::kLong)
    go_ranged(reject ? indices.data_ptr<int64_t>() : static_cast<const int64_t*>(nullptr));
  else
    go_ranged(indices.data_ptr<int32_t>());
  guard.report(threads,
               std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - start).count(),
               helper_wait_ns() - waited_before);
  return {out_src, out_dst};
}

template <typename index_t>
void fill_table(const int64_t* indptr, const index_t* indices, int64_t num_nodes, int64_t* table,
                uint64_t mask) {
  for (int64_t d = 0; d < num_nodes; ++d)
    for (int64_t e = indptr[d]; e < indptr[d + 1]; ++e) {
      const int64_t key = d * num_nodes + static_cast<int64_t>(indices[e]);
      uint64_t h = slot_of(key, mask);
      while (table[h] != kEmpty && table[h] != key) h = (h + 1) & mask;
      table[h] = key;
    }
}

// The edge_key_table of a CSC graph: its edges' keys dst * num_nodes + src in a power of two
// slots at least twice the edges (empty slots -1), for negative_sample's edge test.
at::Tensor edge_key_table(const at::Tensor& indptr_in, const at::Tensor& indices_in) {
  TORCH_CHECK(indptr_in.device().is_cpu() && indices_in.device().is_cpu() &&
                  indptr_in.dim() == 1 && indices_in.dim() == 1 && indptr_in.numel() >= 1,
              "edge_key_table: indptr and indices must be 1-D CPU tensors");
  TORCH_CHECK(indptr_in.scalar_type() == at::kLong, "edge_key_table: indptr must be int64");
  TORCH_CHECK(indices_in.scalar_type() == at::kLong || indices_in.scalar_type() == at::kInt,
              "edge_key_table: indices must be int64 or int32, got ", indices_in.scalar_type());
  const at::Tensor indptr = indptr_in.contiguous(), indices = indices_in.contiguous();
  const int64_t num_nodes = indptr.numel() - 1, edges = indices.numel();
  TORCH_CHECK(indptr[0].item<int64_t>() == 0 && indptr[-1].item<int64_t>() == edges,
              "edge_key_table: indptr must run from 0 to the number of indices");
  int64_t slots = 2;
  while (slots < 2 * edges) slots *= 2;
  at::Tensor table = at::full({slots}, kEmpty, at::kLong);
  const uint64_t mask = static_cast<uint64_t>(slots - 1);
  if (indices.scalar_type() == at::kLong)
    fill_table(indptr.data_ptr<int64_t>(), indices.data_ptr<int64_t>(), num_nodes,
               table.data_ptr<int64_t>(), mask);
  else
    fill_table(indptr.data_ptr<int64_t>(), indices.data_ptr<int32_t>(), num_nodes,
               table.data_ptr<int64_t>(), mask);
  return table;
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) {
  m.impl("negative_sample", &negative_sample);
  m.impl("edge_key_table", &edge_key_table);
}

}  // namespace gnnscale::sampling
