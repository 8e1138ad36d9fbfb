// deps domain, CPU kernels of fullgraph's hybrid planner (NeutronStar Algorithm 4, Eqs. 1-3).
//
// hybrid_greedy: the greedy step behind Hybrid.plan (greedy_walk, shared with split).
//
// subtree_costs / subtree_rows: replicating a layer-k row u means recomputing it from the rows
// beneath it that the rank does not have yet: its *subtree*. Level k is {u} unless u is already
// held; level j - 1 is every level-j row and its in-neighbours, less the rows available at
// layer j - 1 (ok[j - 1]). Per candidate (independently, in parallel):
//   cost (Eq. 1) = sum over levels j >= 1, rows v ascending, of vertex[j-1] + deg(v) edge[j-1]
//   bytes        = sum over levels of 4 dims[j] per row (+ edge_bytes deg(v) for j >= 1)
// summed in the same order as the python reference, so the figures are bit-identical.
// subtree_rows marks the union of the subtrees of the taken candidates, per level.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "deps/greedy.h"
#include "deps/hybrid_plan.h"
#include "utils/parallel.h"

namespace gnnscale::deps {
namespace {

// Walks one candidate's subtree level by level with reusable scratch (one per chunk).
template <class I>
struct SubtreeWalker {
  const int64_t* ptr;
  const I* idx;
  std::vector<const bool*> ok;  // ok[j]: rows available at layer j (j = 0..k)
  std::vector<uint8_t> seen;    // all zero between calls
  std::vector<int64_t> cur, next;

  SubtreeWalker(const int64_t* p, const I* x, std::vector<const bool*> masks, int64_t n)
      : ptr(p), idx(x), ok(std::move(masks)), seen(n, 0) {}

  // Calls visit(j, rows) for levels j = k..0 while rows remain; rows are ascending on the
  // levels j >= 1 below the top when `ordered` (the order the costs are summed in).
  template <class Visit>
  void walk(int64_t u, bool ordered, Visit&& visit) {
    const int64_t k = static_cast<int64_t>(ok.size()) - 1;
    cur.clear();
    if (!ok[k][u]) cur.push_back(u);
    for (int64_t j = k; j >= 0 && !cur.empty(); --j) {
      visit(j, cur);
      if (j == 0) break;
      next.clear();
      const bool* avail = ok[j - 1];
      auto add = [&](int64_t w) {
        if (!seen[w] && !avail[w]) {
          seen[w] = 1;
          next.push_back(w);
        }
      };
      for (const int64_t v : cur) {
        add(v);  // its own row at layer j - 1
        for (int64_t e = ptr[v]; e < ptr[v + 1]; ++e) add(static_cast<int64_t>(idx[e]));
      }
      for (const int64_t w : next) seen[w] = 0;
      if (ordered && j - 1 >= 1) std::sort(next.begin(), next.end());
      cur.swap(next);
    }
  }
};

std::vector<const bool*> mask_ptrs(const std::vector<at::Tensor>& masks) {
  std::vector<const bool*> out;
  for (const at::Tensor& m : masks) out.push_back(m.data_ptr<bool>());
  return out;
}

int64_t grain_for(int64_t items, int64_t threads) {
  return std::max<int64_t>(256, items / std::max<int64_t>(1, 8 * threads) + 1);
}

at::Tensor hybrid_greedy(const at::Tensor& recompute_cost, const at::Tensor& comm_cost,
                         const std::optional<at::Tensor>& mem_bytes, std::optional<double> budget,
                         double mu) {
  check_greedy(recompute_cost, comm_cost, mem_bytes);
  const at::Tensor tr = recompute_cost.to(at::kDouble).contiguous().reshape(-1);
  const at::Tensor tc = comm_cost.to(at::kDouble).contiguous().reshape(-1);
  const int64_t n = tr.numel();
  const double* r = tr.data_ptr<double>();
  const double* c = tc.data_ptr<double>();
  const int64_t c_step = tc.numel() == 1 ? 0 : 1;
  at::Tensor mask = at::zeros({n}, at::kBool);
  bool* out = mask.data_ptr<bool>();
  auto worth = [&](int64_t u) { return mu * r[u] < c[u * c_step]; };
  if (!budget || !mem_bytes) {
    for (int64_t u = 0; u < n; ++u) out[u] = worth(u);
    return mask.view(recompute_cost.sizes());
  }
  const at::Tensor tm = mem_bytes->to(at::kDouble).contiguous().reshape(-1);
  const double* m = tm.data_ptr<double>();
  Candidates cand;
  for (int64_t u = 0; u < n; ++u)
    if (worth(u)) cand.emplace_back(r[u], u);  // a NaN cost is never worth it
  double used = 0.0;
  const double cap = *budget;
  greedy_walk(
      cand, [](int64_t) { return true; }, [&](int64_t u) { return used + m[u] <= cap; },
      [&](int64_t u) {
        used += m[u];
        out[u] = true;
      });
  return mask.view(recompute_cost.sizes());
}

std::vector<at::Tensor> contiguous_masks(at::TensorList ok) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& m : ok) out.push_back(m.contiguous());
  return out;
}

template <class I>
void costs_kernel(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& cand,
                  const std::vector<at::Tensor>& ok, at::IntArrayRef dims, const double* lc,
                  double edge_bytes, double* cost, double* mem, int64_t threads) {
  const int64_t L = static_cast<int64_t>(dims.size()) - 1;
  const double* edge_c = lc + L + 1;
  const double* vert_c = lc + 2 * (L + 1);
  const int64_t* ptr = indptr.data_ptr<int64_t>();
  const I* idx = indices.data_ptr<I>();
  const int64_t* ids = cand.data_ptr<int64_t>();
  const int64_t nc = cand.numel(), n = indptr.numel() - 1;
  const int64_t grain = grain_for(nc, threads);
  parallel_chunks(num_chunks(nc, grain), threads, [&](int64_t chunk) {
    SubtreeWalker<I> w(ptr, idx, mask_ptrs(ok), n);
    const int64_t end = std::min(nc, (chunk + 1) * grain);
    for (int64_t i = chunk * grain; i < end; ++i) {
      double c = 0.0, b = 0.0;
      w.walk(ids[i], true, [&](int64_t j, const std::vector<int64_t>& rows) {
        const double row_bytes = 4.0 * static_cast<double>(dims[j]);
        for (const int64_t v : rows) {
          if (j >= 1) {
            const double d = static_cast<double>(ptr[v + 1] - ptr[v]);
            const double per_edge = d * edge_c[j - 1];
            c += vert_c[j - 1] + per_edge;
            b += row_bytes + edge_bytes * d;
          } else {
            b += row_bytes;
          }
        }
      });
      cost[i] = c;
      mem[i] = b;
    }
  });
}

std::tuple<at::Tensor, at::Tensor> subtree_costs(const at::Tensor& indptr,
                                                 const at::Tensor& indices, const at::Tensor& cand,
                                                 at::TensorList ok, at::IntArrayRef dims,
                                                 const at::Tensor& layer_costs, int64_t edge_bytes,
                                                 int64_t num_threads) {
  check_subtree(indptr, indices, cand, ok);
  const int64_t L = static_cast<int64_t>(dims.size()) - 1;
  TORCH_CHECK(L >= 1 && static_cast<int64_t>(ok.size()) <= L,
              "subtree_costs: needs dims for layers 0..L and at most L availability masks");
  TORCH_CHECK(layer_costs.numel() == 3 * (L + 1),
              "subtree_costs: layer_costs must hold 3 * (L + 1) values");
  const at::Tensor ptr = indptr.contiguous(), idx = indices.contiguous(), ids = cand.contiguous();
  const std::vector<at::Tensor> masks = contiguous_masks(ok);
  const at::Tensor lc = layer_costs.to(at::kDouble).contiguous();
  at::Tensor cost = at::empty({ids.numel()}, at::kDouble);
  at::Tensor mem = at::empty({ids.numel()}, at::kDouble);
  const int64_t threads = resolve_threads(num_threads);
  const double eb = static_cast<double>(edge_bytes);
  if (idx.scalar_type() == at::kInt)
    costs_kernel<int32_t>(ptr, idx, ids, masks, dims, lc.data_ptr<double>(), eb,
                          cost.data_ptr<double>(), mem.data_ptr<double>(), threads);
  else
    costs_kernel<int64_t>(ptr, idx, ids, masks, dims, lc.data_ptr<double>(), eb,
                          cost.data_ptr<double>(), mem.data_ptr<double>(), threads);
  return {cost, mem};
}

template <class I>
std::vector<at::Tensor> rows_kernel(const at::Tensor& indptr, const at::Tensor& indices,
                                    const at::Tensor& cand, const bool* take,
                                    const std::vector<at::Tensor>& ok, int64_t threads) {
  const int64_t* ptr = indptr.data_ptr<int64_t>();
  const I* idx = indices.data_ptr<I>();
  const int64_t* ids = cand.data_ptr<int64_t>();
  const int64_t nc = cand.numel(), n = indptr.numel() - 1;
  const int64_t levels = static_cast<int64_t>(ok.size());
  const int64_t grain = grain_for(nc, threads);
  const int64_t chunks = num_chunks(nc, grain);
  std::vector<std::vector<std::vector<int64_t>>> found(chunks);  // [chunk][level] rows
  parallel_chunks(chunks, threads, [&](int64_t chunk) {
    SubtreeWalker<I> w(ptr, idx, mask_ptrs(ok), n);
    std::vector<std::vector<int64_t>>& mine = found[chunk];
    mine.resize(levels);
    const int64_t end = std::min(nc, (chunk + 1) * grain);
    for (int64_t i = chunk * grain; i < end; ++i) {
      if (!take[i]) continue;
      w.walk(ids[i], false, [&](int64_t j, const std::vector<int64_t>& rows) {
        mine[j].insert(mine[j].end(), rows.begin(), rows.end());
      });
    }
  });
  std::vector<at::Tensor> out;
  for (int64_t j = 0; j < levels; ++j) {
    at::Tensor m = at::zeros({n}, at::kBool);
    bool* p = m.data_ptr<bool>();
    for (const auto& mine : found)
      for (const int64_t v : mine[j]) p[v] = true;
    out.push_back(m);
  }
  return out;
}

std::vector<at::Tensor> subtree_rows(const at::Tensor& indptr, const at::Tensor& indices,
                                     const at::Tensor& cand, const at::Tensor& take,
                                     at::TensorList ok, int64_t num_threads) {
  check_subtree(indptr, indices, cand, ok);
  TORCH_CHECK(take.numel() == cand.numel() && take.scalar_type() == at::kBool,
              "subtree_rows: take must be a bool mask with one entry per candidate");
  const at::Tensor ptr = indptr.contiguous(), idx = indices.contiguous(), ids = cand.contiguous();
  const at::Tensor tk = take.contiguous();
  const std::vector<at::Tensor> masks = contiguous_masks(ok);
  const int64_t threads = resolve_threads(num_threads);
  if (idx.scalar_type() == at::kInt)
    return rows_kernel<int32_t>(ptr, idx, ids, tk.data_ptr<bool>(), masks, threads);
  return rows_kernel<int64_t>(ptr, idx, ids, tk.data_ptr<bool>(), masks, threads);
}

template <class I>
void in_edges_kernel(const int64_t* ptr, const I* idx, const int64_t* ids, const int64_t* off,
                     int64_t m, int64_t* src, int64_t* pos, int64_t threads) {
  const int64_t grain = grain_for(m, threads);
  parallel_chunks(num_chunks(m, grain), threads, [&](int64_t chunk) {
    const int64_t end = std::min(m, (chunk + 1) * grain);
    for (int64_t i = chunk * grain; i < end; ++i) {
      int64_t o = off[i];
      for (int64_t e = ptr[ids[i]]; e < ptr[ids[i] + 1]; ++e, ++o) {
        src[o] = static_cast<int64_t>(idx[e]);
        pos[o] = i;
      }
    }
  });
}

// In-edges of `ids` in CSR order: (source, position of the destination in ids).
std::tuple<at::Tensor, at::Tensor> in_edges(const at::Tensor& indptr, const at::Tensor& indices,
                                            const at::Tensor& ids, int64_t num_threads) {
  check_graph_ids(indptr, indices, ids, "in_edges");
  const at::Tensor p = indptr.contiguous(), x = indices.contiguous(), d = ids.contiguous();
  const int64_t m = d.numel();
  const int64_t* ptr = p.data_ptr<int64_t>();
  const int64_t* id = d.data_ptr<int64_t>();
  std::vector<int64_t> off(m + 1, 0);
  for (int64_t i = 0; i < m; ++i) off[i + 1] = off[i] + ptr[id[i] + 1] - ptr[id[i]];
  at::Tensor src = at::empty({off[m]}, at::kLong), pos = at::empty({off[m]}, at::kLong);
  const int64_t threads = resolve_threads(num_threads);
  if (x.scalar_type() == at::kInt)
    in_edges_kernel<int32_t>(ptr, x.data_ptr<int32_t>(), id, off.data(), m,
                             src.data_ptr<int64_t>(), pos.data_ptr<int64_t>(), threads);
  else
    in_edges_kernel<int64_t>(ptr, x.data_ptr<int64_t>(), id, off.data(), m,
                             src.data_ptr<int64_t>(), pos.data_ptr<int64_t>(), threads);
  return {src, pos};
}

template <class I>
void needed_kernel(const int64_t* ptr, const I* idx, const int64_t* ids, int64_t m, bool* need) {
  for (int64_t i = 0; i < m; ++i) {
    need[ids[i]] = true;
    for (int64_t e = ptr[ids[i]]; e < ptr[ids[i] + 1]; ++e) need[idx[e]] = true;
  }
}

// Mask of the rows a conv on destinations `ids` reads: themselves and their in-neighbours.
at::Tensor needed_mask(const at::Tensor& indptr, const at::Tensor& indices, const at::Tensor& ids) {
  check_graph_ids(indptr, indices, ids, "needed_mask");
  const at::Tensor p = indptr.contiguous(), x = indices.contiguous(), d = ids.contiguous();
  at::Tensor need = at::zeros({p.numel() - 1}, at::kBool);
  if (x.scalar_type() == at::kInt)
    needed_kernel<int32_t>(p.data_ptr<int64_t>(), x.data_ptr<int32_t>(), d.data_ptr<int64_t>(),
                           d.numel(), need.data_ptr<bool>());
  else
    needed_kernel<int64_t>(p.data_ptr<int64_t>(), x.data_ptr<int64_t>(), d.data_ptr<int64_t>(),
                           d.numel(), need.data_ptr<bool>());
  return need;
}

}  // namespace

TORCH_LIBRARY_IMPL(gnnscale, CPU, m) {
  m.impl("hybrid_greedy", &hybrid_greedy);
  m.impl("subtree_costs", &subtree_costs);
  m.impl("subtree_rows", &subtree_rows);
  m.impl("in_edges", &in_edges);
  m.impl("needed_mask", &needed_mask);
}

}  // namespace gnnscale::deps
