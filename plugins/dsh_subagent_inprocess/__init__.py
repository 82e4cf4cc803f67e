"""The in-process subagent driver: a library the ``spawn`` and ``fork`` providers share.

It has no YAML entry: a child runs as an agent of this process, owned by its parent's
scope. See this package's README.
"""

from __future__ import annotations

from ._driver import (
    DESCRIPTOR_EVENT,
    InProcessProvider,
    completed_turns,
    provider_plugin,
    result_of,
    start_in_process,
)

__all__ = [
    "DESCRIPTOR_EVENT",
    "InProcessProvider",
    "completed_turns",
    "provider_plugin",
    "result_of",
    "start_in_process",
]
