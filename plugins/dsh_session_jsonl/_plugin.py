"""The ``session-jsonl`` plugin: sessions persisted as JSONL files under a root."""

from __future__ import annotations

import logging
import time
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
    SessionDataError,
    SessionEvent,
    SessionFencedError,
    SessionHeader,
    SessionWriteError,
    StoreConfig,
    StorePlugin,
    directory_problem,
    path_error,
    store_path,
)

from ._errors import SessionExistsError
from ._format import FILE_NAME, check_session_id
from ._lease import LeaseFile
from ._listing import SessionSummary, list_sessions
from ._load import load_session, read_snapshot
from ._log import SessionLog, attach, reopen
from ._sweep import sweep_stale

__all__ = ["JsonlSessions", "JsonlSessionsConfig"]


class JsonlSessionsConfig(StoreConfig):
    """Config of the ``session-jsonl`` plugin (``fsync``: sync each committed record)."""

    #: Where sessions are stored; a relative path is taken from the process's current
    #: directory when the plugin starts (sessions belong to where the user works).
    root: str = Field(default=".dsh/sessions", min_length=1)


class JsonlSessions(StorePlugin[SessionLog]):
    """Persists every session of the ``sessions`` store as ``<root>/<id>/session.jsonl``,
    loads them back for ``sessions.load``/``sessions.resume`` and lists them for
    ``sessions.stored()``.
    """

    name = "session-jsonl"
    Config = JsonlSessionsConfig
    logger = logging.getLogger("dsh.session-jsonl")
    flush_errors = (SessionWriteError, SessionExistsError, SessionDataError, SessionFencedError)

    def __init__(self, ctx: Context, config: JsonlSessionsConfig) -> None:
        super().__init__(ctx, config)
        #: The session root, made absolute when the plugin started.
        self.root: Path = store_path(ctx, "root", config.root)
        self._fsync = config.fsync

    def open_store(self) -> Iterator[Callable[[], object]]:
        problem = directory_problem(self.root)
        if problem is not None:
            raise path_error(self.ctx, "root", self.root, problem)
        for path in sweep_stale(self.root, time.time()):
            self.logger.info("removed %s, left by a crash while a session was created", path)
        yield from ()

    def list_sessions(self) -> list[SessionSummary]:
        """The sessions stored under :attr:`root` (see :func:`list_sessions`)."""
        return list_sessions(self.root)

    def _directory(self, session_id: str) -> Path:
        return self.root / check_session_id(session_id)

    def open_log(
        self, session: Session, lease: LeaseFile | None, loaded: tuple[Any, ...] | None
    ) -> SessionLog:
        directory = self._directory(session.id)
        durable = self.ctx.sessions.durable_types()
        if loaded is not None:
            length, version = loaded
            return reopen(
                directory,
                session.header,
                length,
                fsync=self._fsync,
                version=version,
                lease=lease,
                durable=durable,
            )
        if (directory / FILE_NAME).exists():
            raise SessionExistsError(
                f'session "{session.id}" is already stored in {directory} '
                "(resume it with sessions.resume, or choose another id)"
            )
        log = SessionLog(directory, session.header, fsync=self._fsync, lease=lease, durable=durable)
        log.add(session.events)
        return log

    def add_event(self, log: SessionLog, session: Session, event: SessionEvent) -> None:
        if event.type == "assistant/chunk":
            run = session.events.run_at(event.seq)
            if run is not None:  # a packed chunk: its run is written when committed
                log.add_chunk(run, event)
                return
        log.add((event,))

    def attach_log(
        self, session: Session, events: Sequence[SessionEvent]
    ) -> tuple[SessionLog, Sequence[SessionEvent]]:
        return attach(
            self._directory(session.id),
            session.header,
            events,
            fsync=self._fsync,
            known=self.ctx.sessions.event_types(),
            durable=self.ctx.sessions.durable_types(),
        )

    def load(self, session_id: str) -> LoadedSession | None:
        loaded = load_session(
            self._directory(session_id),
            session_id,
            fsync=self._fsync,
            known=self.ctx.sessions.event_types(),
            shared=session_id in self._leases,
        )
        if loaded is None:
            return None
        kept = (loaded.length, loaded.version)
        return LoadedSession(loaded.header, loaded.events, kept, loaded.notes)

    def take_lease(self, session_id: str) -> tuple[LeaseFile, Lease]:
        file = LeaseFile(self._directory(session_id), session_id, fsync=self._fsync)
        try:
            return file, file.take()
        except BaseException:
            file.close()
            raise

    def release_lease(self, kept: LeaseFile) -> None:
        kept.close()

    def read_snapshot(self, session_id: str) -> tuple[SessionHeader, EventLog] | None:
        return read_snapshot(
            self._directory(session_id), session_id, self.ctx.sessions.event_types()
        )

    def __repr__(self) -> str:
        return f"<JsonlSessions {self.root} ({len(self._logs)} open)>"
