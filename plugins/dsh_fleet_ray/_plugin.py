"""The ``fleet-ray`` plugin: the ``ray`` engine of ``dsh fleet run``."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

from dsh import Disposer, Plugin
from dsh_fleet import EngineOptions

from ._cluster import load_ray
from ._config import FleetRayConfig
from ._engine import RayEngine

__all__ = ["FleetRay"]


class FleetRay(Plugin):
    """Offers the ``ray`` engine to the fleet (``dsh fleet run --engine ray``)."""

    name = "fleet-ray"
    Config = FleetRayConfig
    inject = ("fleet",)

    def setup(self) -> Iterator[Disposer]:
        if importlib.util.find_spec("ray") is None:
            load_ray()  # raises, naming the extra to install
        yield self.ctx.fleet.register_engine("ray", self.engine)

    def engine(self, options: EngineOptions) -> RayEngine:
        """The engine of one run."""
        return RayEngine(options, self.config)
