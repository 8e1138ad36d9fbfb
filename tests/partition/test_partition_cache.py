"""The partition cache is verified like the processed data: an edited, truncated or garbled
cached book is named in a warning and rebuilt, never used."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.data.graph import GraphStore
from gnnscale.partition.book import PartitionBook, PartitionBookError
from gnnscale.partition.metis import MetisPartitioner
from gnnscale.partition.provider import CachedPartitions
from gnnscale.partition.random import RandomPartitioner
from gnnscale.partition.store import cache_dir, get_partition

PARTS = 4


@pytest.fixture(scope="module")
def graph() -> GraphStore:
    """Directed edges with hubs, self loops and 50 isolated vertices (ids 550..599)."""
    g = torch.Generator().manual_seed(1)
    n, m = 600, 3000
    src = torch.randint(0, 550, (m,), generator=g)
    dst = torch.where(torch.rand(m, generator=g) < 0.2, torch.randint(0, 5, (m,), generator=g),
                      torch.randint(0, 550, (m,), generator=g))
    return GraphStore.from_edge_index(torch.stack([src, dst]), n,
                                      train_idx=torch.arange(0, n, 5), name="awkward")


def same_book(a: PartitionBook, b: PartitionBook) -> bool:
    return a.kind == b.kind and a.num_parts == b.num_parts and all(
        torch.equal(getattr(a, n), getattr(b, n))
        for n in ("part", "mirror_ids", "mirror_ptr", "part_ranges", "new_id"))


def cached(graph, root: Path, partitioner=None) -> tuple[PartitionBook, Path]:
    """A book computed into the cache under ``root`` (and its folder)."""
    partitioner = partitioner or MetisPartitioner(seed=1)
    book = get_partition(graph, partitioner, PARTS, cache_root=root, log=None)
    return book, cache_dir(graph, partitioner, PARTS, root)


def get_again(graph, root: Path, partitioner=None) -> tuple[PartitionBook, list[str], list[str]]:
    """A fresh provider's book (what the next run gets), its log and its warnings."""
    logs: list[str] = []
    provider = CachedPartitions(graph, partitioner or MetisPartitioner(seed=1), root,
                                log=logs.append)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        book = provider.get(PARTS, "edge_cut")
    return book, logs, [str(w.message) for w in caught]


def data_offset(file: Path) -> int:
    """Where the data of a .npy file starts."""
    return file.stat().st_size - np.load(file).nbytes


def flip_one_part(file: Path) -> None:
    """Edit one byte of part.npy so that it still holds a valid (but other) assignment."""
    raw = bytearray(file.read_bytes())
    at = data_offset(file)  # int16 little-endian: the low byte of vertex 0's part
    raw[at] = (raw[at] + 1) % PARTS
    file.write_bytes(bytes(raw))


def test_intact_cache_is_loaded_without_warning(graph, tmp_path):
    fresh, _ = cached(graph, tmp_path)
    book, logs, warned = get_again(graph, tmp_path)
    assert any("loaded cached" in m for m in logs) and not warned
    assert same_book(book, fresh)


def test_edited_byte_is_detected_named_and_rebuilt(graph, tmp_path):
    fresh, folder = cached(graph, tmp_path)
    flip_one_part(folder / "part.npy")
    assert not torch.equal(PartitionBook.load(folder, verify=False).part, fresh.part)
    book, logs, warned = get_again(graph, tmp_path)
    assert [w for w in warned if str(folder / "part.npy") in w and "checksum mismatch" in w]
    assert not any("loaded cached" in m for m in logs)
    assert same_book(book, fresh)
    book, logs, warned = get_again(graph, tmp_path)  # the rebuilt cache is used again
    assert any("loaded cached" in m for m in logs) and not warned
    assert same_book(book, fresh)


def test_edited_byte_and_truncated_file_are_detected_and_rebuilt(graph, tmp_path):
    fresh, folder = cached(graph, tmp_path)
    flip_one_part(folder / "part.npy")
    ids = folder / "mirror_ids.npy"
    ids.write_bytes(ids.read_bytes()[:-5])
    book, _, warned = get_again(graph, tmp_path)
    assert [w for w in warned if str(folder) in w and ".npy" in w]
    assert same_book(book, fresh)
    assert same_book(PartitionBook.load(folder, verify=True), fresh)


@pytest.mark.parametrize("cut", [0, 3, 40, -1])
def test_truncated_array_is_named(graph, tmp_path, cut):
    fresh, folder = cached(graph, tmp_path)
    ids = folder / "mirror_ids.npy"
    ids.write_bytes(ids.read_bytes()[:cut])
    with pytest.raises(PartitionBookError, match="mirror_ids.npy: cannot be read") as err:
        PartitionBook.load(folder)
    assert "allow_pickle" not in str(err.value)
    book, _, warned = get_again(graph, tmp_path)
    assert [w for w in warned if str(ids) in w]
    assert same_book(book, fresh)


def test_edit_with_same_size_and_times_is_caught(graph, tmp_path):
    """The verification stamp is not fooled by restored modification times."""
    fresh, folder = cached(graph, tmp_path)
    get_again(graph, tmp_path)  # stamped as verified
    ptr = folder / "mirror_ptr.npy"
    st = ptr.stat()
    raw = bytearray(ptr.read_bytes())
    raw[-8:] = (int.from_bytes(raw[-8:], "little") + 1).to_bytes(8, "little")
    ptr.write_bytes(bytes(raw))
    os.utime(ptr, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(PartitionBookError, match="mirror_ptr.npy: checksum mismatch"):
        PartitionBook.load(folder)
    book, _, warned = get_again(graph, tmp_path)
    assert [w for w in warned if str(ptr) in w] and same_book(book, fresh)


@pytest.mark.parametrize("edit", ["quality", "num_parts", "garbage"])
def test_edited_book_json_is_named_and_rebuilt(graph, tmp_path, edit):
    fresh, folder = cached(graph, tmp_path, RandomPartitioner(seed=3))
    info_file = folder / "book.json"
    if edit == "garbage":
        info_file.write_text("{not json")
    else:
        info = json.loads(info_file.read_text())
        if edit == "quality":
            info["quality"]["local_edge_ratio"] = 0.999
        else:
            info["num_parts"] = 2
        info_file.write_text(json.dumps(info))
    with pytest.raises(PartitionBookError, match="book.json"):
        PartitionBook.load(folder)
    book, _, warned = get_again(graph, tmp_path, RandomPartitioner(seed=3))
    assert [w for w in warned if str(info_file) in w]
    untimed = lambda q: {k: v for k, v in q.items() if k != "time_s"}  # noqa: E731
    assert same_book(book, fresh) and untimed(book.quality) == untimed(fresh.quality)


def test_book_of_an_older_format_is_recomputed_quietly(graph, tmp_path):
    fresh, folder = cached(graph, tmp_path)
    info_file = folder / "book.json"
    info = json.loads(info_file.read_text())
    old = {k: info[k] for k in ("num_parts", "kind", "quality", "meta")} | {"format": 1}
    info_file.write_text(json.dumps(old))
    book, logs, warned = get_again(graph, tmp_path)
    assert not warned and any("book format 1" in m for m in logs)
    assert same_book(book, fresh)
