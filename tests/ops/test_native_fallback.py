"""The torch-only path of every native op (gnnscale/ops/_torch.py) against the native kernels:
the same outputs, bit for bit, on random inputs that reach every branch (the torch-only path
is the reference the native one must equal); and GNNSCALE_NATIVE's choice and its one line.
The op modules' own tests run on the torch-only path too: ``GNNSCALE_NATIVE=0 pytest ...``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from gnnscale.ops import _loader
from gnnscale.ops import _torch as ref
from gnnscale.ops.sampling import typed_runs

needs_native = pytest.mark.skipif(not _loader.available(), reason="native extension not loaded")


def native():
    return torch.ops.gnnscale


def _same(a, b) -> None:
    """Equal structure and bits (NaNs and signed zeros alike)."""
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        if a.is_floating_point():
            assert torch.equal(a.view(torch.int64 if a.dtype == torch.float64 else torch.int32),
                               b.view(torch.int64 if b.dtype == torch.float64 else torch.int32))
        else:
            assert torch.equal(a, b)
    else:
        assert a == b


def _graph(n: int, max_deg: int, seed: int, sorted_in: bool = False):
    g = torch.Generator().manual_seed(seed)
    deg = torch.randint(0, max_deg + 1, (n,), generator=g)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), deg.cumsum(0)])
    indices = torch.randint(0, n, (int(deg.sum()),), generator=g)
    if sorted_in:
        for v in range(n):
            a, b = int(indptr[v]), int(indptr[v + 1])
            indices[a:b] = indices[a:b].sort().values
    return indptr, indices, g


@needs_native
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fanouts", [[3, 2], [-1, 5], [70, 0], [100]])
def test_sample_neighbors_equals_native(replace, weighted, fanouts):
    indptr, indices, g = _graph(400, 150, len(fanouts) + 7 * replace + 3 * weighted)
    weights = None
    if weighted:
        weights = torch.rand(indices.numel(), generator=g)
        weights[torch.rand(indices.numel(), generator=g) < 0.2] = 0.0  # never drawn
    seeds = torch.tensor([5, 17, 5, 300, 42, 399, 0])  # a repeated seed keeps its first id
    for index_dtype in (torch.int64, torch.int32):
        args = (indptr, indices.to(index_dtype), weights, seeds, fanouts, replace, 1234, 0, True)
        _same(ref.sample_neighbors(*args), native().sample_neighbors(*args))


@needs_native
@pytest.mark.parametrize("weighted", [False, True])
def test_typed_sample_neighbors_equals_native(weighted):
    n, types = 300, 3
    indptr, indices, g = _graph(n, 40, 11)
    off = torch.tensor([0, 120, n])  # node type 0: [0, 120), node type 1: [120, 300)
    edge_dst = [0, 1, 1]             # edge type 0 enters node type 0, types 1 and 2 type 1
    dst = torch.repeat_interleave(torch.arange(n), indptr.diff())
    tpe = torch.where(dst < 120, 0, 1 + torch.randint(0, 2, dst.shape, generator=g))
    for v in range(n):  # in-edges sorted by type, as GraphStore keeps them
        a, b = int(indptr[v]), int(indptr[v + 1])
        order = torch.argsort(tpe[a:b], stable=True)
        tpe[a:b], indices[a:b] = tpe[a:b][order], indices[a:b][order]
    runs = typed_runs(indptr, tpe, off, edge_dst)
    weights = torch.rand(indices.numel(), generator=g) if weighted else None
    table = [[2, -1, 0], [5, 1, 70]]
    seeds = torch.tensor([3, 150, 299, 7])
    for replace in (False, True):
        args = (indptr, indices, weights, seeds, [f for row in table for f in row], replace, 9,
                0, True, *runs[:4], types)
        _same(ref.sample_neighbors(*args), native().sample_neighbors(*args))


@needs_native
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_walk_equals_native(seed):
    indptr, indices, _ = _graph(300, 6, seed)
    targets = torch.tensor([0, 5, 5, 299, 120, 17])
    for index_dtype in (torch.int64, torch.int32):
        args = (indptr, indices.to(index_dtype), targets, 8, 4, 3, seed, 1)
        _same(ref.random_walk_top_k(*args), native().random_walk_top_k(*args))


@needs_native
@pytest.mark.parametrize("mode", [0, 1])
def test_negative_sample_equals_native(mode):
    n = 40  # small and dense: many draws are rejected and drawn again
    indptr, indices, g = _graph(n, 25, 3 + mode, sorted_in=True)
    keys = torch.randint(0, 1 << 40, (200,), generator=g)
    sources = torch.randint(0, n, (200,), generator=g) if mode else torch.empty(0, dtype=torch.long)
    empty = torch.empty(0, dtype=torch.long)
    table_native = native().edge_key_table(indptr, indices)
    table_ref = ref.edge_key_table(indptr, indices)
    assert table_ref.numel() == table_native.numel()
    assert torch.equal(table_ref[table_ref >= 0].sort().values,
                       table_native[table_native >= 0].sort().values)
    for graph in ((empty, empty), (indptr, indices), (indptr, indices.int())):
        for tables in ((None, None), (table_ref, table_native)):
            for ranges in ((None, None), ([3, 30], [10, 40])):
                if tables[0] is not None and graph[0].numel() == 0:
                    continue
                common = (*graph, sources, keys, n, 3, mode, 77, 4, 0)
                _same(ref.negative_sample(*common, tables[0], *ranges),
                      native().negative_sample(*common, tables[1], *ranges))


@needs_native
def test_gather_dropout_and_pairs_equal_native():
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        table = torch.randn(50, 7, generator=g, dtype=dtype)
        ids = torch.randint(0, 50, (90,), generator=g)
        for i in (ids, ids.int()):
            _same(ref.gather_rows(table, i), native().gather_rows(table, i))
            out_a, out_b = torch.empty(90, 7, dtype=dtype), torch.empty(90, 7, dtype=dtype)
            ref.gather_rows_out(table, i, out_a)
            native().gather_rows_out(table, i, out_b)
            _same(out_a, out_b)
        h = torch.randn(64, 33, generator=g, dtype=dtype)
        h[0, 0], h[1, 1] = float("nan"), -0.0
        for p in (0.0, 0.1, 0.5, 0.9):
            for rows in (None, torch.randint(-5, 1 << 40, (64,), generator=g), ids[:64].int()):
                _same(ref.keyed_dropout(h, p, -123456789, rows),
                      native().keyed_dropout(h, p, -123456789, rows))
        src, dst = ids[:40], ids[40:80]
        for reduce in (False, True):
            _same(ref.pair_product(table, src, dst, reduce),
                  native().pair_product(table, src, dst, reduce))
            grad = torch.randn(40, generator=g, dtype=dtype) if reduce else \
                torch.randn(40, 7, generator=g, dtype=dtype)
            _same(ref.pair_product_backward(grad, table, src, dst),
                  native().pair_product_backward(grad, table, src, dst))


@needs_native
@pytest.mark.parametrize("seed", range(4))
def test_deps_ops_equal_native(seed):
    indptr, indices, g = _graph(120, 8, seed)
    n = 120
    ids = torch.randint(0, n, (30,), generator=g)
    for idx in (indices, indices.int()):
        _same(ref.in_edges(indptr, idx, ids), native().in_edges(indptr, idx, ids))
        _same(ref.needed_mask(indptr, idx, ids), native().needed_mask(indptr, idx, ids))
        k = seed % 2  # layers 0..k with k < L
        ok = [torch.rand(n, generator=g) < 0.4 for _ in range(k + 1)]
        dims = [8, 16, 4]
        lc = torch.rand(9, generator=g, dtype=torch.float64)
        _same(ref.subtree_costs(indptr, idx, ids, ok, dims, lc, 12),
              native().subtree_costs(indptr, idx, ids, ok, dims, lc, 12))
        take = torch.rand(ids.numel(), generator=g) < 0.5
        _same(ref.subtree_rows(indptr, idx, ids, take, ok),
              native().subtree_rows(indptr, idx, ids, take, ok))
    cost = (torch.randint(0, 6, (40,), generator=g).double() / 2)
    cost[3] = float("nan")
    comm = torch.randint(0, 6, (40,), generator=g).double()
    mem = torch.randint(1, 10, (40,), generator=g).double()
    for budget in (None, 0.0, 7.0, 40.0, 1e9):
        for mu in (1.0, 0.5):
            for m in (mem, None):
                for c in (comm, torch.tensor([2.0])):
                    _same(ref.hybrid_greedy(cost, c, m, budget, mu),
                          native().hybrid_greedy(cost, c, m, budget, mu))


def test_rng_helpers_match_python_ints():
    """The int64 emulation of the 128-bit multiply and the splitmix64 mixer, on edge values."""
    mask = (1 << 64) - 1
    zs = [0, 1, (1 << 63) - 1, 1 << 63, mask, 0x9E3779B97F4A7C15, 0xDEADBEEFCAFEBABE]
    ns = [1, 2, 3, (1 << 31) - 1, 1 << 32, (1 << 40) + 7, (1 << 63) - 1]
    z = torch.tensor([ref._signed(x) for x in zs])
    for n in ns:
        got = ref._below(z, n).tolist()
        assert got == [(x * n) >> 64 for x in zs], n
    assert [x & mask for x in ref._mix(z).tolist()] == [ref._mix_py(x) for x in zs]


def test_every_native_schema_has_its_torch_only_function():
    """What the loader falls back to answers every op the extension registers (the split's
    equality with the kernel is tested in test_split_fallback.py)."""
    from gnnscale.ops import _torch_split

    assert ref.split_sample is _torch_split.split_sample
    assert ref.split_sample_all is _torch_split.split_sample_all
    if _loader.available():
        names = {n.split("::", 1)[1].split(".", 1)[0]
                 for n in torch._C._dispatch_get_all_op_names() if n.startswith("gnnscale::")}
        assert names, "the extension registered no gnnscale:: op"
        # the disk reader's fallback is its own pool of preadv threads (gnnscale.ops.io)
        own_pool = {"read_ranges", "read_rows", "io_uring_available"}
        missing = sorted(n for n in names - own_pool if not callable(getattr(ref, n, None)))
        assert not missing, f"no torch-only path for {missing}"


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **env}
    full.pop("GNNSCALE_NATIVE_WARNED", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=300)


_SAMPLE = ("import torch; from gnnscale.ops import available; "
           "from gnnscale.ops.sampling import sample_neighbors as s; "
           "p = torch.tensor([0, 2, 3, 4, 4]); i = torch.tensor([1, 2, 2, 3]); "
           "print(available(), s(p, i, None, torch.tensor([0]), [-1, -1], False, 0)[0].tolist()); "
           "s(p, i, None, torch.tensor([0]), [1], False, 0)")


def test_missing_extension_falls_back_with_one_line():
    """A process whose extension cannot be imported samples on the torch-only path and says so
    once, on stderr; GNNSCALE_NATIVE=1 refuses in one line naming the build command."""
    blocked = "import sys; sys.modules['gnnscale._C'] = None; " + _SAMPLE
    res = _python(blocked, GNNSCALE_NATIVE="auto")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False", "[0,", "1,", "2,", "3]"]
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("gnnscale:")]
    assert len(lines) == 1 and "torch-only" in lines[0] and "gnnscale.native build" in lines[0]
    res = _python(blocked, GNNSCALE_NATIVE="1")
    assert res.returncode != 0 and "GNNSCALE_NATIVE=1 requires it" in res.stderr
    res = _python(_SAMPLE, GNNSCALE_NATIVE="0")  # chosen: no line
    assert res.returncode == 0 and res.stdout.startswith("False") and "gnnscale:" not in res.stderr
    res = _python(_SAMPLE, GNNSCALE_NATIVE="yes")
    assert res.returncode != 0 and "GNNSCALE_NATIVE must be 0" in res.stderr
