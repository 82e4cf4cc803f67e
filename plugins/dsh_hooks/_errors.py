"""The errors of the ``hooks`` plugin."""

from __future__ import annotations

from dsh import DshError

__all__ = ["HookSettingsError"]


class HookSettingsError(DshError, ValueError):
    """The ``hooks`` of a Claude Code settings file cannot be used: the message names
    the file and the place (``hooks.PreToolUse[0].matcher``) and what is wrong."""

    code = "HOOK_SETTINGS"
