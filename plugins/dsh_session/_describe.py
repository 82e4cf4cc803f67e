"""How ``dsh sessions`` and the terminal chat's ``/sessions`` show a stored session."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from dsh import counted

from ._store import StoredSession

__all__ = ["TITLE_CHARS", "describe_session", "short_title"]

#: How many characters of the first user message ``dsh sessions`` shows.
TITLE_CHARS = 60


def short_title(text: str, limit: int = TITLE_CHARS) -> str:
    """``text`` on one line (whitespace runs folded to one space), cut to ``limit``
    characters with ``…`` when longer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def describe_session(item: StoredSession) -> str:
    """One line of ``dsh sessions``: id, last activity, turns, tokens, agent, model,
    cwd, the sessions it was rewound from and to (``/rewind``), and the title (the
    first user message, shortened)."""
    if item.error is not None:
        return f"{item.id}  unreadable: {item.error}"
    when = "-" if item.last_activity is None else _local_time(item.last_activity)
    meta = item.meta
    usage = item.usage
    tokens = "-" if usage is None else f"{usage.input_tokens} in / {usage.output_tokens} out"
    parts = [
        item.id,
        when,
        counted(item.turns, "turn"),
        f"tokens {tokens}",
        f"agent {meta.get('agent') or '-'}",
        f"model {meta.get('model') or '-'}",
    ]
    if item.cwd:
        parts.append(f"cwd {item.cwd}")
    source = _named(meta.get("rewound_from"))
    if source:
        parts.append(f"rewound from {source}")
    targets = meta.get("rewound_to")
    named = [_named(t) for t in targets] if isinstance(targets, list) else []
    if any(named):
        parts.append(f"rewound to {', '.join(n for n in named if n)}")
    if item.open:
        parts.append("last turn interrupted (closed on resume)")
    title = short_title(item.title or "")
    if title:
        parts.append(f'"{title}"')
    return "  ".join(parts)


def _named(link: Any) -> str:
    """``<session> (before turn N)`` for a ``{session, turn}`` link of the header's
    meta; empty for anything else."""
    if not isinstance(link, Mapping) or not isinstance(link.get("session"), str):
        return ""
    return f"{link['session']} (before turn {link.get('turn')})"


def _local_time(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")
