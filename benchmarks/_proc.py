"""What the memory suites' child processes read of themselves (``/proc/self/status``)."""

from __future__ import annotations


def status() -> dict[str, int]:
    """This process's ``VmRSS``, ``VmHWM`` (peak RSS) and ``RssAnon``, in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon"):
                out[k] = int(v.split()[0]) * 1024
    return out
