"""Graph store, processed on-disk format and dataset loaders (``schemas``: their typed
configs, torch-free)."""

__all__ = ["GraphStore"]


def __getattr__(name: str):
    """``GraphStore`` on first use (it imports torch; the schemas do not)."""
    if name == "GraphStore":
        from gnnscale.data.graph import GraphStore

        return GraphStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
