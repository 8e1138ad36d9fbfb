"""Where the shared queue's rings live when the ranks span several hosts, and who feeds them.

A ring lives in one host's shared memory, so each host that has trainers holds its own ring
(a *ring host*), serving the job slots of its own trainers: with m jobs per trainer
(``strategy.jobs_per_trainer``) a step has J = m * T job slots, slot ``j`` belongs to trainer
``j mod T``, job ``(step, slot)`` goes to the ring of that trainer's host, and any trainer of
that host takes it. A ring is fed
by the samplers of its host (they claim its next job themselves), and over the network by
samplers elsewhere when the host has none (or by samplers on hosts without trainers, which
have no ring of their own): a *relay* thread of the ring host's first rank claims jobs for
them, asks each for the ones it claimed and puts what comes back into the ring
(:mod:`~gnnscale.strategies.factored.relay`). On one host this is one ring, fed by every
sampler, with no relay.

:class:`HostJobs` numbers a ring's jobs: ``(epoch * steps + step) * len(slots) + i`` for
job slot ``slots[i]``, so a ring's jobs are consecutive whatever the slots.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class HostJobs:
    """The job numbers of one ring: the job slots it serves (ascending) and the epoch's
    steps."""

    slots: tuple[int, ...]
    steps: int

    @property
    def per_step(self) -> int:
        """Jobs of one step in this ring."""
        return len(self.slots)

    def base(self, epoch: int) -> int:
        """The number of the epoch's first job."""
        return epoch * self.steps * self.per_step

    def end(self, epoch: int) -> int:
        """One past the number of the epoch's last job."""
        return self.base(epoch + 1)

    def step_of(self, number: int, epoch: int) -> int:
        """The step of job ``number`` of ``epoch``."""
        return (number - self.base(epoch)) // self.per_step

    def locate(self, number: int, epoch: int) -> tuple[int, int]:
        """``(step, job slot)`` of job ``number`` of ``epoch``."""
        step, i = divmod(number - self.base(epoch), self.per_step)
        return step, self.slots[i]


@dataclass(frozen=True)
class HostPlan:
    """Rings and feeders of a run: per ring host (named by its first rank) the job slots
    its ring serves, its samplers, and the samplers elsewhere that its relay asks."""

    host_of: tuple[int, ...]                 # rank -> its host's first rank
    slots: dict[int, tuple[int, ...]]        # ring host -> job slots it serves
    local: dict[int, tuple[int, ...]]        # ring host -> its own samplers
    remote: dict[int, tuple[int, ...]] = field(default_factory=dict)  # ring host -> relay's

    @staticmethod
    def build(host_of: list[int], trainers: int, per_trainer: int = 1) -> HostPlan:
        """The plan for ranks on hosts ``host_of`` (rank -> host's first rank; hosts hold
        consecutive ranks) whose first ``trainers`` ranks train, ``per_trainer`` jobs each per
        step (job slot ``j`` is trainer ``j mod trainers``'s)."""
        world = len(host_of)
        samplers = range(trainers, world)
        rings = sorted({host_of[t] for t in range(trainers)})
        slots = {h: tuple(j for j in range(trainers * per_trainer)
                          if host_of[j % trainers] == h) for h in rings}
        local = {h: tuple(s for s in samplers if host_of[s] == h) for h in rings}
        spare = tuple(s for s in samplers if host_of[s] not in slots)  # hosts without a ring
        remote = {}
        for h in rings:
            # a host without samplers is fed by every sampler elsewhere; samplers of hosts
            # without trainers feed every ring
            feeders = spare if local[h] and spare else \
                tuple(s for s in samplers if host_of[s] != h) if not local[h] else ()
            if feeders:
                remote[h] = feeders
        return HostPlan(tuple(host_of), slots, local, remote)

    @property
    def hosts(self) -> int:
        """How many hosts the ranks span."""
        return len(set(self.host_of))

    def ring_of(self, rank: int) -> int | None:
        """The ring host whose ring ``rank`` opens (its own host's), None on a host without
        trainers."""
        h = self.host_of[rank]
        return h if h in self.slots else None

    def jobs(self, ring: int, steps: int) -> HostJobs:
        """The numbering of ring ``ring``'s jobs in an epoch of ``steps`` steps."""
        return HostJobs(self.slots[ring], steps)

    def relays_fed_by(self, sampler: int) -> tuple[int, ...]:
        """The ring hosts (= their relays' ranks) that ask ``sampler`` for jobs."""
        return tuple(h for h, feeders in self.remote.items() if sampler in feeders)
