"""``HookDecision``: what a listener of ``tool/before`` or ``user/prompt`` answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsh import DshError

__all__ = ["HookDecision", "HookDecisionError"]

#: The values :attr:`HookDecision.decision` may take.
_DECISIONS = ("allow", "deny", "ask", None)


class HookDecisionError(DshError, ValueError):
    """A :class:`HookDecision` was made with a decision, reason, arguments or context
    of the wrong kind; the message names the field and the value."""

    code = "HOOK_DECISION"


@dataclass(frozen=True)
class HookDecision:
    """A listener's answer about a tool call (``tool/before``) or a user message
    (``user/prompt``).

    ``decision``: ``"allow"`` (run the call; the tool's own approval questions in it
    are approved, except ``always_ask`` ones), ``"deny"`` (refuse it: the call's result
    is ``Error: blocked by a hook: <reason>``, code ``HOOK_DENIED``; a denied user
    message is dropped and the turn ends ``blocked`` with the reason), ``"ask"`` (the
    loop asks the approval service first), or None (no opinion on permission: only
    ``arguments``/``context`` apply). ``arguments`` replace the call's (validated as
    the model's are); ``context`` is text added to the turn after a user message.
    """

    decision: str | None = None
    reason: str = ""
    arguments: Mapping[str, Any] | None = None
    context: str = ""

    def __post_init__(self) -> None:
        if self.decision not in _DECISIONS:
            raise HookDecisionError(
                f"HookDecision.decision must be one of allow, deny, ask or None, "
                f"got {self.decision!r}"
            )
        for name in ("reason", "context"):
            value: object = getattr(self, name)
            if not isinstance(value, str):
                raise HookDecisionError(
                    f"HookDecision.{name} must be a str, got {type(value).__name__}"
                )
        arguments: object = self.arguments
        if arguments is not None and not isinstance(arguments, Mapping):
            raise HookDecisionError(
                "HookDecision.arguments must be a mapping (the tool's arguments by name), "
                f"got {type(arguments).__name__}"
            )
