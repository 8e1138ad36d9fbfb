// split_sample, CPU kernel: the online split of one shared mini-batch sample over `world` ranks (GSplit).
//
// The sample uses cumulative local ids: layer i's vertices are ids [0, n_i), n_0 >= ... >= n_L,
// layer L = the targets. Block i (input layer first) has edges u -> v with u < n_i and
// v < n_{i+1}. Every vertex of every layer gets exactly one owner: layer 0 by `own_in` (where
// its feature is cached, else the partition), the others by `own_part` (partition book).
//
// A rank *computes* the layer-(i+1) vertices it owns, plus (hybrid) the remote ones it chose to
// replicate; it receives every other layer-i row its block needs from the row's owner. The
// replication greedy (NeutronStar's Algorithm 4, top-down here because a layer's needs follow
// from the layer above) replicates a needed remote vertex when recomputing it (its edges,
// its vertex update and the rows of its inputs not yet present) costs less than shuffling it,
// cheapest first, within a per-rank row budget (deps::greedy_walk, shared with fullgraph);
// given the fixed cost of an exchange, every rank then takes all its remaining remote rows of
// a layer when, for every rank, that costs less than shuffling them plus the layer's two
// exchanges (a layer where no rank receives a row is not shuffled at all).
// Layer-0 rows are never replicated (each input feature is loaded by exactly one rank).
//
// With `preagg`, a remote source's edges into a destination are aggregated by the source's
// owner into one row per (destination, sender) (partial mean) and the receiver keeps one edge
// per original edge from that row, so a mean (or sum) aggregation stays exact.
//
// split_sample_all plans the sample once and returns every rank's output, rank 0 first.
//
// With `edge_pos` (asked only by a consumer of edge ids or types: edge features, typed convs),
// each rank's output ends with one more tensor per layer: for each local edge, its position in
// the sample's block i (so its e_id / edge_type are the block's at that position); a
// pre-aggregated edge keeps its original edge's position. Without it nothing is recorded.
//
// Output for rank `rank` (flat list): [loaded layer-0 ids, stats], then per layer i 8 tensors:
//   dst ids, src ids (sample ids; a virtual row carries its destination's id), edge_index
//   (2, E_r) in local ids, gather index (each local source -> row of cat(h, recv)), send index
//   (into cat(h, agg slots)), send counts [world], recv counts [world], agg (3, A): h row,
//   slot, and (first n_slots entries of row 2) the edge count of each slot.
// stats (int64): [edges computed by each rank (world)..., local edges, all edges,
//                 replicated rows of this rank, then per layer the rows all ranks receive].
// Then, with `edge_pos` only, per layer i: the local edges' positions in block i (E_r).
//
// With `read_in` (every rank reads its layer-0 block's sources itself: split's inputs=read,
// never with `preagg`), layer 0 is not shuffled: no rank loads rows for another, so the loaded
// ids are empty, layer 0's gather, send index and agg are empty, its counts zero and its row
// of the stats 0; its dst, src ids and edge_index are as without it.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "deps/greedy.h"
#include "split/split_sample.h"
#include "utils/parallel.h"

namespace gnnscale::split {
namespace {

using Mask = std::vector<uint8_t>;  // [world * n] : rank q's flag for vertex v at q * n + v
using Ids = std::vector<int64_t>;

// The plan is shared by the ranks (split_sample_all builds every rank's output from one):
// each rank's edges, needs and received rows are listed once, so a rank's output reads its
// own lists instead of scanning every vertex and edge once per peer. The hot loops avoid
// unpredictable branches (owners look random to the predictor): they compact by writing
// every candidate and advancing by the condition, and select with pick(). Their arrays are
// raw pointers held in locals, since a byte store may alias anything else.

// c ? a : b for c in {0, 1}, without a branch
inline int64_t pick(int64_t c, int64_t a, int64_t b) { return b ^ ((a ^ b) & -c); }

// An uninitialised int64 buffer with one entry to spare for compaction: every entry is
// written before it is read.
using Buf = std::unique_ptr<int64_t[]>;
Buf buffer(int64_t n) { return Buf(new int64_t[n + 1]); }

// `t` as a contiguous tensor of `type` (itself when it is one already).
at::Tensor as(const at::Tensor& t, at::ScalarType type) {
  return t.scalar_type() == type && t.is_contiguous() ? t : t.contiguous().to(type);
}

at::Tensor to_tensor(const int64_t* v, int64_t n) {
  auto t = at::empty({n}, at::kLong);
  std::copy(v, v + n, t.data_ptr<int64_t>());
  return t;
}

// A list of ids (edge positions) in a buffer.
struct List {
  Buf at;
  int64_t n = 0;
  const int64_t* begin() const { return at.get(); }
  const int64_t* end() const { return at.get() + n; }
};

// Items grouped by a key: group k is items[ptr[k], ptr[k + 1]), in input order.
struct Groups {
  Ids ptr;
  Buf items;
  const int64_t* begin(int64_t k) const { return items.get() + ptr[k]; }
  const int64_t* end(int64_t k) const { return items.get() + ptr[k + 1]; }
  int64_t size(int64_t k) const { return ptr[k + 1] - ptr[k]; }
};

// K empty groups (nothing grouped: layer 0's rows when every rank reads its own).
Groups empty_groups(int64_t K) {
  Groups g;
  g.ptr.assign(K + 1, 0);
  g.items = buffer(0);
  return g;
}

// Stable counting sort of item(j), j in [0, n), by key(j) in [0, K). The input is read as
// kParts interleaved parts, each with its own counters (one counter per key would serialise
// the increments of equal keys in a row); part p is [p * run, (p + 1) * run), the last one
// also holds the tail.
template <class Key, class Item>
Groups group_by(int64_t n, int64_t K, const Key& key, const Item& item) {
  constexpr int64_t kParts = 4;
  const int64_t run = n / kParts;
  Ids at(kParts * K, 0);  // [part * K + key]: count, then cursor
  for (int64_t t = 0; t < run; ++t)
    for (int64_t p = 0; p < kParts; ++p) ++at[p * K + key(p * run + t)];
  for (int64_t j = kParts * run; j < n; ++j) ++at[(kParts - 1) * K + key(j)];
  Groups g;
  g.ptr.assign(K + 1, 0);
  int64_t pos = 0;
  for (int64_t k = 0; k < K; ++k) {
    g.ptr[k] = pos;
    for (int64_t p = 0; p < kParts; ++p) {
      const int64_t count = at[p * K + k];
      at[p * K + k] = pos;
      pos += count;
    }
  }
  g.ptr[K] = pos;
  g.items = buffer(n);
  int64_t* items = g.items.get();
  int64_t* cursor = at.data();
  for (int64_t t = 0; t < run; ++t)
    for (int64_t p = 0; p < kParts; ++p) {
      const int64_t j = p * run + t;
      items[cursor[p * K + key(j)]++] = item(j);
    }
  for (int64_t j = kParts * run; j < n; ++j)
    items[cursor[(kParts - 1) * K + key(j)]++] = item(j);
  return g;
}

struct Layer {
  int64_t n;             // vertices of this layer
  const int32_t* own;    // owner of each vertex
  Mask comp;             // computed by rank q (its owner; hybrid: the ranks replicating it)
  Mask need;             // needed by rank q (as a source of its block or a self row); i < L
  int64_t replicas = 0;  // vertices computed besides their owner (hybrid)
  const uint8_t* comp_of(int64_t q) const { return comp.data() + q * n; }
  const uint8_t* need_of(int64_t q) const { return need.data() + q * n; }
};

// Block i: edges u -> v from layer i into layer i + 1.
struct Block {
  const int64_t* src;
  const int64_t* dst;
  int64_t ne;
  std::vector<List> local;     // [q]: the edges (positions) into destinations q computes
  int64_t same = 0;            // edges whose ends have one owner
  std::vector<Groups> recv;    // [q]: the real layer-i rows q receives (needs and does not
                               // compute; with preagg only self rows), by owner, ascending
  std::vector<Groups> remote;  // [q] (preagg): those of local[q] whose source q does not
                               // compute, grouped by the source's owner
};

// The per-layer costs of the hybrid greedy, each an array of L + 1 values, and the fixed
// seconds of one exchange (`sync`, whatever it carries; 0: not modelled).
struct Costs {
  const double* comm_row;
  const double* edge;
  const double* vertex;
  double sync = 0.0;
};

// The sample, its owners and (once planned) which rank computes and needs which vertex.
struct Splitter {
  int64_t L, W;
  bool preagg;
  bool read_in = false;  // layer 0 is read by every rank, never shuffled (see the header)
  int64_t threads;  // ranks are planned in parallel (mark_needs, replicate, group_received)
  std::vector<Layer> lay;  // layers 0..L
  std::vector<Block> blk;  // blocks 0..L-1
  Groups loaded;           // layer-0 vertices by owner (the rows each rank loads), ascending

  // every vertex is computed by its owner
  void assign_owners() {
    for (Layer& l : lay) {
      const int64_t n = l.n;
      const int32_t* own = l.own;
      l.comp.assign(W * n, 0);
      uint8_t* comp = l.comp.data();
      for (int64_t v = 0; v < n; ++v) comp[own[v] * n + v] = 1;
    }
    if (read_in) {  // nobody loads rows for another rank
      loaded = empty_groups(W);
      return;
    }
    const int32_t* own = lay[0].own;
    loaded = group_by(
        lay[0].n, W, [own](int64_t v) { return own[v]; }, [](int64_t v) { return v; });
  }

  // block i's edges by the ranks computing their destination (final by now), and the needs
  // of layer i that follow: a rank's self rows and its edges' sources
  void mark_needs(int64_t i) {
    Layer& lo = lay[i];
    const Layer& hi = lay[i + 1];
    Block& b = blk[i];
    lo.need.assign(W * lo.n, 0);
    b.local.resize(W);
    Ids same(W, 0);  // edges whose ends q owns
    parallel_chunks(W, threads, [&](int64_t q) {
      const int64_t* src = b.src;
      const int64_t* dst = b.dst;
      const int64_t ne = b.ne;
      const int32_t* own_hi = hi.own;
      const uint8_t* c = hi.comp_of(q);
      const uint8_t* owns = lo.comp_of(q);  // its owners still: layer i is replicated after
      uint8_t* nd = lo.need.data() + q * lo.n;
      Buf buf = buffer(ne);
      int64_t* loc = buf.get();
      int64_t m = 0;
      for (int64_t k = 0; k < ne; ++k) {
        loc[m] = k;
        m += c[dst[k]];
      }
      std::copy(c, c + hi.n, nd);
      int64_t n_same = 0;
      if (hi.replicas == 0) {  // q owns every destination it computes
        for (int64_t j = 0; j < m; ++j) {
          const int64_t u = src[loc[j]];
          nd[u] = 1;
          n_same += owns[u];
        }
      } else {
        for (int64_t j = 0; j < m; ++j) {
          const int64_t u = src[loc[j]], v = dst[loc[j]];
          nd[u] = 1;
          n_same += owns[u] & (own_hi[v] == q);
        }
      }
      b.local[q] = List{std::move(buf), m};
      same[q] = n_same;
    });
    b.same = std::accumulate(same.begin(), same.end(), int64_t{0});
  }

  // what each rank receives for block i (layer i is final now): its real rows by owner and
  // (preagg) its edges from sources it does not compute by the sources' owners
  void group_received(int64_t i) {
    const Layer& lo = lay[i];
    const Layer& hi = lay[i + 1];
    Block& b = blk[i];
    b.recv.resize(W);
    if (preagg) b.remote.resize(W);
    if (i == 0 && read_in) {  // layer 0 is read, not received
      for (Groups& g : b.recv) g = empty_groups(W);
      return;
    }
    parallel_chunks(W, threads, [&](int64_t q) {
      const uint8_t* c = lo.comp_of(q);
      const uint8_t* real = preagg ? hi.comp_of(q) : lo.need_of(q);  // a real row q needs
      const int32_t* own = lo.own;
      const int64_t limit = preagg ? hi.n : lo.n;
      Buf buf = buffer(limit);
      int64_t* rows = buf.get();
      int64_t m = 0;
      for (int64_t u = 0; u < limit; ++u) {
        rows[m] = u;
        m += (!c[u]) & real[u];
      }
      b.recv[q] = group_by(
          m, W, [=](int64_t j) { return static_cast<int64_t>(own[rows[j]]); },
          [=](int64_t j) { return rows[j]; });
      if (!preagg) return;
      const int64_t* src = b.src;
      Buf kept = buffer(b.local[q].n);
      int64_t* edges = kept.get();
      m = 0;
      for (const int64_t* k = b.local[q].begin(); k != b.local[q].end(); ++k) {
        edges[m] = *k;
        m += !c[src[*k]];
      }
      b.remote[q] = group_by(
          m, W, [=](int64_t j) { return static_cast<int64_t>(own[src[edges[j]]]); },
          [=](int64_t j) { return edges[j]; });
    });
  }

  // hybrid: choose remote layer-i vertices (i >= 1) each rank recomputes
  void replicate(int64_t i, const Costs& cost_of, int64_t budget, Ids& used) {
    Layer& cur = lay[i];
    const Layer& below = lay[i - 1];
    const Block& b = blk[i - 1];
    const int64_t nb = below.n;
    // in-edges of layer-i vertices in block i - 1, as CSR over destinations (a sampler's
    // block lists its edges by destination already: then its sources are the CSR's columns)
    Ids ptr(cur.n + 1, 0), sorted_ins;
    for (int64_t k = 0; k < b.ne; ++k) ++ptr[b.dst[k] + 1];
    std::partial_sum(ptr.begin(), ptr.end(), ptr.begin());
    const int64_t* ins = b.src;
    if (!std::is_sorted(b.dst, b.dst + b.ne)) {
      sorted_ins.resize(b.ne);
      Ids fill(ptr.begin(), ptr.end() - 1);
      for (int64_t k = 0; k < b.ne; ++k) sorted_ins[fill[b.dst[k]]++] = b.src[k];
      ins = sorted_ins.data();
    }
    const double comm_in = cost_of.comm_row[i - 1], comm_out = cost_of.comm_row[i];
    const double edge_cost = cost_of.edge[i - 1], vertex_cost = cost_of.vertex[i - 1];
    // after the per-row greedy: the rows each rank still receives, and whether taking them
    // all would pay for that rank (see below)
    std::vector<Ids> rest(W);
    Mask whole(W, 0);
    parallel_chunks(W, threads, [&](int64_t q) {
      if (used[q] >= budget) return;  // nothing more fits
      // first a bound: a candidate costs at least its edges and vertex update (every input
      // present); when no candidate can pay alone and the whole rest cannot either, q takes
      // nothing, without marking what is present (a pass over the block's edges)
      const uint8_t* nd = cur.need_of(q);
      double floor_all = 0.0, cheapest = 0.0;
      int64_t n_cand = 0;
      for (int64_t u = 0; u < cur.n; ++u)
        if (nd[u] && cur.own[u] != q) {
          const double c = (ptr[u + 1] - ptr[u]) * edge_cost + vertex_cost;
          cheapest = n_cand++ ? std::min(cheapest, c) : c;
          floor_all += c;
        }
      if (n_cand == 0) {
        whole[q] = 1;  // nothing to receive here
        return;
      }
      const bool may_whole = cost_of.sync > 0.0 && used[q] + n_cand <= budget &&
                             floor_all < n_cand * comm_out + 2 * cost_of.sync;
      if (cheapest >= comm_out && !may_whole) return;
      // rows of layer i-1 present at q anyway: its own, and those its own vertices need
      std::vector<uint8_t> present(nb, 0);
      for (int64_t w = 0; w < nb; ++w) present[w] = below.own[w] == q;
      for (int64_t v = 0; v < cur.n; ++v)
        if (cur.own[v] == q) {
          present[v] = 1;
          for (int64_t k = ptr[v]; k < ptr[v + 1]; ++k) present[ins[k]] = 1;
        }
      auto cost_at = [&](const std::vector<uint8_t>& pres, int64_t u) {
        double c = (ptr[u + 1] - ptr[u]) * edge_cost + vertex_cost;
        if (!pres[u]) c += comm_in;
        for (int64_t k = ptr[u]; k < ptr[u + 1]; ++k)
          if (!pres[ins[k]]) c += comm_in;
        return c;
      };
      auto cost = [&](int64_t u) { return cost_at(present, u); };
      deps::Candidates cand;
      cand.reserve(n_cand);
      for (int64_t u = 0; u < cur.n; ++u)
        if (nd[u] && cur.own[u] != q) cand.emplace_back(cost(u), u);
      uint8_t* cp = cur.comp.data() + q * cur.n;
      // cheapest first; re-measured: rows fetched for earlier picks are free; a row each
      deps::greedy_walk(
          cand, [&](int64_t u) { return cost(u) < comm_out; },
          [&](int64_t) { return used[q] < budget; },
          [&](int64_t u) {
            cp[u] = 1;
            ++used[q];
            present[u] = 1;
            for (int64_t k = ptr[u]; k < ptr[u + 1]; ++k) present[ins[k]] = 1;
          });
      if (cost_of.sync <= 0.0) return;
      for (const auto& entry : cand)  // sorted by greedy_walk
        if (!cp[entry.second]) rest[q].push_back(entry.second);
      const int64_t n_rest = static_cast<int64_t>(rest[q].size());
      if (used[q] + n_rest > budget) return;
      double all = 0.0;  // cheapest first, each input fetched once
      for (const int64_t u : rest[q]) {
        all += cost_at(present, u);
        present[u] = 1;
        for (int64_t k = ptr[u]; k < ptr[u + 1]; ++k) present[ins[k]] = 1;
      }
      whole[q] = all < n_rest * comm_out + 2 * cost_of.sync;
    });
    // The rows the ranks still receive cost their shuffling plus the layer's two exchanges
    // (forward, backward), which are spared only when no rank receives a row there: every
    // rank takes its whole rest when that pays for every rank, else none does.
    if (cost_of.sync <= 0.0 || !std::all_of(whole.begin(), whole.end(), [](uint8_t w) {
          return w != 0;
        }))
      return;
    for (int64_t q = 0; q < W; ++q) {
      uint8_t* cp = cur.comp.data() + q * cur.n;
      for (const int64_t u : rest[q]) cp[u] = 1;
      used[q] += static_cast<int64_t>(rest[q].size());
    }
  }

  // top-down: each layer's needs follow from the layer above (and its replicas)
  Ids plan(const Costs& costs, int64_t budget) {
    assign_owners();
    Ids used(W, 0);
    for (int64_t i = L - 1; i >= 0; --i) {
      mark_needs(i);
      if (i >= 1 && budget > 0) {
        const int64_t before = std::accumulate(used.begin(), used.end(), int64_t{0});
        replicate(i, costs, budget, used);
        lay[i].replicas = std::accumulate(used.begin(), used.end(), int64_t{0}) - before;
      }
      group_received(i);  // layer i is final now
    }
    return used;
  }

  // [edges computed by each rank..., local edges, all edges, 0]: the last entry is each
  // rank's own (rows it replicated)
  // Then per layer i: the rows all ranks receive in its shuffle (real rows and, preagg, the
  // edges their aggregated rows stand for): 0 means no rank sends or receives anything there,
  // so every rank may skip that shuffle.
  Ids edge_stats() const {
    Ids stats(W + 3 + L, 0);
    for (int64_t i = 0; i < L; ++i) {
      const Block& b = blk[i];
      for (int64_t q = 0; q < W; ++q) {
        stats[q] += b.local[q].n;
        stats[W + 3 + i] += b.recv[q].ptr[W];
        if (preagg) stats[W + 3 + i] += b.remote[q].ptr[W];
      }
      stats[W] += b.same;
      stats[W + 1] += b.ne;
    }
    return stats;
  }
};

// Rank R's working arrays, sized for the largest layer and reused layer after layer.
struct Scratch {
  Buf row;        // layer-i vertex -> its row of cat(h, received rows), where it has one
  Buf pos_src;    // layer-i vertex -> its local source row, where it is one
  Buf dst_rows;   // the local source rows' sample ids: destinations (R computes them), ...
  Buf real_rows;  // ... real sources ...
  Buf virt_rows;  // ... and virtual rows (a pre-aggregated (destination, sender) each)
  Buf virt_recv;  // virtual row -> its row of cat(h, received rows)
  Buf slot_of;    // [p * n_dst + d]: local source row of p's aggregated slot for destination d
  Buf slot;       // sender: layer-(i+1) vertex -> its aggregated slot
  Buf send;       // send index under construction
  Mask mark;      // all zero between uses

  explicit Scratch(const Splitter& s) {
    int64_t n_lo = 0, n_hi = 0, send_cap = 0;
    for (int64_t i = 0; i < s.L; ++i) {
      const int64_t lo = s.lay[i].n, hi = s.lay[i + 1].n;
      n_lo = std::max(n_lo, lo);
      n_hi = std::max(n_hi, hi);
      send_cap = std::max(send_cap, (s.W - 1) * (lo + hi));
    }
    row = buffer(n_lo);
    pos_src = buffer(n_lo);
    dst_rows = buffer(n_hi);
    real_rows = buffer(n_lo);
    virt_rows = buffer((s.W - 1) * n_hi);
    virt_recv = buffer((s.W - 1) * n_hi);
    slot_of = buffer(s.W * n_hi);
    slot = buffer(n_hi);
    send = buffer(send_cap);
    mark.assign(n_hi + 1, 0);
  }
};

// What rank R computes and receives for layer i, and how its local block's source rows are
// laid out: n_dst destinations, n_real real sources, n_virt virtual rows (in the scratch:
// their rows, and row, pos_src, virt_recv, slot_of).
struct ReceiveSide {
  int64_t n_h = 0;  // rows of h: the layer-i vertices R computes
  int64_t n_dst = 0, n_real = 0, n_virt = 0;
  at::Tensor recv_counts;  // rows received from each peer
};

ReceiveSide receive_side(const Splitter& s, int64_t i, int64_t R, Scratch& sc) {
  const Layer& lo = s.lay[i];
  const Layer& hi = s.lay[i + 1];
  const Block& b = s.blk[i];
  const int64_t n_lo = lo.n, n_hi = hi.n, W = s.W;
  const int64_t no_preagg = !s.preagg;
  const uint8_t* comp = lo.comp_of(R);
  const uint8_t* dst = hi.comp_of(R);
  const uint8_t* need = lo.need_of(R);
  const int64_t* edge_dst = b.dst;
  int64_t* row = sc.row.get();
  int64_t* pos_src = sc.pos_src.get();
  int64_t* dst_rows = sc.dst_rows.get();
  int64_t* real_rows = sc.real_rows.get();
  int64_t* virt_rows = sc.virt_rows.get();
  int64_t* virt_recv = sc.virt_recv.get();
  uint8_t* has = sc.mark.data();  // destination d gets an aggregated row from peer p
  ReceiveSide r;
  // one pass over the layer: the rows of h (those R computes), the destinations (their self
  // rows come first) and the real sources after them: rows R computes, and (no preagg) every
  // other row it needs
  const int64_t nd = std::accumulate(dst, dst + n_hi, int64_t{0});
  int64_t n_h = 0, md = 0, mr = 0;
  for (int64_t u = 0; u < n_hi; ++u) {
    const int64_t is_dst = dst[u], take = need[u] & !is_dst & (comp[u] | no_preagg);
    row[u] = n_h;
    n_h += comp[u];
    dst_rows[md] = u;
    real_rows[mr] = u;
    pos_src[u] = pick(is_dst, md, nd + mr);
    md += is_dst;
    mr += take;
  }
  for (int64_t u = n_hi; u < n_lo; ++u) {
    row[u] = n_h;
    n_h += comp[u];
    real_rows[mr] = u;
    pos_src[u] = nd + mr;
    mr += need[u] & (comp[u] | no_preagg);
  }
  r.n_h = n_h;
  r.n_dst = nd;
  r.n_real = mr;
  // per peer: the real rows it sends R (those R needs and does not compute; with preagg only
  // self rows), then its aggregated slots (one per destination with edges from its rows)
  r.recv_counts = at::zeros({W}, at::kLong);
  int64_t* recv_counts = r.recv_counts.data_ptr<int64_t>();
  int64_t n_recv = 0, mv = 0;
  if (s.preagg)  // (rank R's own slots are read by local_edges and never used)
    std::fill_n(sc.slot_of.get() + R * nd, nd, 0);
  for (int64_t p = 0; p < W; ++p) {
    if (p == R) continue;
    const int64_t base = n_recv;
    const int64_t* u1 = b.recv[R].end(p);
    for (const int64_t* u = b.recv[R].begin(p); u != u1; ++u) row[*u] = n_h + n_recv++;
    if (s.preagg) {
      const int64_t* k1 = b.remote[R].end(p);
      for (const int64_t* k = b.remote[R].begin(p); k != k1; ++k) has[pos_src[edge_dst[*k]]] = 1;
      int64_t* slot_of = sc.slot_of.get() + p * nd;
      for (int64_t d = 0; d < nd; ++d) {
        virt_rows[mv] = dst_rows[d];  // a virtual row carries its destination's id
        virt_recv[mv] = n_h + n_recv;
        slot_of[d] = nd + mr + mv;
        mv += has[d];
        n_recv += has[d];
        has[d] = 0;
      }
    }
    recv_counts[p] = n_recv - base;
  }
  r.n_virt = mv;
  return r;
}

// The local source rows' sample ids (a virtual row carries its destination's id).
at::Tensor source_ids(const Scratch& sc, const ReceiveSide& r) {
  at::Tensor t = at::empty({r.n_dst + r.n_real + r.n_virt}, at::kLong);
  int64_t* out = t.data_ptr<int64_t>();
  out = std::copy_n(sc.dst_rows.get(), r.n_dst, out);
  out = std::copy_n(sc.real_rows.get(), r.n_real, out);
  std::copy_n(sc.virt_rows.get(), r.n_virt, out);
  return t;
}

// Each local source row -> its row of cat(h, received rows).
at::Tensor gather_index(const Scratch& sc, const ReceiveSide& r) {
  const int64_t* row = sc.row.get();
  at::Tensor t = at::empty({r.n_dst + r.n_real + r.n_virt}, at::kLong);
  int64_t* gather = t.data_ptr<int64_t>();
  for (int64_t j = 0; j < r.n_dst; ++j) gather[j] = row[sc.dst_rows[j]];
  gather += r.n_dst;
  for (int64_t j = 0; j < r.n_real; ++j) gather[j] = row[sc.real_rows[j]];
  std::copy_n(sc.virt_recv.get(), r.n_virt, gather + r.n_real);
  return t;
}

// The local block's edges (2, E_r) as [sources..., destinations...] in local rows (the
// edges into R's destinations, in block order).
at::Tensor local_edges(const Splitter& s, int64_t i, int64_t R, const Scratch& sc,
                       const ReceiveSide& r) {
  const Block& b = s.blk[i];
  const Layer& lo = s.lay[i];
  const int64_t* loc = b.local[R].begin();
  const int64_t E = b.local[R].n, nd = r.n_dst;
  const int64_t* src = b.src;
  const int64_t* dst = b.dst;
  const int32_t* own = lo.own;
  const int64_t* pos_src = sc.pos_src.get();
  const int64_t* slot_of = sc.slot_of.get();
  const uint8_t* comp = lo.comp_of(R);
  at::Tensor t = at::empty({2, E}, at::kLong);
  int64_t* e_src = t.data_ptr<int64_t>();
  int64_t* e_dst = e_src + E;
  if (!s.preagg) {
    for (int64_t j = 0; j < E; ++j) {
      e_src[j] = pos_src[src[loc[j]]];
      e_dst[j] = pos_src[dst[loc[j]]];
    }
  } else {  // an edge from a row R does not compute reads its owner's slot
    for (int64_t j = 0; j < E; ++j) {
      const int64_t u = src[loc[j]], dv = pos_src[dst[loc[j]]];
      e_src[j] = pick(comp[u], pos_src[u], slot_of[own[u] * nd + dv]);
      e_dst[j] = dv;
    }
  }
  return t;
}

// What rank R sends for layer i: rows of cat(h, aggregated slots), peer by peer, and the
// pre-aggregation (3, A): h row summed into slot, slot, edges per slot.
struct SendSide {
  at::Tensor send_idx, send_counts, agg;
};

SendSide send_side(const Splitter& s, int64_t i, int64_t R, Scratch& sc, int64_t n_h) {
  const Layer& hi = s.lay[i + 1];
  const Block& b = s.blk[i];
  const int64_t n_hi = hi.n, W = s.W;
  const bool preagg = s.preagg;
  const int64_t* src = b.src;
  const int64_t* dst = b.dst;
  const int64_t* row = sc.row.get();  // R's rows: their rows of h
  int64_t* send = sc.send.get();
  int64_t* slot = sc.slot.get();
  uint8_t* has = sc.mark.data();  // a destination of q gets a slot
  SendSide out;
  out.send_counts = at::zeros({W}, at::kLong);
  int64_t* send_counts = out.send_counts.data_ptr<int64_t>();
  int64_t A = 0;  // peers' edges from R's rows into aggregated slots
  if (preagg)
    for (int64_t q = 0; q < W; ++q) A += q == R ? 0 : b.remote[q].size(R);
  out.agg = at::empty({3, A}, at::kLong);
  int64_t* agg_row = out.agg.data_ptr<int64_t>();
  int64_t* agg_slot = agg_row + A;
  int64_t* slot_count = agg_slot + A;  // the first n_slots entries, zeros after them
  std::fill_n(slot_count, A, 0);
  int64_t m = 0, n_slots = 0, a = 0;
  for (int64_t q = 0; q < W; ++q) {
    if (q == R) continue;
    const int64_t before = m;
    // the real rows q receives from R, in vertex order
    for (const int64_t* u = b.recv[q].begin(R); u != b.recv[q].end(R); ++u) send[m++] = row[*u];
    if (preagg) {
      // one slot per destination of q with edges from R's rows that q does not compute
      const int64_t* k0 = b.remote[q].begin(R);
      const int64_t* k1 = b.remote[q].end(R);
      for (const int64_t* k = k0; k != k1; ++k) has[dst[*k]] = 1;
      for (int64_t v = 0; v < n_hi; ++v) {
        slot[v] = n_slots;
        send[m] = n_h + n_slots;
        m += has[v];
        n_slots += has[v];
        has[v] = 0;
      }
      for (const int64_t* k = k0; k != k1; ++k, ++a) {
        agg_row[a] = row[src[*k]];
        agg_slot[a] = slot[dst[*k]];
      }
    }
    send_counts[q] = m - before;
  }
  for (int64_t j = 0; j < A; ++j) ++slot_count[agg_slot[j]];
  out.send_idx = to_tensor(send, m);
  return out;
}

// The 8 tensors of layer i (see the header comment), appended to `out`.
void plan_layer(const Splitter& s, int64_t i, int64_t R, Scratch& sc,
                std::vector<at::Tensor>& out) {
  const ReceiveSide recv = receive_side(s, i, R, sc);
  out.push_back(to_tensor(sc.dst_rows.get(), recv.n_dst));
  out.push_back(source_ids(sc, recv));
  out.push_back(local_edges(s, i, R, sc, recv));
  if (i == 0 && s.read_in) {  // read, not shuffled: nothing to gather, send or aggregate
    out.push_back(at::empty({0}, at::kLong));
    out.push_back(at::empty({0}, at::kLong));
    out.push_back(at::zeros({s.W}, at::kLong));
    out.push_back(recv.recv_counts);
    out.push_back(at::empty({3, 0}, at::kLong));
    return;
  }
  out.push_back(gather_index(sc, recv));
  SendSide send = send_side(s, i, R, sc, recv.n_h);
  out.push_back(std::move(send.send_idx));
  out.push_back(std::move(send.send_counts));
  out.push_back(recv.recv_counts);
  out.push_back(std::move(send.agg));
}

// The sample and its owners read into `s` (which keeps `keep`'s tensors alive), then planned.
Ids plan_sample(Splitter& s, std::vector<at::Tensor>& keep, const at::Tensor& counts,
                at::TensorList edges, const at::Tensor& own_in, const at::Tensor& own_part,
                int64_t world, bool preagg, const at::Tensor& costs, int64_t budget,
                int64_t num_threads, bool read_in) {
  s.L = static_cast<int64_t>(edges.size());
  s.W = world;
  s.preagg = preagg;
  s.read_in = read_in;
  s.threads = resolve_threads(num_threads);
  const at::Tensor cnt = as(counts, at::kLong);
  keep.push_back(as(own_in, at::kInt));
  const int32_t* in = keep.back().data_ptr<int32_t>();
  keep.push_back(as(own_part, at::kInt));
  const int32_t* part = keep.back().data_ptr<int32_t>();
  // counts are in sampler order (targets first); layer i has counts[L - i] vertices; layer 0
  // is owned by own_in, the others by own_part
  s.lay.resize(s.L + 1);
  for (int64_t i = 0; i <= s.L; ++i) {
    s.lay[i].n = cnt.data_ptr<int64_t>()[s.L - i];
    s.lay[i].own = i == 0 ? in : part;
  }
  s.blk.resize(s.L);
  for (int64_t i = 0; i < s.L; ++i) {
    keep.push_back(as(edges[i], at::kLong));
    s.blk[i].ne = keep.back().size(1);
    s.blk[i].src = keep.back().data_ptr<int64_t>();
    s.blk[i].dst = s.blk[i].src + s.blk[i].ne;
  }
  keep.push_back(as(costs, at::kDouble));
  const double* c = keep.back().data_ptr<double>();
  const Costs per_layer{c, c + s.L + 1, c + 2 * (s.L + 1),
                        costs.numel() > 3 * (s.L + 1) ? c[3 * (s.L + 1)] : 0.0};
  return s.plan(per_layer, budget);
}

// Rank R's flat output (see the header comment) of a planned split; `edge_pos` appends each
// layer's local edge positions.
std::vector<at::Tensor> rank_output(const Splitter& s, const Ids& used, Ids stats, int64_t R,
                                    bool edge_pos) {
  stats[s.W + 2] = used[R];
  std::vector<at::Tensor> out{to_tensor(s.loaded.begin(R), s.loaded.size(R)),
                              to_tensor(stats.data(), static_cast<int64_t>(stats.size()))};
  out.reserve(2 + (8 + edge_pos) * s.L);
  Scratch sc(s);
  for (int64_t i = 0; i < s.L; ++i) plan_layer(s, i, R, sc, out);
  if (edge_pos)
    for (const Block& b : s.blk) out.push_back(to_tensor(b.local[R].begin(), b.local[R].n));
  return out;
}

std::vector<at::Tensor> split_sample(const at::Tensor& counts, at::TensorList edges,
                                     const at::Tensor& own_in, const at::Tensor& own_part,
                                     int64_t world, int64_t rank, bool preagg,
                                     const at::Tensor& costs, int64_t budget,
                                     int64_t num_threads, bool edge_pos, bool read_in) {
  check_split_sample(counts, edges, own_in, own_part, world, rank, costs, preagg, read_in);
  Splitter s;
  std::vector<at::Tensor> keep;
  const Ids used = plan_sample(s, keep, counts, edges, own_in, own_part, world, preagg, costs,
                               budget, num_threads, read_in);
  return rank_output(s, used, s.edge_stats(), rank, edge_pos);
}

// Every rank's output, ranks 0 .. world - 1 one after another: the sample is planned once and
// the ranks' outputs are built in parallel.
std::vector<at::Tensor> split_sample_all(const at::Tensor& counts, at::TensorList edges,
                                         const at::Tensor& own_in, const at::Tensor& own_part,
                                         int64_t world, bool preagg, const at::Tensor& costs,
                                         int64_t budget, int64_t num_threads,
                                         bool edge_pos, bool read_in) {
  check_split_sample(counts, edges, own_in, own_part, world, 0, costs, preagg, read_in);
  Splitter s;
  std::vector<at::Tensor> keep;
  const Ids used = plan_sample(s, keep, counts, edges, own_in, own_part, world, preagg, costs,
                               budget, num_threads, read_in);
  const Ids stats = s.edge_stats();
  std::vector<std::vector<at::Tensor>> per_rank(world);
  parallel_chunks(world, s.threads,
                  [&](int64_t r) { per_rank[r] = rank_output(s, used, stats, r, edge_pos); });
  std::vector<at::Tensor> out;
  for (auto& part : per_rank) out.insert(out.end(), part.begin(), part.end());
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) {
  m.impl("split_sample", &split_sample);
  m.impl("split_sample_all", &split_sample_all);
}

}  // namespace gnnscale::split
