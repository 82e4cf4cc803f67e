"""Listing the sessions stored under a root without loading them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from dsh import DshError
from dsh_llm import LlmFormatError, Message, Usage
from dsh_session import SessionEvent

from ._errors import SessionReadError
from ._format import FILE_NAME, SESSION_ID, InvalidRecord, parse_event, parse_header

__all__ = ["TITLE_CHARS", "SessionSummary", "list_sessions"]

_TAIL = 1 << 16
#: The forward scan parses only the lines that name these (the records it reads).
_USER = b'"user/message"'
_ASSISTANT = b'"assistant/message"'
_USAGE = b'"usage"'
#: The longest title kept (``dsh sessions`` shortens it further).
TITLE_CHARS = 200


@dataclass(slots=True)
class SessionSummary:
    """One stored session as a listing shows it; ``error`` is set (and the other
    fields left empty) when its file cannot be read.

    A :class:`dsh_session.StoredSession` (what ``sessions.stored()`` lists); not frozen,
    because that protocol declares plain (settable) attributes.
    """

    id: str
    path: Path
    created_at: float | None = None
    cwd: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: Records in the file (the last valid record's seq + 1).
    events: int = 0
    #: The number of the last turn recorded (turns count from 1).
    turns: int = 0
    #: The time of the last valid record, else ``created_at``.
    last_activity: float | None = None
    #: Whether the last turn has no ``turn/end`` (running, or cut short by a crash:
    #: ``sessions.resume`` closes it as interrupted).
    open: bool = False
    error: str | None = None
    #: The text of the first user message (at most :data:`TITLE_CHARS` characters),
    #: None before any.
    title: str | None = None
    #: The usage of every assistant message summed (absent fields count 0), None when
    #: no message recorded any.
    usage: Usage | None = None


def _last_event(file: BinaryIO, start: int, size: int) -> SessionEvent | None:
    """The last valid record between ``start`` and ``size``, reading from the end."""
    block = _TAIL
    while True:
        low = max(start, size - block)
        file.seek(low)
        lines = file.read(size - low).split(b"\n")
        if low > start:
            del lines[0]  # may begin mid-line
        for line in reversed(lines):
            try:
                return parse_event(line)
            except InvalidRecord:
                continue
        if low == start:
            return None
        block *= 4


def _added(total: Usage | None, more: Usage) -> Usage:
    if total is None:
        return more
    return Usage(
        total.input_tokens + more.input_tokens,
        total.output_tokens + more.output_tokens,
        (total.cache_read_tokens or 0) + (more.cache_read_tokens or 0),
        (total.cache_write_tokens or 0) + (more.cache_write_tokens or 0),
        (total.reasoning_tokens or 0) + (more.reasoning_tokens or 0),
    )


def _scan(file: BinaryIO, start: int, size: int) -> tuple[str | None, Usage | None]:
    """The title and the summed usage of the records between ``start`` and ``size``,
    reading forward; lines that do not parse are skipped."""
    file.seek(start)
    title: str | None = None
    usage: Usage | None = None
    position = start
    for line in file:
        position += len(line)
        if position > size:
            break
        if not ((title is None and _USER in line) or (_ASSISTANT in line and _USAGE in line)):
            continue
        try:
            event = parse_event(line)
        except InvalidRecord:
            continue
        data = event.data
        if event.type == "user/message" and title is None:
            title = Message.from_json(data["message"]).text[:TITLE_CHARS]
        elif event.type == "assistant/message" and "usage" in data:
            try:
                usage = _added(usage, Usage.from_json(data["usage"]))
            except LlmFormatError:
                continue
    return title, usage


def _summarize(session_id: str, path: Path) -> SessionSummary | None:
    """The summary of the session file ``path``; None when no file was published
    there (a crash during creation left only the directory)."""
    try:
        with path.open("rb") as file:
            first = file.readline()
            if not first.endswith(b"\n"):
                return SessionSummary(session_id, path, error=f"{path}:1: no complete header")
            header = parse_header(first, str(path), session_id)
            size = os.fstat(file.fileno()).st_size
            last = _last_event(file, len(first), size)
            title, usage = _scan(file, len(first), size)
    except FileNotFoundError:
        return None
    except (OSError, DshError) as exc:
        return SessionSummary(session_id, path, error=str(exc))
    if last is None:
        return SessionSummary(
            session_id, path, header.created_at, header.cwd, header.meta, 0, 0, header.created_at
        )
    return SessionSummary(
        session_id,
        path,
        header.created_at,
        header.cwd,
        header.meta,
        events=last.seq + 1,
        turns=last.data["turn"],
        last_activity=last.time,
        open=last.type != "turn/end",
        title=title,
        usage=usage,
    )


def _recent_first(summary: SessionSummary) -> tuple[bool, float, str]:
    return (summary.error is not None, -(summary.last_activity or 0.0), summary.id)


def list_sessions(root: str | os.PathLike[str]) -> list[SessionSummary]:
    """One summary per session stored under ``root``, most recent activity first,
    unreadable ones last (with ``error`` set). A missing root lists nothing, and so
    does a directory holding no published session file.

    Reads each file's header and last records, and scans it once for the first user
    message and the usage records: nothing is locked, loaded or written, so it is safe
    while sessions are live.
    """
    base = Path(root)
    try:
        with os.scandir(base) as scan:
            entries = list(scan)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SessionReadError(f"cannot list the session root {base}: {exc}") from exc
    found = [
        _summarize(entry.name, base / entry.name / FILE_NAME)
        for entry in entries
        if SESSION_ID.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
    ]
    summaries = [summary for summary in found if summary is not None]
    summaries.sort(key=_recent_first)
    return summaries
