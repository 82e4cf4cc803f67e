"""Sessions in the database: durable appends, loading (cutting a damaged tail),
attaching to a session already written, and taking over a loaded one.

The plugin's own connection is made when first needed and used on the event loop's
thread only; loading runs in a worker thread on a connection of its own (WAL lets it
read while the plugin writes).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_session import (
    DURABLE_EVENTS,
    EVENT_TYPES,
    EventLog,
    Lease,
    LogDamage,
    SessionCorruptError,
    SessionDataError,
    SessionEvent,
    SessionExistsError,
    SessionFencedError,
    SessionHeader,
    SessionInUseError,
    SessionReadError,
    SessionWriteError,
    check_log,
)

from ._db import decode_event, encode_json, header_of, prepare, reader, transaction
from ._errors import SessionDatabaseError
from ._lease import current_epoch
from ._locks import SessionLock, locks_of

__all__ = ["Database", "Loaded", "SqliteLog", "adopt", "attach", "load_session", "read_rows"]

_log = logging.getLogger("dsh.session-sqlite")

_Row = tuple[int, str, float, str]


class Database:
    """The plugin's handle on its database file: one connection, opened (and checked,
    see :func:`prepare`) when first needed, created by the first write."""

    def __init__(self, path: Path, *, fsync: bool, busy_ms: int) -> None:
        self.path = path
        self.locks = locks_of(path)
        self.fsync = fsync
        self.busy_ms = busy_ms
        self._connection: sqlite3.Connection | None = None

    def open(self, *, create: bool) -> sqlite3.Connection | None:
        """The connection; None when the file does not exist and ``create`` is false.
        Raises :class:`SessionDatabaseError`."""
        if self._connection is None:
            self._connection = prepare(
                self.path, fsync=self.fsync, busy_ms=self.busy_ms, create=create
            )
        return self._connection

    def head(self, session_id: str) -> tuple[int, float, int | None] | None:
        """The row key, ``created_at`` and last seq (None: no events) of session
        ``session_id``; None when it is not stored."""
        connection = self.open(create=False)
        if connection is None:
            return None
        try:
            found: tuple[int, float, int | None] | None = connection.execute(
                "SELECT key, created_at, (SELECT max(seq) FROM events WHERE session = key) "
                "FROM sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
        except sqlite3.Error as exc:
            raise SessionReadError(f"cannot read session database {self.path}: {exc}") from exc
        return found

    def stored(self, session_id: str) -> bool:
        """Whether the database holds a session ``session_id``."""
        return self.head(session_id) is not None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


# -- reading -----------------------------------------------------------------------------


@dataclass
class Loaded:
    """A stored session: its header, its row's key and its good events (a damaged
    tail cut, or, for a mere snapshot, left out)."""

    header: SessionHeader
    key: int
    events: EventLog
    notes: list[str] = field(default_factory=list)


def read_rows(
    connection: sqlite3.Connection, path: Path, session_id: str, known: AbstractSet[str]
) -> tuple[Loaded, int | None] | None:
    """Session ``session_id`` read in one transaction (a consistent snapshot) and
    checked; with the seq of its first invalid record, if its tail is damaged (the
    note says what was wrong). None when it is not stored."""
    try:
        with transaction(connection, "BEGIN"):
            # An empty file: its creator has not given it the schema yet (nothing stored).
            empty = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
            found = None
            if not empty:
                found = connection.execute(
                    "SELECT key, id, created_at, cwd, meta FROM sessions WHERE id = ?",
                    (session_id,),
                ).fetchone()
            rows: list[tuple[Any, ...]] = []
            if found is not None:
                rows = connection.execute(
                    "SELECT seq, type, time, data FROM events WHERE session = ? ORDER BY seq",
                    (found[0],),
                ).fetchall()
    except sqlite3.Error as exc:
        raise SessionReadError(f'cannot read session "{session_id}" from {path}: {exc}') from exc
    if found is None:
        return None
    header = header_of(found[1:], path)

    def where(index: int) -> str:
        return f"{path}: session {session_id!r}, seq {rows[index][0]}"

    try:
        checked = check_log(map(decode_event, rows), known, lambda i: f"seq {rows[i][0]}")
    except LogDamage as exc:
        seq = rows[exc.index][0]
        raise SessionCorruptError(exc.problem, str(path), seq, where=where(exc.index)) from None
    loaded = Loaded(header, found[0], checked.events)
    if checked.bad is None:
        return loaded, None
    index, problem = checked.bad
    loaded.notes.append(
        f"{where(index)}: {problem}; dropped it and the {len(rows) - index - 1} record(s) "
        "after it (the tail of the last turn; the store closes that turn as interrupted)"
    )
    return loaded, rows[index][0]


def _load(
    connection: sqlite3.Connection, path: Path, session_id: str, known: AbstractSet[str]
) -> Loaded | None:
    """:func:`read_rows`, then cut a damaged tail (the caller holds the session's lock)."""
    read = read_rows(connection, path, session_id, known)
    if read is None:
        return None
    loaded, cut = read
    if cut is not None:
        try:
            with transaction(connection):
                connection.execute(
                    "DELETE FROM events WHERE session = ? AND seq >= ?", (loaded.key, cut)
                )
        except sqlite3.Error as exc:
            raise SessionWriteError(
                f'cannot cut session "{session_id}" in {path} back (dropping a damaged tail): {exc}'
            ) from exc
    return loaded


def load_session(
    path: Path,
    session_id: str,
    *,
    fsync: bool = True,
    busy_ms: int = 5000,
    known: AbstractSet[str] = EVENT_TYPES,
    shared: bool = False,
) -> Loaded | None:
    """Load session ``session_id`` from the database at ``path`` under its lock, on a
    connection of its own (it runs in a worker thread), and cut a damaged tail. None
    when the database or the session does not exist. ``shared``: for a leased writer
    (which took its lease first, so an older attempt writes nothing more).

    Raises :class:`SessionInUseError` when a live session holds it. Nothing else is
    written: a turn a crash left open is closed by the store when it enters the
    session, and its closing records arrive as ``session/event``s.
    """
    if not path.exists():
        return None
    lock = SessionLock.take(locks_of(path), session_id, shared)
    try:
        connection = reader(path, fsync=fsync, busy_ms=busy_ms)
        try:
            return _load(connection, path, session_id, known)
        finally:
            connection.close()
    finally:
        lock.release()


# -- writing -----------------------------------------------------------------------------


class SqliteLog:
    """One live session's records in the database.

    Records are encoded as they are appended and kept in a buffer; a durable record
    (one of ``durable``: ``DURABLE_EVENTS`` and the types plugins declared durable)
    writes the buffer and itself in one transaction. The session's
    own row is written by its first commit (after taking its lock). A failed
    transaction is rolled back and the records stay buffered, so the next commit
    writes them again without a gap.

    With ``lease`` (a lease this process took) each commit's transaction first checks
    that the stored epoch is still the lease's, and the session's lock is held shared
    with the other leased writers.
    """

    def __init__(
        self,
        db: Database,
        header: SessionHeader,
        *,
        key: int | None = None,
        stored: int = 0,
        lock: SessionLock | None = None,
        lease: Lease | None = None,
        durable: AbstractSet[str] = DURABLE_EVENTS,
    ) -> None:
        self.db = db
        self.header = header
        try:
            self._meta = encode_json(header.meta)
        except (TypeError, ValueError) as exc:
            raise SessionDataError(
                f'session "{header.id}" cannot be persisted: its header carries data that '
                f"is not JSON ({exc})"
            ) from exc
        self._key = key
        self._stored = stored
        self._lock = lock
        self._pending: list[_Row] = []
        self._broken: str | None = None
        self.lease = lease
        #: The types committed at once (``sessions.durable_types()``).
        self.durable = durable

    def __repr__(self) -> str:
        return (
            f"<SqliteLog {self.header.id!r} in {self.db.path} ({self._stored} stored, "
            f"{len(self._pending)} pending)>"
        )

    @property
    def stored(self) -> int:
        """Records known to be committed to the database."""
        return self._stored

    @property
    def pending(self) -> int:
        """Records appended but not yet committed."""
        return len(self._pending)

    def add(self, events: Sequence[SessionEvent]) -> None:
        """Buffer ``events``; commit at once when one of them is durable."""
        durable = False
        for event in events:
            if self._broken is not None:
                raise SessionDataError(self._broken)
            try:
                data = encode_json(event.data)
            except (TypeError, ValueError) as exc:
                self._broken = (
                    f'session "{self.header.id}" cannot be persisted past seq {event.seq}: '
                    f'its "{event.type}" event carries data that is not JSON ({exc})'
                )
                raise SessionDataError(self._broken) from exc
            self._pending.append((event.seq, event.type, event.time, data))
            durable = durable or event.type in self.durable
        if durable:
            self.flush()

    def flush(self) -> None:
        """Commit the buffered records in one transaction."""
        if not self._pending:
            return
        header = self.header
        lease = self.lease
        if lease is not None and lease.fenced is not None:  # fenced for good: no I/O
            lease.check(None)
        try:
            connection = self.db.open(create=True)
        except SessionDatabaseError as exc:
            raise SessionWriteError(f'cannot write session "{header.id}": {exc}') from exc
        assert connection is not None  # created when missing
        lock = self._lock
        if lock is None:
            try:
                lock = SessionLock.take(self.db.locks, header.id, lease is not None)
            except SessionInUseError:
                raise SessionExistsError(
                    f'session "{header.id}" already exists: it is live in another process '
                    f"({self.db.path})"
                ) from None
            self._lock = lock
        key = self._key
        try:
            with transaction(connection):
                if lease is not None:
                    lease.check(current_epoch(connection, header.id))
                if key is None:
                    key = self._insert_header(connection)
                connection.executemany(
                    "INSERT INTO events (session, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
                    [(key, *row) for row in self._pending],
                )
        except SessionExistsError:
            lock.release()  # a new session after all: not ours to hold
            self._lock = None
            raise
        except sqlite3.Error as exc:
            raise SessionWriteError(
                f'cannot write session "{header.id}" to {self.db.path}: {exc}; the '
                f"transaction was rolled back and the next commit writes the "
                f"{len(self._pending)} buffered record(s) again"
            ) from exc
        self._key = key
        self._stored += len(self._pending)
        self._pending.clear()

    def _insert_header(self, connection: sqlite3.Connection) -> int:
        header = self.header
        try:
            cursor = connection.execute(
                "INSERT INTO sessions (id, created_at, cwd, meta) VALUES (?, ?, ?, ?)",
                (header.id, header.created_at, header.cwd, self._meta),
            )
        except sqlite3.IntegrityError:
            raise SessionExistsError(
                f'session "{header.id}" already exists: {self.db.path} holds it'
            ) from None
        key = cursor.lastrowid
        assert key is not None  # an INSERT always sets it
        return key

    def close(self) -> None:
        """Commit what is buffered (errors are logged) and let go of the lock."""
        try:
            self.flush()
        except (SessionWriteError, SessionExistsError) as exc:
            _log.error("session %r: records lost when closing: %s", self.header.id, exc)
        except SessionFencedError as exc:
            _log.warning("%s (%d buffered record(s) dropped)", exc, len(self._pending))
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None


def attach(
    db: Database,
    header: SessionHeader,
    events: Sequence[SessionEvent],
    known: AbstractSet[str] = EVENT_TYPES,
    durable: AbstractSet[str] = DURABLE_EVENTS,
) -> tuple[SqliteLog, Sequence[SessionEvent], list[str]]:
    """The log of a live session the plugin has not seen from its start, the records
    of ``events`` the database still lacks (all of them when it is not stored), and
    the notes of a cut tail.

    A session written for this one earlier (by a previous instance of the plugin) must
    hold a prefix of ``events``; a damaged tail is cut first.
    """
    connection = db.open(create=False)
    if connection is None:
        return SqliteLog(db, header, durable=durable), events, []
    lock = SessionLock.take(db.locks, header.id)
    try:
        loaded = _load(connection, db.path, header.id, known)
        if loaded is not None and (
            loaded.header.created_at != header.created_at or len(loaded.events) > len(events)
        ):
            raise SessionExistsError(
                f'{db.path} holds another session "{header.id}" than the live one of that id'
            )
    except BaseException:
        lock.release()
        raise
    if loaded is None:  # not stored: its first commit takes the lock again
        lock.release()
        return SqliteLog(db, header, durable=durable), events, []
    count = len(loaded.events)
    log = SqliteLog(db, header, key=loaded.key, stored=count, lock=lock, durable=durable)
    return log, events[count:], loaded.notes


def adopt(
    db: Database,
    header: SessionHeader,
    key: int,
    count: int,
    lease: Lease | None = None,
    *,
    durable: AbstractSet[str] = DURABLE_EVENTS,
) -> SqliteLog:
    """The log of a session :func:`load_session` loaded (``count`` events, row
    ``key``), now entering the store (held by the writer of ``lease`` when given): lock
    it again and check nobody wrote it since (else :class:`SessionInUseError`)."""
    lock = SessionLock.take(db.locks, header.id, lease is not None)
    try:
        found = db.head(header.id)
        if found != (key, header.created_at, count - 1 if count else None):
            raise SessionInUseError(
                f'session "{header.id}" in {db.path} changed after it was loaded (another '
                "process wrote it?)"
            )
    except BaseException:
        lock.release()
        raise
    return SqliteLog(db, header, key=key, stored=count, lock=lock, lease=lease, durable=durable)
