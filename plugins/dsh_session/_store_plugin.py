"""What the persisting plugins (``session-jsonl``, ``session-sqlite``) share: their wiring
to the ``sessions`` store.

A store plugin keeps one open log per live session, adopts the sessions it loaded for
``session/open`` when they go live, hands out leases for the next writer, and closes
everything once no turn is being written. :class:`StorePlugin` does all of that; a
subclass says how its medium opens a log, loads, leases and snapshots a session.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict

from dsh import Context, Plugin

from ._meta import fold_meta
from ._packed import EventLog
from ._persistence import Lease, SessionInUseError, check_session_id
from ._session import Session, SessionHeader
from ._store import StoredSession, UnsavedRecords

__all__ = ["LoadedSession", "StoreConfig", "StoreLog", "StorePlugin"]


class StoreConfig(BaseModel):
    """The config every store plugin takes; a subclass adds where its medium is."""

    model_config = ConfigDict(extra="forbid")

    #: Sync each commit to the disk before ``append`` returns.
    fsync: bool = True


class StoreLog(Protocol):
    """The open log of one live session, as a store plugin uses it."""

    @property
    def pending(self) -> int:
        """How many records are not committed yet (what a failed flush reports)."""
        ...

    def add(self, events: Sequence[Any]) -> None:
        """Write ``events`` (committed at the session's commit points)."""
        ...

    def flush(self) -> None:
        """Commit what is pending now."""
        ...

    def close(self) -> None:
        """Commit what is pending and let go of the medium."""
        ...


LogT = TypeVar("LogT", bound=StoreLog)
ConfigT = TypeVar("ConfigT")


@dataclass
class LoadedSession:
    """A stored session read for ``session/open``: its header and events, the notes a
    load makes (a damaged tail cut, say; logged as warnings), and what the medium needs
    to adopt it when it goes live (``kept``: a file's length and version, a row key)."""

    header: SessionHeader
    events: EventLog
    kept: tuple[Any, ...] = ()
    notes: list[str] = field(default_factory=list)


class StorePlugin(Plugin, Generic[LogT]):
    """The base of a plugin that persists the sessions of the ``sessions`` store.

    ``setup`` claims the store (one per deployment), runs :meth:`open_store` (checks
    and opens the medium; a generator may yield disposers), listens to the store's
    events and attaches the sessions already live. A subclass implements the abstract
    methods; :attr:`flush_errors` are the errors a flush reports as unsaved records.
    """

    inject = ("sessions",)
    #: The errors of a failed flush: its records are reported unsaved, not raised.
    flush_errors: ClassVar[tuple[type[Exception], ...]]
    #: Where the plugin's warnings go.
    logger: ClassVar[logging.Logger]

    def __init__(self, ctx: Context, config: Any) -> None:
        super().__init__(ctx, config)
        self._logs: dict[str, LogT] = {}
        # Sessions loaded by ``session/open`` that the store has not adopted yet: the
        # header and what the medium kept to adopt it (``LoadedSession.kept``).
        self._loaded: dict[str, tuple[SessionHeader, tuple[Any, ...]]] = {}
        # Leases taken for the next writer of a session (consumed when it goes live), as
        # the medium keeps them (the first of what :meth:`take_lease` returns).
        self._leases: dict[str, Any] = {}

    def setup(self) -> Iterator[Callable[[], object]]:
        ctx = self.ctx
        # One store per deployment, and a medium that can hold sessions: checked before
        # anything is touched, so `dsh check` names the mistake.
        yield ctx.sessions.persist()
        yield from self.open_store()
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

    def log_of(self, session_id: str) -> LogT | None:
        """The open log of live session ``session_id``, if this plugin holds one."""
        return self._logs.get(session_id)

    # -- what a medium implements -------------------------------------------------------

    @abstractmethod
    def open_store(self) -> Iterator[Callable[[], object]]:
        """Check and open the medium, raising a located error when it cannot work;
        yield the disposers of what it opened."""

    @abstractmethod
    def list_sessions(self) -> Sequence[StoredSession]:
        """The sessions the medium holds."""

    @abstractmethod
    def open_log(self, session: Session, lease: Any, loaded: tuple[Any, ...] | None) -> LogT:
        """The log of ``session`` going live, writing under ``lease`` (what
        :meth:`take_lease` kept, or None): adopting what ``session/open`` loaded
        (``loaded`` is its ``kept``), else a new one holding ``session.events``
        (raising ``SessionExistsError`` when the id is stored already)."""

    @abstractmethod
    def attach_log(self, session: Session, events: Sequence[Any]) -> tuple[LogT, Sequence[Any]]:
        """A log for a session that went live without this plugin seeing it, and the
        events of ``events`` it does not hold yet."""

    @abstractmethod
    def load(self, session_id: str) -> LoadedSession | None:
        """Read stored session ``session_id`` (in a worker thread), or None."""

    @abstractmethod
    def take_lease(self, session_id: str) -> tuple[Any, Lease]:
        """Fence every other writer of ``session_id`` (in a worker thread): what the
        next writer of this process writes under, and the lease the store is given."""

    @abstractmethod
    def read_snapshot(self, session_id: str) -> tuple[SessionHeader, EventLog] | None:
        """The stored state of ``session_id`` as it is now (in a worker thread)."""

    def check_id(self, session_id: str) -> str:
        """``session_id`` if it is a safe id (it names a file or a row of the medium),
        else :class:`~dsh_session.SessionIdError`."""
        return check_session_id(session_id)

    def add_event(self, log: LogT, session: Session, event: Any) -> None:
        """Write one event of a live session (a medium may pack chunks)."""
        log.add((event,))

    def release_lease(self, kept: Any) -> None:
        """Let go of a lease no writer took (what :meth:`take_lease` kept)."""

    # -- listeners ----------------------------------------------------------------------

    def _created(self, session: Session) -> None:
        session_id = self.check_id(session.id)
        lease = self._leases.pop(session_id, None)
        loaded = self._loaded.pop(session_id, None)
        kept = loaded[1] if loaded is not None and loaded[0] is session.header else None
        try:
            self._logs[session_id] = self.open_log(session, lease, kept)
        except BaseException:
            if lease is not None:
                self.release_lease(lease)
            raise

    def _event(self, session: Session, event: Any) -> None:
        log = self._logs.get(session.id)
        if log is None:  # a session that went live without session/created reaching us
            self._attach(session, session.events)
        else:
            self.add_event(log, session, event)

    def _attach(self, session: Session, events: Sequence[Any]) -> None:
        self.check_id(session.id)
        log, missing = self.attach_log(session, events)
        self._logs[session.id] = log
        log.add(missing)

    def _flush(self, session: Session, unsaved: list[UnsavedRecords]) -> None:
        log = self._logs.get(session.id)
        if log is None:
            return
        try:
            log.flush()
        except self.flush_errors as exc:
            unsaved.append(UnsavedRecords(session.id, log.pending, exc))

    def _disposed(self, session: Session) -> None:
        log = self._logs.pop(session.id, None)
        if log is not None:
            log.close()

    async def _open(self, session_id: str) -> tuple[SessionHeader, EventLog] | None:
        self.check_id(session_id)
        if session_id in self._logs:
            raise SessionInUseError(f'session "{session_id}" is live in this process')
        loaded = await anyio.to_thread.run_sync(self.load, session_id)
        if loaded is None:
            return None
        for note in loaded.notes:
            self.logger.warning("%s", note)
        header = fold_meta(loaded.header, loaded.events.rows())
        self._loaded[session_id] = (header, loaded.kept)
        return header, loaded.events

    def _stored(self, found: list[StoredSession]) -> None:
        found.extend(self.list_sessions())

    async def _lease(self, session_id: str) -> Lease:
        self.check_id(session_id)
        # It may wait for a commit of the writer it fences (another process's).
        kept, lease = await anyio.to_thread.run_sync(self.take_lease, session_id)
        previous = self._leases.pop(session_id, None)
        if previous is not None:
            self.release_lease(previous)
        self._leases[session_id] = kept
        return lease

    async def _snapshot(self, session_id: str) -> tuple[SessionHeader, EventLog] | None:
        stored = await anyio.to_thread.run_sync(self.read_snapshot, session_id)
        if stored is None:
            return None
        header, events = stored
        return fold_meta(header, events.rows()), events

    def _close_all(self) -> Awaitable[None] | None:
        """Close every log, once no turn is being written to a session it holds.

        A turn that is running when this plugin unloads (the whole deployment going
        down, say) still records how it ended: its agent is being disposed too, or the
        turn ends on its own, and this waits for that (``session.writing``) with the
        listeners still in place.
        """
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
        leases = list(self._leases.values())
        self._logs.clear()
        self._loaded.clear()
        self._leases.clear()
        for log in logs:
            log.close()
        for lease in leases:
            self.release_lease(lease)
