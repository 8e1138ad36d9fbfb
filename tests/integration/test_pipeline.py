"""The peer exchange (gnnscale/deps/pipeline.py) equals the all-to-all shuffle on real gloo
ranks: the rows each rank receives, and the gradients summed back into the senders' rows."""

from __future__ import annotations

import pytest
import torch

from gnnscale.deps.pipeline import PeerExchange
from gnnscale.distributed import spawn
from tests import _pipeline_fns as P


@pytest.mark.slow
@pytest.mark.parametrize("world,ring,hide", [(2, False, True), (3, True, True), (4, False, True),
                                             (3, False, False)])
def test_peer_exchange_equals_the_shuffle_forward_and_backward(world, ring, hide):
    """``hide=False`` (every message awaited at once) moves the same rows too."""
    for r in spawn(P.compare, world, ring, hide, timeout_s=120.0):
        a, b = r["shuffle"], r["pipeline"]
        assert torch.equal(a["recv"], b["recv"])
        assert torch.allclose(a["grad"], b["grad"], atol=1e-6)
        assert (a["stats"].bytes_forward, a["stats"].bytes_backward) == \
            (b["stats"].bytes_forward, b["stats"].bytes_backward)


def test_a_rank_sending_itself_rows_is_refused():
    with pytest.raises(ValueError, match="sends itself no rows"):
        PeerExchange(torch.zeros(1, dtype=torch.int64), [1], [1])
