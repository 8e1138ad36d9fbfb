"""Hostile or sloppy user files (dataset=custom): bounded memory, clear errors, no silently
wrong training data, no hint to turn on pickle loading."""

import time
import zipfile

import numpy as np
import pytest
import torch

from gnnscale.data.custom import CustomDataset


def _load(tmp_path, **arrays):
    path = tmp_path / "g.npz"
    np.savez(path, **arrays)
    return CustomDataset(tmp_path / "data", path=str(path), symmetrize=False).load()


def _graph(n=6, **extra):
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    base = {"edge_index": ring, "x": np.ones((n, 2), np.float32), "y": np.arange(n) % 2,
            "train_idx": np.array([0, 1]), "val_idx": np.array([2, 3]),
            "test_idx": np.array([4, 5])}
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def test_huge_ids_without_features_are_refused_before_allocating(tmp_path):
    ei = np.array([[0, 2**31 - 2], [2**31 - 3, 1]])
    start = time.monotonic()
    with pytest.raises(ValueError, match="g.npz: 2147483647 nodes for 2 edges and no x or y"):
        _load(tmp_path, edge_index=ei)
    with pytest.raises(ValueError, match="g.npz: edge_index holds ids up to 2147483646 but "
                                         "num_nodes = 3"):
        _load(tmp_path, edge_index=ei, x=np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="num_nodes = 2147483647 but x has 3 rows"):
        _load(tmp_path, edge_index=np.array([[0], [1]]), x=np.ones((3, 2), np.float32),
              num_nodes=np.array(2**31 - 1))
    assert time.monotonic() - start < 10


def test_npz_declaring_more_than_memory_is_refused_unread(tmp_path):
    path = tmp_path / "g.npz"
    with zipfile.ZipFile(path, "w") as zf, zf.open("edge_index.npy", "w") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<i8", "fortran_order": False, "shape": (2, 10**12)})
        f.write(b"\0" * 64)  # the rest is missing: it must never be read
    with pytest.raises(ValueError, match="'edge_index'.*more than the .* GiB allowed"):
        CustomDataset(tmp_path / "data", path=str(path)).load()


def test_corrupt_or_pickled_npz_never_suggests_allow_pickle(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"definitely not a zip file" * 10)
    with pytest.raises(ValueError) as err:
        CustomDataset(tmp_path / "data", path=str(tmp_path / "junk.npz")).load()
    assert "junk.npz: not a readable .npz" in str(err.value)
    assert "allow_pickle" not in str(err.value)
    np.savez(tmp_path / "obj.npz", edge_index=np.array([[0], [1]]),
             x=np.array([{"a": 1}, None], dtype=object))
    with pytest.raises(ValueError) as err:
        CustomDataset(tmp_path / "data", path=str(tmp_path / "obj.npz")).load()
    assert "holds Python objects" in str(err.value) and "allow_pickle" not in str(err.value)


def test_integer_masks_are_read_as_masks_with_a_warning(tmp_path):
    masks = {s: np.zeros(6, np.int64) for s in ("train_mask", "val_mask", "test_mask")}
    masks["train_mask"][[0, 1, 2]] = 1
    masks["val_mask"][3] = 1
    masks["test_mask"][[4, 5]] = 1
    with pytest.warns(UserWarning) as record:
        g = _load(tmp_path, **_graph(train_idx=None, val_idx=None, test_idx=None, **masks))
    assert ("train_mask is stored as torch.int64 0/1 values: read as a boolean mask "
            "(3 vertices in train)") in [str(w.message) for w in record]
    assert g.train_idx.tolist() == [0, 1, 2] and g.test_idx.tolist() == [4, 5]
    masks["val_mask"][3] = 7
    with pytest.raises(ValueError, match="val_mask must be boolean"), pytest.warns(UserWarning):
        _load(tmp_path, **_graph(train_idx=None, val_idx=None, test_idx=None, **masks))


def test_non_finite_features_are_refused(tmp_path):
    x = np.ones((6, 2), np.float32)
    x[4, 1] = np.nan
    x[5, 0] = np.inf
    with pytest.raises(ValueError, match="g.npz: x holds 2 NaN/Inf values in 2 rows "
                                         "\\(first: row 4\\)"):
        _load(tmp_path, **_graph(x=x))


def test_overlapping_splits_are_refused(tmp_path):
    with pytest.raises(ValueError, match="1 vertices are in both the train and the test split "
                                         "\\(first: vertex 1\\)"):
        _load(tmp_path, **_graph(test_idx=np.array([1, 4, 5])))


@pytest.mark.parametrize("y, extra, match", [
    (np.array([0, 1, 2, 0, 1, 0]), {"num_classes": np.array(2)},
     "the val split has label 2 but num_classes = 2"),
    (np.array([0, -1, 1, 0, 1, 0]), {}, "1 vertices of the train split have no label"),
    (np.array([0, 1, 1000, 0, 1, 0]), {}, "largest label is 1000, so 1001 classes"),
])
def test_bad_labels_inside_splits_are_refused(tmp_path, y, extra, match):
    with pytest.raises(ValueError, match=match):
        _load(tmp_path, **_graph(y=y, **extra))


def test_a_missing_class_is_a_warning_saying_what_was_assumed(tmp_path):
    with pytest.warns(UserWarning, match="assuming 4 classes .* 1 of them have no vertex"):
        g = _load(tmp_path, **_graph(y=np.array([0, 1, 3, 0, 1, 3])))
    assert g.num_classes == 4 and torch.equal(g.y, torch.tensor([0, 1, 3, 0, 1, 3]))
