"""The two memory tiers of offloaded training and the bytes that cross between them.

:class:`HostStore` keeps, per layer, the rows of this rank's masters and their gradients in
host memory (pinned when the device is a GPU). :class:`DeviceTier` is where chunks compute: on
a GPU the GPU; on a CPU host a separate set of buffers, so a copy between the tiers is an
explicit, counted copy either way. The tier tracks the bytes of the buffers it holds (and,
during a recompute, the tensors autograd saves) and their peak, to hold it to a budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class TransferStats:
    """Bytes and rows moved per tier since the last reset."""

    host_to_device: int = 0
    device_to_host: int = 0
    rank_to_rank: int = 0
    reused: int = 0              # bytes kept on the device instead of reloaded (intra)
    rows_loaded: int = 0         # vertex-data rows loaded from the host for neighbour sets
    rows_reused: int = 0
    rows_intermediate: int = 0   # cached aggregates and destination rows loaded back
    recompute_seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def reset(self) -> None:
        """Zero the counters."""
        self.__init__()


class HostStore:
    """Per-layer host buffers: ``rows[k]`` (k = 0..L, 0 = features) and ``grads[k]``
    (k = 1..L) of this rank's masters, in masters order."""

    def __init__(self, features: torch.Tensor, widths: list[int], pin: bool) -> None:
        n = features.shape[0]
        alloc = (lambda *s: torch.empty(*s).pin_memory()) if pin else torch.empty
        self.rows = [features.pin_memory() if pin else features.contiguous()]
        self.rows += [alloc(n, w) for w in widths[1:]]
        self.grads: list[torch.Tensor | None] = [None] + [alloc(n, w) for w in widths[1:]]

    def zero_grads(self) -> None:
        """Zero every layer's host gradient buffer."""
        for g in self.grads[1:]:
            g.zero_()

    @property
    def nbytes(self) -> int:
        """Bytes of the host buffers."""
        ts = self.rows + [g for g in self.grads if g is not None]
        return sum(t.numel() * t.element_size() for t in ts)


class DeviceTier:
    """Counted copies between host and device and the device bytes held (with their peak)."""

    def __init__(self, device: torch.device, stats: TransferStats) -> None:
        self.device, self.stats = device, stats
        self.live = 0
        self.peak = 0
        self._held: dict[str, int] = {}

    # -- what the tier holds ---------------------------------------------------------------
    def hold(self, name: str, t: torch.Tensor | None) -> torch.Tensor | None:
        """Account ``t`` as the device buffer ``name`` (replacing what that name held)."""
        self.release(name)
        if t is not None:
            self._held[name] = t.numel() * t.element_size()
            self.live += self._held[name]
            self.peak = max(self.peak, self.live)
        return t

    def release(self, *names: str) -> None:
        """Drop the named device buffers."""
        for name in names:
            self.live -= self._held.pop(name, 0)

    def release_all(self) -> None:
        """Drop every device buffer."""
        self._held.clear()
        self.live = 0

    def transient(self, nbytes: int) -> None:
        """Bytes held only for a moment on top of the buffers (autograd's saved tensors)."""
        self.peak = max(self.peak, self.live + nbytes)

    def reset_peak(self) -> None:
        """Start a new peak from the bytes held now."""
        self.peak = self.live

    # -- copies between the tiers ----------------------------------------------------------
    def load(self, host: torch.Tensor, rows: torch.Tensor, vertex_rows: bool = True
             ) -> torch.Tensor:
        """``host[rows]`` copied to the device (counted)."""
        t = host.index_select(0, rows)
        nbytes = t.numel() * t.element_size()
        self.stats.host_to_device += nbytes
        if vertex_rows:
            self.stats.rows_loaded += rows.numel()
        else:
            self.stats.rows_intermediate += rows.numel()
        # on a CPU host ``t`` (a fresh gather) is already the device tier's own copy
        return t if self.device.type == "cpu" else t.to(self.device, non_blocking=True)

    def store(self, host: torch.Tensor, rows: torch.Tensor, t: torch.Tensor,
              accumulate: bool = False) -> None:
        """Device rows ``t`` written (or, ``accumulate``, added) to ``host[rows]`` (counted)."""
        self.stats.device_to_host += t.numel() * t.element_size()
        t = t.detach().to("cpu")
        if accumulate:
            host.index_add_(0, rows, t)
        else:
            host[rows] = t
