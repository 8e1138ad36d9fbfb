"""gnnscale: config-driven, multi-strategy GNN training for graphs that outgrow one device."""

__version__ = "0.1.0"
