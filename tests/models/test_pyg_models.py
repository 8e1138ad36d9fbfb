"""PyG's PNA and EdgeCNN traced into stages (gnnscale/models/trace.py): PNA's degree histogram
from the training graph (``model.kwargs.deg=auto``, PyG's documented computation), its
scalers on the in-degree of the edges a stage is given, and EdgeConv's ``x_j - x_i`` from
both endpoints' rows. Under every strategy on 2 ranks: tests/integration/test_traced_models.py."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import PNAConv
from torch_geometric.utils import degree

from gnnscale.errors import ConfigError
from gnnscale.models.contract import build, degree_histogram
from gnnscale.models.custom import Custom
from gnnscale.runner.validate import check_config
from gnnscale.sampling.base import Block
from gnnscale.strategies.base import model_node
from tests import _fullgraph_fns as F
from tests._train import make_cfg

PNA = "torch_geometric.nn.models.PNA"
PNA_KW = {"hidden_channels": 8, "num_layers": 1, "aggregators": ["mean", "min", "max", "std"],
          "scalers": ["identity", "amplification", "attenuation"]}


def test_deg_auto_is_the_training_graphs_histogram_as_pyg_documents_it():
    graph = F.make_graph()
    ei = graph.edge_index()
    d = degree(ei[1], num_nodes=graph.num_nodes, dtype=torch.long)
    hist = PNAConv.get_degree_histogram([Data(edge_index=ei, num_nodes=graph.num_nodes)])
    assert degree_histogram(graph) == torch.bincount(d).tolist() == hist.tolist()


def test_a_run_fills_deg_auto_from_its_graph_and_the_launcher_probes_it(tmp_path):
    cfg = make_cfg(tmp_path, "dataset=synthetic", "dataset.preset=tiny", "model=custom",
                   f"model.target={PNA}", "+model.kwargs.hidden_channels=8",
                   "+model.kwargs.num_layers=2", "+model.kwargs.deg=auto",
                   "+model.kwargs.aggregators=[mean,std]", "+model.kwargs.scalers=[identity]",
                   "sampler.fanouts=[5,5]")
    assert check_config(cfg).get("model.num_layers") == 2
    graph = F.make_graph()
    node = model_node(cfg, graph)
    assert list(node.kwargs.deg) == degree_histogram(graph)
    model = Custom(graph.num_features, 3, target=PNA, kwargs=dict(node.kwargs))
    assert model.contract.traced and model.num_layers == 2


def test_deg_auto_outside_a_run_is_one_line_saying_what_fills_it():
    with pytest.raises(ConfigError, match="filled from the training graph") as err:
        build(PNA, 4, 2, {**PNA_KW, "deg": "auto"})
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"model\.kwargs\.deg=auto gives the training"):
        build(PNA, 4, 2, {"hidden_channels": 8, "num_layers": 1})


def test_pnas_scalers_read_the_in_degree_of_the_edges_a_stage_is_given():
    """A stage on a sampled block scales by each destination's in-degree in that block (as
    PyG's PNA on a NeighborLoader's subgraph): one process on the same sample gives the same;
    on the whole graph (fullgraph, offload) the graph's in-degrees."""
    graph = F.make_graph()
    ei, n = graph.edge_index(), graph.num_nodes
    torch.manual_seed(0)
    model = Custom(graph.num_features, 3, target=PNA,
                   kwargs={**PNA_KW, "deg": degree_histogram(graph)}).eval()
    keep = torch.rand(ei.shape[1]) < 0.5  # a sample: about half of each vertex's in-edges
    sampled = ei[:, keep]
    block = Block(edge_index=sampled, size=(n, n), src_ids=torch.arange(n))
    out = model.layer(0, graph.x, block)
    torch.testing.assert_close(out, model.net(graph.x, sampled))
    assert not torch.allclose(out, model.net(graph.x, ei))
    whole = Block(edge_index=ei, size=(n, n), src_ids=torch.arange(n))
    torch.testing.assert_close(model.layer(0, graph.x, whole), model.net(graph.x, ei))


def test_a_pna_stage_on_a_bipartite_block_gives_its_destinations_rows():
    """PNAConv takes one tensor of rows (no ``(x_src, x_dst)`` pair): the stage gives it every
    source's rows and keeps the first ``n_dst`` outputs, the destinations'."""
    graph = F.make_graph()
    ei = graph.edge_index()
    torch.manual_seed(0)
    model = Custom(graph.num_features, 3, target=PNA,
                   kwargs={**PNA_KW, "deg": degree_histogram(graph)}).eval()
    n_dst = 20
    mine = ei[:, ei[1] < n_dst]
    src = torch.unique(torch.cat([torch.arange(n_dst), mine[0]]))  # destinations first
    local = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    local[src] = torch.arange(src.numel())
    block = Block(edge_index=local[mine], size=(src.numel(), n_dst), src_ids=src)
    out = model.layer(0, graph.x[src], block)
    assert out.shape == (n_dst, 3)
    torch.testing.assert_close(out, model.net(graph.x, mine)[:n_dst])


def test_edgecnn_reads_both_endpoints_rows_in_its_stage():
    """EdgeConv's messages read ``x_j - x_i``: the destinations' rows are the first ``n_dst``
    sources', so a stage on a bipartite block equals the conv on the whole graph."""
    graph = F.make_graph()
    ei = graph.edge_index()
    torch.manual_seed(0)
    model = Custom(graph.num_features, 3, target="torch_geometric.nn.models.EdgeCNN",
                   kwargs={"hidden_channels": 8, "num_layers": 1}).eval()
    n_dst = 20
    mine = ei[:, ei[1] < n_dst]
    src = torch.unique(torch.cat([torch.arange(n_dst), mine[0]]))
    local = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    local[src] = torch.arange(src.numel())
    block = Block(edge_index=local[mine], size=(src.numel(), n_dst), src_ids=src)
    torch.testing.assert_close(model.layer(0, graph.x[src], block),
                               model.net(graph.x, ei)[:n_dst])
