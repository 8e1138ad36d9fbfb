"""The two memory tiers of offloaded training and the bytes that cross between them.

:class:`HostStore` keeps, per layer, the rows of this rank's masters and their gradients in
host memory (pinned when the device is a GPU). :class:`DeviceTier` is where chunks compute: on
a GPU the GPU; on a CPU host a separate set of buffers, so a copy between the tiers is an
explicit, counted (and timed) copy either way.

The tier measures the device memory it holds: it keeps the named buffers it holds and a weak
reference to every tensor it loads, holds or is shown (the tensors autograd saves while a chunk
recomputes), and at each moment memory can peak (a buffer taken, a chunk's recompute before
its backward) sums the bytes of the distinct storages of those still alive: a tensor some
Python name still references counts until it is freed, a view counts its whole storage once.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from gnnscale.distributed import device as device_seam
from gnnscale.sampling.base import TypedInputs


@dataclass
class TransferStats:
    """Bytes, rows and seconds moved per tier since the last reset."""

    host_to_device: int = 0
    device_to_host: int = 0
    rank_to_rank: int = 0
    reused: int = 0              # bytes kept on the device instead of reloaded (intra)
    rows_loaded: int = 0         # vertex-data rows loaded from the host for neighbour sets
    rows_reused: int = 0
    rows_intermediate: int = 0   # cached aggregates and destination rows loaded back
    edge_features: int = 0       # edge feature bytes the chunks' blocks brought
    #: a typed graph's raw feature bytes per node type loaded to the device (in host_to_device)
    typed_features: dict = field(default_factory=dict)
    recompute_seconds: float = 0.0
    h2d_seconds: float = 0.0     # in host-to-device copies
    d2h_seconds: float = 0.0     # in device-to-host copies
    reuse_seconds: float = 0.0   # in copies of reused rows on the device
    extra: dict = field(default_factory=dict)

    def reset(self) -> None:
        """Zero the counters."""
        self.__init__()


class HostStore:
    """Per-layer host buffers: ``rows[k]`` (k = 0..L, 0 = layer 0's input rows: the features,
    or a typed graph's encoded rows) and ``grads[k]`` (k = 1..L; k = 0 too with
    ``input_grads``: the gradient of trained encoded rows) of this rank's masters, in masters
    order. Allocated zeroed, so the first epoch does not pay the first touch of their pages (it
    would skew the probed copy rates)."""

    def __init__(self, features: torch.Tensor, widths: list[int], device: torch.device,
                 input_grads: bool = False) -> None:
        n = features.shape[0]

        def alloc(rows: int, width: int) -> torch.Tensor:  # pinned when it feeds a GPU
            return device_seam.host_empty((rows, width), device).zero_()

        self.rows = [device_seam.pinned(features, device)]
        self.rows += [alloc(n, w) for w in widths[1:]]
        self.grads: list[torch.Tensor | None] = [alloc(n, widths[0]) if input_grads else None]
        self.grads += [alloc(n, w) for w in widths[1:]]

    def zero_grads(self) -> None:
        """Zero every layer's host gradient buffer."""
        for g in self.grads:
            if g is not None:
                g.zero_()

    @property
    def nbytes(self) -> int:
        """Bytes of the host buffers."""
        ts = self.rows + [g for g in self.grads if g is not None]
        return sum(t.numel() * t.element_size() for t in ts)


def _input_tensors(inputs: TypedInputs) -> list[torch.Tensor]:
    """The tensors of typed inputs: ids, types, type-local ids, each type's features."""
    return [inputs.ids, inputs.node_type, inputs.local, *inputs.features.values()]


def _storages(t: torch.Tensor) -> list[torch.Tensor]:
    """The strided tensors holding ``t``'s memory (a sparse matrix: its index and values)."""
    if t.layout == torch.sparse_csr:
        return [t.crow_indices(), t.col_indices(), t.values()]
    if t.layout == torch.sparse_coo:
        return [t._indices(), t._values()]
    return [t]


def storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (each storage once, whole)."""
    seen: set[int] = set()
    total = 0
    for t in tensors:
        for part in _storages(t):
            st = part.untyped_storage()
            ptr = st.data_ptr()
            if ptr and ptr not in seen:
                seen.add(ptr)
                total += st.nbytes()
    return total


class DeviceTier:
    """Counted, timed copies between host and device, and the device bytes alive (measured,
    with their peak)."""

    def __init__(self, device: torch.device, stats: TransferStats) -> None:
        self.device, self.stats = device, stats
        self.peak = 0
        self._held: dict[str, torch.Tensor] = {}
        #: every tracked tensor still alive, once each (by id; an entry leaves when its tensor
        #: dies): a tensor tracked again (a parameter autograd saves, a block's index reused
        #: every batch) is not a new entry, so the work of a measurement does not grow with
        #: the epochs run
        self._seen: weakref.WeakValueDictionary[int, torch.Tensor] = \
            weakref.WeakValueDictionary()

    # -- what the tier holds ---------------------------------------------------------------
    def hold(self, name: str, t: torch.Tensor | None, track: bool = True
             ) -> torch.Tensor | None:
        """Keep ``t`` as the device buffer ``name`` (replacing what that name held) and
        measure. ``track=False``: count ``t`` only while the tier holds it (a tensor that
        lives on in host memory and serves the device in place, as a chunk's cached
        matrices on a CPU host)."""
        self.release(name)
        if t is not None:
            self._held[name] = t
            if track:
                self.track(t)
            self.measure()
        return t

    def release(self, *names: str) -> None:
        """Drop the tier's reference to the named device buffers."""
        for name in names:
            self._held.pop(name, None)

    def release_all(self) -> None:
        """Drop every device buffer the tier references."""
        self._held.clear()

    def track(self, *ts: torch.Tensor | None) -> None:
        """Count ``ts`` as device memory for as long as they are alive."""
        for t in ts:
            if t is not None:
                self._seen[id(t)] = t

    def alive(self) -> list[torch.Tensor]:
        """The tracked tensors still alive, each once, and the held buffers."""
        return list(self._seen.values()) + list(self._held.values())

    def live_bytes(self) -> int:
        """Bytes of the distinct storages of the device tensors alive now."""
        return storage_bytes(self.alive())

    def measure(self, *extra: torch.Tensor) -> int:
        """The live device bytes now (with ``extra`` tensors shown to the tier), into the
        peak."""
        self.track(*extra)
        live = self.live_bytes()
        self.peak = max(self.peak, live)
        return live

    def reset_peak(self) -> None:
        """Start a new peak from the bytes alive now."""
        self.peak = self.live_bytes()

    # -- copies between the tiers ----------------------------------------------------------
    def load(self, host: torch.Tensor, rows: torch.Tensor, vertex_rows: bool = True
             ) -> torch.Tensor:
        """``host[rows]`` copied to the device (counted, timed, tracked)."""
        t0 = time.perf_counter()
        t = host.index_select(0, rows)
        nbytes = t.numel() * t.element_size()
        # on a CPU host ``t`` (a fresh gather) is already the device tier's own copy
        if device_seam.is_accelerator(self.device):
            t = device_seam.to_device(t, self.device)
            device_seam.synchronize(self.device)
        self.stats.h2d_seconds += time.perf_counter() - t0
        self.stats.host_to_device += nbytes
        if vertex_rows:
            self.stats.rows_loaded += rows.numel()
        else:
            self.stats.rows_intermediate += rows.numel()
        self.track(t)
        return t

    def load_inputs(self, inputs: TypedInputs) -> TypedInputs:
        """A typed graph's raw input rows (read from the host tables) copied to the device
        (counted and timed as host-to-device bytes, tracked; not vertex rows of a neighbour
        set)."""
        t0 = time.perf_counter()
        nbytes = sum(t.numel() * t.element_size() for t in _input_tensors(inputs))
        if device_seam.is_accelerator(self.device):
            inputs = inputs.to(self.device)
            device_seam.synchronize(self.device)
        self.stats.h2d_seconds += time.perf_counter() - t0
        self.stats.host_to_device += nbytes
        for t, x in inputs.features.items():
            self.stats.typed_features[t] = (self.stats.typed_features.get(t, 0)
                                            + x.numel() * x.element_size())
        self.track(*_input_tensors(inputs))
        return inputs

    def copy_rows(self, dst: torch.Tensor, dst_rows: torch.Tensor, src: torch.Tensor,
                  src_rows: torch.Tensor) -> None:
        """``dst[dst_rows] = src[src_rows]`` on the device (rows reused in place; timed)."""
        t0 = time.perf_counter()
        dst[dst_rows.to(self.device)] = src[src_rows.to(self.device)]
        device_seam.synchronize(self.device)
        self.stats.reuse_seconds += time.perf_counter() - t0
        self.stats.reused += src_rows.numel() * dst.shape[1] * dst.element_size()
        self.stats.rows_reused += src_rows.numel()

    def store(self, host: torch.Tensor, rows: torch.Tensor, t: torch.Tensor,
              accumulate: bool = False) -> None:
        """Device rows ``t`` written (or, ``accumulate``, added) to ``host[rows]`` (counted,
        timed)."""
        t0 = time.perf_counter()
        self.stats.device_to_host += t.numel() * t.element_size()
        t = t.detach().to("cpu")
        if accumulate:
            host.index_add_(0, rows, t)
        else:
            host[rows] = t
        self.stats.d2h_seconds += time.perf_counter() - t0
