"""Hot reload: a change to the deployment file or a file plugin reloads what changed.

YAML name ``hot-reload`` (extra ``watch``: ``watchfiles``); ``dsh run --watch`` starts
it too. See this package's README.
"""

from __future__ import annotations

from ._service import (
    HotReload,
    HotReloadConfig,
    HotReloadError,
    HotReloadSpecs,
    ReloadReport,
    watch,
)
from ._steps import StepGate, Steps

plugin = HotReload

__all__ = [
    "HotReload",
    "HotReloadConfig",
    "HotReloadError",
    "HotReloadSpecs",
    "ReloadReport",
    "StepGate",
    "Steps",
    "plugin",
    "watch",
]
