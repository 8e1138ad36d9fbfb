"""GNN base: a stack of PyG conv layers run on sampled blocks.

A model never knows which strategy runs it: it gets input features and per-layer
:class:`~gnnscale.sampling.base.Block` objects (destinations first among the sources) and runs
``conv((x_src, x_dst), edge_index, size)`` per layer.

Dropout is torch's unless a strategy sets :attr:`GNN.dropout_key` to ``(seed, epoch)``: then
hidden-layer masks are keyed by (seed, epoch, layer, global vertex id) (see
:mod:`gnnscale.models.dropout`), so every rank that computes a vertex's row drops the same
channels, and a partitioned forward equals the single-process one with dropout on.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gnnscale.models.dropout import keyed_dropout, stream_key
from gnnscale.sampling.base import Block

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu, "elu": F.elu, "gelu": F.gelu, "leaky_relu": F.leaky_relu, "tanh": torch.tanh,
}
NORMS = ("none", "batch", "layer")


@dataclass
class ModelConfig:
    """Fields shared by every model; ``in_channels``/``out_channels`` come from the dataset."""

    _target_: str = ""
    hidden: int = 256
    num_layers: int = 3
    dropout: float = 0.5
    activation: str = "relu"
    norm: str = "none"


class GNN(nn.Module):
    """``num_layers`` conv layers; hidden layers get norm, activation and dropout."""

    def __init__(self, in_channels: int, out_channels: int, hidden: int = 256,
                 num_layers: int = 3, dropout: float = 0.5, activation: str = "relu",
                 norm: str = "none") -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"model.num_layers must be >= 1, got {num_layers}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"model.activation must be one of {sorted(ACTIVATIONS)}")
        if norm not in NORMS:
            raise ValueError(f"model.norm must be one of {NORMS}, got {norm!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {dropout}")
        self.num_layers, self.dropout, self.act = num_layers, dropout, ACTIVATIONS[activation]
        dims = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList(
            self.make_conv(i, dims[i], dims[i + 1]) for i in range(num_layers)
        )
        self.norms = nn.ModuleList(
            nn.BatchNorm1d(hidden) if norm == "batch" else
            nn.LayerNorm(hidden) if norm == "layer" else nn.Identity()
            for _ in range(num_layers - 1)
        )
        #: ``(seed, epoch)`` for keyed dropout, or None for torch's dropout (set by strategies).
        self.dropout_key: tuple[int, int] | None = None

    def set_dropout_key(self, seed: int | None, epoch: int = 0) -> None:
        """Key hidden-layer dropout by ``(seed, epoch)``; ``seed=None`` restores torch's."""
        self.dropout_key = None if seed is None else (int(seed), int(epoch))

    def bind_graph(self, graph) -> None:
        """Take graph-level constants a layer needs (e.g. degrees); most models need none."""

    @abstractmethod
    def make_conv(self, layer: int, in_dim: int, out_dim: int) -> nn.Module:
        """The PyG conv layer ``layer`` (0 = input layer)."""

    def conv(self, layer: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """Run conv ``layer`` on a block: ``x`` holds its sources, destinations first."""
        return self.convs[layer]((x, x[: block.num_dst]), block.edge_index, size=block.size)

    def layer(self, i: int, x: torch.Tensor, block: Block,
              ids: torch.Tensor | None = None) -> torch.Tensor:
        """Conv ``i`` plus, for hidden layers, norm, activation and dropout. ``ids`` are the
        global ids of the output rows (default ``block.src_ids[:num_dst]``); keyed dropout
        needs them."""
        if ids is None and block.src_ids is not None:
            ids = block.src_ids[: block.num_dst]
        return self.post(i, self.conv(i, x, block), ids)

    def post(self, i: int, h: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """What follows conv ``i``: for hidden layers norm, activation and dropout (keyed by
        ``ids``, the rows' global vertex ids, when :attr:`dropout_key` is set)."""
        if i == self.num_layers - 1:
            return h
        h = self.act(self.norms[i](h))
        if self.dropout_key is None or not self.training or self.dropout == 0.0:
            return F.dropout(h, p=self.dropout, training=self.training)
        if ids is None:
            raise ValueError("keyed dropout (model.dropout_key set) needs the global vertex ids "
                             "of the output rows: pass ids= or blocks that carry src_ids")
        return keyed_dropout(h, self.dropout, stream_key(*self.dropout_key, i), ids)

    def forward(self, x: torch.Tensor, blocks: list[Block]) -> torch.Tensor:
        if len(blocks) != self.num_layers:
            raise ValueError(f"got {len(blocks)} blocks for a {self.num_layers}-layer model")
        for i, block in enumerate(blocks):
            x = self.layer(i, x, block)
        return x
