"""Hostile or broken user files (dataset=custom) and processed folders: nothing is inflated
past what the graph backs, every refusal names the member or file, nothing crashes."""

from __future__ import annotations

import io
import json
import re
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.data import processed
from gnnscale.data.custom import CustomDataset
from gnnscale.data.schemas import CustomConfig
from gnnscale.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
N = 6


def ring(n: int = N) -> np.ndarray:
    return np.stack([np.arange(n), (np.arange(n) + 1) % n])


def graph_arrays(**extra) -> dict:
    base = {"edge_index": ring(), "x": np.ones((N, 2), np.float32), "y": np.arange(N) % 2,
            "train_idx": np.array([0, 1]), "val_idx": np.array([2, 3]),
            "test_idx": np.array([4, 5])}
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def load(tmp_path: Path, name: str = "g", **arrays):
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    return CustomDataset(tmp_path / "data", path=str(path), symmetrize=False).load()


# ---- hand-made zip files: members that declare far more than they store -----------------------

def npy_header(shape: tuple[int, ...], dtype: str) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)  # byte-aligned, not final


def deflated_zeros(nbytes: int, chunk: int = 1 << 22) -> bytes:
    """A raw deflate stream (not final) of ``nbytes`` zeros in about nbytes / 1000 bytes: one
    compressed chunk repeated (a full flush makes each copy self-contained)."""
    full, rest = divmod(nbytes, chunk)
    return deflate(bytes(chunk)) * full + deflate(bytes(rest))


def member(header: bytes, body_zeros: int = 0, body: bytes = b"") -> tuple[bytes, int, int]:
    """(deflated data, uncompressed size, crc) of a member: a header, then zeros or bytes."""
    data = deflate(header) + deflate(body) + deflated_zeros(body_zeros)
    data += zlib.compressobj(9, zlib.DEFLATED, -15).flush()  # the final (empty) block
    crc = zlib.crc32(header + body) if not body_zeros else 0  # never checked: never read
    return data, len(header) + len(body) + body_zeros, crc


def real(a: np.ndarray) -> tuple[bytes, int, int]:
    buf = io.BytesIO()
    np.save(buf, a)
    raw = buf.getvalue()
    return member(raw[:0], body=raw)


def write_zip(path: Path, members: dict[str, tuple[bytes, int, int]]) -> None:
    """A zip (deflate, no zip64) with the given members, written by hand."""
    out, central = bytearray(), bytearray()
    for name, (data, size, crc) in members.items():
        fname = name.encode()
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc,
                               len(data), size, len(fname), 0, 0, 0, 0, 0, len(out)) + fname
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data), size,
                           len(fname), 0) + fname + data
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central),
                       len(out), 0)
    path.write_bytes(bytes(out + central + eocd))


BOMB = 3_500_000_000  # bytes a 3.4 MB member inflates to


def bombs(tmp_path: Path) -> dict[str, tuple[Path, float, str]]:
    """name -> (file, dataset.max_member_gb, what the refusal must say)."""
    small = {"edge_index.npy": real(ring()), "y.npy": real(np.arange(N) % 2)}
    x_small = real(np.ones((N, 2), np.float32))
    x_bomb = member(npy_header((BOMB // 4,), "<f4"), body_zeros=BOMB)
    cases = {
        "rows": ({**small, "x.npy": x_bomb}, 64,
                 "x has 875000000 rows but y has 6 entries.*member 'x' declares "
                 "3,500,000,000 bytes"),
        "edges": ({"edge_index.npy": member(npy_header((2, BOMB // 16), "<i8"), body_zeros=BOMB),
                   "x.npy": x_small, "y.npy": small["y.npy"]}, 64,
                  "edge_index declares 218750000 edges for 6 nodes.*member 'edge_index' "
                  "declares 3,500,000,000 bytes"),
        "ceiling": ({"edge_index.npy": small["edge_index.npy"], "x.npy": x_bomb}, 1,
                    "member 'x' declares 3,500,000,[0-9]+ bytes .*more than the 1 GiB allowed by "
                    "dataset.max_member_gb"),
        "lying_header": ({**small, "x.npy": member(npy_header((10**9,), "<f4"), body=bytes(64))},
                         64, "member 'x'.*declares shape \\(1000000000,\\) float32, "
                         "4,000,000,000 bytes.*holds 64 bytes of data: the file is truncated"),
        "lying_body": ({**small, "x.npy": member(npy_header((N, 2), "<f4"), body_zeros=BOMB)},
                       64, "member 'x'.*declares shape \\(6, 2\\) float32, 48 bytes, but it "
                       "holds 3,500,000,000 bytes.*damaged or forged"),
    }
    out = {}
    for name, (members, ceiling, match) in cases.items():
        write_zip(tmp_path / f"{name}.npz", members)
        out[name] = (tmp_path / f"{name}.npz", ceiling, match)
    return out


LOADER = """
import json, sys
from gnnscale.data.custom import CustomDataset
out = {}
for name, path, ceiling in json.loads(sys.argv[1]):
    try:
        CustomDataset(sys.argv[2], path=path, max_member_gb=ceiling).load()
        out[name] = "loaded"
    except Exception as err:
        out[name] = f"{type(err).__name__}: {err}"
# VmHWM: this process's own peak. ru_maxrss would also count the parent's resident set, which
# Linux carries over exec (a large pytest process would be measured, not the loader)
status = open("/proc/self/status").read()
out["maxrss_kib"] = int(status.split("VmHWM:")[1].split()[0])
print(json.dumps(out))
"""


def test_bombs_are_refused_unread_with_low_memory(tmp_path):
    start = time.monotonic()
    cases = bombs(tmp_path)
    assert all(p.stat().st_size < 5_000_000 for p, _, _ in cases.values())
    arg = json.dumps([[name, str(p), ceiling] for name, (p, ceiling, _) in cases.items()])
    run = subprocess.run([sys.executable, "-c", LOADER, arg, str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    for name, (path, _, match) in cases.items():
        assert got[name].startswith(f"ConfigError: {path}: "), (name, got[name])
        assert re.search(match, got[name]), (name, got[name])
    assert got["maxrss_kib"] < 1 << 20, f"peak RSS {got['maxrss_kib'] / 2**20:.2f} GiB"
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("meta.json"))
    assert time.monotonic() - start < 60


def test_bomb_members_are_refused_in_process(tmp_path):
    """The same refusals without a subprocess (fast, and they show in coverage)."""
    for path, ceiling, match in bombs(tmp_path).values():
        with pytest.raises(ConfigError, match=match):
            CustomDataset(tmp_path / "data", path=str(path), max_member_gb=ceiling).load()


def test_max_member_gb_is_an_option_of_the_schema(tmp_path):
    from hydra import compose, initialize_config_dir

    from gnnscale import registry

    assert CustomConfig().max_member_gb == 64
    np.savez(tmp_path / "g.npz", **graph_arrays())
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        cfg = compose(config_name="dataset/custom", overrides=[
            f"dataset.path={tmp_path / 'g.npz'}", "dataset.max_member_gb=0.5",
            f"dataset.root={tmp_path / 'data'}"])
    ds = registry.build(cfg.dataset)
    assert ds.max_member_bytes == 2**29
    with pytest.raises(ConfigError, match="dataset.max_member_gb"):
        CustomDataset(tmp_path, path=str(tmp_path / "g.npz"), max_member_gb=0)
    tiny = "more than the .* GiB allowed by dataset.max_member_gb"
    with pytest.raises(ConfigError, match=f"g.npz: member 'edge_index' .*{tiny}"):
        CustomDataset(tmp_path / "d", path=str(tmp_path / "g.npz"), max_member_gb=1e-8).load()
    torch.save({k: torch.as_tensor(v) for k, v in graph_arrays().items()}, tmp_path / "g.pt")
    with pytest.raises(ConfigError, match=f"g.pt: entry .*{tiny}"):
        CustomDataset(tmp_path / "d", path=str(tmp_path / "g.pt"), max_member_gb=1e-8).load()
    assert CustomDataset(tmp_path / "d", path=str(tmp_path / "g.pt")).load().num_nodes == N


def test_unknown_members_are_never_read(tmp_path):
    members = {f"{k}.npy": real(v) for k, v in graph_arrays().items()}
    members["notes.npy"] = member(npy_header((10**9,), "<f4"), body=bytes(8))  # lies, unused
    write_zip(tmp_path / "g.npz", members)
    g = CustomDataset(tmp_path / "data", path=str(tmp_path / "g.npz")).load()
    assert g.num_nodes == N


# ---- num_classes -------------------------------------------------------------------------------

@pytest.mark.parametrize("num_classes, match", [
    (10**12, "num_classes = 1000000000000 but the largest label is 1: between 2 and "
             "max\\(1000, 10 x \\(largest label \\+ 1\\)\\) = 1000 classes are accepted"),
    (1001, "num_classes = 1001 .* = 1000 classes are accepted; give num_classes = 2"),
    (-3, "num_classes = -3"),
    (np.array([2, 3]), "num_classes must be a single integer, got an array of shape \\(2,\\)"),
    (np.array(2.5), "num_classes must be an integer, got 2.5"),
])
def test_absurd_num_classes_is_refused(tmp_path, num_classes, match):
    with pytest.raises(ConfigError, match=match):
        load(tmp_path, **graph_arrays(num_classes=np.asarray(num_classes)))


def test_num_classes_must_exceed_every_label_even_outside_the_splits(tmp_path):
    n = N + 1
    arrays = graph_arrays(edge_index=ring(n), x=np.ones((n, 2), np.float32),
                          y=np.array([0, 1, 0, 1, 0, 1, 4]), num_classes=np.array(2))
    with pytest.raises(ConfigError, match="vertex 6 \\(in no split\\) has label 4 but "
                                          "num_classes = 2.*give num_classes > 4"):
        load(tmp_path, **arrays)
    assert load(tmp_path, "ok", **{**arrays, "num_classes": np.array(5)}).num_classes == 5
    assert load(tmp_path, "many", **graph_arrays(num_classes=np.array(1000))).num_classes == 1000


def test_explicit_num_classes_with_a_big_label_set_is_bounded_by_the_labels(tmp_path):
    y = np.array([0, 1, 0, 1, 0, 199])
    g = load(tmp_path, **graph_arrays(y=y, num_classes=np.array(2000)))
    assert g.num_classes == 2000
    with pytest.raises(ConfigError, match="= 2000 classes are accepted"):
        load(tmp_path, "over", **graph_arrays(y=y, num_classes=np.array(2001)))


# ---- dtypes and shapes -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint64, np.uint32, np.uint16, np.uint8, np.int8, np.int32])
def test_any_integer_edge_index_dtype_is_read(tmp_path, dtype):
    g = load(tmp_path, **graph_arrays(edge_index=ring().astype(dtype)))
    ref = load(tmp_path, "ref", **graph_arrays())
    assert torch.equal(g.indptr, ref.indptr) and torch.equal(g.indices, ref.indices)


def test_uint64_ids_beyond_int64_and_non_integer_dtypes_are_refused(tmp_path):
    ei = ring().astype(np.uint64)
    ei[0, 0] = 2**63
    with pytest.raises(ConfigError, match="edge_index holds ids beyond int64: number the nodes "
                                          "densely"):
        load(tmp_path, **graph_arrays(edge_index=ei))
    for dtype in (np.float32, np.bool_, np.complex64):
        with pytest.raises(ConfigError, match=f"edge_index .*{np.dtype(dtype)}"):
            load(tmp_path, **graph_arrays(edge_index=ring().astype(dtype)))
    with pytest.raises(ConfigError, match="edge_index .*<U"):
        load(tmp_path, **graph_arrays(edge_index=ring().astype(str)))


def test_torch_saved_uint64_edge_index_is_read(tmp_path):
    data = {k: torch.as_tensor(v) for k, v in graph_arrays().items()}
    data["edge_index"] = data["edge_index"].to(torch.uint64)
    data["x"] = data["x"].to(torch.bfloat16)  # no numpy dtype: read as float32
    torch.save(data, tmp_path / "g.pt")
    g = CustomDataset(tmp_path / "data", path=str(tmp_path / "g.pt"), symmetrize=False).load()
    assert g.num_edges == N and g.num_nodes == N and g.x.dtype == torch.float32


@pytest.mark.parametrize("fmt", ["npz", "pt"])
@pytest.mark.parametrize("name, value, match", [
    ("x", np.ones((N, 4, 4), np.float32), "x must be \\[N, F\\].*got shape \\(6, 4, 4\\)"),
    ("x", np.float32(3), "x must be \\[N, F\\].*got shape \\(\\)"),
    ("y", np.zeros((N, 2), np.int64), "y must be 1-D \\[N\\].*or \\[N, 1\\], got shape "
                                      "\\(6, 2\\)"),
    ("x", np.ones((N, 2), np.complex64), "x holds complex64 values"),
])
def test_bad_feature_and_label_shapes_are_refused_at_conversion(tmp_path, fmt, name, value,
                                                                match):
    arrays = graph_arrays(**{name: value})
    path = tmp_path / f"g.{fmt}"
    if fmt == "npz":
        np.savez(path, **arrays)
    else:
        torch.save({k: torch.as_tensor(v) for k, v in arrays.items()}, path)
    with pytest.raises(ConfigError, match=match):
        CustomDataset(tmp_path / "data", path=str(path)).load()
    assert not list((tmp_path / "data").rglob("meta.json"))  # nothing was saved


def test_column_labels_and_vector_features_are_accepted(tmp_path):
    g = load(tmp_path, **graph_arrays(y=(np.arange(N) % 2).reshape(N, 1),
                                      x=np.arange(N, dtype=np.float64)))
    assert g.y.tolist() == [0, 1, 0, 1, 0, 1] and g.x.shape == (N, 1)


# ---- truncated files ---------------------------------------------------------------------------

def test_truncated_or_corrupt_member_of_an_npz_is_named(tmp_path):
    np.savez(tmp_path / "ok.npz", **graph_arrays())
    with zipfile.ZipFile(tmp_path / "ok.npz") as src:
        raw = {i.filename: src.read(i) for i in src.infolist()}
    for name, cut in (("y.npy", -8), ("x.npy", 30), ("train_idx.npy", 3)):
        with zipfile.ZipFile(tmp_path / "cut.npz", "w") as dst:
            for f, data in raw.items():
                dst.writestr(f, data[:cut] if f == name else data)
        with pytest.raises(ConfigError) as err:
            CustomDataset(tmp_path / "data", path=str(tmp_path / "cut.npz")).load()
        assert f"cut.npz: member {name.removesuffix('.npy')!r}" in str(err.value)
        assert "allow_pickle" not in str(err.value)
    whole = (tmp_path / "ok.npz").read_bytes()  # a stored member with a flipped byte: bad CRC
    at = whole.index(b"\x93NUMPY", whole.index(b"y.npy")) + 130
    (tmp_path / "crc.npz").write_bytes(whole[:at] + bytes([whole[at] ^ 1]) + whole[at + 1:])
    with pytest.raises(ConfigError, match="crc.npz: member 'y' cannot be read"):
        CustomDataset(tmp_path / "data", path=str(tmp_path / "crc.npz")).load()
    (tmp_path / "half.npz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ConfigError, match="half.npz: not a readable .npz"):
        CustomDataset(tmp_path / "data", path=str(tmp_path / "half.npz")).load()


@pytest.mark.parametrize("mmap", [True, False])
@pytest.mark.parametrize("cut", [0, 3, 7, 60, -4])
def test_truncated_processed_array_is_named(tmp_path, mmap, cut):
    folder = Path(load(tmp_path, **graph_arrays()).meta["processed_dir"])
    x = folder / "x.npy"
    x.write_bytes(x.read_bytes()[:cut])
    with pytest.raises(processed.ProcessedDataError) as err:
        processed.load(folder, mmap=mmap)
    assert str(err.value).startswith(f"{x}: ") and "allow_pickle" not in str(err.value)


# ---- gnn-benchmark raw files (dataset=npz) -----------------------------------------------------

def test_gnn_benchmark_file_with_absurd_shapes_is_refused_before_allocating(tmp_path):
    from gnnscale.data.npz import read_npz

    two = np.array([0, 1, 2])
    base = {"adj_data": np.ones(2, np.float32), "adj_indices": np.array([1, 0]),
            "adj_indptr": two, "adj_shape": np.array([2, 2]),
            "attr_data": np.ones(2, np.float32), "attr_indices": np.array([0, 1]),
            "attr_indptr": two, "attr_shape": np.array([2, 2]), "labels": np.array([0, 1])}
    np.savez(tmp_path / "ok.npz", **base)
    edges, x, y = read_npz(tmp_path / "ok.npz")
    assert edges.tolist() == [[0, 1], [1, 0]] and x.tolist() == [[1, 0], [0, 1]]
    for name, value, match in [
        ("attr_shape", np.array([2, 10**12]), "dense features of 8,000,000,000,000 bytes"),
        ("attr_shape", np.array([10**6, 3]), "attr_shape \\(1000000, 3\\) for 2 labels"),
        ("adj_indptr", np.array([0, 1, 10**12]), "inconsistent adjacency CSR arrays"),
        ("attr_indices", np.array([0, 10**9]), "inconsistent CSR arrays"),
    ]:
        np.savez(tmp_path / "bad.npz", **{**base, name: value})
        with pytest.raises(ConfigError, match=f"bad.npz: .*{match}"):
            read_npz(tmp_path / "bad.npz")
    members = {f"{k}.npy": real(v) for k, v in base.items()}
    members["attr_data.npy"] = member(npy_header((10**9,), "<f4"), body=bytes(8))
    write_zip(tmp_path / "lying.npz", members)
    with pytest.raises(ConfigError, match="lying.npz: member 'attr_data'.*truncated"):
        read_npz(tmp_path / "lying.npz")
