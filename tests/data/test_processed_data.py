"""Processed data: verified on every load (the bad file is named), CSC invariants checked,
first complete copy wins with no gap for readers, folders readable by others."""

import json
import multiprocessing as mp
import os
import time

import numpy as np
import pytest
import torch

from gnnscale.data import processed
from gnnscale.data.graph import GraphStore
from gnnscale.data.publish import default_dir_mode
from tests import _launch_fns


@pytest.fixture
def saved(tiny_graph, tmp_path):
    folder = tmp_path / "g" / "processed"
    processed.save(tiny_graph, folder)
    processed.load(folder)  # first use: verified in full, stamped
    return folder


def test_edited_array_is_caught_on_the_next_plain_load(saved):
    x = np.load(saved / "x.npy")
    x[5, 3] += 1.0
    np.save(saved / "x.npy", x)
    with pytest.raises(processed.ProcessedDataError) as err:
        processed.load(saved)
    assert str(saved / "x.npy") in str(err.value) and f"delete {saved}" in str(err.value)


def test_edit_with_restored_times_is_still_caught(saved):
    st = (saved / "indices.npy").stat()
    ind = np.load(saved / "indices.npy")
    ind[[0, 1]] = ind[[1, 0]]
    np.save(saved / "indices.npy", ind)
    os.utime(saved / "indices.npy", ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(processed.ProcessedDataError, match="indices.npy: checksum mismatch"):
        processed.load(saved)


def test_edited_checksum_or_classes_in_meta_is_caught(saved):
    meta = json.loads((saved / "meta.json").read_text())
    meta["num_classes"] = 1001
    (saved / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(processed.ProcessedDataError, match="meta.json: checksum mismatch"):
        processed.load(saved)


def test_truncated_and_garbage_files_are_named(saved):
    (saved / "y.npy").write_bytes((saved / "y.npy").read_bytes()[:200])
    with pytest.raises(processed.ProcessedDataError, match="y.npy: cannot be read"):
        processed.load(saved)
    (saved / "meta.json").write_text("{not json")
    with pytest.raises(processed.ProcessedDataError, match="meta.json: not a valid meta.json"):
        processed.load(saved)


def test_corrupted_indptr_is_an_error_not_a_crash(saved):
    indptr = np.load(saved / "indptr.npy")
    indptr[10] = indptr[12] + 5  # no longer monotone
    np.save(saved / "indptr.npy", indptr)
    with pytest.raises(processed.ProcessedDataError, match="indptr decreases at vertex 10"):
        processed.load(saved, verify=False)  # even unverified: GraphStore checks the CSC


@pytest.mark.parametrize("indptr, indices, match", [
    ([1, 2, 2], [0, 1], "indptr\\[0\\] = 1"),
    ([0, 2, 1, 3], [0, 1, 2], "indptr decreases at vertex 1"),
    ([0, 1, 2], [0, 7], "indices hold ids in \\[0, 7\\] but there are 2 nodes"),
    ([0, 1, 2], [-1, 0], "indices hold ids in \\[-1, 0\\]"),
])
def test_graph_store_checks_csc_invariants(indptr, indices, match):
    with pytest.raises(ValueError, match=match):
        GraphStore(indptr=torch.tensor(indptr), indices=torch.tensor(indices))


def test_graph_store_checks_split_ids():
    with pytest.raises(ValueError, match="train_idx holds ids in \\[0, 5\\]"):
        GraphStore(indptr=torch.tensor([0, 1, 2]), indices=torch.tensor([1, 0]),
                   train_idx=torch.tensor([0, 5]))


def test_processed_folder_is_readable_by_others(saved):
    assert saved.stat().st_mode & 0o777 == default_dir_mode()


@pytest.mark.slow
def test_readers_never_see_a_gap_while_others_publish(tiny_graph, tmp_path):
    src = tmp_path / "src"
    processed.save(tiny_graph, src)
    folder = tmp_path / "shared" / "processed"
    processed.save(tiny_graph, folder)
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        writers = pool.starmap_async(_launch_fns.save_repeatedly,
                                     [(str(src), str(folder), 4.0)] * 2)
        loads, errors = 0, []
        while not writers.ready():
            try:
                g = processed.load(folder)
                assert g.num_nodes == tiny_graph.num_nodes
            except (OSError, ValueError) as err:
                errors.append(repr(err))
            loads += 1
            time.sleep(0.001)
        saves = sum(writers.get())
    assert saves > 2 and loads > 20
    assert errors == []
    leftovers = [p.name for p in folder.parent.iterdir() if p.name != "processed"]
    assert leftovers == []


def test_an_older_formats_copy_is_rebuilt_not_refused(tmp_path, capsys):
    """A processed copy written by an older gnnscale is derived data: the next load rebuilds it
    from its source (and says so) instead of asking the user to delete it."""
    from gnnscale.data.synthetic import SyntheticDataset

    ds = SyntheticDataset(root=str(tmp_path), preset="tiny")
    first = ds.load()
    meta_file = ds.processed_dir / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta["format"] = processed.FORMAT_VERSION - 1
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(processed.ProcessedDataError, match="format"):
        processed.load(ds.processed_dir)  # the plain reader still refuses it
    again = SyntheticDataset(root=str(tmp_path), preset="tiny").load()
    assert "reprocessing" in capsys.readouterr().out
    assert json.loads(meta_file.read_text())["format"] == processed.FORMAT_VERSION
    assert torch.equal(torch.as_tensor(first.indices), torch.as_tensor(again.indices))
