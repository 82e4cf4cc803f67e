"""Token usage: the ``usage/step`` session event, sums, prices, a one-line summary, and
the local estimate of a step whose server reported none."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from dsh_llm import LlmRequest, Message, Usage, add_usage, estimate_tokens
from dsh_session import ChunkRun, Session, SessionEvent

__all__ = [
    "NO_USAGE",
    "USAGE_EVENT",
    "Price",
    "add_usage",
    "cost",
    "estimate_usage",
    "format_usage",
    "session_usage",
    "turn_usage",
]

#: The session event the loop appends after each ``assistant/message``:
#: ``{"turn", "step", "usage": Usage.to_json()}``, plus ``"estimated": True`` when the
#: stream reported no usage and the loop counted it (:func:`estimate_usage`).
USAGE_EVENT = "usage/step"

#: Nothing used yet: every field 0.
NO_USAGE = Usage(0, 0, 0, 0, 0)

_MILLION = 1_000_000


class Price(BaseModel):
    """What one model costs, in currency units (the table's own, e.g. US dollars) per
    million tokens. Cache reads and writes cost ``input`` when not given."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


_Row = SessionEvent | ChunkRun


def _plain(rows: Sequence[_Row]) -> Iterable[SessionEvent]:
    """The plain events of a log's rows (a packed run of chunks holds no usage)."""
    return (row for row in rows if not isinstance(row, ChunkRun))


def _summed(
    events: Iterable[SessionEvent], turn: int | None = None, estimated: bool | None = None
) -> Usage:
    total = NO_USAGE
    for event in events:
        data = event.data
        if (
            event.type == USAGE_EVENT
            and (turn is None or data["turn"] == turn)
            and (estimated is None or data.get("estimated", False) is estimated)
        ):
            total = add_usage(total, Usage.from_json(data["usage"]))
    return total


def session_usage(session: Session, *, estimated: bool | None = None) -> Usage:
    """The usage of every ``usage/step`` of ``session``, summed (a scan of its log;
    ``LoopAgent.usage`` keeps the same sum up to date without one). ``estimated``
    True sums only the steps the loop estimated, False only those the server
    reported; None (the default) both."""
    return _summed(_plain(session.events.rows()), estimated=estimated)


def turn_usage(session: Session, turn: int, *, estimated: bool | None = None) -> Usage:
    """The usage of turn ``turn`` of ``session``, summed: a scan back from the end of
    the log to that turn's (latest) ``turn/start``; :data:`NO_USAGE` for a turn that
    never started. ``estimated`` as in :func:`session_usage`."""
    rows = session.events.rows()
    for start in range(len(rows) - 1, -1, -1):
        row = rows[start]
        if not isinstance(row, ChunkRun) and row.type == "turn/start" and row.data["turn"] == turn:
            return _summed(_plain(rows[start:]), turn, estimated)
    return NO_USAGE


def estimate_usage(request: LlmRequest, answer: Message) -> Usage:
    """The usage of a step whose server reported none, counted locally by
    :func:`dsh_llm.estimate_tokens` (UTF-8 bytes / 4, rounded up): the request as the
    model reads it (its system prompt, messages and tool schemas, whatever wire format
    the adapter wraps them in) for the input, the answer for the output. RFC 0031.
    """
    return Usage(estimate_tokens(request), estimate_tokens(answer))


def cost(usage: Usage, prices: Mapping[str, Price], model: str | None) -> float | None:
    """What ``usage`` cost at ``prices[model]``, or None when the table has no price
    for ``model``. Reasoning tokens are part of the output tokens (providers count
    them there), so they are not priced again."""
    price = prices.get(model) if model is not None else None
    if price is None:
        return None
    cache_read = price.input if price.cache_read is None else price.cache_read
    cache_write = price.input if price.cache_write is None else price.cache_write
    total = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + (usage.cache_read_tokens or 0) * cache_read
        + (usage.cache_write_tokens or 0) * cache_write
    )
    return total / _MILLION


def format_usage(usage: Usage, cost: float | None = None) -> str:
    """One line for a terminal: ``1,234 in · 800 cached · 56 out · $0.0012``.

    Cache reads (``cached``), cache writes (``cache write``) and reasoning tokens
    (``reasoning``, a part of ``out``) appear only when not zero; the cost only when
    given (4 decimals below 1, else 2).
    """
    parts = [f"{usage.input_tokens:,} in"]
    if usage.cache_read_tokens:
        parts.append(f"{usage.cache_read_tokens:,} cached")
    if usage.cache_write_tokens:
        parts.append(f"{usage.cache_write_tokens:,} cache write")
    parts.append(f"{usage.output_tokens:,} out")
    if usage.reasoning_tokens:
        parts.append(f"{usage.reasoning_tokens:,} reasoning")
    if cost is not None:
        parts.append(f"${cost:,.2f}" if cost >= 1 else f"${cost:.4f}")
    return " · ".join(parts)
