"""Processing and partitioning in bounded memory (gnnscale.data.bounded, METIS's refusal)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnscale.data import bounded, processed
from gnnscale.data.custom import CustomDataset
from gnnscale.data.graph import GraphStore
from gnnscale.errors import ConfigError
from gnnscale.partition import metis
from gnnscale.partition.ldg import LdgPartitioner


def _edges(n: int = 2000, e: int = 30000) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(1)
    ei = torch.from_numpy(rng.integers(0, n, (2, e)))
    ei[:, :400] = ei[:, 400:800]  # repeated edges: the first one's weight must win
    return ei, torch.from_numpy(rng.random(e).astype(np.float32))


@pytest.mark.parametrize("symmetrize,self_loops,dedupe",
                         [(True, "remove", True), (False, "add", True), (True, "keep", False)])
def test_out_of_core_csc_is_bit_identical_with_many_buckets(tmp_path, symmetrize, self_loops,
                                                            dedupe):
    ei, w = _edges()
    ref = GraphStore.from_edge_index(ei, 2000, symmetrize=symmetrize, self_loops=self_loops,
                                     dedupe=dedupe, edge_weight=w)
    stage = bounded.Stage(tmp_path)
    budget = 600_000  # a few thousand edges a bucket: about 15 buckets here
    indptr, indices, wts = bounded.staged_csc(stage, ei[0], ei[1], w, 2000, symmetrize,
                                              self_loops, dedupe, budget, torch.int64, "t")
    assert torch.equal(indptr, ref.indptr) and torch.equal(indices, ref.indices)
    assert torch.equal(wts, ref.edge_weight)
    assert stage.files["indices"][1] == processed.array_digest(ref.indices.numpy())
    assert stage.files["edge_weight"][1] == processed.array_digest(ref.edge_weight.numpy())


def _npz(path, n: int = 600, f: int = 24):
    rng = np.random.default_rng(0)
    x = rng.random((n, f)).astype(np.float64)  # converted to float32 per chunk
    np.savez(path, x=x, edge_index=rng.integers(0, n, (2, 5000)), y=rng.integers(0, 4, n))


@pytest.mark.parametrize("norm", ["none", "row"])
def test_streamed_features_and_budgeted_csc_equal_the_in_memory_processing(tmp_path,
                                                                           monkeypatch, norm):
    _npz(tmp_path / "g.npz")
    ref = CustomDataset(root=str(tmp_path / "a"), path=str(tmp_path / "g.npz"),
                        feature_norm=norm)
    arrays = np.load(tmp_path / "g.npz")
    from gnnscale.data.base import normalize_features
    from gnnscale.data.custom import graph_from_arrays
    whole = normalize_features(graph_from_arrays(dict(arrays), ref.path, True, 0.6, 0.2, 0),
                               norm)  # today's build: every array in memory
    whole.name = ref.path.stem
    monkeypatch.setattr(bounded, "CHUNK_BYTES", 1000)  # many feature chunks
    got = CustomDataset(root=str(tmp_path / "b"), path=str(tmp_path / "g.npz"),
                        feature_norm=norm, memory_budget="16MiB").load()
    assert torch.equal(got.x, whole.x) and torch.equal(got.indices, whole.indices)
    assert processed.checksum(got) == processed.checksum(ref.load())
    assert not list((tmp_path / "b").glob("*/.staging*"))  # the staging folder is gone


def test_a_budget_too_small_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^dataset.memory_budget='1MB' is too small to "
                                          r"process anything: give at least 16MiB$"):
        CustomDataset(root=str(tmp_path), path=str(tmp_path / "g.npz"), memory_budget="1MB")
    ei, _ = _edges(n=200_000, e=1000)
    with pytest.raises(ConfigError) as err:
        bounded.staged_csc(bounded.Stage(tmp_path), ei[0], ei[1], None, 200_000, True, "keep",
                           True, 1 << 20, torch.int64, "g")
    assert "\n" not in str(err.value) and "its 200,000 nodes alone need" in str(err.value)


def test_metis_refuses_a_graph_beyond_the_available_memory(monkeypatch):
    ei, _ = _edges(n=500, e=3000)
    g = GraphStore.from_edge_index(ei, 500, symmetrize=True, name="g")
    monkeypatch.setattr(metis, "available_memory", lambda: metis.peak_estimate(500, 10))
    with pytest.raises(ConfigError, match="use partitioner=ldg or partitioner=fennel") as err:
        metis.MetisPartitioner().partition(g, 2)
    assert "\n" not in str(err.value)
    monkeypatch.setattr(metis, "available_memory", lambda: None)  # unknown: not refused
    assert metis.MetisPartitioner().partition(g, 2).num_parts == 2


def test_streaming_partitioner_on_the_out_of_core_graph_is_unchanged(tmp_path):
    ei, _ = _edges()
    ref = GraphStore.from_edge_index(ei, 2000, symmetrize=True)
    indptr, indices, _ = bounded.staged_csc(bounded.Stage(tmp_path), ei[0], ei[1], None, 2000,
                                            True, "keep", True, 600_000, torch.int64, "t")
    mapped = GraphStore(indptr=indptr, indices=indices)  # indices memory-mapped from disk
    assert torch.equal(LdgPartitioner().assign(mapped, 4), LdgPartitioner().assign(ref, 4))
