"""``strategy=fullgraph``: full-graph training on edge- or vertex-cut partitions (NeutronStar,
DeepGalois)."""

from gnnscale.strategies.fullgraph.strategy import FullGraph, FullGraphConfig

__all__ = ["FullGraph", "FullGraphConfig"]
