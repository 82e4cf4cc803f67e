"""The local bash executor: ``bash -c`` in a process group of its own, on this machine.

YAML name ``bash-local``; it injects the ``bash`` seam and sets itself as its executor.
With ``sandbox`` on, each command runs in the ``sandbox`` service's sandbox; off (the
default), it confines nothing: see this package's README and tool-bash's "Security".
"""

from __future__ import annotations

from ._config import DEFAULT_SCRUB, LocalBashConfig, SandboxMode, default_writable_roots
from ._executor import FIXED_ENV, LocalExecutor
from ._plugin import LocalBash

plugin = LocalBash

__all__ = [
    "DEFAULT_SCRUB",
    "FIXED_ENV",
    "LocalBash",
    "LocalBashConfig",
    "LocalExecutor",
    "SandboxMode",
    "default_writable_roots",
    "plugin",
]
