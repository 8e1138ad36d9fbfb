"""Project one epoch's volumes onto a hardware profile (modelled, never measured).

Per rank (volumes / ranks, compute scaled by the edge skew): aggregation bytes over device
memory bandwidth + update FLOPs over device FLOP/s; host->rank bytes over the host link;
rank->rank bytes over the device-device link (NVLink, else the host links) for peers on the
same node and over the node's network link (shared by its devices) for the others, peers
assumed uniform; gradients as a ring all-reduce over the slowest link in the ring; sampling at
the device's sampling rate, overlapped with training when dedicated ranks sample. The stages
add up (no overlap assumed): an upper bound for systems that pipeline them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gnnscale.cost.profile import HardwareProfile
from gnnscale.cost.volumes import Volumes


class ProjectionError(ValueError):
    """Volumes that do not fit the profile (e.g. more ranks than devices)."""


@dataclass
class Projection:
    """Seconds per epoch by stage on one profile; every figure is modelled."""

    hardware: str
    sample: float
    host_to_rank: float
    compute: float
    rank_to_rank: float
    network: float
    allreduce: float
    total: float
    modelled: bool = True

    def as_dict(self) -> dict:
        """The projection as a plain dict (for JSON)."""
        return asdict(self)


def project(v: Volumes, hw: HardwareProfile) -> Projection:
    """The modelled epoch time of volumes ``v`` on ``hw`` (ranks placed node by node)."""
    r = v.ranks
    if r > hw.devices:
        raise ProjectionError(f"{r} ranks but {hw.name} has {hw.devices} devices: project a run "
                              "with at most that many ranks")
    trainers = max(r - v.sampler_ranks, 1)
    per_node = min(hw.devices_per_node, r)
    remote = (r - per_node) / (r - 1) if r > 1 else 0.0  # share of peers on other nodes
    compute = (v.aggregation_bytes() / hw.memory_Bps + v.update_flops() / hw.compute_flops
               ) / trainers * v.edge_skew
    host = v.bytes_host_to_rank / trainers / hw.host_to_device_Bps
    peer_bytes = v.bytes_rank_to_rank / trainers  # received by the training ranks
    local_link = hw.peer_Bps or hw.host_to_device_Bps
    rank_to_rank = peer_bytes * (1 - remote) / local_link
    net_Bps = hw.network_Bps or 0.0  # read when remote: a profile of several nodes has it
    network = peer_bytes * remote * per_node / net_Bps if remote else 0.0
    grad = v.bytes_allreduce / trainers  # one rank's buffer (trainers all-reduce)
    ring = 2 * (trainers - 1) / trainers * grad if trainers > 1 else 0.0
    slowest = net_Bps / per_node if remote else local_link
    allreduce = ring / slowest
    sample = v.sampled_edges / hw.sample_edges_per_s
    train = host + compute + rank_to_rank + network + allreduce
    if v.sampler_ranks:  # dedicated samplers run beside the trainers
        sample /= v.sampler_ranks
        total = max(sample, train)
    else:
        sample /= trainers
        total = sample + train
    return Projection(hw.name, sample, host, compute, rank_to_rank, network, allreduce, total)
