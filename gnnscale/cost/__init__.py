"""Cost model: project the volumes a run measured onto a hardware profile (modelled)."""

from __future__ import annotations

from gnnscale.compare.runs import Run
from gnnscale.cost.model import Projection, ProjectionError, project
from gnnscale.cost.profile import HardwareProfile, ProfileError, all_profiles, load_profile
from gnnscale.cost.volumes import Volumes, volumes_of_run

__all__ = ["HardwareProfile", "ProfileError", "Projection", "ProjectionError", "Volumes",
           "all_profiles", "load_profile", "project", "project_run", "volumes_of_run"]


def project_run(run: Run, profile: HardwareProfile) -> Projection:
    """The modelled epoch time of a finished run (:class:`gnnscale.compare.Run`) on ``profile``."""
    return project(volumes_of_run(run), profile)
