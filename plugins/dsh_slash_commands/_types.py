"""The shapes of the slash-command registry: a command, one invocation of it, errors."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from dsh import DshError, DuplicateNameError

__all__ = [
    "COMMAND_NAME",
    "DuplicateSlashCommandError",
    "SlashCommand",
    "SlashCommandError",
    "SlashInvocation",
    "split_command",
]

#: What a command name matches (without its leading ``/``): a letter or digit, then
#: letters, digits, ``_``, ``-``, ``.`` and ``:`` (a namespace), 64 characters at most.
COMMAND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")

_LINE = re.compile(r"/([A-Za-z0-9][A-Za-z0-9_.:-]{0,63})(?:\s+(.*))?", re.DOTALL)


class SlashCommandError(DshError, ValueError):
    """A slash command cannot be registered: a bad name, a duplicate, a wrong type."""

    code = "SLASH_COMMAND"


class DuplicateSlashCommandError(SlashCommandError, DuplicateNameError):
    """The command name is taken; ``holder`` registered it, ``claimant`` asked too."""


@dataclass(eq=False)
class SlashInvocation:
    """What a command's ``run`` receives: one use of the command in one front-end.

    ``arguments`` is the text after the name (surrounding whitespace removed), ``agent``
    the agent the user talks to. ``reply(text)`` shows text to the user only (the
    terminal's stdout, an ACP ``agent_message_chunk``); ``await send(text)`` sends text
    as the user's message (one turn of ``agent``) and returns once that turn ended.
    ``switch(agent)`` makes the front-end talk to another agent from now on (``None``
    where the front-end cannot: ACP binds a session to its agent). ``frontend`` names
    the front-end (``"terminal"``, ``"acp"``).
    """

    command: SlashCommand
    arguments: str
    agent: Any
    reply: Callable[[str], None]
    send: Callable[[str], Awaitable[None]]
    frontend: str
    switch: Callable[[Any], None] | None = None


@dataclass(eq=False)
class SlashCommand:
    """A ``/name`` the user can type: ``description`` and ``argument_hint`` (e.g.
    ``[NAME]``; empty when it takes none) are what the lists show; ``run`` is
    ``async (SlashInvocation) -> None``."""

    name: str
    description: str
    argument_hint: str = ""
    #: Required (the default only lets ``argument_hint`` come before it positionally,
    #: as in ``SlashCommand(name, description, argument_hint, run)``): registering a
    #: command without one is refused.
    run: Callable[[SlashInvocation], Awaitable[None]] | None = None


def split_command(text: str) -> tuple[str, str] | None:
    """``("name", "the rest")`` for text that starts with ``/``, a command name, then
    whitespace or nothing (the rest with its surrounding whitespace removed); None for
    any other text (a path such as ``/tmp/x`` included)."""
    match = _LINE.fullmatch(text)
    if match is None:
        return None
    return match[1], (match[2] or "").strip()
