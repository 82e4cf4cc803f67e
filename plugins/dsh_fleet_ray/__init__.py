"""Ray for the fleet: ``dsh fleet run --engine ray`` runs sessions on a pool of Ray
actors, each with the deployment loaded once.

YAML name ``fleet-ray``; plugin ``FleetRay`` (needs the ``fleet`` service and the
``ray`` extra). See the README.
"""

from __future__ import annotations

from ._cluster import LOOPBACK_ENV, connected, is_loopback, load_ray
from ._config import FleetRayConfig
from ._engine import RayEngine
from ._plugin import FleetRay
from ._worker import FleetWorker

plugin = FleetRay

__all__ = [
    "LOOPBACK_ENV",
    "FleetRay",
    "FleetRayConfig",
    "FleetWorker",
    "RayEngine",
    "connected",
    "is_loopback",
    "load_ray",
    "plugin",
]
