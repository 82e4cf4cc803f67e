"""The config of ``hooks``: command hooks by event, in the shape of Claude Code's settings."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["EVENTS", "HookCommand", "HookGroup", "HooksConfig", "compile_matcher"]

#: The Claude Code hook events this plugin runs, in the order a turn meets them.
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SessionEnd",
)

EventName = Literal[
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"
]


def compile_matcher(matcher: str) -> re.Pattern[str] | None:
    """The regex of a matcher (``fullmatch``-ed against a name), or None for one that
    matches everything (empty or ``*``). Raises ``re.error`` for an invalid regex."""
    if matcher in ("", "*"):
        return None
    return re.compile(matcher)


class HookCommand(BaseModel):
    """One hook: a shell command run with the event's JSON on stdin."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["command"] = "command"
    #: The command line, run as ``bash -c <command>`` in the project directory.
    command: str = Field(min_length=1)
    #: Seconds before its process group is killed (default: the plugin's ``timeout``).
    timeout: float | None = Field(default=None, gt=0)


class HookGroup(BaseModel):
    """The hooks one matcher selects."""

    model_config = ConfigDict(extra="forbid")

    #: A regex on the Claude Code tool name (``Bash``, ``Edit|Write``, ``mcp__.*``) for
    #: ``PreToolUse``/``PostToolUse``, on the source (``startup``, ``resume``) for
    #: ``SessionStart``; empty or ``*``: every one. Other events ignore it.
    matcher: str = ""
    hooks: list[HookCommand]

    @field_validator("matcher")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            compile_matcher(value)
        except re.error as exc:
            raise ValueError(f"matcher {value!r} is not a valid regex: {exc}") from None
        return value


class HooksConfig(BaseModel):
    """Config of the ``hooks`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: The hooks of each event, as under ``hooks`` in a Claude Code settings file.
    hooks: dict[EventName, list[HookGroup]] = Field(default_factory=dict)
    #: Also run the hooks of ``.claude/settings.json``, ``.claude/settings.local.json``
    #: (from the project directory up) and ``~/.claude/settings.json``.
    claude_settings: bool = True
    #: The project directory: hooks run there and see it as ``CLAUDE_PROJECT_DIR``
    #: (default: the process's working directory when the plugin loads).
    project_dir: str | None = None
    #: Seconds a hook may run when it sets no ``timeout``.
    timeout: float = Field(default=60.0, gt=0)
