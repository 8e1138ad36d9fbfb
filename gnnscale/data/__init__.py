"""Graph store, processed on-disk format and dataset loaders."""

from gnnscale.data.graph import GraphStore

__all__ = ["GraphStore"]
