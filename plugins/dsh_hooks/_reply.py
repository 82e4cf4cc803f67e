"""What one hook answered, read from its exit status and output (Claude Code's rules)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._runner import Outcome

__all__ = ["Reply", "read_reply"]


@dataclass(frozen=True)
class Reply:
    """One hook's answer.

    ``block`` is the reason of a blocking answer (exit 2 with its stderr, or
    ``decision: "block"`` with its ``reason``); ``permission`` and ``permission_reason``
    come from ``hookSpecificOutput.permissionDecision``/``permissionDecisionReason``;
    ``updated_input`` from ``updatedInput``; ``context`` is ``additionalContext``, or
    plain stdout where the event takes it; ``stop`` is the ``stopReason`` of
    ``continue: false`` (``""`` when it gives none, None without it); ``warning`` what
    the user is shown (a failed hook, or a ``systemMessage``).
    """

    block: str | None = None
    permission: str | None = None
    permission_reason: str = ""
    updated_input: Mapping[str, Any] | None = None
    context: str = ""
    stop: str | None = None
    warning: str | None = None


def read_reply(command: str, outcome: Outcome, *, plain_context: bool) -> Reply:
    """The reply of the hook ``command`` that ended as ``outcome``. ``plain_context``:
    stdout that is not a JSON object is context (``UserPromptSubmit``, ``SessionStart``)."""
    if outcome.failure is not None:
        return Reply(warning=f"hook {command!r} {outcome.failure}")
    if outcome.exit_code == 2:
        reason = outcome.stderr.strip() or f"hook {command!r} exited with status 2"
        return Reply(block=reason)
    if outcome.exit_code != 0:
        said = outcome.stderr.strip() or outcome.stdout.strip()
        tail = f": {said}" if said else ""
        return Reply(warning=f"hook {command!r} failed with exit status {outcome.exit_code}{tail}")
    data = _json_object(outcome.stdout)
    if data is None:
        text = outcome.stdout.strip()
        return Reply(context=text if plain_context else "")
    return _from_json(data)


def _json_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _from_json(data: Mapping[str, Any]) -> Reply:
    specific = data.get("hookSpecificOutput")
    if not isinstance(specific, Mapping):
        specific = {}
    permission = specific.get("permissionDecision")
    legacy = data.get("decision")
    reason = _text(data.get("reason"))
    block = (reason or "blocked by a hook") if legacy == "block" else None
    if permission not in ("allow", "deny", "ask"):
        # The older PreToolUse answer: decision "approve" (or "block", read above).
        permission = "allow" if legacy == "approve" else None
    permission_reason = _text(specific.get("permissionDecisionReason")) or (
        reason if legacy == "approve" else ""
    )
    updated = specific.get("updatedInput")
    stop = None
    if data.get("continue") is False:
        stop = _text(data.get("stopReason"))
    message = _text(data.get("systemMessage"))
    return Reply(
        block=block,
        permission=permission,
        permission_reason=permission_reason,
        updated_input=updated if isinstance(updated, Mapping) else None,
        context=_text(specific.get("additionalContext")).strip(),
        stop=stop,
        warning=message or None,
    )
