"""The ``session-sqlite`` plugin: sessions persisted in one SQLite database."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, Field

from dsh import Context, Plugin
from dsh_session import (
    EventLog,
    Lease,
    Session,
    SessionEvent,
    SessionExistsError,
    SessionFencedError,
    SessionHeader,
    SessionInUseError,
    SessionSummary,
    SessionWriteError,
    StoredSession,
    UnsavedRecords,
    check_session_id,
    directory_problem,
    path_error,
    store_path,
)

from ._lease import take_lease
from ._listing import list_sessions, read_session
from ._locks import locks_of
from ._log import Database, SqliteLog, adopt, attach, load_session

__all__ = ["SqliteSessions", "SqliteSessionsConfig"]

_log = logging.getLogger("dsh.session-sqlite")


class SqliteSessionsConfig(BaseModel):
    """Config of the ``session-sqlite`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: The database file; a relative path is taken from the process's current
    #: directory when the plugin starts (sessions belong to where the user works).
    path: str = Field(default=".dsh/sessions.db", min_length=1)
    #: Sync each commit to the disk before ``append`` returns (``synchronous=FULL``).
    fsync: bool = True
    #: How long a statement waits for another connection's write lock.
    busy_timeout_ms: int = Field(default=5000, ge=0)


class SqliteSessions(Plugin):
    """Persists every session of the ``sessions`` store in one SQLite database, loads
    them back for ``sessions.load``/``sessions.resume`` and lists them for
    ``sessions.stored()``.
    """

    name = "session-sqlite"
    Config = SqliteSessionsConfig
    inject = ("sessions",)

    def __init__(self, ctx: Context, config: SqliteSessionsConfig) -> None:
        super().__init__(ctx, config)
        #: The database file, made absolute when the plugin started.
        self.path: Path = store_path(ctx, "path", config.path)
        self._db = Database(self.path, fsync=config.fsync, busy_ms=config.busy_timeout_ms)
        self._logs: dict[str, SqliteLog] = {}
        # Sessions loaded by ``session/open`` that the store has not adopted yet:
        # their header, row key and number of events.
        self._loaded: dict[str, tuple[SessionHeader, int, int]] = {}
        # Leases taken for the next writer of a session (consumed when it goes live).
        self._leases: dict[str, Lease] = {}

    def setup(self) -> Iterator[Callable[[], object]]:
        ctx = self.ctx
        # One store per deployment, and a path that can hold a database: checked
        # before anything is touched, so `dsh check` names the mistake.
        yield ctx.sessions.persist()
        problem = _path_problem(self.path)
        if problem is not None:
            raise path_error(ctx, "path", self.path, problem)
        # An existing file is opened and checked now: a damaged, foreign or locked
        # database fails the plugin here, naming the file.
        self._db.open(create=False)
        yield self._db.close
        yield ctx.on("session/created", self._created)
        yield ctx.on("session/event", self._event)
        yield ctx.on("session/disposed", self._disposed)
        yield ctx.on("session/open", self._open)
        yield ctx.on("session/list", self._stored)
        yield ctx.on("session/lease", self._lease)
        yield ctx.on("session/snapshot", self._snapshot)
        yield ctx.on("session/flush", self._flush)
        # Undone first, while the listeners above still write: see `_close_all`.
        yield self._close_all
        # Sessions that went live before this plugin started (or while it restarted).
        for session in ctx.sessions.list():
            self._attach(session, session.events)

    def list_sessions(self) -> list[SessionSummary]:
        """The sessions stored in :attr:`path` (see :func:`list_sessions`)."""
        return list_sessions(self.path, busy_ms=self._db.busy_ms)

    def log_of(self, session_id: str) -> SqliteLog | None:
        """The log of live session ``session_id``, if this plugin holds one."""
        return self._logs.get(session_id)

    # -- listeners ----------------------------------------------------------------------

    def _created(self, session: Session) -> None:
        session_id = check_session_id(session.id)
        lease = self._leases.pop(session_id, None)
        loaded = self._loaded.pop(session_id, None)
        if loaded is not None and loaded[0] is session.header:
            self._logs[session_id] = adopt(
                self._db,
                session.header,
                loaded[1],
                loaded[2],
                lease,
                durable=self.ctx.sessions.durable_types(),
            )
            return
        if self._db.stored(session_id):
            raise SessionExistsError(
                f'session "{session_id}" is already stored in {self.path} '
                "(resume it with sessions.resume, or choose another id)"
            )
        log = SqliteLog(
            self._db, session.header, lease=lease, durable=self.ctx.sessions.durable_types()
        )
        self._logs[session_id] = log
        log.add(session.events)

    def _event(self, session: Session, event: SessionEvent) -> None:
        log = self._logs.get(session.id)
        if log is None:  # a session that went live without session/created reaching us
            self._attach(session, session.events)
        else:
            log.add((event,))

    def _attach(self, session: Session, events: Sequence[SessionEvent]) -> None:
        check_session_id(session.id)
        sessions = self.ctx.sessions
        log, missing, notes = attach(
            self._db, session.header, events, sessions.event_types(), sessions.durable_types()
        )
        for note in notes:
            _log.warning("%s", note)
        self._logs[session.id] = log
        log.add(missing)

    def _flush(self, session: Session, unsaved: list[UnsavedRecords]) -> None:
        log = self._logs.get(session.id)
        if log is None:
            return
        try:
            log.flush()
        except (SessionWriteError, SessionExistsError, SessionFencedError) as exc:
            unsaved.append(UnsavedRecords(session.id, log.pending, exc))

    def _disposed(self, session: Session) -> None:
        log = self._logs.pop(session.id, None)
        if log is not None:
            log.close()

    async def _open(self, session_id: str) -> tuple[SessionHeader, EventLog] | None:
        check_session_id(session_id)
        if session_id in self._logs:
            raise SessionInUseError(f'session "{session_id}" is live in this process')
        load = functools.partial(
            load_session,
            self.path,
            session_id,
            fsync=self._db.fsync,
            busy_ms=self._db.busy_ms,
            known=self.ctx.sessions.event_types(),
            shared=session_id in self._leases,
        )
        loaded = await anyio.to_thread.run_sync(load)
        if loaded is None:
            return None
        for note in loaded.notes:
            _log.warning("%s", note)
        self._loaded[session_id] = (loaded.header, loaded.key, len(loaded.events))
        return loaded.header, loaded.events

    def _stored(self, found: list[StoredSession]) -> None:
        found.extend(self.list_sessions())

    async def _lease(self, session_id: str) -> Lease:
        check_session_id(session_id)
        take = functools.partial(
            take_lease, self.path, session_id, fsync=self._db.fsync, busy_ms=self._db.busy_ms
        )
        lease = await anyio.to_thread.run_sync(take)
        self._leases[session_id] = lease
        return lease

    async def _snapshot(self, session_id: str) -> tuple[SessionHeader, EventLog] | None:
        read = functools.partial(
            read_session,
            self.path,
            session_id,
            known=self.ctx.sessions.event_types(),
            busy_ms=self._db.busy_ms,
        )
        return await anyio.to_thread.run_sync(read)

    def _close_all(self) -> Awaitable[None] | None:
        """Commit and let go of every session, once no turn is being written to a
        session it holds (as ``session-jsonl`` does: a running turn still records how
        it ended, its listeners in place)."""
        busy = [s for s in self.ctx.sessions.list() if s.id in self._logs and s.writing.count]
        if not busy:
            self._close_logs()
            return None
        return self._close_when_written(busy)

    async def _close_when_written(self, busy: list[Session]) -> None:
        for session in busy:
            await session.writing.idle()
        self._close_logs()

    def _close_logs(self) -> None:
        logs = list(self._logs.values())
        self._logs.clear()
        self._loaded.clear()
        self._leases.clear()
        for log in logs:
            log.close()

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
