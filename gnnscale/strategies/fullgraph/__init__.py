"""``strategy=fullgraph``: full-graph training on edge- or vertex-cut partitions (NeutronStar,
DeepGalois)."""

from gnnscale.strategies.fullgraph.config import FullGraphConfig

__all__ = ["FullGraph", "FullGraphConfig"]


def __getattr__(name: str):
    """``FullGraph`` on first use: its module imports torch, the config (above) does not."""
    if name == "FullGraph":
        from gnnscale.strategies.fullgraph.strategy import FullGraph

        return FullGraph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
