"""Naming a host that went away from a failed collective's error (no process group needed)."""

from gnnscale.distributed.peers import Peer, describe_node, lost_host

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
