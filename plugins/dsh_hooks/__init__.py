"""Command hooks in Claude Code's protocol, on the agent loop's events.

YAML name ``hooks``; it injects ``agents`` (the owner of ``tool/before``,
``tool/after``, ``user/prompt``, ``turn/stop``, ``session/start`` and ``session/end``)
and reads hooks from its config and from Claude Code settings files. See this
package's README.
"""

from __future__ import annotations

from ._config import EVENTS, HookCommand, HookGroup, HooksConfig
from ._errors import HookSettingsError
from ._plugin import Hooks

plugin = Hooks

__all__ = [
    "EVENTS",
    "HookCommand",
    "HookGroup",
    "HookSettingsError",
    "Hooks",
    "HooksConfig",
    "plugin",
]
