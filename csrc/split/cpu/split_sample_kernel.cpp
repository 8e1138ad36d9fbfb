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
// cheapest first, within a per-rank row budget (deps::greedy_walk, shared with fullgraph).
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
//                 replicated rows of this rank].
// Then, with `edge_pos` only, per layer i: the local edges' positions in block i (E_r).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
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

at::Tensor to_tensor(const Ids& v) {
  auto t = at::empty({static_cast<int64_t>(v.size())}, at::kLong);
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t;
}

struct Layer {
  int64_t n;             // vertices of this layer
  Mask comp;             // computed by rank q
  Mask need;             // needed by rank q (as a source of its block or a self row)
};

// The per-layer costs of the hybrid greedy, each an array of L + 1 values.
struct Costs {
  const double* comm_row;
  const double* edge;
  const double* vertex;
};

// The sample, its owners and (once planned) which rank computes and needs which vertex.
struct Splitter {
  int64_t L, W;
  bool preagg;
  int64_t threads;  // ranks are planned in parallel (mark_needs, replicate)
  Ids n;                                       // n[i], i = 0..L
  std::vector<const int64_t*> src, dst;        // block i edges
  Ids ne;                                      // block i edge counts
  const int32_t* own_in;
  const int32_t* own_part;
  std::vector<Layer> lay;

  int32_t owner(int64_t i, int64_t u) const { return i == 0 ? own_in[u] : own_part[u]; }
  bool comp(int64_t i, int64_t q, int64_t u) const { return lay[i].comp[q * n[i] + u] != 0; }
  bool needs(int64_t i, int64_t q, int64_t u) const { return lay[i].need[q * n[i] + u] != 0; }
  // a real (non-aggregated) layer-i row rank q needs: a self row, or (no preagg) any source
  bool need_real(int64_t i, int64_t q, int64_t u) const {
    if (u < n[i + 1] && comp(i + 1, q, u)) return true;
    return !preagg && needs(i, q, u);
  }

  // every vertex is computed by its owner
  void assign_owners() {
    lay.resize(L + 1);
    for (int64_t i = 0; i <= L; ++i) {
      Layer& l = lay[i];
      l.n = n[i];
      l.comp.assign(W * l.n, 0);
      for (int64_t v = 0; v < l.n; ++v) l.comp[owner(i, v) * l.n + v] = 1;
    }
  }

  // needs of layer i from the computed sets of layer i + 1
  void mark_needs(int64_t i) {
    Layer& lo = lay[i];
    const Layer& hi = lay[i + 1];
    lo.need.assign(W * lo.n, 0);
    parallel_chunks(W, threads, [&](int64_t q) {
      const uint8_t* c = hi.comp.data() + q * hi.n;
      uint8_t* nd = lo.need.data() + q * lo.n;
      for (int64_t v = 0; v < hi.n; ++v) nd[v] |= c[v];
      for (int64_t k = 0; k < ne[i]; ++k)
        if (c[dst[i][k]]) nd[src[i][k]] = 1;
    });
  }

  // hybrid: choose remote layer-i vertices (i >= 1) each rank recomputes
  void replicate(int64_t i, const Costs& cost_of, int64_t budget, Ids& used) {
    Layer& cur = lay[i];
    const int64_t nb = n[i - 1];
    // in-edges of layer-i vertices in block i - 1, as CSR over destinations
    Ids ptr(cur.n + 1, 0), ins(ne[i - 1]);
    for (int64_t k = 0; k < ne[i - 1]; ++k) ++ptr[dst[i - 1][k] + 1];
    std::partial_sum(ptr.begin(), ptr.end(), ptr.begin());
    Ids fill(ptr.begin(), ptr.end() - 1);
    for (int64_t k = 0; k < ne[i - 1]; ++k) ins[fill[dst[i - 1][k]]++] = src[i - 1][k];
    const double comm_in = cost_of.comm_row[i - 1], comm_out = cost_of.comm_row[i];
    const double edge_cost = cost_of.edge[i - 1], vertex_cost = cost_of.vertex[i - 1];
    parallel_chunks(W, threads, [&](int64_t q) {
      // rows of layer i-1 present at q anyway: its own, and those its own vertices need
      std::vector<uint8_t> present(nb, 0);
      for (int64_t w = 0; w < nb; ++w) present[w] = owner(i - 1, w) == q;
      for (int64_t v = 0; v < cur.n; ++v)
        if (owner(i, v) == q) {
          present[v] = 1;
          for (int64_t k = ptr[v]; k < ptr[v + 1]; ++k) present[ins[k]] = 1;
        }
      auto cost = [&](int64_t u) {
        double c = (ptr[u + 1] - ptr[u]) * edge_cost + vertex_cost;
        if (!present[u]) c += comm_in;
        for (int64_t k = ptr[u]; k < ptr[u + 1]; ++k)
          if (!present[ins[k]]) c += comm_in;
        return c;
      };
      if (used[q] >= budget) return;  // nothing more fits
      deps::Candidates cand;
      const uint8_t* nd = cur.need.data() + q * cur.n;
      for (int64_t u = 0; u < cur.n; ++u)
        if (nd[u] && owner(i, u) != q) cand.emplace_back(cost(u), u);
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
    });
  }

  // top-down: each layer's needs follow from the layer above (and its replicas)
  Ids plan(const Costs& costs, int64_t budget) {
    assign_owners();
    Ids used(W, 0);
    for (int64_t i = L - 1; i >= 0; --i) {
      mark_needs(i);
      if (i >= 1 && budget > 0) replicate(i, costs, budget, used);
    }
    return used;
  }

  // layer-0 rows rank R loads
  Ids loaded_rows(int64_t R) const {
    Ids loaded;
    for (int64_t v = 0; v < n[0]; ++v)
      if (own_in[v] == R) loaded.push_back(v);
    return loaded;
  }

  // [edges computed by each rank..., local edges, all edges, 0]: the last entry is each
  // rank's own (rows it replicated)
  Ids edge_stats() const {
    Ids stats(W + 3, 0);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t k = 0; k < ne[i]; ++k) {
        const int64_t u = src[i][k], v = dst[i][k];
        for (int64_t q = 0; q < W; ++q) stats[q] += comp(i + 1, q, v);
        stats[W] += owner(i, u) == owner(i + 1, v);
        ++stats[W + 1];
      }
    return stats;
  }

  // destinations (layer i + 1) with an edge from a layer-i row that sender p owns and rank q
  // does not compute, into a destination q computes: the pre-aggregated slots p sends q
  std::vector<uint8_t> preagg_targets(int64_t i, int64_t q, int64_t p) const {
    std::vector<uint8_t> has(n[i + 1], 0);
    for (int64_t k = 0; k < ne[i]; ++k) {
      const int64_t u = src[i][k], v = dst[i][k];
      if (comp(i + 1, q, v) && !comp(i, q, u) && owner(i, u) == p) has[v] = 1;
    }
    return has;
  }
};

// What rank R receives for layer i and how its local block is laid out.
struct ReceiveSide {
  Ids dst_ids, src_ids;      // destinations first, then real sources, then virtual rows
  Ids pos_src;               // layer-i vertex -> its local source row (-1: none)
  Ids recv_pos;              // layer-i vertex -> its row among the received (-1: none)
  Ids recv_counts;           // rows received from each peer
  std::vector<Ids> slot_of;  // [p][v] -> local source row of p's aggregated slot for v
  Ids virt_pos;              // received row of each virtual source row
};

ReceiveSide receive_side(const Splitter& s, int64_t i, int64_t R) {
  const int64_t n_lo = s.n[i], n_hi = s.n[i + 1];
  ReceiveSide r;
  r.pos_src.assign(n_lo, -1);
  for (int64_t v = 0; v < n_hi; ++v)
    if (s.comp(i + 1, R, v)) {
      r.pos_src[v] = static_cast<int64_t>(r.dst_ids.size());
      r.dst_ids.push_back(v);
    }
  r.src_ids = r.dst_ids;
  for (int64_t u = 0; u < n_lo; ++u)
    if (r.pos_src[u] < 0 && s.needs(i, R, u) && (s.comp(i, R, u) || s.need_real(i, R, u))) {
      r.pos_src[u] = static_cast<int64_t>(r.src_ids.size());
      r.src_ids.push_back(u);
    }
  // per peer: real rows then aggregated slots (one per destination with remote edges)
  r.recv_pos.assign(n_lo, -1);
  r.recv_counts.assign(s.W, 0);
  r.slot_of.resize(s.W);
  int64_t n_recv = 0;
  for (int64_t p = 0; p < s.W; ++p) {
    if (p == R) continue;
    const int64_t base = n_recv;
    for (int64_t u = 0; u < n_lo; ++u)
      if (s.owner(i, u) == p && !s.comp(i, R, u) && s.need_real(i, R, u))
        r.recv_pos[u] = n_recv++;
    if (s.preagg) {
      const std::vector<uint8_t> has = s.preagg_targets(i, R, p);
      r.slot_of[p].assign(n_hi, -1);
      for (int64_t v = 0; v < n_hi; ++v)
        if (has[v]) {
          r.slot_of[p][v] = static_cast<int64_t>(r.src_ids.size());
          r.src_ids.push_back(v);
          r.virt_pos.push_back(n_recv++);
        }
    }
    r.recv_counts[p] = n_recv - base;
  }
  return r;
}

// Each local source row -> its row of cat(h, received rows); h holds the n_h rows R computes.
Ids gather_index(const Splitter& s, int64_t i, int64_t R, const ReceiveSide& r,
                 const Ids& pos_h, int64_t n_h) {
  Ids gather(r.src_ids.size());
  const int64_t n_real = static_cast<int64_t>(r.src_ids.size() - r.virt_pos.size());
  for (int64_t j = 0; j < n_real; ++j) {
    const int64_t u = r.src_ids[j];
    const bool own = s.comp(i, R, u);
    gather[j] = own ? pos_h[u] : n_h + r.recv_pos[u];
    TORCH_CHECK(own || r.recv_pos[u] >= 0, "split_sample: unresolved source row");
  }
  for (size_t j = 0; j < r.virt_pos.size(); ++j) gather[n_real + j] = n_h + r.virt_pos[j];
  return gather;
}

// The local block's edges (2, E_r) as [sources..., destinations...] in local rows; `pos`
// (when given) receives each local edge's position in the sample's block i.
Ids local_edges(const Splitter& s, int64_t i, int64_t R, const ReceiveSide& r, Ids* pos) {
  Ids e_src, e_dst;
  for (int64_t k = 0; k < s.ne[i]; ++k) {
    const int64_t u = s.src[i][k], v = s.dst[i][k];
    if (!s.comp(i + 1, R, v)) continue;
    if (pos != nullptr) pos->push_back(k);
    if (s.preagg && !s.comp(i, R, u))
      e_src.push_back(r.slot_of[s.owner(i, u)][v]);
    else
      e_src.push_back(r.pos_src[u]);
    e_dst.push_back(r.pos_src[v]);
  }
  e_src.insert(e_src.end(), e_dst.begin(), e_dst.end());
  return e_src;
}

// What rank R sends for layer i: rows of cat(h, aggregated slots), peer by peer, and the
// pre-aggregation (h row summed into slot, edges per slot).
struct SendSide {
  Ids send_idx, send_counts, agg_row, agg_slot, slot_count;
};

SendSide send_side(const Splitter& s, int64_t i, int64_t R, const Ids& pos_h, int64_t n_h) {
  const int64_t n_lo = s.n[i], n_hi = s.n[i + 1];
  SendSide out;
  out.send_counts.assign(s.W, 0);
  for (int64_t q = 0; q < s.W; ++q) {
    if (q == R) continue;
    const size_t before = out.send_idx.size();
    for (int64_t u = 0; u < n_lo; ++u)
      if (s.owner(i, u) == R && !s.comp(i, q, u) && s.need_real(i, q, u))
        out.send_idx.push_back(pos_h[u]);
    if (s.preagg) {
      const std::vector<uint8_t> has = s.preagg_targets(i, q, R);
      Ids slot(n_hi, -1);
      for (int64_t v = 0; v < n_hi; ++v)
        if (has[v]) {
          slot[v] = static_cast<int64_t>(out.slot_count.size());
          out.slot_count.push_back(0);
          out.send_idx.push_back(n_h + slot[v]);
        }
      for (int64_t k = 0; k < s.ne[i]; ++k) {
        const int64_t u = s.src[i][k], v = s.dst[i][k];
        if (s.comp(i + 1, q, v) && !s.comp(i, q, u) && s.owner(i, u) == R) {
          out.agg_row.push_back(pos_h[u]);
          out.agg_slot.push_back(slot[v]);
          ++out.slot_count[slot[v]];
        }
      }
    }
    out.send_counts[q] = static_cast<int64_t>(out.send_idx.size() - before);
  }
  return out;
}

// The 8 tensors of layer i (see the header comment), appended to `out`; `pos` (when given)
// receives the local edges' positions in block i.
void plan_layer(const Splitter& s, int64_t i, int64_t R, std::vector<at::Tensor>& out,
                Ids* pos) {
  // rows of h on rank R (layer i) and their positions
  Ids pos_h(s.n[i], -1);
  int64_t n_h = 0;
  for (int64_t u = 0; u < s.n[i]; ++u)
    if (s.comp(i, R, u)) pos_h[u] = n_h++;
  const ReceiveSide recv = receive_side(s, i, R);
  const Ids gather = gather_index(s, i, R, recv, pos_h, n_h);
  const Ids edges = local_edges(s, i, R, recv, pos);
  const SendSide send = send_side(s, i, R, pos_h, n_h);
  const int64_t A = static_cast<int64_t>(send.agg_row.size());
  Ids agg(send.agg_row);
  agg.insert(agg.end(), send.agg_slot.begin(), send.agg_slot.end());
  Ids third(A, 0);
  std::copy(send.slot_count.begin(), send.slot_count.end(), third.begin());
  agg.insert(agg.end(), third.begin(), third.end());
  out.push_back(to_tensor(recv.dst_ids));
  out.push_back(to_tensor(recv.src_ids));
  out.push_back(to_tensor(edges).view({2, static_cast<int64_t>(edges.size() / 2)}));
  out.push_back(to_tensor(gather));
  out.push_back(to_tensor(send.send_idx));
  out.push_back(to_tensor(send.send_counts));
  out.push_back(to_tensor(recv.recv_counts));
  out.push_back(to_tensor(agg).view({3, A}));
}

// The sample and its owners read into `s` (which keeps `keep`'s tensors alive), then planned.
Ids plan_sample(Splitter& s, std::vector<at::Tensor>& keep, const at::Tensor& counts,
                at::TensorList edges, const at::Tensor& own_in, const at::Tensor& own_part,
                int64_t world, bool preagg, const at::Tensor& costs, int64_t budget,
                int64_t num_threads) {
  s.L = static_cast<int64_t>(edges.size());
  s.W = world;
  s.preagg = preagg;
  s.threads = resolve_threads(num_threads);
  const at::Tensor cnt = counts.contiguous().to(at::kLong);
  // counts are in sampler order (targets first); layer i has counts[L - i] vertices
  for (int64_t i = 0; i <= s.L; ++i) s.n.push_back(cnt.data_ptr<int64_t>()[s.L - i]);
  for (int64_t i = 0; i < s.L; ++i) {
    keep.push_back(edges[i].contiguous().to(at::kLong));
    s.ne.push_back(keep.back().size(1));
    s.src.push_back(keep.back().data_ptr<int64_t>());
    s.dst.push_back(keep.back().data_ptr<int64_t>() + keep.back().size(1));
  }
  keep.push_back(own_in.contiguous().to(at::kInt));
  s.own_in = keep.back().data_ptr<int32_t>();
  keep.push_back(own_part.contiguous().to(at::kInt));
  s.own_part = keep.back().data_ptr<int32_t>();
  keep.push_back(costs.contiguous().to(at::kDouble));
  const double* c = keep.back().data_ptr<double>();
  const Costs per_layer{c, c + s.L + 1, c + 2 * (s.L + 1)};
  return s.plan(per_layer, budget);
}

// Rank R's flat output (see the header comment) of a planned split; `edge_pos` appends each
// layer's local edge positions.
std::vector<at::Tensor> rank_output(const Splitter& s, const Ids& used, Ids stats, int64_t R,
                                    bool edge_pos) {
  stats[s.W + 2] = used[R];
  std::vector<at::Tensor> out{to_tensor(s.loaded_rows(R)), to_tensor(stats)};
  std::vector<Ids> pos(edge_pos ? s.L : 0);
  for (int64_t i = 0; i < s.L; ++i) plan_layer(s, i, R, out, edge_pos ? &pos[i] : nullptr);
  for (const Ids& p : pos) out.push_back(to_tensor(p));
  return out;
}

std::vector<at::Tensor> split_sample(const at::Tensor& counts, at::TensorList edges,
                                     const at::Tensor& own_in, const at::Tensor& own_part,
                                     int64_t world, int64_t rank, bool preagg,
                                     const at::Tensor& costs, int64_t budget,
                                     int64_t num_threads, bool edge_pos) {
  check_split_sample(counts, edges, own_in, own_part, world, rank, costs);
  Splitter s;
  std::vector<at::Tensor> keep;
  const Ids used = plan_sample(s, keep, counts, edges, own_in, own_part, world, preagg, costs,
                               budget, num_threads);
  return rank_output(s, used, s.edge_stats(), rank, edge_pos);
}

// Every rank's output, ranks 0 .. world - 1 one after another: the sample is planned once and
// the ranks' outputs are built in parallel.
std::vector<at::Tensor> split_sample_all(const at::Tensor& counts, at::TensorList edges,
                                         const at::Tensor& own_in, const at::Tensor& own_part,
                                         int64_t world, bool preagg, const at::Tensor& costs,
                                         int64_t budget, int64_t num_threads,
                                         bool edge_pos) {
  check_split_sample(counts, edges, own_in, own_part, world, 0, costs);
  Splitter s;
  std::vector<at::Tensor> keep;
  const Ids used = plan_sample(s, keep, counts, edges, own_in, own_part, world, preagg, costs,
                               budget, num_threads);
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
