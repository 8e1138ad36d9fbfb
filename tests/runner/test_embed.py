"""``python -m gnnscale.embed``: every node's embeddings from a trained run's checkpoint,
equal to the layer-wise evaluation's rows, on one rank and on several."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from gnnscale.embed.__main__ import main, parse
from gnnscale.errors import UserError
from gnnscale.evaluation.evaluate import layerwise_logits
from gnnscale.runner import checkpoint
from gnnscale.runner.embed import load_run
from gnnscale.runner.outputs import read_table
from gnnscale.runner.run import run
from tests._train import TINY, make_cfg


def trained(tmp_path: Path, *extra: str) -> Path:
    cfg = make_cfg(tmp_path, *TINY, "dist.world_size=1", "epochs=1", *extra)
    run(cfg)
    return Path(cfg.run_dir)


def reference(run_dir: Path, layer: int) -> np.ndarray:
    """The layer's rows of every node: the evaluation's layer-wise inference for the last
    layer; one conv over every node's whole neighbourhood for the first."""
    from gnnscale.sampling.neighbor import NeighborSampler

    ckpt = run_dir / checkpoint.FILENAME
    cfg = OmegaConf.create(checkpoint.load(ckpt)["config"])
    graph, model, _ = load_run(cfg, str(ckpt))
    nodes = torch.arange(graph.num_nodes)
    if layer == model.num_layers - 1:
        return layerwise_logits(model, graph, nodes, torch.device("cpu"), 300).numpy()
    mb = NeighborSampler(fanouts=[-1]).sample(graph, nodes, 0)
    with torch.no_grad():
        return model.layer(0, graph.x[mb.n_id], mb.blocks[0]).numpy()


@pytest.mark.parametrize("layer", [-1, 0])
def test_embeddings_equal_the_layerwise_rows(tmp_path, layer):
    run_dir = trained(tmp_path)
    out = tmp_path / "emb" / "z.npy"
    res = main([f"run_dir={run_dir}", f"out={out}", f"layer={layer}", "batch_size=300",
                "progress=false", f"data_root={tmp_path / 'data'}"])
    z = np.load(out, mmap_mode="r")
    want = reference(run_dir, layer % 2)
    assert z.shape == want.shape == tuple(res["shape"])
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-6)
    assert sorted(p.name for p in out.parent.iterdir()) == ["z.ids.npy", "z.npy"]  # no layers
    assert res["ids"] == str(out.parent / "z.ids.npy")  # the rows' ids: internal, no map
    np.testing.assert_array_equal(np.load(res["ids"]), np.arange(want.shape[0]))


def test_link_run_embeds_its_message_graph(tmp_path):
    run_dir = trained(tmp_path, "task=link", "task.dim=12")
    res = main([f"run_dir={run_dir}", "progress=false"])
    assert res["shape"][1] == 12 and Path(res["path"]).is_file()
    pq = main([f"run_dir={run_dir}", "progress=false", "format=parquet"])
    table = read_table(pq["path"])
    assert pq["path"].endswith("embeddings.parquet") and sorted(table) == ["embedding", "id"]
    np.testing.assert_array_equal(table["embedding"], np.load(res["path"]))


def test_bad_arguments_fail_clearly(tmp_path):
    with pytest.raises(UserError, match="run_dir= is required"):
        parse(["layer=1"])
    with pytest.raises(UserError, match="unknown argument"):
        parse(["run_dir=x", "layers=1"])
    with pytest.raises(SystemExit) as err:
        main([f"run_dir={tmp_path}"])
    assert err.value.code == 2


@pytest.mark.slow
def test_ranks_write_the_same_embeddings(tmp_path):
    run_dir = trained(tmp_path)
    one = main([f"run_dir={run_dir}", f"out={tmp_path / 'one.npy'}", "progress=false"])
    two = main([f"run_dir={run_dir}", f"out={tmp_path / 'two.npy'}", "world_size=2",
                "batch_size=256", "progress=false"])
    assert len(two["peak_rss_per_rank"]) == 2
    np.testing.assert_allclose(np.load(one["path"]), np.load(two["path"]), rtol=1e-5,
                               atol=1e-6)


def test_typed_graph_embeds_one_array_per_node_type(tmp_path):
    """R-GCN on a typed graph: ``<stem>.<type>.npy`` per node type (type-local row order) with
    its ids, equal to the layer-wise evaluation's rows; Parquet: one file with a type column."""
    from gnnscale import registry
    from gnnscale.strategies.base import model_node

    cfg = make_cfg(tmp_path, "dataset=hetero_sim", "dataset.scale=0.0005", "model=rgcn",
                   "model.hidden=8", "model.num_layers=2", "logger=none",
                   f"data_root={tmp_path / 'data'}")
    graph = registry.build(cfg.dataset).load()  # a run's checkpoint, untrained parameters
    model = registry.build(model_node(cfg, graph), in_channels=graph.num_features,
                           out_channels=graph.num_classes)
    model.bind_graph(graph)
    run_dir = Path(cfg.run_dir)
    checkpoint.save(run_dir / checkpoint.FILENAME, {
        "model": model.state_dict(), "optimizer": {"state": {}, "param_groups": []},
        "epoch": 0, "rng": [checkpoint.rng_state()],
        "history": [{"epoch": 0, "train_loss": 0.0, "epoch_time": 0.0}],
        "config": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)})
    res = main([f"run_dir={run_dir}", f"out={tmp_path / 'emb' / 'z.npy'}", "progress=false"])
    want = reference(run_dir, 1)
    off = graph.node_type_offset.tolist()
    assert list(res["per_type"]) == list(graph.node_types)
    for t, node_type in enumerate(graph.node_types):
        part = res["per_type"][node_type]
        assert part["path"] == str(tmp_path / "emb" / f"z.{node_type}.npy")
        np.testing.assert_allclose(np.load(part["path"]), want[off[t]:off[t + 1]], rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_array_equal(np.load(part["ids"]), np.arange(off[t + 1] - off[t]))
    assert len(list((tmp_path / "emb").iterdir())) == 2 * len(graph.node_types)  # no leftovers
    from gnnscale.runner.embed import embed  # Run.embed() without out=: the ids in memory

    mem = embed(str(run_dir), str(tmp_path / "mem" / "z.npy"), -1, progress=False,
                ids_in_memory=True)
    for t, node_type in enumerate(graph.node_types):
        part = mem["per_type"][node_type]
        np.testing.assert_array_equal(part["id_values"], np.arange(off[t + 1] - off[t]))
        np.testing.assert_allclose(np.load(part["path"]), want[off[t]:off[t + 1]], rtol=1e-5,
                                   atol=1e-6)
    assert len(list((tmp_path / "mem").iterdir())) == len(graph.node_types)  # no ids files
    pq = main([f"run_dir={run_dir}", "progress=false", "format=parquet"])
    table = read_table(pq["path"])
    assert sorted(table) == ["embedding", "id", "id_type"]
    np.testing.assert_allclose(np.stack(table["embedding"]), want, rtol=1e-5, atol=1e-6)
    assert list(table["id_type"][[0, -1]]) == [graph.node_types[0], graph.node_types[-1]]
