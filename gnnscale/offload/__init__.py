"""Offloaded full-graph training (HongTu): 2-level chunks, host/device tiers, deduplicated
transfers, cached or recomputed intermediates. The strategy is
:class:`gnnscale.executor.offload.Offload`."""
