"""The partitioned layout (gnnscale/partition/layout.py, parts.py): written one part at a time,
opened as a host's view of its part, verified, refused with one line when it is not the run's;
the row servers a factored run fetches other parts' rows through; and a host given only its
part's folder training fullgraph deps=depcomm under torchrun."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf, open_dict

from gnnscale.data.graph import GraphStore
from gnnscale.errors import ConfigError
from gnnscale.ops.deps import in_edges
from gnnscale.partition.book import PartitionBook
from gnnscale.partition.layout import LayoutError, check_run
from gnnscale.partition.parts import NotHeldError, PartLayout, RowView, write_layout
from gnnscale.partition.store import graph_checksum
from gnnscale.runner.prepare import prepare_data
from gnnscale.runner.validate import validate
from tests._train import make_cfg

ROOT = Path(__file__).resolve().parents[2]
BASE = ("dataset=synthetic", "dataset.preset=tiny", "partitioner=random", "strategy=fullgraph",
        "deps=depcomm", "model.hidden=16", "model.num_layers=2", "epochs=3", "logger=none",
        "eval_batch_size=512")
RUN = (*BASE, "dist.world_size=2")


def small_graph(n: int = 60, seed: int = 0) -> GraphStore:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, 6 * n), generator=g)
    return GraphStore.from_edge_index(
        ei, n, symmetrize=True, edge_weight=torch.rand(6 * n, generator=g),
        x=torch.randn(n, 5, generator=g), y=torch.randint(0, 3, (n,), generator=g),
        train_idx=torch.arange(0, n, 3), val_idx=torch.arange(1, n, 3),
        test_idx=torch.arange(2, n, 3), num_classes=3, name="small")


def nodes(cfg, group: str) -> dict:
    return OmegaConf.to_container(cfg[group], resolve=True, enum_to_str=True)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A 2-part layout of a small graph, recorded as the tiny synthetic preset of ``RUN``."""
    tmp = tmp_path_factory.mktemp("parts")
    cfg = make_cfg(tmp, *RUN, f"parts={tmp / 'L'}")
    graph = small_graph()
    part = torch.arange(graph.num_nodes) % 2
    part[:7] = 1  # uneven, interleaved owners
    book = PartitionBook.from_edge_cut(graph, part, 2)
    book.meta["checksum"] = graph_checksum(graph)  # as get_partition records it
    logs: list[str] = []
    write_layout(graph, book, tmp / "L", nodes(cfg, "dataset"), nodes(cfg, "partitioner"),
                 log=logs.append)
    assert "wrote 2 parts" in logs[0]
    return tmp, cfg, graph, book


def test_each_part_holds_its_rows_and_in_edges(written):
    tmp, _, graph, book = written
    layout = PartLayout(tmp / "L")
    for q in range(2):
        view = PartLayout(tmp / "L").open_part(q)
        owned = (book.part == q).nonzero().flatten()
        assert torch.equal(view.owned, owned)
        assert view.num_nodes == graph.num_nodes and view.num_edges == graph.num_edges
        assert view.held_edges == int(graph.in_degree()[owned].sum())
        assert torch.equal(view.in_degree(), graph.in_degree())  # the whole graph's
        assert torch.equal(view.x[owned], graph.x[owned]) and view.x.shape == graph.x.shape
        assert torch.equal(view.y[owned.flip(0)], graph.y[owned.flip(0)])
        for mine, whole in zip(in_edges(view.indptr, view.indices, owned),
                               in_edges(graph.indptr, graph.indices, owned)):
            assert torch.equal(mine, whole)  # what fullgraph reads, global ids kept
        eids = view.global_edge_ids()
        assert torch.equal(graph.indices[eids], view.indices)
        assert torch.equal(graph.edge_weight[eids], view.edge_weight)
        assert torch.equal(view.train_idx, graph.train_idx)  # the global split
        other = int((book.part != q).nonzero()[0])
        with pytest.raises(NotHeldError, match=f"node {other}'s feature row is not on this "
                                                f"host.*part {q} of"):
            view.x[torch.tensor([int(owned[0]), other])]
        with pytest.raises(NotHeldError, match="label row"):
            view.y[other]
        files = view.layout.bytes_opened()
        assert not [f for f in files["files"] if f"part-{1 - q}" in f]
        assert any(f"part-{q}" in f for f in files["mapped"])  # mapped, not read in
    assert layout.info["num_parts"] == 2 and layout.info["graph"]["name"] == "small"


def test_a_sampling_rank_holds_the_topology_and_fetches_rows_from_owners(written):
    """A rank of a sampling strategy gets the whole CSC and labels but only its own feature
    rows; its feature store serves the others from their owner ranks (the remote owner tier,
    counted apart), here two in-process ranks over a LocalExchange."""
    from types import SimpleNamespace

    from gnnscale.cache.exchange import LocalExchange
    from gnnscale.cache.store import FeatureStore

    tmp, _, graph, book = written
    stores: list[FeatureStore] = []
    exchange = LocalExchange(stores)
    for q in range(2):
        layout = PartLayout(tmp / "L")
        view = layout.open_part(q, topology=True)
        owned = (book.part == q).nonzero().flatten()
        for name in ("indptr", "indices", "edge_weight", "y", "train_idx"):
            assert torch.equal(getattr(view, name), getattr(graph, name)), name
        assert torch.equal(view.x.held, owned) and torch.equal(view.x.owner, book.part)
        assert torch.equal(view.x[owned], graph.x[owned])
        with pytest.raises(NotHeldError, match="from its owner"):
            view.x[int((book.part != q).nonzero()[0])]
        files = layout.bytes_opened()["files"]
        assert not [f for f in files if f"part-{1 - q}" in f]
        assert not [f for f in files if f"part-{q}/indices" in f]  # its in-edges: in the whole
        stores.append(FeatureStore(view.x, owned[:3], topo=SimpleNamespace(rank=q, world_size=2),
                                   exchange=exchange))
        alone = FeatureStore(view.x, owned[1:3])  # no peers: its own rows only, never others'
        assert torch.equal(alone.gather(owned.flip(0)), graph.x[owned.flip(0)])
        with pytest.raises(NotHeldError, match="not on this host"):
            alone.gather(torch.arange(graph.num_nodes))
        full = PartLayout(tmp / "L")
        full.open_part(q)  # fullgraph's part: no topology, no labels of other parts
        assert not [f for f in full.bytes_opened()["files"]
                    if f.endswith(("L/indices.npy", "L/y.npy"))]
    ids = torch.arange(graph.num_nodes).flip(0)
    for q, store in enumerate(stores):
        assert torch.equal(store.gather(ids), graph.x[ids])
        away = int((book.part[ids] != q).sum())
        last = store.last_stats()
        assert last["remote_owner_rows"] == away and last["local_hits"] == 3
        assert last["bytes_remote_owner"] == away * store.row_bytes
        assert last["misses"] == ids.numel() - away - 3  # its own rows, from its own table
    bare: list[FeatureStore] = []  # no cache at all: every other part's row from its owner
    for q in range(2):
        bare.append(FeatureStore(PartLayout(tmp / "L").open_part(q, topology=True).x,
                                 torch.empty(0, dtype=torch.long),
                                 topo=SimpleNamespace(rank=q, world_size=2),
                                 exchange=LocalExchange(bare)))
    for q, store in enumerate(bare):
        assert torch.equal(store.gather(ids), graph.x[ids])
        assert store.last_stats()["remote_owner_rows"] == int((book.part[ids] != q).sum())


def test_row_servers_answer_whatever_their_owners_are_doing(written, monkeypatch):
    """Three ranks (threads, each with its own gloo groups) from their parts' rows: rank 0's
    store (a one-rank trainers' group) and evaluation fetch from ranks 1 and 2 while rank 1
    fetches from four threads at once and rank 2 asks nothing; each close waits for the
    others, and no server thread is left."""
    import datetime
    import threading
    from types import SimpleNamespace

    import torch.distributed as dist

    from gnnscale.cache.served import ServedExchange
    from gnnscale.cache.store import FeatureStore, owner_rows
    from gnnscale.distributed.device import listener_env

    for key, value in listener_env().items():  # the groups' listeners on loopback
        monkeypatch.setenv(key, value)
    _, _, graph, _ = written
    n, world = graph.num_nodes, 3
    owner = torch.arange(n) % world
    store = dist.HashStore()
    out: dict = {}

    def rank(r: int) -> None:
        groups = tuple(dist.ProcessGroupGloo(dist.PrefixStore(name, store), r, world,
                                             datetime.timedelta(seconds=20))
                       for name in ("ask", "reply"))
        held = (owner == r).nonzero().flatten()
        view = RowView(graph.x[held], held, n, "feature", f"part {r}", owner=owner)
        view.remote = rows = ServedExchange(view, groups)
        ids = torch.arange(n).flip(0)
        if r == 0:  # caches rows of other owners, gathers the rest from them
            fs = FeatureStore(view, held[:2].flip(0).tolist() + [1, 2],
                              topo=SimpleNamespace(rank=0, world_size=1))
            out["store"] = torch.equal(fs.gather(ids), graph.x[ids])
            out["away"] = fs.last_stats()["remote_owner_rows"]
            few = ids[::3].contiguous()
            out["eval"] = torch.equal(owner_rows(view, few), graph.x[few])
        elif r == 1:
            got: list = []
            threads = [threading.Thread(target=lambda k=k: got.append(torch.equal(
                rows.fetch(ids[k::4], owner[ids[k::4]], None, 5, graph.x.dtype),
                graph.x[ids[k::4]]))) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            out["threads"] = got
        rows.close()
        out[f"alive{r}"] = rows.thread.is_alive()

    ranks = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(world)]
    for t in ranks:
        t.start()
    for t in ranks:
        t.join(timeout=60)
    assert out["store"] and out["eval"] and out["threads"] == [True] * 4, out
    assert out["away"] == int((owner != 0).sum()) - 2  # rows 1 and 2 come from the cache
    assert not any(out[f"alive{r}"] for r in range(world))


@pytest.mark.parametrize("level2", ["range", "metis"])
def test_offload_chunks_each_part_from_its_own_and_gathers_the_rest(written, level2):
    """offload's chunking on ranks given only their parts (each chunks its own, the others'
    gathered) is the chunking planned from the whole graph, reorganized schedule included."""
    from gnnscale.strategies.offload.chunks import two_level

    tmp, _, graph, book = written
    views = [PartLayout(tmp / "L").open_part(q) for q in range(2)]
    mine = []
    for q, view in enumerate(views):  # what each rank contributes to the gather
        two_level(view, book.part, 2, 3, True, level2, q, lambda m: mine.append(m) or [m, m])
    whole = two_level(graph, book.part, 2, 3, True, level2)
    alone = two_level(views[0], book.part, 2, 3, True, level2)  # part 1 unseen: its loads lack
    assert not all(torch.equal(a, b) for a, b in zip(alone.load[1], whole.load[1]))  # halos
    for q, view in enumerate(views):
        got = two_level(view, book.part, 2, 3, True, level2, q, lambda m, q=q: (
            [m if p == q else mine[p] for p in range(2)]))
        assert (got.assign, got.order) == (whole.assign, whole.order)
        for p in range(2):
            for a, b in zip(got.dst[p] + got.load[p], whole.dst[p] + whole.load[p]):
                assert torch.equal(a, b)


def test_a_damaged_or_foreign_part_is_named(written, tmp_path):
    src, _, _, _ = written
    copy = tmp_path / "L"
    shutil.copytree(src / "L", copy)
    x = copy / "part-1" / "x.npy"
    data = bytearray(x.read_bytes())
    data[-1] ^= 0xFF
    x.write_bytes(bytes(data))
    with pytest.raises(LayoutError, match=r"part-1/x.npy: checksum mismatch"):
        PartLayout(copy).open_part(1)
    PartLayout(copy).open_part(0)  # the other part is untouched
    info = json.loads((copy / "part-0" / "part.json").read_text())
    info["num_owned"] += 1
    (copy / "part-0" / "part.json").write_text(json.dumps(info))
    with pytest.raises(LayoutError, match=r"part-0/part.json: checksum mismatch"):
        PartLayout(copy).open_part(0)


def test_run_checks_refuse_what_is_not_the_layouts(written, tmp_path, monkeypatch):
    tmp, cfg, graph, book = written
    validate(cfg)  # the layout of this run: accepted without the dataset
    assert not (tmp / "data").exists()  # neither read nor processed

    def refused(match: str, **changes) -> None:
        bad = cfg.copy()
        with open_dict(bad):
            for key, value in changes.items():
                OmegaConf.update(bad, key, value, force_add=True)
        with pytest.raises(ConfigError, match=match):
            validate(bad)

    refused(r"holds 2 parts, one per rank, but dist.world_size=3", **{"dist.world_size": 3})
    refused(r"partitioned by partitioner=random, .*set partitioner.seed=0 ",
            **{"partitioner.seed": 4})
    refused(r"holds small, partitioned from other dataset options .*: set "
            r'dataset.preset="tiny" ', **{"dataset.preset": "small"})
    auto = cfg.copy()
    with open_dict(auto):
        auto.parts = str(tmp_path / "auto")
    with pytest.raises(ConfigError, match=r"no such folder"):
        validate(auto)  # the checks read a layout and never write one
    assert not (tmp_path / "auto").exists()
    prepare_data(auto)  # a single-host launch's own step writes the missing layout first
    validate(auto)  # then the checks accept it
    assert PartLayout(tmp_path / "auto").info["num_parts"] == 2
    for key, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"),
                       ("MASTER_PORT", "29500")):  # under torchrun each host brings its own
        monkeypatch.setenv(key, value)
    refused(r"parts=.*nowhere: no such folder", parts=str(tmp_path / "nowhere"))
    monkeypatch.undo()
    factored = ("strategy=factored", "deps=depcache", "sampler.fanouts=[5,5]")
    validate(make_cfg(tmp_path, *RUN, *factored, f"parts={tmp / 'L'}"))  # row servers
    vcut = ("strategy=factored", "deps=depcache", "sampler.fanouts=[5,5]", "partitioner=cvc")
    for over, match in ((("deps=hybrid",), "fullgraph needs deps=depcomm"),
                        (vcut, "a vertex-cut layout does not hold")):
        with pytest.raises(ConfigError, match=match):
            validate(make_cfg(tmp_path, *RUN, *over, f"parts={tmp / 'L'}"))

    g = small_graph()  # edge features stay with their destination's part: not sampled
    feats = GraphStore(indptr=g.indptr, indices=g.indices, x=g.x, y=g.y,
                       edge_attr=torch.randn(g.num_edges, 2), train_idx=g.train_idx,
                       num_classes=3, name="small")
    write_layout(feats, PartitionBook.from_edge_cut(feats, book.part, 2), tmp_path / "E",
                 nodes(cfg, "dataset"), nodes(cfg, "partitioner"), log=lambda _m: None)
    with pytest.raises(ConfigError, match="keeps each edge's features in its destination's "
                                          "part, but strategy=data samples any edge"):
        validate(make_cfg(tmp_path, *RUN, "strategy=data", "deps=depcache",
                          "sampler.fanouts=[5,5]", f"parts={tmp_path / 'E'}"))

    host = tmp_path / "host1"  # a host given the top folder and part 0 only
    shutil.copytree(tmp / "L", host, ignore=shutil.ignore_patterns("part-1"))
    with open_dict(cfg):
        cfg.parts = str(host)
    try:
        with pytest.raises(LayoutError, match=r"host1/part-1 is missing: rank 1 trains on "
                                              r"part 1 of 2; copy that folder"):
            validate(cfg)
        assert check_run(cfg, [0]).num_nodes == graph.num_nodes  # host 0's own part is there
        # part 1 of a partitioning with another seed, mixed in
        other = tmp_path / "other"
        part = book.part.flip(0).contiguous()
        ob = PartitionBook.from_edge_cut(graph, part, 2)
        ob.meta["checksum"] = book.meta["checksum"]
        pnode = nodes(cfg, "partitioner")
        write_layout(graph, ob, other, nodes(cfg, "dataset"), {**pnode, "seed": 9},
                     log=lambda _m: None)
        shutil.copytree(other / "part-1", host / "part-1")
        with pytest.raises(LayoutError, match=r"part-1 is a part of another partitioning: "
                                              r"its seed is 9, .*layout.json says 0"):
            validate(cfg)
    finally:
        with open_dict(cfg):
            cfg.parts = str(tmp / "L")


def test_the_writer_refuses_what_it_cannot_lay_out(tmp_path):
    graph = small_graph()
    book = PartitionBook.from_edge_cut(graph, torch.arange(graph.num_nodes) % 2, 2)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(Exception, match="exists and is not a partitioned layout"):
        write_layout(graph, book, tmp_path / "busy", {}, {})
    assert (tmp_path / "busy" / "notes.txt").is_file()  # never removed
    other = small_graph(n=50)  # a vertex-cut book of another graph
    vcut = PartitionBook.from_vertex_cut(other, torch.arange(50) % 2,
                                         torch.zeros(other.num_edges, dtype=torch.long), 2)
    with pytest.raises(Exception, match="covers 50 nodes .* belongs to another graph"):
        write_layout(graph, vcut, tmp_path / "v", {}, {})


@pytest.mark.parametrize("cut", ["cvc", "oec"])  # 2 parts: the broadcast, the reduce
def test_a_vertex_cut_part_holds_its_edges_and_gives_the_same_syncs(tmp_path, cut):
    """A vertex-cut layout: each part its edges (global ids), the input rows it reads, its
    masters' labels; the vertex-cut plan built from one part alone has the same sync sets,
    local order and edges as from the whole graph and book."""
    from gnnscale.distributed.launch import Topology
    from gnnscale.models.sage import SAGE
    from gnnscale.partition.cvc import CvcPartitioner
    from gnnscale.partition.oec import OecPartitioner
    from gnnscale.strategies.fullgraph.vertex_cut import VertexCutPlan

    graph = small_graph()
    book = {"cvc": CvcPartitioner, "oec": OecPartitioner}[cut]().partition(graph, 2)
    book.meta["checksum"] = graph_checksum(graph)
    logs: list[str] = []
    target = f"gnnscale.partition.{cut}.{cut.capitalize()}Partitioner"  # a declared option
    write_layout(graph, book, tmp_path / "V", {}, {"_target_": target}, log=logs.append)
    assert "wrote 2 vertex-cut parts" in logs[0]
    hosts = PartLayout(tmp_path / "V")
    sync = json.loads((tmp_path / "V" / "part-0" / "part.json").read_text())["sync"]
    assert sync == {"bcast": cut == "cvc", "reduce": cut == "oec"}  # on 2 parts
    hbook = hosts.book()
    assert hbook.kind == "vertex_cut" and hbook.edge_part.numel() == 0  # edges: in the parts
    assert torch.equal(hbook.part, book.part)
    model = SAGE(5, 3, hidden=8, num_layers=2)
    for q in range(2):
        view = PartLayout(tmp_path / "V").open_part(q)
        eids = (book.edge_part == q).nonzero().flatten()
        assert torch.equal(view.global_edge_ids(), eids) and view.held_edges == eids.numel()
        assert torch.equal(view.indices, graph.indices[eids])
        assert torch.equal(view.edge_weight, graph.edge_weight[eids])
        assert torch.equal(view.in_degree(), graph.in_degree())
        masters = (book.part == q).nonzero().flatten()
        assert torch.equal(view.y[masters], graph.y[masters])
        read = torch.unique(torch.cat([masters, graph.indices[eids]]))
        assert torch.equal(view.x[read], graph.x[read])
        unread = torch.ones(graph.num_nodes, dtype=torch.bool)
        unread[read] = False
        if bool(unread.any()):
            with pytest.raises(NotHeldError, match="feature row is not on this host"):
                view.x[unread.nonzero()[0]]
        topo = Topology(q, 2, q, 2, torch.device("cpu"))
        whole, mine = (VertexCutPlan(g, b, model, topo) for g, b in ((graph, book),
                                                                      (view, hbook)))
        for a, b in ((whole.bcast, mine.bcast), (whole.reduce, mine.reduce)):
            assert torch.equal(a.send_idx, b.send_idx) and torch.equal(a.recv_ids, b.recv_ids)
            assert (a.send_counts, a.recv_counts, a.active) == \
                (b.send_counts, b.recv_counts, b.active)
        assert torch.equal(whole.local_ids, mine.local_ids)
        assert torch.equal(whole.x, mine.x)
        order = lambda ei: ei[:, torch.argsort(ei[0] * 10**6 + ei[1])]  # noqa: E731
        assert torch.equal(order(whole.block.edge_index), order(mine.block.edge_index))
        files = view.layout.bytes_opened()["files"]
        assert not [f for f in files if f"part-{1 - q}" in f]


#: the runs on the loopback nodes, each from the layout LAYOUT names (default: the edge-cut
#: one, ``L``); each equals one process on the whole graph (split: a whole batch per step;
#: data from parts runs in tests/integration/test_hosts.py, on namespace hosts or its loopback
#: fallback)
SAMPLED = ("sampler.fanouts=[5,5]", "strategy.batch_size=128", "model.dropout=0")
FULL = ("model=gcn", "model.gcn_norm=graph", "model.dropout=0")
COMMON = tuple(o for o in RUN if not o.startswith(("strategy=", "deps=", "dist.world_size")))
LOOPBACK = {"fullgraph": RUN,
            "offload": (*COMMON, *FULL, "strategy=offload", "strategy.chunks=2",
                        "strategy.reorganize=true", "dist.world_size=2"),
            "vertex": (*COMMON, *FULL, "strategy=fullgraph", "partitioner=cvc",
                       "dist.world_size=2"),
            "split": (*COMMON, "strategy=split", *SAMPLED, "dist.world_size=2")}
LAYOUT = {"vertex": "C"}  # the vertex-cut layout


@pytest.mark.slow
def test_two_hosts_each_with_only_its_part_train_as_one_process(tmp_path):
    """Two torchrun "nodes" on loopback, each given a folder holding the global files and
    its own part only of an edge-cut layout and of a vertex-cut one, train fullgraph deps=
    depcomm, offload and split from the first and fullgraph vertex-cut from the second in one
    launch: their losses equal one process on the whole graph, and neither opened a file of
    the other's parts."""
    from gnnscale.distributed import free_port
    from gnnscale.partition.cli import run as partition
    from gnnscale.runner.run import run

    for layout, over in (("L", ()), ("C", ("partitioner=cvc",))):
        partition(make_cfg(tmp_path, *RUN, *over, f"parts={tmp_path / layout}"),
                  log=lambda _m: None)
        for q in range(2):  # copy each host its folders
            shutil.copytree(tmp_path / layout, tmp_path / f"host{q}" / layout,
                            ignore=shutil.ignore_patterns(f"part-{1 - q}"))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([[f"run-{name}", [*o, f"parts={{host}}/{LAYOUT.get(name, 'L')}",
                                                 "progress=false", "dist.timeout_s=120"]]
                                for name, o in LOOPBACK.items()]))
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node",
           "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
           "--rdzv_id", "gnnscale-parts", "--max_restarts", "0", "-m", "tests._hosts_driver",
           str(plan)]
    nodes_ = [subprocess.Popen([*cmd, str(tmp_path / f"host{q}")], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for q in range(2)]
    refs = {name: run(make_cfg(tmp_path, *o[:-1], "dist.world_size=1", run=f"ref-{name}"))
            for name, o in LOOPBACK.items() if name != "vertex"}  # vertex: fullgraph's, in 1
    refs["vertex"] = refs["offload"]  # the same model, one process on the whole graph
    outs = [p.communicate(timeout=300)[0] for p in nodes_]
    assert [p.returncode for p in nodes_] == [0, 0], "\n".join(outs)
    for name, ref in refs.items():
        two = json.loads((tmp_path / "host0" / f"run-{name}" / "results.json").read_text())
        losses = [[h["train_loss"] for h in r["history"]] for r in (ref, two)]
        assert np.allclose(losses[0], losses[1], rtol=1e-5), (name, losses)
        assert two["summary"]["final_test_acc"] == pytest.approx(
            ref["summary"]["final_test_acc"], abs=2e-3), name
        folder = LAYOUT.get(name, "L")
        for q, rank in enumerate(two["parts"]["ranks"]):
            opened = list(rank["files"]) + list(rank["mapped"])
            assert all(f.startswith(str(tmp_path / f"host{q}" / folder)) for f in opened), \
                (name, opened)
            assert any(f"part-{q}" in f for f in rank["mapped"])
        assert sum(h["disk_bytes"] for h in two["parts"]["hosts"].values()) > 0
    assert "memory-mapped" in outs[0]
    assert not any((tmp_path / f"host{q}" / "data").exists() for q in range(2))  # no dataset
