"""Facts of this host that ``/proc`` says (Linux): its memory. Torch-free, on the bottom floor,
so the partitioner's memory check, the cache's budget and the launcher's watch of its ranks
read ``/proc/meminfo`` one way."""

from __future__ import annotations


def meminfo(*keys: str) -> dict[str, int]:
    """Bytes of each of ``keys`` (``MemTotal``, ``MemAvailable``, ...) in ``/proc/meminfo``;
    a key it does not hold, or a host without it, is left out."""
    out: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in keys:
                    out[key] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return out
    return out
