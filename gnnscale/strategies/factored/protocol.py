"""What the factored strategy's helpers read of it: :class:`FactoredRun`, the attributes and
methods of :class:`~gnnscale.strategies.factored.strategy.Factored` that the queue, relay,
sync, pre-sampling and shared-ring helpers use. The helpers sit below the strategy (it imports
them), so they name this protocol rather than the class: the package's import graph keeps no
circle (``tests/test_layers.py``)."""

from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.distributed as dist

from gnnscale.models.base import GNN
from gnnscale.sampling.base import MiniBatch
from gnnscale.sampling.schedule import Draw, Schedule
from gnnscale.strategies.factored.allocation import Allocation
from gnnscale.strategies.factored.hosts import HostJobs, HostPlan


class FactoredRun(Protocol):
    """A factored run as its helpers see it (set up: roles, groups and the queue decided)."""

    #: written by the helpers: bytes of jobs received this epoch, the pre-sampling's seconds
    _received_bytes: int
    presample_time: float

    @property
    def ctx(self) -> Any:
        """The run's :class:`~gnnscale.strategies.base.RunContext` (model, graph, task, sampler,
        topology; a sampling strategy's has its sampler and task)."""

    @property
    def schedule(self) -> Schedule:
        """The run's schedule of micro-batches (one slot per job of a step)."""

    @property
    def alloc(self) -> Allocation:
        """The sampler/trainer roles."""

    @property
    def train_topo(self) -> Any:
        """The training ranks' topology (rank among the trainers)."""

    @property
    def is_trainer(self) -> bool:
        """Whether this rank trains."""

    @property
    def hosts(self) -> HostPlan:
        """The shared queue's ring hosts and relays."""

    @property
    def queue(self) -> str:
        """``strategy.queue``: shared or routes."""

    @property
    def queue_depth(self) -> int:
        """Jobs a sampler runs ahead of the trainers."""

    @property
    def queue_slot_mb(self) -> int:
        """A ring slot's size (MiB)."""

    @property
    def prefetch(self) -> int:
        """Jobs a trainer takes ahead."""

    @property
    def jobs_per_trainer(self) -> Any:
        """Jobs each trainer takes per step."""

    @property
    def jobs_per_step(self) -> int:
        """A step's jobs (slots)."""

    @property
    def staleness(self) -> int:
        """Steps a replica's parameters may lag."""

    @property
    def switching(self) -> bool:
        """Whether samplers train when the queue runs ahead."""

    @property
    def queue_group(self) -> Any:
        """Every rank's group of the queue (a ``ProcessGroup``; None on one rank, where the
        helpers that use it do not run)."""

    @property
    def reduce_group(self) -> dist.ProcessGroup:
        """The ranks that take part in each step's reduction."""

    @property
    def sparse_group(self) -> dist.ProcessGroup | None:
        """The sparse tables' group (None without tables)."""

    @property
    def relay_groups(self) -> tuple[Any, Any]:
        """The relays' request and job groups ((None, None) without remote hosts)."""

    @property
    def record(self) -> dict | None:
        """Tests: each job's loss and each step's gradients, when asked."""

    @property
    def job_log(self) -> list[tuple[int, int, int]]:
        """(epoch, step, trainer) of the jobs handled here."""

    @property
    def reducer(self) -> Any:
        """This epoch's step reducer (sync)."""

    @property
    def _module(self) -> GNN:
        """The model this rank trains (no DDP wrapper)."""

    @property
    def _sparse(self) -> list:
        """The model's embedding tables with sparse gradients."""

    @property
    def _optimizer(self) -> Any:
        """The optimizer of :attr:`_module`."""

    def sample(self, draw: Draw) -> MiniBatch:
        """The micro-batch of ``draw``."""

    def gather(self, mb: MiniBatch) -> Any:
        """``mb``'s input features on the device."""

    def host_gather(self, mb: MiniBatch) -> torch.Tensor:
        """``mb``'s input features in host memory."""

    def visited(self, input_nodes: torch.Tensor) -> None:
        """Counts a trained micro-batch's input nodes (footprint)."""

    def sampler_of(self, step: int, trainer: int) -> int:
        """The sampler rank that draws ``trainer``'s job of ``step``."""

    def ring_jobs(self, steps: int) -> HostJobs:
        """The shared queue's jobs of an epoch of ``steps`` steps, by host."""
