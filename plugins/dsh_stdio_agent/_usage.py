"""Token counts as the chat shows them (no rich, no prompt_toolkit: ``/tokens`` runs in
the line REPL too)."""

from __future__ import annotations

from dsh_llm import Usage
from dsh_session import Session

__all__ = ["session_usage", "usage_text"]


def session_usage(session: Session, turn: int | None = None) -> Usage | None:
    """The tokens of ``session``'s model steps (of turn ``turn`` only, when given)
    summed, or None when none recorded any. The loop records each step's usage in its
    ``assistant/message`` event."""
    total: Usage | None = None
    for event in session.events:
        data = event.data
        if event.type != "assistant/message" or "usage" not in data:
            continue
        if turn is not None and data.get("turn") != turn:
            continue
        usage = Usage.from_json(data["usage"])
        total = usage if total is None else _add(total, usage)
    return total


def _add(a: Usage, b: Usage) -> Usage:
    def both(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    return Usage(
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        both(a.cache_read_tokens, b.cache_read_tokens),
        both(a.cache_write_tokens, b.cache_write_tokens),
        both(a.reasoning_tokens, b.reasoning_tokens),
    )


def usage_text(usage: Usage) -> str:
    """``1,234 in · 56 out`` (`` · N cached`` and `` · N reasoning`` when present)."""
    parts = [f"{usage.input_tokens:,} in", f"{usage.output_tokens:,} out"]
    if usage.cache_read_tokens:
        parts.append(f"{usage.cache_read_tokens:,} cached")
    if usage.reasoning_tokens:
        parts.append(f"{usage.reasoning_tokens:,} reasoning")
    return " · ".join(parts)
