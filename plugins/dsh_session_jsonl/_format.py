"""The file format: ids, encoding records, parsing and checking a log.

Pure functions over bytes and events; the file handling lives in ``_log.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from dsh_llm import LlmFormatError, Message
from dsh_session import (
    CHUNKS_ROW,
    COMMIT_EVENTS,
    EVENT_TYPES,
    ChunkRun,
    EventLog,
    SessionError,
    SessionEvent,
    SessionHeader,
)

from ._errors import SessionCorruptError, SessionIdError

__all__ = [
    "DURABLE_EVENTS",
    "FILE_NAME",
    "FORMAT_VERSION",
    "READ_VERSIONS",
    "SESSION_ID",
    "InvalidRecord",
    "Parsed",
    "check_session_id",
    "encode",
    "encode_header",
    "parse_event",
    "parse_header",
    "parse_log",
    "parse_record",
]

#: What a session id must look like: a plain file name that cannot escape the root.
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: The log of a session, inside ``<root>/<session id>/``.
FILE_NAME = "session.jsonl"
#: The ``version`` field of the header line of a new file: 2 stores the chunks of each
#: step as packed ``assistant/chunks`` rows; 1 has one row per chunk.
FORMAT_VERSION = 2
#: The versions this dsh reads (a version-1 file it appends to stays version 1).
READ_VERSIONS = (1, 2)
#: Records made durable (written and fsynced) before ``append`` returns.
DURABLE_EVENTS = COMMIT_EVENTS | {"step/end"}

_EVENT_KEYS = frozenset({"seq", "type", "time", "data"})


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is a safe id, else raise :class:`SessionIdError`."""
    if not isinstance(session_id, str) or SESSION_ID.fullmatch(session_id) is None:
        raise SessionIdError(
            f"invalid session id {session_id!r}: an id is 1 to 128 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit (it names a directory "
            "under the session root and must not leave it)"
        )
    return session_id


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


class InvalidRecord(Exception):
    """A line that is not a well-formed event record (internal; the caller adds file:line)."""


def _is_int(value: object) -> bool:
    return type(value) is int


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_object(value: object) -> bool:
    return isinstance(value, dict)


def _is_reason(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("kind"), str)


def _is_message(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    try:
        Message.from_json(value)
    except LlmFormatError:
        return False
    return True


_Check = Callable[[object], bool]
_TURN: dict[str, _Check] = {"turn": _is_int}
_STEP: dict[str, _Check] = {"turn": _is_int, "step": _is_int}
_CALL: dict[str, _Check] = {**_STEP, "call_id": _is_str, "name": _is_str}

#: The data fields each event type must carry (the ones the history and the store's
#: crash repair read).
_FIELDS: dict[str, dict[str, _Check]] = {
    "turn/start": _TURN,
    "turn/end": {**_TURN, "reason": _is_reason},
    "step/start": _STEP,
    "step/end": _STEP,
    "user/message": {**_TURN, "message": _is_message},
    "assistant/chunk": {**_STEP, "chunk": _is_object},
    "assistant/message": {**_STEP, "message": _is_message},
    "tool/call": {**_CALL, "arguments": _is_str},
    "tool/result": {**_CALL, "content": _is_str, "is_error": _is_bool},
    "request/header": {**_STEP, "header": _is_object},
}


def parse_record(line: bytes, known: AbstractSet[str] = EVENT_TYPES) -> SessionEvent | ChunkRun:
    """The event, or the packed run of chunks (an ``assistant/chunks`` row), a line
    holds; raises :class:`InvalidRecord` saying what is wrong.

    ``known`` is the set of event types accepted: the built-in ones, and those the
    plugins of the running deployment declared (``sessions.event_types()``).
    """
    try:
        record = json.loads(line)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise InvalidRecord(f"not JSON ({exc})") from None
    if not isinstance(record, dict) or record.keys() != _EVENT_KEYS:
        raise InvalidRecord("not an event record (expected the keys seq, type, time, data)")
    seq, kind, when, data = record["seq"], record["type"], record["time"], record["data"]
    if not _is_int(seq) or seq < 0:
        raise InvalidRecord(f"seq {seq!r} is not a non-negative integer")
    if kind not in known and kind != CHUNKS_ROW:
        raise InvalidRecord(
            f"unknown event type {kind!r} (not built in, and no loaded plugin declares it)"
        )
    if type(when) not in (int, float):
        raise InvalidRecord(f"time {when!r} is not a number")
    if not isinstance(data, dict):
        raise InvalidRecord(f'"{kind}" record: data is not an object')
    if kind == CHUNKS_ROW:
        try:
            return ChunkRun.from_json(seq, when, data)
        except SessionError as exc:
            raise InvalidRecord(f'"{kind}" record: {exc}') from None
    for key, check in _FIELDS.get(kind, {}).items():
        if key not in data or not check(data[key]):
            raise InvalidRecord(f'"{kind}" record: data.{key} is missing or malformed')
    return SessionEvent(seq, kind, when, data)


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
    rows: list[SessionEvent | ChunkRun] = []
    count = 0  # events so far (a packed row holds several)
    offset = len(lines[0]) + 1
    bad: tuple[int, int, str] | None = None  # (line number, byte offset, problem)
    for number, line in enumerate(lines[1:], start=2):
        try:
            row = parse_record(line, known)
        except InvalidRecord as exc:
            if bad is None:
                bad = (number, offset, str(exc))
        else:
            seq = row.seq0 if isinstance(row, ChunkRun) else row.seq
            if bad is not None:
                if isinstance(row, SessionEvent) and row.type == "turn/end":
                    raise SessionCorruptError(
                        f"{bad[2]}; it comes before the committed turn end on line "
                        f"{number}, so the history is damaged and the session is not loaded",
                        path,
                        bad[0],
                    )
            elif seq != count:
                raise SessionCorruptError(
                    f"seq {seq} where {count} was expected (seqs count from 0 without gaps)",
                    path,
                    number,
                )
            else:
                rows.append(row)
                count += len(row) if isinstance(row, ChunkRun) else 1
        offset += len(line) + 1
    if bad is None:
        return Parsed(header, EventLog(rows), end, notes, version)
    notes.append(
        f"{path}:{bad[0]}: {bad[2]}; dropped it and the {len(lines) - bad[0]} line(s) "
        "after it (the tail of the last turn; the store closes that turn as interrupted)"
    )
    return Parsed(header, EventLog(rows), bad[1], notes, version)
