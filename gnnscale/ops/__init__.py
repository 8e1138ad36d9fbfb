"""Typed wrappers of every native op (``csrc/<domain>/``), one module per domain.

- :mod:`gnnscale.ops.sampling`: ``sample_neighbors``, ``random_walk_top_k``,
  ``negative_sample``, ``edge_key_table``;
- :mod:`gnnscale.ops.pairs`: ``pair_product``, ``pair_product_backward`` (the link decoder's
  fused gather-and-multiply);
- :mod:`gnnscale.ops.gather`: ``gather_rows`` (into a new tensor or ``out``),
  ``advise_huge_pages``;
- :mod:`gnnscale.ops.split`: ``split_sample``;
- :mod:`gnnscale.ops.deps`: ``hybrid_greedy``, ``subtree_costs``, ``subtree_rows``,
  ``in_edges``, ``needed_mask``;
- :mod:`gnnscale.ops.sparse` (pure torch, no native op): ``fixed_mm``, a CSR product whose
  backward uses a transpose built once.

Nothing outside this package calls ``torch.ops.gnnscale`` directly.
Every op also has a torch-only path (:mod:`gnnscale.ops._torch`, the same results) that
:mod:`gnnscale.ops._loader` takes when the extension is absent or does not load, or when
``GNNSCALE_NATIVE=0``; ``split_sample`` has none yet.
"""

from gnnscale.ops._loader import available
from gnnscale.ops.deps import hybrid_greedy, in_edges, needed_mask, subtree_costs, subtree_rows
from gnnscale.ops.gather import advise_huge_pages, gather_rows
from gnnscale.ops.sampling import random_walk_top_k, sample_neighbors
from gnnscale.ops.sparse import fixed_mm
from gnnscale.ops.split import split_sample

__all__ = ["available", "advise_huge_pages", "gather_rows", "random_walk_top_k",
           "sample_neighbors", "split_sample", "hybrid_greedy", "in_edges", "needed_mask",
           "subtree_costs", "subtree_rows", "fixed_mm"]
