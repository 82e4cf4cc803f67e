"""The ``session-sqlite`` plugin: sessions persisted in one SQLite database."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from dsh import Context
from dsh_session import (
    EventLog,
    Lease,
    LoadedSession,
    Session,
    SessionEvent,
    SessionExistsError,
    SessionFencedError,
    SessionHeader,
    SessionSummary,
    SessionWriteError,
    StoreConfig,
    StorePlugin,
    directory_problem,
    path_error,
    store_path,
)

from ._lease import take_lease
from ._listing import list_sessions, read_session
from ._locks import locks_of
from ._log import Database, SqliteLog, adopt, attach, load_session

__all__ = ["SqliteSessions", "SqliteSessionsConfig"]


class SqliteSessionsConfig(StoreConfig):
    """Config of the ``session-sqlite`` plugin (``fsync``: ``synchronous=FULL``)."""

    #: The database file; a relative path is taken from the process's current
    #: directory when the plugin starts (sessions belong to where the user works).
    path: str = Field(default=".dsh/sessions.db", min_length=1)
    #: How long a statement waits for another connection's write lock.
    busy_timeout_ms: int = Field(default=5000, ge=0)


class SqliteSessions(StorePlugin[SqliteLog]):
    """Persists every session of the ``sessions`` store in one SQLite database, loads
    them back for ``sessions.load``/``sessions.resume`` and lists them for
    ``sessions.stored()``.
    """

    name = "session-sqlite"
    Config = SqliteSessionsConfig
    logger = logging.getLogger("dsh.session-sqlite")
    flush_errors = (SessionWriteError, SessionExistsError, SessionFencedError)

    def __init__(self, ctx: Context, config: SqliteSessionsConfig) -> None:
        super().__init__(ctx, config)
        #: The database file, made absolute when the plugin started.
        self.path: Path = store_path(ctx, "path", config.path)
        self._db = Database(self.path, fsync=config.fsync, busy_ms=config.busy_timeout_ms)

    def open_store(self) -> Iterator[Callable[[], object]]:
        problem = _path_problem(self.path)
        if problem is not None:
            raise path_error(self.ctx, "path", self.path, problem)
        # An existing file is opened and checked now: a damaged, foreign or locked
        # database fails the plugin here, naming the file.
        self._db.open(create=False)
        yield self._db.close

    def list_sessions(self) -> list[SessionSummary]:
        """The sessions stored in :attr:`path` (see :func:`list_sessions`)."""
        return list_sessions(self.path, busy_ms=self._db.busy_ms)

    def open_log(
        self, session: Session, lease: Lease | None, loaded: tuple[Any, ...] | None
    ) -> SqliteLog:
        durable = self.ctx.sessions.durable_types()
        if loaded is not None:
            key, count = loaded
            return adopt(self._db, session.header, key, count, lease, durable=durable)
        if self._db.stored(session.id):
            raise SessionExistsError(
                f'session "{session.id}" is already stored in {self.path} '
                "(resume it with sessions.resume, or choose another id)"
            )
        log = SqliteLog(self._db, session.header, lease=lease, durable=durable)
        log.add(session.events)
        return log

    def attach_log(
        self, session: Session, events: Sequence[SessionEvent]
    ) -> tuple[SqliteLog, Sequence[SessionEvent]]:
        sessions = self.ctx.sessions
        log, missing, notes = attach(
            self._db, session.header, events, sessions.event_types(), sessions.durable_types()
        )
        for note in notes:
            self.logger.warning("%s", note)
        return log, missing

    def load(self, session_id: str) -> LoadedSession | None:
        loaded = load_session(
            self.path,
            session_id,
            fsync=self._db.fsync,
            busy_ms=self._db.busy_ms,
            known=self.ctx.sessions.event_types(),
            shared=session_id in self._leases,
        )
        if loaded is None:
            return None
        kept = (loaded.key, len(loaded.events))
        return LoadedSession(loaded.header, loaded.events, kept, loaded.notes)

    def take_lease(self, session_id: str) -> tuple[Lease, Lease]:
        lease = take_lease(self.path, session_id, fsync=self._db.fsync, busy_ms=self._db.busy_ms)
        return lease, lease

    def read_snapshot(self, session_id: str) -> tuple[SessionHeader, EventLog] | None:
        return read_session(
            self.path,
            session_id,
            known=self.ctx.sessions.event_types(),
            busy_ms=self._db.busy_ms,
        )

    def __repr__(self) -> str:
        return f"<SqliteSessions {self.path} ({len(self._logs)} live)>"


def _path_problem(path: Path) -> str | None:
    """Why the database file ``path`` cannot be used, or None (its checks as a
    database come when it is opened)."""
    if path.is_dir():
        return "it is a directory, not a database file"
    problem = directory_problem(path.parent)
    if problem is not None:
        return f"its folder cannot hold it ({problem})"
    locks = locks_of(path)
    if locks.exists() and not locks.is_dir():
        return f"its lock folder {locks} is not a directory"
    return None
