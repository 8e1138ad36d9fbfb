"""The partitioned dataset layout: its format and the launcher's checks on it (torch-free).

A layout is one folder written once by ``python -m gnnscale.partition ... parts=DIR``
(:mod:`gnnscale.partition.parts` writes and opens it)::

    DIR/layout.json      what was partitioned and how: the graph (name, checksum, sizes), the
                         dataset option it came from, k, the partitioner (name, seed, config),
                         every part's checksum, and the digests of the global arrays
    DIR/indptr.npy       the whole graph's CSC indptr (O(N): every node's in-degree)
    DIR/indices.npy      the whole graph's topology (O(E)): the CSC's source ids, and the edge
    DIR/edge_weight.npy  weights when the graph has them; read by the sampling strategies only
    DIR/y.npy            every node's label (O(N)): a rank's seeds are anyone's nodes
    DIR/train_idx.npy    the splits, global ids in the dataset's order (O(split) <= O(N):
    DIR/val_idx.npy      the loss divides by the whole training set, the metrics count the
    DIR/test_idx.npy     whole splits)
    DIR/book/            the node -> part book (a saved :class:`PartitionBook`)
    DIR/part-<q>/        part q: ``part.json`` and its arrays (below)

A part folder holds ``owned`` (its nodes' global ids, ascending), ``indptr`` (over the owned
nodes, in that order) and ``indices`` (global source ids: the halo is the sources not owned),
the owned rows of ``x`` and ``y``, and, in the CSC order of its in-edges, ``edge_weight`` and
``edge_attr`` when the graph has them. Every array is a plain ``.npy`` whose shape, dtype and
SHA-256 digest ``part.json`` records, with a checksum over the whole file; ``part.json`` also
repeats the partitioning's identity (graph checksum, k, partitioner and seed), so a part of
another partitioning is named, not read. A host needs ``layout.json``, the global arrays,
``book/`` and the part folders of its ranks (rank r reads ``part-<r>``), nothing else. The
full-graph strategy reads ``indptr`` and the splits of the global arrays; the sampling strategies
(:data:`TOPOLOGY`) read the whole topology and the labels too, never another part's features.
A vertex-cut partitioner's layout (``kind: vertex_cut`` in ``layout.json``) has other part
arrays and a book without ``edge_part``: :mod:`gnnscale.partition.vc_parts` writes and opens
it.

:func:`check_run` is the launcher's check of a run given ``parts=DIR`` (after
:func:`gnnscale.runner.validate.parts_problem`, which says whether its strategy can train from
parts): the run's dataset, partitioner and world size are the layout's, and every part this
process's ranks read is there and of this partitioning. Each problem is one line naming what
to fix.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from gnnscale.data.metadata import DatasetMeta
from gnnscale.errors import ConfigError

LAYOUT_FORMAT = 2
LAYOUT_FILE = "layout.json"
PART_FILE = "part.json"
BOOK_DIR = "book"
#: the global arrays in the top folder (edge weights and splits only when the graph has them)
GLOBAL_ARRAYS = ("indptr", "indices", "edge_weight", "y", "train_idx", "val_idx", "test_idx")
#: the global arrays only a rank that samples the whole graph reads (the others are O(N) or less)
TOPOLOGY = ("indices", "edge_weight", "y")
#: a part's arrays (``edge_weight``, ``edge_attr`` only when the graph has them)
PART_ARRAYS = ("owned", "indptr", "indices", "x", "y", "edge_weight", "edge_attr")
#: the partitioning's identity, repeated in every part.json
IDENTITY = ("graph_checksum", "num_parts", "partitioner", "seed", "config_hash")
#: dataset keys that say where a dataset lives or how it was processed, not which one it is
_PLACE_KEYS = ("root", "raw_dir", "path", "memory_budget")


class LayoutError(ConfigError):
    """A layout folder that is missing, damaged, of another partitioning or not this run's;
    the message names the file and what to do."""


def part_dir(root: str | os.PathLike, part: int) -> Path:
    """The folder of part ``part`` in the layout ``root``."""
    return Path(root) / f"part-{part}"


def info_checksum(info: dict) -> str:
    """Hash of a layout.json or part.json's content other than its checksum (JSON-normalised)."""
    body = {k: v for k, v in info.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]


def config_hash(config: dict) -> str:
    """Hash of a partitioner's config (its composed node: target and every option)."""
    return hashlib.blake2b(json.dumps(config, sort_keys=True, default=str).encode(),
                           digest_size=8).hexdigest()


def partitioner_name(config: dict) -> str:
    """``metis`` of ``gnnscale.partition.metis.MetisPartitioner`` (the option's module)."""
    target = str(config.get("_target_", ""))
    return target.rsplit(".", 2)[-2] if target.count(".") >= 2 else target


def partitioner_overrides(wanted: dict, given: dict) -> str:
    """The overrides that turn the partitioner node ``given`` into ``wanted``:
    ``partitioner=<name>`` when the option differs, then each option key whose value differs
    (from ``given``'s, or from the option's defaults when the option changes)."""
    from gnnscale import registry

    name = partitioner_name(wanted)
    base = given
    out = []
    if partitioner_name(given) != name:
        out.append(f"partitioner={name}")
        schema = registry.schemas("partitioner").get(name)
        base = {} if schema is None else registry.instance(schema, {}).__dict__
        base = {k: getattr(v, "value", v) for k, v in base.items()}
    out += [f"partitioner.{k}={_show(v)}" for k, v in sorted(wanted.items())
            if k != "_target_" and base.get(k) != v]
    return " ".join(out) or f"partitioner={name}"


def dataset_identity(node: dict) -> dict:
    """A dataset option's composed node without the keys that only say where it lives."""
    return {k: v for k, v in node.items() if k not in _PLACE_KEYS}


def read_info(path: Path, what: str) -> dict:
    """A layout.json or part.json, its checksum verified; a missing, unreadable or edited file
    is a :class:`LayoutError` naming it."""
    if not path.is_file():
        raise LayoutError(f"{path} is missing: {what}")
    try:
        info = json.loads(path.read_text())
        ok = isinstance(info, dict) and info.get("checksum") == info_checksum(info)
    except (OSError, ValueError) as err:
        raise LayoutError(f"{path} cannot be read ({err}): copy it again from the machine "
                          "that partitioned the graph") from None
    if not ok:
        raise LayoutError(f"{path}: checksum mismatch, it was edited or damaged since it was "
                          "written: copy it again or partition again")
    if info.get("format") != LAYOUT_FORMAT:
        raise LayoutError(f"{path} is layout format {info.get('format')!r}, this gnnscale "
                          f"reads {LAYOUT_FORMAT}: partition again")
    return info


def read_layout(root: str | os.PathLike) -> dict:
    """The verified ``layout.json`` of the layout folder ``root``."""
    root = Path(os.path.expanduser(str(root)))
    if not root.is_dir():
        raise LayoutError(f"parts={root}: no such folder; write it with python -m "
                          "gnnscale.partition ... parts=DIR (and copy it to this host)")
    info = read_info(root / LAYOUT_FILE, "not a partitioned layout (python -m "
                     "gnnscale.partition ... parts=DIR writes one)")
    _check_targets(info, root / LAYOUT_FILE)
    return info


def _check_targets(info: dict, path: Path) -> None:
    """A layout's configs (its partitioner's, its dataset's) name only options gnnscale
    declares: a file never chooses what is imported (one :class:`LayoutError` line)."""
    from gnnscale import registry

    for key, group in (("partitioner_config", "partitioner"), ("dataset", "dataset")):
        node = info.get(key)
        if isinstance(node, dict) and "_target_" not in node:
            continue  # names nothing to import
        target = node.get("_target_") if isinstance(node, dict) else node
        if node is not None and registry.declared(group, target) is None:
            raise LayoutError(f"{path}: {key}._target_={target!r} is not an option gnnscale "
                              f"declares for {group}; a layout's config never chooses what is "
                              "imported: partition again")


def read_part(root: str | os.PathLike, part: int, layout: dict) -> dict:
    """The verified ``part.json`` of part ``part``, checked to be of ``layout``'s partitioning:
    a missing part or one of another partitioning is a one-line :class:`LayoutError`."""
    folder = part_dir(root, part)
    if not folder.is_dir():
        raise LayoutError(f"{folder} is missing: rank {part} trains on part {part} of "
                          f"{layout['num_parts']}; copy that folder from the machine that "
                          "partitioned the graph to this host")
    info = read_info(folder / PART_FILE, "the part's description")
    for key in IDENTITY:
        if info.get(key) != layout.get(key):
            raise LayoutError(
                f"{folder} is a part of another partitioning: its {key} is "
                f"{_show(info.get(key))}, {Path(root) / LAYOUT_FILE} says "
                f"{_show(layout.get(key))}; copy this host the parts written with that "
                "layout.json (or partition again)")
    other = info.get("part")
    if other != part and isinstance(other, int) and not isinstance(other, bool) \
            and 0 <= other < len(layout["parts"]) \
            and layout["parts"][other] == info.get("checksum"):
        raise LayoutError(f"{folder} holds part {other}, not part {part}: the part folders "
                          f"were swapped or renamed; move it back to {part_dir(root, other)} "
                          f"and part {part}'s folder to {folder}")
    if other != part or layout["parts"][part] != info["checksum"]:
        raise LayoutError(f"{folder} is not the part {part} that {Path(root) / LAYOUT_FILE} "
                          "lists (another run of the partitioner wrote it): copy the parts "
                          "written with that layout.json")
    return info


def _plain(node: object) -> dict:
    """A composed config node as a plain dict (a group's node always is one)."""
    if not isinstance(node, dict):
        raise ConfigError(f"a config group holds {type(node).__name__}, not its options")
    return node


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def dataset_meta(layout: dict) -> DatasetMeta:
    """The :class:`DatasetMeta` of the partitioned graph, as layout.json records it."""
    d = dict(layout["dataset_meta"])
    for key, value in d.items():
        if isinstance(value, list):
            d[key] = tuple(tuple(v) if isinstance(v, list) else v for v in value)
    return DatasetMeta(**d)


def check_run(cfg: Any, ranks: list[int]) -> DatasetMeta:
    """The launcher's checks of ``cfg.parts`` for the ranks ``ranks`` this process starts
    (all of them; under torchrun its own): returns the graph's metadata, read from the layout
    (the dataset itself is neither read nor processed)."""
    from omegaconf import OmegaConf

    root = Path(os.path.expanduser(str(cfg.parts)))
    layout = read_layout(root)
    world = int(cfg.dist.world_size)
    if layout["num_parts"] != world:
        raise ConfigError(f"parts={root} holds {layout['num_parts']} parts, one per rank, but "
                          f"dist.world_size={world}: set dist.world_size={layout['num_parts']} "
                          f"(or partition again with dist.world_size={world})")
    node = _plain(OmegaConf.to_container(cfg.partitioner, resolve=True, enum_to_str=True))
    if config_hash(node) != layout["config_hash"]:
        raise ConfigError(f"parts={root} was partitioned by partitioner={layout['partitioner']}"
                          f", this run's partitioner differs: set "
                          f"{partitioner_overrides(layout['partitioner_config'], node)} (or "
                          "partition again with this run's)")
    data = dataset_identity(_plain(OmegaConf.to_container(cfg.dataset, resolve=True,
                                                          enum_to_str=True)))
    want = layout["dataset"]
    if data != want:
        keys = [k for k in sorted(set(want) | set(data)) if want.get(k) != data.get(k)]
        fix = (f"the dataset option of {want.get('_target_')}" if "_target_" in keys else
               " ".join(f"dataset.{k}={_show(want.get(k))}" for k in keys))
        raise ConfigError(f"parts={root} holds {layout['graph']['name']}, partitioned from "
                          f"other dataset options than this run's: set {fix} (or partition "
                          "this dataset)")
    for r in ranks:
        read_part(root, r, layout)
    return dataset_meta(layout)
