"""Hardware profiles (``configs/hardware/<name>.yaml``): what a testbed's devices compute and
how fast its links move bytes. Loaded with every field checked; unknown fields refused."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from gnnscale.paths import CONFIGS

HARDWARE_DIR = CONFIGS / "hardware"


class ProfileError(ValueError):
    """A hardware profile that is missing, malformed or physically impossible."""


@dataclass(frozen=True)
class HardwareProfile:
    """One testbed. Bandwidths in bytes/s per device (``network_Bps`` per node, shared by its
    devices); ``compute_flops`` is the dense FLOP/s a GNN update reaches, ``memory_Bps`` the
    device memory bandwidth that bounds the (memory-bound) sparse aggregation."""

    name: str
    device: str  # "gpu" or "cpu" (a CPU rank: host_to_device is a memory copy)
    nodes: int
    devices_per_node: int
    compute_flops: float
    memory_Bps: float
    memory_bytes: float
    host_to_device_Bps: float
    sample_edges_per_s: float  # neighbour sampling throughput of one device
    peer_Bps: float | None = None  # direct device-device link (NVLink); None: via host links
    network_Bps: float | None = None  # per node; None for a single node
    source: str = ""  # where the figures come from

    @property
    def devices(self) -> int:
        """Devices in the testbed (``nodes * devices_per_node``)."""
        return self.nodes * self.devices_per_node


_POSITIVE = ("compute_flops", "memory_Bps", "memory_bytes", "host_to_device_Bps",
             "sample_edges_per_s")


def validate(raw: dict[str, Any], where: str) -> HardwareProfile:
    """The profile in ``raw`` (from ``where``), or :class:`ProfileError` naming the field."""
    known = {f.name for f in fields(HardwareProfile)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ProfileError(f"{where}: unknown field(s) {unknown}; known: {sorted(known)}")
    required = {f.name for f in fields(HardwareProfile) if f.default is MISSING}
    missing = sorted(k for k in required if k not in raw)
    if missing:
        raise ProfileError(f"{where}: missing field(s) {missing}")
    if raw["device"] not in ("gpu", "cpu"):
        raise ProfileError(f"{where}: device must be gpu or cpu, got {raw['device']!r}")
    for key in ("nodes", "devices_per_node"):
        if not isinstance(raw[key], int) or raw[key] < 1:
            raise ProfileError(f"{where}: {key} must be an integer >= 1, got {raw[key]!r}")
    raw = dict(raw)
    for key in (*_POSITIVE, "peer_Bps", "network_Bps"):
        v = raw.get(key)
        if isinstance(v, str):  # YAML 1.1 reads 3.2e12 (no exponent sign) as a string
            try:
                v = raw[key] = float(v)
            except ValueError:
                pass
        if v is None and key in ("peer_Bps", "network_Bps"):
            continue
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
            raise ProfileError(f"{where}: {key} must be a positive number, got {v!r}")
    if raw["nodes"] > 1 and raw.get("network_Bps") is None:
        raise ProfileError(f"{where}: {raw['nodes']} nodes need network_Bps")
    values: dict[str, Any] = {k: (float(v) if k in (*_POSITIVE, "peer_Bps", "network_Bps")
                                  and v is not None else v) for k, v in raw.items()}
    return HardwareProfile(**values)


def load_profile(name_or_path: str | Path) -> HardwareProfile:
    """``configs/hardware/<name>.yaml`` or a path to a yaml file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = HARDWARE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        have = sorted(p.stem for p in HARDWARE_DIR.glob("*.yaml"))
        raise ProfileError(f"no hardware profile {name_or_path!r} ({path}); have {have}")
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: expected a mapping of fields")
    return validate(raw, str(path))


def all_profiles() -> dict[str, HardwareProfile]:
    """Every profile shipped in ``configs/hardware``."""
    return {p.stem: load_profile(p) for p in sorted(HARDWARE_DIR.glob("*.yaml"))}
