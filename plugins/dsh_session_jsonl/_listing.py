"""Listing the sessions stored under a root without loading them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from dsh import DshError
from dsh_session import ChunkRun, SessionEvent

from ._errors import SessionReadError
from ._format import FILE_NAME, SESSION_ID, InvalidRecord, parse_header, parse_record

__all__ = ["SessionSummary", "list_sessions"]

_TAIL = 1 << 16


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
                record = parse_record(line)
            except InvalidRecord:
                continue
            if isinstance(record, ChunkRun):  # a packed row: its last chunk
                return record.member(len(record) - 1)
            return record
        if low == start:
            return None
        block *= 4


def _summarize(session_id: str, path: Path) -> SessionSummary | None:
    """The summary of the session file ``path``; None when no file was published
    there (a crash during creation left only the directory)."""
    try:
        with path.open("rb") as file:
            first = file.readline()
            if not first.endswith(b"\n"):
                return SessionSummary(session_id, path, error=f"{path}:1: no complete header")
            header = parse_header(first, str(path), session_id)
            last = _last_event(file, len(first), os.fstat(file.fileno()).st_size)
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
    )


def _recent_first(summary: SessionSummary) -> tuple[bool, float, str]:
    return (summary.error is not None, -(summary.last_activity or 0.0), summary.id)


def list_sessions(root: str | os.PathLike[str]) -> list[SessionSummary]:
    """One summary per session stored under ``root``, most recent activity first,
    unreadable ones last (with ``error`` set). A missing root lists nothing, and so
    does a directory holding no published session file.

    Reads only each file's header and its last records: nothing is locked, loaded or
    written, so it is safe while sessions are live.
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
