"""How a run reports its turns in plain text: the exit status a turn's end maps to,
the stderr line describing that end, the todo list as a checklist and the one-line
previews of tool calls (both the line REPL and the terminal chat use them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "CHECKS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "checklist",
    "compact",
    "describe_end",
    "exit_status",
]

#: The turn completed (or stopped at the token limit); the REPL ended with ``/exit``
#: or at end of input.
EXIT_OK = 0
#: The turn failed (``error``, ``blocked``, or it never ran); no agent to talk to.
EXIT_FAILED = 1
#: Ctrl-C: the one-shot turn was cancelled (``aborted``), or Ctrl-C twice in a row.
EXIT_INTERRUPTED = 130


def exit_status(reason: Mapping[str, Any] | None) -> int:
    """The exit status of a one-shot run whose turn ended with ``reason``.

    ``completed`` and ``max-tokens`` are success (the answer was written; a truncated
    one is flagged on stderr); ``aborted`` is :data:`EXIT_INTERRUPTED`; ``error``,
    ``blocked``, any other kind and a turn that never ran (``None``) are
    :data:`EXIT_FAILED`.
    """
    kind = None if reason is None else reason.get("kind")
    if kind in ("completed", "max-tokens"):
        return EXIT_OK
    if kind == "aborted":
        return EXIT_INTERRUPTED
    return EXIT_FAILED


#: The turn-limit codes of a ``turn/end`` reason, and the config key of each limit.
_LIMITS = {"MAX_STEPS": "max_steps", "USAGE_LIMIT": "max_turn_tokens"}


def describe_end(reason: Mapping[str, Any]) -> str | None:
    """The stderr line reporting a turn end, or None for ``completed``."""
    kind = reason.get("kind")
    message = reason.get("message")
    if kind == "completed":
        return None
    if kind == "aborted":
        return f"[aborted] the turn was cancelled ({reason.get('reason', 'user')})"
    if kind == "error":
        code = reason.get("code")
        limit = _LIMITS.get(str(code))
        hint = f"; the agent config's {limit} sets it" if limit else ""
        return f"[error] {message} (code {code}{hint})"
    if kind == "blocked":
        return f"[blocked] {message}"
    if kind == "max-tokens":
        return "[max-tokens] the answer stopped at the model's token limit"
    return f"[{kind}] {message or 'the turn ended'}"


#: How a checklist line marks a task's status.
CHECKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


def checklist(todos: list[Mapping[str, Any]]) -> str:
    """The lines a ``todo/write`` list is shown as: a ``[todo]`` header, then one
    ``[x]``/``[>]``/``[ ]`` line per task."""
    if not todos:
        return "[todo] (empty list)"
    done = sum(todo["status"] == "completed" for todo in todos)
    lines = [f"[todo] {done}/{len(todos)} completed"]
    lines.extend(f"  {CHECKS.get(todo['status'], '[?]')} {todo['content']}" for todo in todos)
    return "\n".join(lines)


def compact(text: str, limit: int) -> str:
    """``text`` on one line (whitespace folded), cut to ``limit`` characters with ``…``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
