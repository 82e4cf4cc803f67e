"""Reading the database without taking part in it: listing its sessions, and a
consistent snapshot of one session (no lock, nothing written)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from dsh_llm import LlmFormatError, Message, Usage, add_usage
from dsh_session import (
    EVENT_TYPES,
    META_EVENT,
    SESSION_ID,
    ChunkRun,
    EventLog,
    InvalidRecord,
    LogDamage,
    OpaqueEvent,
    SessionCorruptError,
    SessionEvent,
    SessionHeader,
    SessionSummary,
    check_event,
    check_log,
    check_session_id,
    fold_meta,
    recent_first,
)

from ._db import decode_event, header_of, reader, transaction
from ._errors import SessionDatabaseError
from ._log import read_rows

__all__ = ["list_sessions", "read_session"]

#: The longest title kept (``dsh sessions`` shortens it further), as in session-jsonl.
TITLE_CHARS = 200
_ROWS = "SELECT seq, type, time, data FROM events WHERE session = ?"


def _reader(path: Path, busy_ms: int) -> sqlite3.Connection | None:
    return reader(path, busy_ms=busy_ms) if path.exists() else None


def _summarize(connection: sqlite3.Connection, path: Path, row: tuple[Any, ...]) -> SessionSummary:
    key, session_id, *rest = row
    if not isinstance(session_id, str) or SESSION_ID.fullmatch(session_id) is None:
        return SessionSummary(
            str(session_id), path, error=f"{path}: invalid session id {session_id!r}"
        )
    try:
        header = header_of((session_id, *rest), path)
    except SessionCorruptError as exc:
        return SessionSummary(session_id, path, error=str(exc))
    damage = _damage(connection, key)
    if damage is not None:
        return SessionSummary(session_id, path, error=f"{path}: session {session_id!r}, {damage}")
    last: SessionEvent | None = None
    latest: SessionEvent | None = None  # an opaque record counts: it is history
    # Newest first, read lazily: usually the first row is the answer.
    for record in connection.execute(f"{_ROWS} ORDER BY seq DESC", (key,)):
        try:
            checked = check_event(decode_event(record))
        except InvalidRecord:
            continue
        # A packed row (session-jsonl's kind, stored here by hand): its last chunk.
        event = checked.member(len(checked) - 1) if isinstance(checked, ChunkRun) else checked
        latest = latest or event
        if not isinstance(event, OpaqueEvent):
            last = event
            break
    title, usage = _title_and_usage(connection, key)
    header = fold_meta(header, _events(connection, key, f"type = '{META_EVENT}'"))
    return SessionSummary.of(path, header, last, title=title, usage=usage, latest=latest)


def _damage(connection: sqlite3.Connection, key: int) -> str | None:
    """What makes session ``key``'s records a log that loading refuses (the rule of
    ``dsh_session.check_log``: an invalid record with a committed turn end after it,
    or a seq gap), or None."""
    rows = connection.execute(f"{_ROWS} ORDER BY seq", (key,)).fetchall()
    try:
        check_log(map(decode_event, rows), label=lambda index: f"seq {rows[index][0]}")
    except LogDamage as exc:
        return f"damaged at seq {rows[exc.index][0]}: {exc.problem}"
    return None


def _events(connection: sqlite3.Connection, key: int, where: str) -> Iterator[SessionEvent]:
    """The valid event records of session ``key`` matching ``where``, in order."""
    for record in connection.execute(f"{_ROWS} AND {where} ORDER BY seq", (key,)):
        try:
            event = check_event(decode_event(record))
        except InvalidRecord:
            continue
        assert isinstance(event, SessionEvent)  # ``where`` picks a type of event
        yield event


def _title_and_usage(connection: sqlite3.Connection, key: int) -> tuple[str | None, Usage | None]:
    """The text of the first valid user message, and the usage of every assistant
    message that has one, summed (what session-jsonl's listing reports)."""
    title: str | None = None
    for event in _events(connection, key, "type = 'user/message'"):
        title = Message.from_json(event.data["message"]).text[:TITLE_CHARS]
        break
    usage: Usage | None = None
    for event in _events(connection, key, "type = 'assistant/message' AND instr(data, 'usage')"):
        if "usage" not in event.data:
            continue
        try:
            more = Usage.from_json(event.data["usage"])
        except LlmFormatError:
            continue
        usage = more if usage is None else add_usage(usage, more)
    return title, usage


def list_sessions(path: str | os.PathLike[str], *, busy_ms: int = 5000) -> list[SessionSummary]:
    """One summary per session in the database at ``path``, most recent activity
    first, unreadable ones last (with ``error`` set). A missing file lists nothing.

    One read transaction, on a connection of its own: nothing is locked or written, so
    it is safe while sessions are live (WAL readers do not wait for the writer).
    Raises :class:`SessionDatabaseError` when the file is not a usable database.
    """
    base = Path(path)
    connection = _reader(base, busy_ms)
    if connection is None:
        return []
    try:
        with transaction(connection, "BEGIN"):
            # An empty file: its creator has not given it the schema yet (nothing stored).
            empty = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
            summaries = []
            if not empty:
                rows = connection.execute("SELECT key, id, created_at, cwd, meta FROM sessions")
                summaries = [_summarize(connection, base, row) for row in rows.fetchall()]
    except sqlite3.Error as exc:
        raise SessionDatabaseError(
            f"cannot list the sessions of database {base}: {exc}", str(base)
        ) from exc
    finally:
        connection.close()
    summaries.sort(key=recent_first)
    return summaries


def read_session(
    path: str | os.PathLike[str],
    session_id: str,
    *,
    known: AbstractSet[str] = EVENT_TYPES,
    busy_ms: int = 5000,
) -> tuple[SessionHeader, EventLog] | None:
    """A snapshot of session ``session_id``: its header and the events committed when
    the read began (one transaction), a damaged tail left out. None when it is not
    stored. Takes no lock and writes nothing, so a live session may be read while its
    writer appends; every snapshot ends at a commit.

    Raises :class:`SessionCorruptError` for damaged committed history.
    """
    base = Path(path)
    check_session_id(session_id)
    connection = _reader(base, busy_ms)
    if connection is None:
        return None
    try:
        read = read_rows(connection, base, session_id, known)
    finally:
        connection.close()
    if read is None:
        return None
    return read[0].header, read[0].events
