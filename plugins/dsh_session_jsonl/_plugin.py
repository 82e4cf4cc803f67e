"""The ``session-jsonl`` plugin: sessions persisted as JSONL files under a root."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, Field

from dsh import Context, Plugin
from dsh_session import (
    EventLog,
    Lease,
    Session,
    SessionDataError,
    SessionEvent,
    SessionFencedError,
    SessionHeader,
    SessionWriteError,
    StoredSession,
    UnsavedRecords,
    directory_problem,
    path_error,
    store_path,
)

from ._errors import SessionExistsError, SessionInUseError
from ._format import FILE_NAME, check_session_id
from ._lease import LeaseFile
from ._listing import SessionSummary, list_sessions
from ._log import SessionLog, attach, load_session, read_snapshot, reopen, sweep_stale

__all__ = ["JsonlSessions", "JsonlSessionsConfig"]

_log = logging.getLogger("dsh.session-jsonl")


class JsonlSessionsConfig(BaseModel):
    """Config of the ``session-jsonl`` plugin."""

    model_config = ConfigDict(extra="forbid")

    #: Where sessions are stored; a relative path is taken from the process's current
    #: directory when the plugin starts (sessions belong to where the user works).
    root: str = Field(default=".dsh/sessions", min_length=1)
    #: Sync each committed record to the disk before ``append`` returns.
    fsync: bool = True


class JsonlSessions(Plugin):
    """Persists every session of the ``sessions`` store as ``<root>/<id>/session.jsonl``,
    loads them back for ``sessions.load``/``sessions.resume`` and lists them for
    ``sessions.stored()``.
    """

    name = "session-jsonl"
    Config = JsonlSessionsConfig
    inject = ("sessions",)

    def __init__(self, ctx: Context, config: JsonlSessionsConfig) -> None:
        super().__init__(ctx, config)
        #: The session root, made absolute when the plugin started.
        self.root: Path = store_path(ctx, "root", config.root)
        self._fsync = config.fsync
        self._logs: dict[str, SessionLog] = {}
        # Sessions loaded by ``session/open`` that the store has not adopted yet: the
        # header, the file's length and its format version.
        self._loaded: dict[str, tuple[SessionHeader, int, int]] = {}
        # Leases taken for the next writer of a session (consumed when it goes live).
        self._leases: dict[str, LeaseFile] = {}

    def setup(self) -> Iterator[Callable[[], object]]:
        ctx = self.ctx
        # One store per deployment, and a root that can hold sessions: checked before
        # anything is touched, so `dsh check` names the mistake.
        yield ctx.sessions.persist()
        problem = directory_problem(self.root)
        if problem is not None:
            raise path_error(ctx, "root", self.root, problem)
        for path in sweep_stale(self.root, time.time()):
            _log.info("removed %s, left by a crash while a session was created", path)
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
        """The sessions stored under :attr:`root` (see :func:`list_sessions`)."""
        return list_sessions(self.root)

    def log_of(self, session_id: str) -> SessionLog | None:
        """The open file of live session ``session_id``, if this plugin holds one."""
        return self._logs.get(session_id)

    # -- listeners ----------------------------------------------------------------------

    def _directory(self, session_id: str) -> Path:
        return self.root / check_session_id(session_id)

    def _created(self, session: Session) -> None:
        directory = self._directory(session.id)
        lease = self._leases.pop(session.id, None)
        try:
            self._go_live(session, directory, lease)
        except BaseException:
            if lease is not None and session.id not in self._logs:
                lease.close()
            raise

    def _go_live(self, session: Session, directory: Path, lease: LeaseFile | None) -> None:
        loaded = self._loaded.pop(session.id, None)
        if loaded is not None and loaded[0] is session.header:
            self._logs[session.id] = reopen(
                directory,
                session.header,
                loaded[1],
                fsync=self._fsync,
                version=loaded[2],
                lease=lease,
                durable=self.ctx.sessions.durable_types(),
            )
            return
        if (directory / FILE_NAME).exists():
            raise SessionExistsError(
                f'session "{session.id}" is already stored in {directory} '
                "(resume it with sessions.resume, or choose another id)"
            )
        log = SessionLog(
            directory,
            session.header,
            fsync=self._fsync,
            lease=lease,
            durable=self.ctx.sessions.durable_types(),
        )
        self._logs[session.id] = log
        log.add(session.events)

    def _event(self, session: Session, event: SessionEvent) -> None:
        log = self._logs.get(session.id)
        if log is None:  # a session that went live without session/created reaching us
            self._attach(session, session.events)
            return
        if event.type == "assistant/chunk":
            run = session.events.run_at(event.seq)
            if run is not None:  # a packed chunk: its run is written when committed
                log.add_chunk(run, event)
                return
        log.add((event,))

    def _attach(self, session: Session, events: Sequence[SessionEvent]) -> None:
        log, missing = attach(
            self._directory(session.id),
            session.header,
            events,
            fsync=self._fsync,
            known=self.ctx.sessions.event_types(),
            durable=self.ctx.sessions.durable_types(),
        )
        self._logs[session.id] = log
        log.add(missing)

    def _flush(self, session: Session, unsaved: list[UnsavedRecords]) -> None:
        log = self._logs.get(session.id)
        if log is None:
            return
        try:
            log.flush()
        except (SessionWriteError, SessionExistsError, SessionDataError, SessionFencedError) as exc:
            unsaved.append(UnsavedRecords(session.id, log.pending, exc))

    def _disposed(self, session: Session) -> None:
        log = self._logs.pop(session.id, None)
        if log is not None:
            log.close()

    async def _open(self, session_id: str) -> tuple[SessionHeader, EventLog] | None:
        directory = self._directory(session_id)
        if session_id in self._logs:
            raise SessionInUseError(f'session "{session_id}" is live in this process')
        load = functools.partial(
            load_session,
            directory,
            session_id,
            fsync=self._fsync,
            known=self.ctx.sessions.event_types(),
            shared=session_id in self._leases,
        )
        loaded = await anyio.to_thread.run_sync(load)
        if loaded is None:
            return None
        for note in loaded.notes:
            _log.warning("%s", note)
        self._loaded[session_id] = (loaded.header, loaded.length, loaded.version)
        return loaded.header, loaded.events

    def _stored(self, found: list[StoredSession]) -> None:
        found.extend(self.list_sessions())

    async def _lease(self, session_id: str) -> Lease:
        file = LeaseFile(self._directory(session_id), session_id, fsync=self._fsync)
        try:
            # It may wait for a commit of the writer it fences (another process's).
            lease = await anyio.to_thread.run_sync(file.take)
        except BaseException:
            file.close()
            raise
        previous = self._leases.pop(session_id, None)
        if previous is not None:
            previous.close()
        self._leases[session_id] = file
        return lease

    async def _snapshot(self, session_id: str) -> tuple[SessionHeader, EventLog] | None:
        read = functools.partial(
            read_snapshot, self._directory(session_id), session_id, self.ctx.sessions.event_types()
        )
        return await anyio.to_thread.run_sync(read)

    def _close_all(self) -> Awaitable[None] | None:
        """Close every file, once no turn is being written to a session it holds.

        A turn that is running when this plugin unloads (the whole deployment going
        down, say) still records how it ended: its agent is being disposed too, or the
        turn ends on its own, and this waits for that (``session.writing``) with the
        listeners still in place.
        """
        busy = [s for s in self.ctx.sessions.list() if s.id in self._logs and s.writing.count]
        if not busy:
            self._close_files()
            return None
        return self._close_when_written(busy)

    async def _close_when_written(self, busy: list[Session]) -> None:
        for session in busy:
            await session.writing.idle()
        self._close_files()

    def _close_files(self) -> None:
        logs = list(self._logs.values())
        self._logs.clear()
        self._loaded.clear()
        for log in logs:
            log.close()
        for lease in self._leases.values():
            lease.close()
        self._leases.clear()

    def __repr__(self) -> str:
        return f"<JsonlSessions {self.root} ({len(self._logs)} open)>"
