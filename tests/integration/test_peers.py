"""Across hosts, in one line: a host that went away (from a failed collective's error), a store
that cannot be reached, ranks whose hosts hold different graphs."""

import pytest

from gnnscale.distributed import RankFailed, free_port, spawn
from gnnscale.distributed.peers import Peer, closed_on_this_host, describe_node, lost_host
from gnnscale.distributed.topology import check_store_reachable
from tests import _hosts

PEERS = [Peer(0, 0, "10.0.0.1", "a"), Peer(1, 0, "10.0.0.1", "a"),
         Peer(2, 1, "10.0.0.2", "b"), Peer(3, 1, "10.0.0.2", "b")]


def test_a_closed_connection_names_the_other_host_and_its_ranks():
    err = RuntimeError("[gloo/transport/tcp/pair.cc:534] Connection closed by peer "
                       "[10.0.0.2]:41235")
    assert lost_host(RuntimeError("DDP failed"), PEERS, 0) is None  # no peer: not a lost host
    wrapped = RuntimeError("step failed")
    wrapped.__cause__ = err
    line = lost_host(wrapped, PEERS, 1)
    assert line.startswith("the host of ranks 2-3 (torchrun node 1, 10.0.0.2, host b) is gone "
                           "(its connection to rank 1: Connection closed by peer)")


def test_own_host_or_unknown_addresses_name_nothing():
    own = RuntimeError("Connection reset by peer [10.0.0.1]:5000")
    assert lost_host(own, PEERS, 0) is None  # a peer on this host: its own error says more
    assert lost_host(RuntimeError("Connection reset by peer [10.9.9.9]:1"), PEERS, 0) is None
    # two "nodes" on one address (loopback): the other node is the one named
    loop = [Peer(0, 0, "127.0.0.1", "h"), Peer(1, 1, "127.0.0.1", "h")]
    line = lost_host(RuntimeError("Connection closed by peer [127.0.0.1]:9"), loop, 0)
    assert line.startswith(describe_node(loop, 1))


def test_a_connection_closed_by_a_rank_of_this_host_is_told_apart():
    """A rank of this host whose deadline fired first closes its pairs: its peers on the host
    then see "closed by peer" at their own address, and look for who went quiet instead."""
    own = RuntimeError("Connection closed by peer [10.0.0.1]:10130")
    assert closed_on_this_host(own, PEERS, 0)
    assert not closed_on_this_host(RuntimeError("Connection closed by peer [10.0.0.2]:1"),
                                   PEERS, 0)  # the other host's: lost_host names it
    assert not closed_on_this_host(RuntimeError("Timed out waiting 1000ms"), PEERS, 0)
    assert not closed_on_this_host(own, [], 0)


def test_an_unreachable_store_is_named_at_once_with_the_torchrun_flag_to_set():
    port = free_port()  # nothing listens there
    with pytest.raises(RuntimeError, match=r"MASTER_ADDR=localhost \(resolves to 127\.0\.0\.1 "
                       r"here\), port \d+: Connection refused\..*--local-addr="):
        check_store_reachable("localhost", port, timeout_s=2)


@pytest.mark.slow
def test_ranks_with_different_graphs_are_refused_naming_host_and_folder():
    with pytest.raises(RankFailed, match=r"rank 1 \(host .+, data_root=/data/host1\) loaded "
                       r"another graph than rank 0 .*checksum graph-1 against graph-0"):
        spawn(_hosts.graph_check_rank, 2)
