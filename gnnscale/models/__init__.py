"""GNN models built from PyG conv layers; they run unmodified under every strategy."""
