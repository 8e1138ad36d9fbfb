"""Simple-HGN (Lv et al., KDD 2021, the HGB paper) on typed graphs, from PyG's GATConv.

Layer 0 reads the rows of :class:`~gnnscale.models.typed_input.TypedInput` (``hidden`` wide:
a linear map per featured node type, a learned embedding row per vertex of a featureless one;
``input_features`` picks which types' features are read, HGB's ``--feats-type``). Then
``num_layers`` GAT layers whose attention also reads the edge's type: each layer holds a
learned embedding per relation (``edge_emb`` wide; one more row for the self loop every
destination gets, a relation of its own) and a PyG ``GATConv(edge_dim=edge_emb)``, fed that
embedding row per edge, so an edge ``u -> v`` of relation ``r`` scores
``LeakyReLU(a^T [W h_u || W h_v || W_r e_r])`` (``negative_slope`` 0.05, HGB's). Hidden
layers concatenate ``heads`` heads of ``hidden`` channels each (HGB's ``hidden_dim`` is per
head: rows between layers are ``hidden * heads`` wide) and apply ELU (``activation``); the
last layer has one head of the classes. Every layer but the first adds a node residual (the
conv's own ``residual``: a linear map of the destination's input row). The output rows are
L2-normalised, as HGB's code does before its softmax. Dropout: ``input_dropout`` on layer 0's
input, ``dropout`` on every later layer's input (HGB's ``feat_drop`` on every layer's input),
``attn_dropout`` on the attention coefficients.

HGB's edge-residual attention (``alpha`` = 0.05: a layer's coefficients mixed with the
previous layer's) is left out: it ties a layer to the previous one's per-edge state, which a
layer-wise evaluation (one layer over all vertices at a time) and sampled blocks (a layer's
edges are not the previous layer's) do not carry.

The conv's parameters are PyG's ``GATConv``'s and the result equals calling it with
``edge_attr = embedding[edge_type]`` (tests/models/test_simplehgn.py); :meth:`SimpleHGN.conv`
computes it without a row per edge and channel: the relation term on the embedding table's
rows (one per relation, not per edge), the scores per edge and head, and each head's
weighted sum as one sparse product (:class:`_HeadSum`, whose backward computes the
coefficients' gradient head by head). Self loops already in the graph are dropped and one of
the self-loop relation added per destination (destinations are the first sources of a
block). The model reads ``block.edge_type``; it is not split into aggregate and update (the
softmax spans a destination's in-edges), so it trains under the strategies that train typed
graphs on sampled blocks (data, factored).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv
from torch_geometric.utils import softmax

from gnnscale.data.graph import GraphStore
from gnnscale.models.base import GNN, csr_matrix
from gnnscale.models.dropout import keyed_dropout, stream_key
from gnnscale.models.schemas import SimpleHGNConfig
from gnnscale.models.typed_input import TypedInput, input_dims
from gnnscale.sampling.base import Block, TypedInputs

#: keyed attention dropout's streams: layer i draws from ``ATTN_STREAM - i`` (the layers'
#: own streams are 0.., -1 and -2 the inputs', 1000.. the residual blocks')
ATTN_STREAM = -100


class _HeadSum(torch.autograd.Function):
    """``out[v, k] = sum over edges (u, v) of alpha[e, k] * h[u, k]`` per head ``k``, as one
    sparse product per head (edges grouped by destination, the order the coefficients come
    in), without an ``[E, heads, C]`` tensor in the forward or the backward: the backward
    takes the coefficients' gradient as a sampled product (``torch.sparse.sampled_addmm``,
    the output's gradient times the sources' rows on the edges only) and the rows' as the
    transposed product."""

    @staticmethod
    def forward(ctx: Any, alpha: torch.Tensor, h: torch.Tensor, src: torch.Tensor,
                dst: torch.Tensor, n_dst: int) -> torch.Tensor:
        heads, n_src = h.shape[1], h.shape[0]
        out = h.new_empty(n_dst, heads, h.shape[2])
        pattern = csr_matrix(src, dst, None, (n_src, n_dst), h.dtype)
        crow, col = pattern.crow_indices(), pattern.col_indices()
        for k in range(heads):
            a = torch.sparse_csr_tensor(crow, col, alpha[:, k].contiguous(), (n_dst, n_src),
                                        check_invariants=False)
            out[:, k] = torch.sparse.mm(a, h[:, k].contiguous())
        ctx.save_for_backward(alpha, h, src, dst, crow, col)
        ctx.n_dst = n_dst
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        alpha, h, src, dst, crow, col = ctx.saved_tensors
        heads, n_src, n_dst = h.shape[1], h.shape[0], ctx.n_dst
        grad_alpha = grad_h = None
        if ctx.needs_input_grad[0]:
            grad_alpha = torch.empty_like(alpha)
            pattern = torch.sparse_csr_tensor(crow, col, torch.zeros_like(alpha[:, 0]),
                                              (n_dst, n_src), check_invariants=False)
            for k in range(heads):
                picked = torch.sparse.sampled_addmm(pattern, grad[:, k].contiguous(),
                                                    h[:, k].t(), beta=0.0)
                grad_alpha[:, k] = picked.values()
        if ctx.needs_input_grad[1]:
            grad_h = torch.empty_like(h)
            order = torch.argsort(src, stable=True)  # the transpose: sources as rows
            t_src, t_dst, t_alpha = dst[order], src[order], alpha[order]
            pattern = csr_matrix(t_src, t_dst, None, (n_dst, n_src), h.dtype)
            t_crow, t_col = pattern.crow_indices(), pattern.col_indices()
            for k in range(heads):
                a_t = torch.sparse_csr_tensor(t_crow, t_col, t_alpha[:, k].contiguous(),
                                              (n_src, n_dst), check_invariants=False)
                grad_h[:, k] = torch.sparse.mm(a_t, grad[:, k].contiguous())
        return grad_alpha, grad_h, None, None, None


class _Unbound(nn.Module):
    """The relation embeddings' place before :meth:`SimpleHGN.bind_graph`."""

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise RuntimeError("Simple-HGN has no relations yet: call model.bind_graph(graph) "
                           "first")


class SimpleHGN(GNN):
    """Simple-HGN: GAT layers with edge-type attention and node residuals behind a typed
    input, L2-normalised outputs."""

    schema = SimpleHGNConfig
    sparse_conv = False  # attention weighs each edge

    def __init__(self, in_channels: int, out_channels: int, heads: int = 8,
                 edge_emb: int = 64, negative_slope: float = 0.05, attn_dropout: float = 0.5,
                 node_residual: bool = True, input_features: str = "all", hidden: int = 64,
                 **kw: Any) -> None:
        SimpleHGNConfig(hidden=hidden, heads=heads, edge_emb=edge_emb,
                        negative_slope=negative_slope, attn_dropout=attn_dropout,
                        node_residual=node_residual, input_features=input_features,
                        residual=bool(kw.get("residual", False))).check()
        self.heads, self.edge_emb, self.negative_slope = heads, edge_emb, negative_slope
        self.attn_dropout, self.node_residual = attn_dropout, node_residual
        self.input_features, self.hidden, self.out_channels = input_features, hidden, out_channels
        self.num_relations = 0
        self._bound: tuple | None = None
        super().__init__(in_channels, out_channels, hidden=hidden, **kw)
        self.typed_input: TypedInput | None = None
        self.relations: nn.Module = _Unbound()

    def options(self) -> dict[str, Any]:
        """The shared options and the ones that decide widths and inputs."""
        return {**super().options(), "heads": self.heads, "hidden": self.hidden,
                "num_layers": self.num_layers, "input_features": self.input_features}

    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> GATConv:
        """Layer ``layer``'s GATConv: ``hidden * heads`` wide in (``hidden`` at layer 0),
        ``heads`` concatenated heads of ``hidden`` channels, or one head of the classes last;
        a node residual from layer 1 on."""
        last = layer == self.num_layers - 1
        width = self.hidden if layer == 0 else self.hidden * self.heads
        return GATConv(width, out_dim if last else self.hidden, heads=1 if last else self.heads,
                       concat=not last, negative_slope=self.negative_slope,
                       dropout=self.attn_dropout, add_self_loops=False, edge_dim=self.edge_emb,
                       bias=False, residual=self.node_residual and layer > 0)

    def bind_graph(self, graph: GraphStore) -> None:
        """Build the typed input (per node type) and each layer's relation embeddings (one row
        per edge type and one for self loops); binding again to a graph of the same types
        keeps the parameters."""
        if not graph.is_typed:
            raise ValueError(f"model=simplehgn trains typed graphs (several node or edge "
                             f"types); {graph.name} has one of each: use model=gat")
        dims, rows = input_dims(graph, self.input_features)
        key = (tuple(graph.edge_types), tuple(dims.items()), tuple(rows.items()))
        if self._bound is not None:
            if self._bound != key:
                raise ValueError("this Simple-HGN is bound to a graph of other node or edge "
                                 "types")
            return
        self._bound, self.num_relations = key, len(graph.edge_types)
        self.relations = nn.ModuleList(nn.Embedding(self.num_relations + 1, self.edge_emb)
                                       for _ in range(self.num_layers))
        self.typed_input = TypedInput(dims, rows, self.hidden)

    def encode(self, inputs: TypedInputs | torch.Tensor) -> torch.Tensor:
        """Layer 0's source rows: the typed input's ``hidden``-wide rows."""
        if self.typed_input is None:
            raise RuntimeError("Simple-HGN has no typed input yet: call model.bind_graph(graph) "
                               "first")
        return self.typed_input(inputs)

    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """GATConv ``layer`` on the block with every edge's relation embedding as its edge
        features, self loops of their own relation added (computed as in the module
        docstring)."""
        if block.edge_weight is not None:
            raise ValueError(self.spec().why_not_weighted())
        if block.edge_type is None:
            raise ValueError("Simple-HGN needs blocks that carry edge_type (sampled from a "
                             "typed graph)")
        conv: GATConv = self.convs[layer]
        keyed = self.training and conv.dropout > 0 and self.dropout_key is not None
        src, dst, rel, keys = self.edges(block, keyed)
        heads, width, n_dst = conv.heads, conv.out_channels, block.num_dst
        h = conv.lin(x).view(-1, heads, width)
        score_src = (h * conv.att_src).sum(-1)
        score_dst = (h[:n_dst] * conv.att_dst).sum(-1)
        table = conv.lin_edge(self.relations[layer].weight).view(-1, heads, width)
        score_rel = (table * conv.att_edge).sum(-1)
        alpha = F.leaky_relu(score_src[src] + score_dst[dst] + score_rel[rel],
                             conv.negative_slope)
        alpha = softmax(alpha, dst, num_nodes=n_dst)
        if keyed:  # each (edge, head) kept by its global edge id: any partition, one mask
            alpha = keyed_dropout(alpha, conv.dropout,
                                  stream_key(*self.dropout_key, ATTN_STREAM - layer), keys)
        else:
            alpha = F.dropout(alpha, p=conv.dropout, training=self.training)
        out = _HeadSum.apply(alpha, h, src, dst, n_dst)
        out = out.reshape(n_dst, heads * width) if conv.concat else out.mean(dim=1)
        if conv.res is not None:
            out = out + conv.res(x[:n_dst])
        return out

    def edges(self, block: Block, keyed: bool = False
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(src, dst, relation, keys)`` of the block's edges without its self loops, plus
        one self loop per destination (relation ``num_relations``), grouped by destination;
        ``keyed``: ``keys`` names each edge the same on any partition (its global edge id, a
        self loop ``-1 - `` its destination's global id), else None."""
        src, dst = block.edge_index
        rel = block.edge_type.long()
        keep = src != dst
        loops = torch.arange(block.num_dst, device=src.device)
        src = torch.cat([src[keep], loops])
        dst = torch.cat([dst[keep], loops])
        rel = torch.cat([rel[keep], torch.full_like(loops, self.num_relations)])
        order = torch.argsort(dst, stable=True)
        keys = None
        if keyed:
            if block.e_id is None or block.src_ids is None:
                raise ValueError("keyed attention dropout needs blocks that carry e_id and "
                                 "src_ids (the edges' and rows' global ids)")
            keys = torch.cat([block.e_id.long()[keep],
                              -1 - block.src_ids[: block.num_dst].long()])[order]
        return src[order], dst[order], rel[order], keys

    def post(self, i: int, h: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden layers: the base's activation and dropout; the last: rows L2-normalised."""
        if i == self.num_layers - 1:
            return F.normalize(h, p=2.0, dim=1, eps=1e-12)
        return super().post(i, h, ids)

    def widths(self, in_dim: int) -> list[int]:
        """The typed input's width, ``hidden * heads`` between layers, the classes last."""
        return [self.hidden] + [self.hidden * self.heads] * (self.num_layers - 1) + \
            [self.out_channels]
