"""The local filesystem behind the ``fs`` seam, fenced by a mode and ``deny_read``.

YAML name ``fs-local`` (injects ``fs``). See this package's README for the contract.
"""

from __future__ import annotations

from ._backend import INLINE_READ, LocalBackend
from ._config import DEFAULT_DENY_READ, FsLocalConfig, Mode
from ._fence import Fence
from ._plugin import FsLocal

plugin = FsLocal

__all__ = [
    "DEFAULT_DENY_READ",
    "INLINE_READ",
    "Fence",
    "FsLocal",
    "FsLocalConfig",
    "LocalBackend",
    "Mode",
    "plugin",
]
