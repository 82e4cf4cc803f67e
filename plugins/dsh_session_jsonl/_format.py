"""The file format: ids, encoding records, parsing and checking a log.

Pure functions over bytes and events; the file handling lives in ``_log.py`` (writes),
``_load.py`` (reads) and ``_sweep.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from dsh_session import (
    CHUNKS_ROW,
    DURABLE_EVENTS,
    EVENT_TYPES,
    SESSION_ID,
    ChunkRun,
    EventLog,
    InvalidRecord,
    LogDamage,
    SessionCorruptError,
    SessionEvent,
    SessionHeader,
    check_event,
    check_log,
    check_session_id,
)

__all__ = [
    "DURABLE_EVENTS",
    "FILE_NAME",
    "FORMAT_VERSION",
    "READ_VERSIONS",
    "SESSION_ID",
    "InvalidRecord",
    "Parsed",
    "check_session_id",
    "decode_line",
    "encode",
    "encode_header",
    "parse_event",
    "parse_header",
    "parse_log",
    "parse_record",
]

#: The log of a session, inside ``<root>/<session id>/``.
FILE_NAME = "session.jsonl"
#: The ``version`` field of the header line of a new file: 2 stores the chunks of each
#: step as packed ``assistant/chunks`` rows; 1 has one row per chunk.
FORMAT_VERSION = 2
#: The versions this dsh reads (a version-1 file it appends to stays version 1).
READ_VERSIONS = (1, 2)


def encode(record: Mapping[str, Any]) -> bytes:
    """One JSONL line. Raises ``TypeError``/``ValueError`` for data that is not JSON."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: escape it rather than lose the record
        return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def encode_header(header: SessionHeader) -> bytes:
    """Line 1 of a session file."""
    return encode({"type": "session", "version": FORMAT_VERSION, **header.to_json()})


# -- checking records ------------------------------------------------------------------


def decode_line(line: bytes) -> object:
    """A line's JSON value, or the :class:`InvalidRecord` saying why it has none."""
    try:
        return json.loads(line)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        return InvalidRecord(f"not JSON ({exc})")


def parse_record(line: bytes, known: AbstractSet[str] = EVENT_TYPES) -> SessionEvent | ChunkRun:
    """The event, or the packed run of chunks (an ``assistant/chunks`` row), a line
    holds; raises :class:`InvalidRecord` saying what is wrong.

    ``known`` is the set of event types accepted: the built-in ones, and those the
    plugins of the running deployment declared (``sessions.event_types()``).
    """
    return check_event(decode_line(line), known)


def parse_event(line: bytes, known: AbstractSet[str] = EVENT_TYPES) -> SessionEvent:
    """The event a line holds; raises :class:`InvalidRecord` saying what is wrong (a
    packed row of chunks, too: read those with :func:`parse_record`)."""
    record = parse_record(line, known)
    if isinstance(record, ChunkRun):
        raise InvalidRecord(f'"{CHUNKS_ROW}" record: a packed row, not one event')
    return record


def parse_header(line: bytes, path: str, session_id: str) -> SessionHeader:
    """The header on line 1; raises :class:`SessionCorruptError` naming ``path:1``."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise SessionCorruptError(f"the header is not JSON ({exc})", path, 1) from None
    if not isinstance(record, dict) or record.get("type") != "session":
        raise SessionCorruptError('line 1 is not a session header ("type": "session")', path, 1)
    version = record.get("version")
    if type(version) is not int or version not in READ_VERSIONS:
        readable = " and ".join(map(str, READ_VERSIONS))
        raise SessionCorruptError(
            f"unsupported format version {version!r} (this dsh reads versions {readable})",
            path,
            1,
        )
    if record.get("id") != session_id:
        raise SessionCorruptError(
            f"the header names session {record.get('id')!r}, but the file belongs to "
            f"{session_id!r}",
            path,
            1,
        )
    created_at = record.get("created_at")
    cwd = record.get("cwd")
    meta = record.get("meta", {})
    if type(created_at) not in (int, float) or not (cwd is None or isinstance(cwd, str)):
        raise SessionCorruptError("the header's created_at or cwd is malformed", path, 1)
    if not isinstance(meta, dict):
        raise SessionCorruptError("the header's meta is not an object", path, 1)
    return SessionHeader.from_json(record)


# -- a whole log -----------------------------------------------------------------------


@dataclass
class Parsed:
    """A parsed log: the good prefix (``length`` bytes) and what was dropped past it."""

    header: SessionHeader
    events: EventLog
    length: int
    notes: list[str] = field(default_factory=list)
    #: The header's format version.
    version: int = FORMAT_VERSION


def header_version(line: bytes) -> int:
    """The version of a header line :func:`parse_header` accepted."""
    version: int = json.loads(line)["version"]
    return version


def parse_log(
    raw: bytes, path: str, session_id: str, known: AbstractSet[str] = EVENT_TYPES
) -> Parsed:
    """Parse a whole session file.

    A torn last line (no newline) is dropped. The first unparsable or invalid record
    ends the log when no valid ``turn/end`` follows it (the tail of an interrupted
    turn), and refuses the load when one does (committed history is damaged). Seqs
    must count from 0 without gaps. Dropped parts are described in ``notes``.
    """
    end = raw.rfind(b"\n") + 1
    lines = raw[:end].split(b"\n")[:-1]
    notes: list[str] = []
    if end < len(raw):
        notes.append(f"{path}:{len(lines) + 1}: dropped a torn last line (no newline)")
    if not lines:
        raise SessionCorruptError("the file has no complete header line", path, 1)
    header = parse_header(lines[0], path, session_id)
    version = header_version(lines[0])
    body = lines[1:]
    try:
        checked = check_log(map(decode_line, body), known, lambda index: f"line {index + 2}")
    except LogDamage as exc:
        raise SessionCorruptError(exc.problem, path, exc.index + 2) from None
    if checked.bad is None:
        return Parsed(header, checked.events, end, notes, version)
    index, problem = checked.bad
    notes.append(
        f"{path}:{index + 2}: {problem}; dropped it and the {len(body) - index - 1} line(s) "
        "after it (the tail of the last turn; the store closes that turn as interrupted)"
    )
    offset = len(lines[0]) + 1 + sum(len(line) + 1 for line in body[:index])
    return Parsed(header, checked.events, offset, notes, version)
