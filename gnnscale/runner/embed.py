"""Embeddings of every node from a trained run (``python -m gnnscale.embed run_dir=...``).

Loads the run's checkpoint and config, rebuilds its graph as the task prepared it (link
prediction: the message graph) and its model, then runs layer-wise full-neighbour inference
(as :mod:`gnnscale.evaluation.evaluate`: layer ``l`` of every vertex from layer ``l-1`` of all
its in-neighbours; layer 0 reads the features as the run trained on them,
``cache.feature_dtype``: :func:`gnnscale.evaluation.evaluate.served_dtype`) up to the chosen
layer and writes that layer's rows of every node to a ``.npy`` file (float32
``[num_nodes, width]``), memory-mappable, with the row's ids beside it
(``<stem>.ids.npy``: the user's ids when the dataset stores them,
:mod:`gnnscale.data.idmap`, else the internal ones); or, with ``format=parquet``, to one
Parquet file of columns ``id`` and ``embedding`` (a fixed-size list), converted from the
finished ``.npy`` in row groups.

A typed graph's layer 0 reads the typed model's encoded rows of each chunk's typed inputs
(``model.encode``), and the output is one array per node type: ``<stem>.<type>.npy``
(float32 ``[num_nodes_of(type), width]``, rows in type-local id order) with
``<stem>.<type>.ids.npy`` (the user's ids of that type, else its type-local ids), copied from
the finished ``[num_nodes, width]`` rows a chunk at a time; with ``format=parquet`` one file
whose rows carry an ``id_type`` column beside ``id`` and ``embedding``.

Distributed and bounded: ``world_size`` ranks split the vertices of every layer; a rank
computes its share in chunks of ``batch_size`` destinations, reads each chunk's in-neighbour
rows from the previous layer's file (mapped for that chunk only) and writes its output rows
to the next layer's file with plain writes, then all ranks meet at a barrier before the next
layer. No rank holds a whole layer's activations: its memory is the model, one chunk's
neighbourhood and the pages of the files it maps for one chunk. Intermediate layers and the
output itself are written to hidden files beside the output, named after the process
(``.<out>.tmp<pid>@<host>.*``); the output replaces ``out`` by a rename only once every rank
has written it, so a killed or failed embedding leaves the previous output as it was. The
leftovers of a killed embedding are removed by the next one writing to the same ``out``.
"""

from __future__ import annotations

import os
import re
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist

from gnnscale.data.publish import pid_alive, temp_path
from gnnscale.errors import UserError
from gnnscale.runner.finished import id_map, load_model
from gnnscale.runner.plan import RunPlan

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from gnnscale.data.graph import GraphStore
    from gnnscale.distributed.topology import Topology


@dataclass
class LayerFile:
    """One layer's rows on disk: a ``.npy`` file, its data offset and row width."""

    path: str
    offset: int
    width: int


def load_run(cfg: DictConfig, ckpt_path: str):
    """``(graph, model, task)`` of a run: its task's graph and its trained model (eval mode),
    from ``cfg`` once checked (:func:`gnnscale.runner.finished.load_model`)."""
    return load_model(cfg, ckpt_path)


def _write_rows(f: LayerFile, start: int, rows: torch.Tensor) -> None:
    """Rows ``start ..`` of ``f``, written in place (no mapping held)."""
    data = rows.detach().float().cpu().contiguous().numpy()
    with open(f.path, "r+b") as fh:
        fh.seek(f.offset + start * f.width * 4)
        fh.write(data.tobytes())


def _read_rows(f: LayerFile, ids: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Rows ``ids`` of ``f`` (the file mapped for this read only)."""
    m = np.memmap(f.path, dtype=np.float32, mode="r", offset=f.offset,
                  shape=(num_nodes, f.width))
    try:
        return torch.from_numpy(np.ascontiguousarray(m[ids.numpy()]))
    finally:
        del m


def embed_rank(topo: Topology, plan: RunPlan, files: list[LayerFile], batch_size: int,
               progress: bool) -> dict:
    """This rank's share of every layer up to ``len(files) - 1``, written to ``files``;
    ``plan``: the finished run's (:meth:`~gnnscale.runner.plan.RunPlan.from_run`), whose
    graph and trained model it loads (:meth:`~gnnscale.runner.plan.RunPlan.load`)."""
    from gnnscale.cache.store import typed_inputs
    from gnnscale.evaluation.evaluate import rounding, served_dtype
    from gnnscale.sampling.neighbor import NeighborSampler

    graph, model, _ = plan.load()
    served = rounding(served_dtype(plan.config) or "float32")  # the features it trained on
    device = topo.device
    model.to(device)
    world, rank, n = topo.world_size, topo.rank, graph.num_nodes
    share = torch.tensor_split(torch.arange(n), world)[rank]
    chunks = list(torch.split(share, batch_size))
    one_hop = NeighborSampler(fanouts=[-1])
    bar = None
    if progress and rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=len(chunks) * len(files), desc="embed (rank 0's share)",
                   dynamic_ncols=True)
    t0 = time.perf_counter()
    with torch.no_grad():
        for layer, out_file in enumerate(files):
            for chunk in chunks:
                mb = one_hop.sample(graph, chunk, 0)
                if layer > 0:
                    src = _read_rows(files[layer - 1], mb.n_id, n)
                elif graph.is_typed:  # the typed model's layer-0 rows of the typed inputs
                    inputs = typed_inputs(graph, mb.n_id)
                    inputs.features = {t: served(x) for t, x in inputs.features.items()}
                    src = model.encode(inputs.to(device))
                else:
                    src = served(graph.x[mb.n_id]).float()
                out = model.layer(layer, src.to(device), mb.blocks[0].to(device))
                _write_rows(out_file, int(chunk[0]), out)
                if bar is not None:
                    bar.update(1)
            if world > 1:
                dist.barrier()
    if bar is not None:
        bar.close()
    return {"seconds": time.perf_counter() - t0,
            "peak_rss": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024}


def _sweep_legacy(out_path: Path) -> None:
    """Layer files of an older gnnscale's killed embedding (``.<stem>.layer<k>.<pid>.npy``)
    whose process is gone."""
    pattern = re.compile(re.escape(f".{out_path.stem}.layer") + r"\d+\.(\d+)\.npy")
    for entry in out_path.parent.glob(f".{out_path.stem}.layer*.npy"):
        m = pattern.fullmatch(entry.name)
        if m and not pid_alive(int(m.group(1))):
            entry.unlink(missing_ok=True)


def embed(run_dir: str, out: str | None = None, layer: int = -1, world_size: int = 1,
          batch_size: int = 4096, progress: bool = True, data_root: str | None = None,
          format: str = "npy", ids_in_memory: bool = False) -> dict:
    """Write layer ``layer`` (0-based; -1: the last) of every node of the run in ``run_dir``
    to ``out`` (default ``<run_dir>/embeddings.npy``, or ``.parquet``) with each row's id;
    returns the paths, shape, seconds and each rank's peak RSS. ``ids_in_memory`` (``.npy``
    only): no ids file; the ids come back as arrays (``id_values``, and in ``per_type``),
    exact (strings as ``str`` objects, NUL characters kept), so none is refused."""
    from gnnscale.distributed.launch import Topology, spawn
    from gnnscale.runner import outputs

    if world_size < 1 or batch_size < 1:
        raise UserError(f"world_size and batch_size must be >= 1, got {world_size}, "
                        f"{batch_size}")
    outputs.check_format(format)
    plan = RunPlan.from_run(run_dir, data_root)  # its config checked: never imports code
    cfg = plan.config
    graph, model, _ = plan.load()  # processes the data once, here
    keys = row_ids(cfg, graph)
    if ids_in_memory and format != "npy":
        raise ValueError("ids_in_memory takes format='npy'")
    if format == "npy" and not ids_in_memory:  # an id numpy unicode cannot hold: refused
        ids_npy = outputs.npy_strings(_single(keys), "an id of the embeddings (.ids.npy)")
    widths = model.widths(graph.num_features)[1:]
    last = len(widths) - 1
    if not -len(widths) <= layer <= last:
        raise UserError(f"layer={layer}: the model has {len(widths)} layers (0..{last}, or -1 "
                        "for the last)")
    layer = layer % len(widths)
    out_path = Path(out) if out else Path(run_dir) / f"embeddings.{format}"
    _sweep_legacy(out_path)
    paths = [temp_path(out_path, f"layer{k}.npy") for k in range(layer)]
    paths.append(temp_path(out_path, "out.npy"))
    files = []
    done = False
    try:
        for path, width in zip(paths, widths):
            m = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32,
                                          shape=(graph.num_nodes, width))
            files.append(LayerFile(str(path), int(m.offset), width))
            del m
        t0 = time.perf_counter()
        if world_size == 1:
            cpu = Topology(0, 1, 0, 1, torch.device("cpu"))
            ranks = [embed_rank(cpu, plan, files, batch_size, progress)]
        else:
            ranks = spawn(embed_rank, world_size, plan, files, batch_size, progress)
        seconds = time.perf_counter() - t0
        per_type = None
        if format == "parquet":  # read back in row groups: bounded as the layers were
            rows = np.load(paths[-1], mmap_mode="r")
            outputs.write_parquet(out_path, {**keys, "embedding": rows})
            del rows
            ids_path = None
        elif graph.is_typed:  # one array (and its ids) per node type
            per_type = _write_per_type(cfg, graph, paths[-1], out_path, batch_size,
                                       ids_in_memory)
            ids_path = None
        elif ids_in_memory:
            ids_path = None
            os.replace(paths[-1], out_path)
        else:
            ids_path = ids_file(out_path)
            ids_tmp = temp_path(ids_path, "npy")
            np.save(ids_tmp, ids_npy, allow_pickle=False)
            os.replace(ids_tmp, ids_path)
            os.replace(paths[-1], out_path)  # complete: the previous output is replaced now
        done = True
    finally:
        for path in paths[:-1] if done and format == "npy" else paths:
            path.unlink(missing_ok=True)
    return {"path": str(out_path), "ids": None if ids_path is None else str(ids_path),
            "id_values": _single(keys) if ids_in_memory and not graph.is_typed else None,
            "shape": [graph.num_nodes, widths[layer]], "layer": layer, "seconds": seconds,
            "peak_rss_per_rank": [r["peak_rss"] for r in ranks], "per_type": per_type}


def type_file(out_path: Path, node_type: str) -> Path:
    """The ``.npy`` of one node type's rows beside ``out_path``: ``<stem>.<type>.npy``."""
    return out_path.with_name(f"{out_path.stem}.{node_type}.npy")


def _write_per_type(cfg, graph, rows_path: Path, out_path: Path, batch_size: int,
                    ids_in_memory: bool = False) -> dict[str, dict]:
    """Each node type's rows of the finished ``[num_nodes, width]`` file ``rows_path`` (types
    are contiguous global id ranges) to ``<stem>.<type>.npy`` in type-local id order, its ids
    (the user's, else type-local) to ``<stem>.<type>.ids.npy`` (``ids_in_memory``: returned
    as the entry's ``id_values`` array instead), copied a chunk of rows at a time and each
    renamed into place when complete; ``rows_path`` is removed."""
    from gnnscale.runner import outputs

    ids = id_map(cfg)
    rows = np.load(rows_path, mmap_mode="r")
    off = graph.node_type_offset.tolist()
    step = max(batch_size, 1 << 16)
    out: dict[str, dict[str, Any]] = {}
    written: list[Path] = []
    try:
        for t, node_type in enumerate(graph.node_types):
            lo, hi = int(off[t]), int(off[t + 1])
            path = type_file(out_path, node_type)
            tmp = temp_path(path, "npy")
            written.append(tmp)
            part = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32,
                                             shape=(hi - lo, rows.shape[1]))
            for a in range(lo, hi, step):
                part[a - lo: min(a + step, hi) - lo] = rows[a: min(a + step, hi)]
            part.flush()
            del part
            keys = outputs.user_ids(ids, node_type, np.arange(hi - lo))
            if ids_in_memory:
                out[node_type] = {"path": str(path), "ids": None, "id_values": keys,
                                  "rows": hi - lo, "tmp": (tmp, None)}
                continue
            id_path = ids_file(path)
            id_tmp = temp_path(id_path, "npy")
            written.append(id_tmp)
            np.save(id_tmp, outputs.npy_strings(keys, f"an id of node type {node_type!r}"),
                    allow_pickle=False)
            out[node_type] = {"path": str(path), "ids": str(id_path), "rows": hi - lo,
                              "tmp": (tmp, id_tmp)}
        for entry in out.values():  # complete: the previous outputs are replaced now
            tmp, id_tmp = entry.pop("tmp")
            os.replace(tmp, entry["path"])
            if id_tmp is not None:
                os.replace(id_tmp, entry["ids"])
    finally:
        del rows
        for path in written:
            Path(path).unlink(missing_ok=True)
        Path(rows_path).unlink(missing_ok=True)
    return out


def ids_file(out_path: Path) -> Path:
    """The ``.npy`` of row ids beside an ``.npy`` of embeddings: ``<stem>.ids.npy``."""
    return out_path.with_name(f"{out_path.stem}.ids.npy")


def row_ids(cfg: DictConfig, graph: GraphStore) -> dict[str, np.ndarray]:
    """The id column(s) of every node's row: the user's ids when the dataset stores them
    (:mod:`gnnscale.data.idmap`), else the internal ids."""
    from gnnscale.runner.outputs import key_columns

    return key_columns(graph, id_map(cfg), torch.arange(graph.num_nodes))


def _single(keys: dict[str, np.ndarray]) -> np.ndarray:
    """The id column (``<type>:<id>`` strings when the nodes span several types)."""
    if "id_type" in keys:  # built as str objects: exact, NUL characters kept
        return np.array([f"{t}:{i}" for t, i in zip(keys["id_type"].tolist(),
                                                     keys["id"].tolist())], dtype=object)
    return keys["id"]
