"""What a strategy asks of its compute device beyond tensors: the allocator's peak and a
barrier before reading a clock. On a CPU there is no device allocator and nothing runs
asynchronously, so these are None and no-ops there.
"""

from __future__ import annotations

import torch


def allocator_peak(device: torch.device) -> int | None:
    """Peak bytes the device's allocator handed out since the last reset (CUDA), else None."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return None


def reset_allocator_peak(device: torch.device) -> None:
    """Start a new allocator peak from the bytes allocated now (CUDA; no-op elsewhere)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA), so a clock read after it times that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
