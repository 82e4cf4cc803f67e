"""What every persistence backend shares: its errors, the id grammar, the checks a
stored record must pass, the damaged-tail rule of crash repair, and the summary a
listing reports.

A backend (``session-jsonl``, ``session-sqlite``) reads its records its own way, then
hands them to :func:`check_log`, so every store accepts, cuts and refuses the same
logs; closing a turn a crash left open is :meth:`Session.close_open_turn`, run by
``sessions.resume`` whatever the backend. A backend may store the chunks of a step
packed, as one ``assistant/chunks`` row (:class:`ChunkRun`); the checks accept such a
row wherever they accept an event, and its chunks count as events.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh import DshError
from dsh_llm import LlmFormatError, Message, Usage

from ._event import OpaqueEvent, SessionError, SessionEvent
from ._packed import CHUNKS_ROW, ChunkRun, EventLog
from ._session import COMMIT_EVENTS, EVENT_TYPE, EVENT_TYPES, SessionHeader

__all__ = [
    "DURABLE_EVENTS",
    "SESSION_ID",
    "Checked",
    "InvalidRecord",
    "Lease",
    "LogDamage",
    "SessionCorruptError",
    "SessionDataError",
    "SessionExistsError",
    "SessionFencedError",
    "SessionIdError",
    "SessionInUseError",
    "SessionReadError",
    "SessionSummary",
    "SessionWriteError",
    "check_event",
    "check_log",
    "check_session_id",
    "recent_first",
]

#: What a session id must look like: a plain file name (stores use it as one).
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: Records a backend makes durable before ``append`` returns: the commit events and
#: the end of each step. Everything else waits in memory for the next of them.
DURABLE_EVENTS = COMMIT_EVENTS | {"step/end"}


# -- errors ------------------------------------------------------------------------------


class SessionIdError(SessionError):
    """A session id that is not a plain name (a store may use it as a file name)."""

    code = "SESSION_ID"


class SessionExistsError(SessionError):
    """A new session was given the id of a session already stored."""

    code = "SESSION_EXISTS"


class SessionInUseError(SessionError):
    """The stored session is held by a live session (in this process or another one),
    or changed between loading it and taking it over."""

    code = "SESSION_IN_USE"


class SessionFencedError(SessionError):
    """An append of a writer whose lease a newer attempt took over (see :class:`Lease`):
    nothing more of the older attempt is written."""

    code = "SESSION_FENCED"


class SessionCorruptError(SessionError):
    """A stored session cannot be loaded safely; ``path`` and ``line`` locate the record
    (``line`` is the line of a JSONL file, the seq of a SQLite record)."""

    code = "SESSION_CORRUPT"

    def __init__(self, message: str, path: str, line: int, *, where: str | None = None) -> None:
        super().__init__(f"{where or f'{path}:{line}'}: {message}")
        self.path = path
        self.line = line


class SessionDataError(SessionError, TypeError):
    """An event carried data that cannot be written as JSON (NaN, an object, a cycle)."""

    code = "SESSION_DATA"


class SessionWriteError(DshError, OSError):
    """Writing (or syncing) a stored session failed; the store went back to its last
    good state, so the records are written again by the next commit."""

    code = "SESSION_WRITE"


class SessionReadError(DshError, OSError):
    """A stored session (or the place sessions are stored) could not be read."""

    code = "SESSION_READ"


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is a safe id, else raise :class:`SessionIdError`."""
    if not isinstance(session_id, str) or SESSION_ID.fullmatch(session_id) is None:
        raise SessionIdError(
            f"invalid session id {session_id!r}: an id is 1 to 128 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit (it names a file or a "
            "directory of the store and must not leave it)"
        )
    return session_id


# -- leases ------------------------------------------------------------------------------


@dataclass(eq=False)
class Lease:
    """The writer lease of one attempt at a session: the epoch it holds in the store.

    ``sessions.lease(id)`` takes it: the store's epoch of the session goes up by one
    (durably), and the next writer of that session in this process (its ``create`` or
    ``resume``) holds the new epoch. Every commit of that writer checks, atomically with
    its write, that the store's epoch is still its own; once a newer lease exists the
    commit writes nothing and raises :class:`SessionFencedError` (and so does every
    later one). So two attempts never interleave in a log, even when an engine runs a
    retry while the older attempt's worker still runs.
    """

    session_id: str
    #: The epoch this lease holds (epochs count from 1 per session).
    epoch: int
    #: Whether the store held the session when the lease was taken (resume it) or not
    #: (create it).
    stored: bool
    #: Why a commit of this writer was refused, once one was (it stays refused).
    fenced: str | None = None

    def check(self, current: int | None) -> None:
        """Raise :class:`SessionFencedError` unless ``current`` (the epoch the store
        holds now; None: the store holds none) is this lease's; a writer fenced once
        stays fenced."""
        if self.fenced is None and current != self.epoch:
            self.fenced = (
                f'session "{self.session_id}": this writer\'s lease (epoch {self.epoch}) '
                f"is no longer the store's (epoch {current}): a newer attempt took the "
                "session over, and nothing more of this attempt is written"
            )
        if self.fenced is not None:
            raise SessionFencedError(self.fenced)


# -- checking records ----------------------------------------------------------------------


class InvalidRecord(Exception):
    """A record that is not a well-formed event (internal: the store adds where it is)."""


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

#: The data fields each built-in event type must carry (the ones the history and the
#: store's crash repair read).
FIELDS: dict[str, dict[str, _Check]] = {
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
_NO_FIELDS: dict[str, _Check] = {}
_EVENT_KEYS = frozenset({"seq", "type", "time", "data"})


def check_event(record: object, known: AbstractSet[str] = EVENT_TYPES) -> SessionEvent | ChunkRun:
    """The event a decoded record holds, or the (closed) :class:`ChunkRun` of a packed
    ``assistant/chunks`` row; raises :class:`InvalidRecord` saying what is wrong.
    ``record`` may itself be an :class:`InvalidRecord` (the store could not decode
    it), which is raised.

    ``known`` is the set of event types the reader interprets: the built-in ones, and
    those the plugins of the running deployment declared (``sessions.event_types()``).
    A record of another type (lower-case words joined by ``/``, :data:`EVENT_TYPE`)
    is history all the same: it comes back as an :class:`OpaqueEvent` (RFC 0023). Only
    a record that is not an event is invalid: not the keys ``seq``, ``type``, ``time``
    and ``data``, a bad seq, time or type, data that is not an object, or a built-in
    type without the data fields it needs.
    """
    if isinstance(record, InvalidRecord):
        raise record
    if not isinstance(record, dict) or record.keys() != _EVENT_KEYS:
        raise InvalidRecord("not an event record (expected the keys seq, type, time, data)")
    seq, kind, when, data = record["seq"], record["type"], record["time"], record["data"]
    if not _is_int(seq) or seq < 0:
        raise InvalidRecord(f"seq {seq!r} is not a non-negative integer")
    if not isinstance(kind, str) or (kind != CHUNKS_ROW and not EVENT_TYPE.fullmatch(kind)):
        raise InvalidRecord(f"type {kind!r} is not an event type (lower-case words joined by /)")
    if type(when) not in (int, float):
        raise InvalidRecord(f"time {when!r} is not a number")
    if not isinstance(data, dict):
        raise InvalidRecord(f'"{kind}" record: data is not an object')
    if kind == CHUNKS_ROW:
        try:
            return ChunkRun.from_json(seq, when, data)
        except SessionError as exc:
            raise InvalidRecord(f'"{kind}" record: {exc}') from None
    for key, check in FIELDS.get(kind, _NO_FIELDS).items():
        if key not in data or not check(data[key]):
            raise InvalidRecord(f'"{kind}" record: data.{key} is missing or malformed')
    if kind in known or kind in FIELDS:
        return SessionEvent(seq, kind, when, data)
    return OpaqueEvent(seq, kind, when, data)


class LogDamage(Exception):
    """Committed history is damaged: the store refuses the load with a
    :class:`SessionCorruptError` locating record ``index`` (internal)."""

    def __init__(self, index: int, problem: str) -> None:
        super().__init__(problem)
        self.index = index
        self.problem = problem


@dataclass
class Checked:
    """A checked log: the good events (packed rows kept packed), and the first invalid
    record (its index and the problem) when the log's tail was damaged — it and
    everything after it are dropped."""

    events: EventLog
    bad: tuple[int, str] | None = None


def check_log(
    records: Iterable[object],
    known: AbstractSet[str] = EVENT_TYPES,
    label: Callable[[int], str] = lambda index: f"record {index + 1}",
) -> Checked:
    """Check a session's records in order (each as :func:`check_event` takes it).

    A record of a type outside ``known`` is an :class:`OpaqueEvent`, kept and counted
    like any other. The first invalid record ends the log when no valid ``turn/end``
    follows it (the tail of an interrupted turn: :attr:`Checked.bad`); when one does, committed
    history is damaged and :class:`LogDamage` is raised. Seqs must count from 0
    without gaps (else :class:`LogDamage`): a packed row's seq is its first chunk's,
    and each of its chunks counts. ``label(index)`` names a record in messages
    (``line 16``).
    """
    rows: list[SessionEvent | ChunkRun] = []
    count = 0  # events so far (a packed row holds several)
    bad: tuple[int, str] | None = None
    for index, record in enumerate(records):
        try:
            row = check_event(record, known)
        except InvalidRecord as exc:
            if bad is None:
                bad = (index, str(exc))
            continue
        if bad is not None:
            if isinstance(row, SessionEvent) and row.type == "turn/end":
                raise LogDamage(
                    bad[0],
                    f"{bad[1]}; it comes before the committed turn end on {label(index)}, "
                    "so the history is damaged and the session is not loaded",
                )
            continue
        if isinstance(row, ChunkRun):
            seq, size = row.seq0, len(row)
        else:
            seq, size = row.seq, 1
        if seq != count:
            raise LogDamage(
                index,
                f"seq {seq} where {count} was expected (seqs count from 0 without gaps)",
            )
        rows.append(row)
        count += size
    return Checked(EventLog(rows), bad)


# -- listing -------------------------------------------------------------------------------


@dataclass(slots=True)
class SessionSummary:
    """One stored session as a listing shows it; ``error`` is set (and the other
    fields left empty) when it cannot be read.

    A :class:`StoredSession` (what ``sessions.stored()`` lists); not frozen, because
    that protocol declares plain (settable) attributes.
    """

    id: str
    #: Where it is stored: a JSONL file, or the SQLite database holding it.
    path: Path
    created_at: float | None = None
    cwd: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: Records stored (the last valid record's seq + 1).
    events: int = 0
    #: The number of the last turn recorded (turns count from 1).
    turns: int = 0
    #: The time of the last valid record, else ``created_at``.
    last_activity: float | None = None
    #: Whether the last turn has no ``turn/end`` (running, or cut short by a crash:
    #: ``sessions.resume`` closes it as interrupted).
    open: bool = False
    error: str | None = None
    #: The text of the first user message (a listing may cut it), None before any.
    title: str | None = None
    #: The usage of every assistant message summed (absent fields count 0), None when
    #: no message recorded any.
    usage: Usage | None = None

    @classmethod
    def of(
        cls,
        path: Path,
        header: SessionHeader,
        last: SessionEvent | None,
        *,
        title: str | None = None,
        usage: Usage | None = None,
        latest: SessionEvent | None = None,
    ) -> SessionSummary:
        """The summary of the session ``header`` whose last valid record of a built-in
        type is ``last`` (its turns, and whether the last is open) and whose last valid
        record of any type is ``latest`` (its count and activity; ``last`` when
        omitted), with the ``title`` and ``usage`` its store found."""
        newest = latest or last
        base = (header.id, path, header.created_at, header.cwd, header.meta)
        if newest is None:
            return cls(*base, 0, 0, header.created_at, title=title, usage=usage)
        return cls(
            *base,
            events=newest.seq + 1,
            turns=0 if last is None else last.data["turn"],
            last_activity=newest.time,
            open=last is not None and last.type != "turn/end",
            title=title,
            usage=usage,
        )


def recent_first(summary: SessionSummary) -> tuple[bool, float, str]:
    """The sort key of a listing: readable ones first, most recent activity first."""
    return (summary.error is not None, -(summary.last_activity or 0.0), summary.id)
