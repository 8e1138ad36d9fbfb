"""Suite ``native_ops``: each native op against its torch-only path (gnnscale/ops/_torch.py;
split_sample: gnnscale/ops/_torch_split.py), side by side in one process on the same inputs:
what running without the extension costs.

A random graph (``nodes`` vertices, ``degree`` in-edges each, CSC); per op the median of
``repeats`` calls of each variant (one warm-up each), at ``torch.get_num_threads()`` threads
(the native ops' default). The ratio is torch-only time / native time. ``split_sample`` splits
the sampler's mini-batch of the batch over 4 ranks (random owners; the plain split, and
``split_sample_hybrid``: the hybrid greedy with a row budget and the exchange cost).
"""

from __future__ import annotations

import torch

from benchmarks import median_time


def settings(quick: bool) -> dict:
    return {"nodes": 20_000 if quick else 200_000, "degree": 15, "batch": 1024,
            "fanouts": [15, 10], "rows": 20_000 if quick else 100_000, "width": 128,
            "repeats": 3 if quick else 5}


def _cases(s: dict) -> dict:
    """op name -> (args of the schema call)."""
    g = torch.Generator().manual_seed(0)
    n, d = s["nodes"], s["degree"]
    indptr = torch.arange(0, n * d + 1, d)
    indices = torch.randint(0, n, (n * d,), generator=g).view(n, d).sort(1).values.reshape(-1)
    weights = torch.rand(n * d, generator=g)
    seeds = torch.randint(0, n, (s["batch"],), generator=g)
    table = torch.randn(s["rows"], s["width"], generator=g)
    ids = torch.randint(0, s["rows"], (s["rows"],), generator=g)
    src, dst = ids[: s["rows"] // 2], ids[s["rows"] // 2:]
    grad = torch.randn(src.numel(), generator=g)
    keys = torch.randint(0, 1 << 40, (10 * s["batch"],), generator=g)
    empty = torch.empty(0, dtype=torch.int64)
    ok = [torch.rand(n, generator=g) < 0.5 for _ in range(2)]
    lc = torch.rand(9, generator=g, dtype=torch.float64)
    cost = torch.rand(n, generator=g, dtype=torch.float64)
    mem = torch.rand(n, generator=g, dtype=torch.float64)
    # a sampler mini-batch split over 4 ranks: counts targets first, blocks input first
    world, nl = 4, len(s["fanouts"])
    n_id, counts, hops, _ = torch.ops.gnnscale.sample_neighbors(indptr, indices, None, seeds,
                                                                s["fanouts"], False, 1, 0, False)
    owner = torch.randint(0, world, (n,), generator=g, dtype=torch.int32)[n_id]
    blocks = list(reversed(hops))
    plain = torch.zeros(3 * (nl + 1), dtype=torch.float64)
    hybrid = torch.tensor([0.3] * (nl + 1) + [0.01] * (nl + 1) + [0.05] * (nl + 1) + [2.0],
                          dtype=torch.float64)
    return {
        "sample_neighbors": (indptr, indices, None, seeds, s["fanouts"], False, 1, 0, False),
        "sample_neighbors_weighted": (indptr, indices, weights, seeds[:128], s["fanouts"], False,
                                      1, 0, False),
        "random_walk_top_k": (indptr, indices, seeds, 10, 3, 10, 1, 0),
        "negative_sample": (indptr, indices, empty, keys, n, 5, 0, 1, 64, 0, None),
        "gather_rows": (table, ids),
        "keyed_dropout": (table, 0.5, 7, ids),
        "pair_product": (table, src, dst, True),
        "pair_product_backward": (grad, table, src, dst),
        "in_edges": (indptr, indices, seeds),
        "needed_mask": (indptr, indices, seeds),
        "subtree_costs": (indptr, indices, seeds, ok, [64, 64, 64], lc, 12),
        "hybrid_greedy": (cost, torch.tensor([0.5], dtype=torch.float64), mem, n / 10, 1.0),
        "split_sample": (counts, blocks, owner, owner, world, 0, False, plain, 0),
        "split_sample_hybrid": (counts, blocks, owner, owner, world, 0, False, hybrid, 1000),
    }


def run(quick: bool) -> dict:
    from gnnscale.ops import _loader, _torch_split
    from gnnscale.ops import _torch as torch_only

    s = settings(quick)
    if not _loader.available():
        raise SystemExit("native_ops: the native extension is not loaded: build it first "
                         "(python -m gnnscale.native build)")
    native = torch.ops.gnnscale
    results, ratios = {}, {}
    for op, args in _cases(s).items():
        name = op.replace("_weighted", "").replace("_hybrid", "")
        f_native = getattr(native, name)
        f_torch = getattr(_torch_split if name.startswith("split_") else torch_only, name)
        t_native = median_time(lambda f=f_native, a=args: f(*a), s["repeats"])
        t_torch = median_time(lambda f=f_torch, a=args: f(*a), s["repeats"])
        results[op] = {"native_ms": t_native * 1000, "torch_only_ms": t_torch * 1000}
        ratios[f"{op}_torch_only_over_native"] = t_torch / t_native
    return {"config": s, "results": results, "ratios": ratios}
