"""The ``fs-local`` plugin: sets the local backend on the ``fs`` seam."""

from __future__ import annotations

from dsh import Disposer, Plugin

from ._backend import LocalBackend
from ._config import FsLocalConfig
from ._fence import Fence

__all__ = ["FsLocal"]


class FsLocal(Plugin):
    """Serves the ``fs`` seam from the local filesystem, fenced by ``mode``."""

    name = "fs-local"
    Config = FsLocalConfig
    inject = ("fs",)

    config: FsLocalConfig
    #: The backend set on the seam (set by :meth:`setup`).
    backend: LocalBackend

    def setup(self) -> Disposer:
        self.backend = LocalBackend(Fence(self.config))
        registration: Disposer = self.ctx.fs.set_backend(self.backend)
        return registration
