"""Executor strategies: data, split, factored, fullgraph, offload."""
