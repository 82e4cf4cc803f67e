"""The ``Sessions`` service: holds live sessions and publishes what they record."""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, Protocol

from dsh import Context, Disposer, Fiber, Service, counted, hookspec
from dsh._record import record
from dsh_llm import Usage

from ._event import SessionError, SessionEvent
from ._meta import META_EVENT, checked_patch
from ._packed import EventLog
from ._persistence import DURABLE_EVENTS, Lease, SessionInUseError, check_session_id
from ._session import EVENT_TYPE, EVENT_TYPES, Session, SessionHeader

__all__ = [
    "SessionSpecs",
    "SessionStoreConflictError",
    "Sessions",
    "StoredSession",
    "UnsavedRecords",
]


class SessionStoreConflictError(SessionError):
    """A second persistence backend asked to persist the sessions of a store that one
    already persists (see :meth:`Sessions.persist`)."""

    code = "SESSION_STORE_CONFLICT"


@record
class UnsavedRecords:
    """Records of a live session that a persistence backend holds but could not store
    (see :meth:`Sessions.flush`): how many, and the error of the last try."""

    session_id: str
    records: int
    error: Exception

    def __str__(self) -> str:
        return (
            f"{counted(self.records, 'record')} of session {self.session_id} could not be "
            f"stored: {self.error}"
        )


class StoredSession(Protocol):
    """What a persistence backend reports about one stored session (read-only)."""

    @property
    def id(self) -> str: ...
    @property
    def created_at(self) -> float | None: ...
    @property
    def cwd(self) -> str | None: ...
    @property
    def meta(self) -> Mapping[str, Any]: ...
    @property
    def turns(self) -> int:
        """The number of the last turn recorded."""

    @property
    def last_activity(self) -> float | None: ...
    @property
    def open(self) -> bool:
        """The last turn has no end (a crash, or still running); resuming closes it."""

    @property
    def error(self) -> str | None:
        """Set when the stored session cannot be read (other fields may be empty)."""

    @property
    def title(self) -> str | None:
        """The text of the first user message (a backend may cut it), None before any."""

    @property
    def usage(self) -> Usage | None:
        """The tokens of the session's model steps summed, None when none recorded any."""


class SessionSpecs:
    """The events owned by the session store."""

    @hookspec
    def session_created(self, session: Session) -> None:
        """A session joined the store (new or resumed). A listener that raises vetoes
        it: the session leaves the store again and the error reaches the caller."""

    @hookspec
    def session_disposed(self, session: Session) -> None:
        """A session left the store (its owner unloaded); persistence closes its file."""

    @hookspec
    def session_event(self, session: Session, event: SessionEvent) -> None:
        """An event was appended to a live session; persistence listens here. A
        listener that raises makes the append raise (after the event is recorded)."""

    @hookspec
    def session_list(self, found: list[Any]) -> None:
        """Emit: each persistence backend appends the sessions it stores to ``found``
        (objects with the attributes of :class:`StoredSession`)."""

    @hookspec
    def session_open(self, session_id: str) -> Any:
        """Serial: a persistence backend returns ``(header, events)`` of a stored
        session (a :class:`SessionHeader` and a list of :class:`SessionEvent`), or None
        when it has no such session."""

    @hookspec
    def session_lease(self, session_id: str) -> Any:
        """Serial: a persistence backend raises the stored epoch of ``session_id`` by
        one and returns the :class:`Lease` its next writer in this process holds (see
        :meth:`Sessions.lease`), or None when it does not take leases."""

    @hookspec
    def session_flush(self, session: Session, unsaved: list[Any]) -> None:
        """Emit: each persistence backend writes what it buffers of the live
        ``session`` now, and appends an :class:`UnsavedRecords` to ``unsaved`` when
        it cannot."""

    @hookspec
    def session_snapshot(self, session_id: str) -> Any:
        """Serial: a persistence backend returns ``(header, events)`` of the stored
        session as committed now, read without a lock and writing nothing (a damaged
        tail left out), or None when it has no such session."""


class Sessions(Service):
    """The store of live sessions (ctx key ``sessions``)."""

    key = "sessions"
    name = "sessions"
    hookspecs = SessionSpecs

    def __init__(self, ctx: Context, config: Any) -> None:
        super().__init__(ctx, config)
        self._bus = bus = ctx.events
        #: Looked up once: what a live session publishes to, and the store's arrival
        #: and departure events (each emitted only when heard).
        self._audience = bus.event("session/event")
        self._created_event = bus.event("session/created")
        self._disposed_event = bus.event("session/disposed")
        self._live: dict[str, Session] = {}
        #: Event types plugins declared, with how many declarations hold each; the
        #: store's own ``session/meta`` is held for good (see :meth:`amend_meta`).
        self._declared: dict[str, int] = {META_EVENT: 1}
        #: The durable types: the built-in ones and ``session/meta`` (held for good),
        #: and the declared types with how many durable declarations hold each.
        self._durable: dict[str, int] = dict.fromkeys((*DURABLE_EVENTS, META_EVENT), 1)
        #: The fiber of the persistence backend that persists this store's sessions.
        self._backend: Fiber | None = None

    def _publish(self, session: Session, event: SessionEvent) -> None:
        # Scoped to the session's owner: a listener registered through another agent's
        # context is not reached (the bus finds the scope's listeners by index).
        self._bus.emit("session/event", (session, event), session._scope)

    def prepare(
        self,
        id: str | None = None,
        cwd: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new, empty session that is not in the store yet (see :meth:`enter`)."""
        header = SessionHeader(id or _new_id(), time.time(), cwd, dict(meta or {}))
        return Session(header)

    def enter(self, session: Session) -> Disposer:
        """Hold ``session`` in the store while the calling plugin lives; returns the
        exact disposer. From now on its appends publish ``session/event``; on removal
        they stop and ``session/disposed`` is emitted. A live id raises
        :class:`SessionError`."""
        self._refuse_live(session)
        scope = self.ctx.scope

        def body() -> Iterator[Callable[[], None]]:
            yield self._hold(session, scope)
            if self._created_event.heard(scope):
                self.home_ctx.emit("session/created", session, scope=scope)

        return self.ctx.effect(body, label=f"session {session.id}")

    def _refuse_live(self, session: Session) -> None:
        if session.header.id in self._live:
            raise SessionError(f'session "{session.id}" already exists')

    def _hold(self, session: Session, scope: object) -> Callable[[], None]:
        """Take ``session`` in (its id is not live: checked by the caller)."""
        self._live[session.header.id] = session
        session._on_append = self._publish
        session._declared = self._declared
        session._scope = scope
        session._audience = self._audience
        return functools.partial(self._drop, session)

    def _enter_undo(self, session: Session, scope: object) -> Callable[[], None] | None:
        """:meth:`enter` for the agent factory, whose own effect (of ``scope``'s
        fiber) holds what it returns: the undo, as a plain callable (no effect of its
        own). None, with nothing done, when ``session/created`` is heard in ``scope``:
        then :meth:`enter` it (a listener that raises rolls the entry back)."""
        if self._created_event.heard(scope):
            return None
        if session.header.id in self._live:
            self._refuse_live(session)  # raises
        return self._hold(session, scope)

    def _drop(self, session: Session) -> None:
        del self._live[session.header.id]
        scope = session._scope
        session._on_append = None
        session._declared = frozenset()
        session._scope = None
        session._audience = None
        if self._disposed_event.heard(scope):
            self.home_ctx.emit("session/disposed", session, scope=scope)

    def declare_event_types(self, *types: str, durable: bool = False) -> Disposer:
        """Let the sessions of this store record events of ``types`` while the calling
        plugin lives; returns the exact disposer.

        A type is lower-case words joined by ``/`` (``todo/write``). Several plugins may
        declare the same type; it stays known until the last of them is gone.
        ``durable``: a persistence backend makes each such record durable before
        ``append`` returns, as it does a commit event (``compaction/checkpoint``); a
        type is durable while one durable declaration of it holds. Raises
        :class:`SessionError`, declaring nothing, for no types, a type that is not a
        string or does not match :data:`EVENT_TYPE`, a built-in type, or a repeat.
        """
        if not types:
            raise SessionError("declare_event_types() needs at least one event type")
        for kind in types:
            checked: object = kind
            if not isinstance(checked, str):
                raise SessionError(
                    f"a session event type must be a string, got {type(checked).__name__}"
                )
            if not EVENT_TYPE.fullmatch(kind):
                raise SessionError(
                    f'invalid session event type "{kind}": it must be lower-case words '
                    'joined by "/", such as "todo/write"'
                )
            if kind in EVENT_TYPES:
                raise SessionError(f'"{kind}" is a built-in session event type')
        if len(set(types)) != len(types):
            raise SessionError(f"declare_event_types() repeats a type: {', '.join(types)}")

        def body() -> Callable[[], None]:
            for kind in types:
                self._declared[kind] = self._declared.get(kind, 0) + 1
                if durable:
                    self._durable[kind] = self._durable.get(kind, 0) + 1
            return functools.partial(self._undeclare, types, durable)

        return self.ctx.effect(body, label=f"session event types {', '.join(types)}")

    def _undeclare(self, types: tuple[str, ...], durable: bool) -> None:
        for kind in types:
            _release(self._declared, kind)
            if durable:
                _release(self._durable, kind)

    def persist(self) -> Disposer:
        """Make the calling plugin the persistence backend of this store while it
        lives; returns the exact disposer. One backend per store: each backend writes
        every session, so with two every session would be stored (and listed) twice.
        Raises :class:`SessionStoreConflictError` naming both plugins (with their
        deployment entries) when another backend holds the store."""
        fiber = self.ctx.fiber
        holder = self._backend
        if holder is not None and holder is not fiber:
            raise SessionStoreConflictError(
                f"the sessions are already persisted by {holder.describe()}: a deployment "
                "loads one session store (session-jsonl or session-sqlite), as each one "
                "writes every session and dsh sessions would list each twice; remove one "
                "of the two entries"
            )

        def body() -> Callable[[], None]:
            self._backend = fiber
            return self._unpersist

        return self.ctx.effect(body, label="session persistence")

    def _unpersist(self) -> None:
        self._backend = None

    def flush(self, session: Session) -> list[UnsavedRecords]:
        """Have the persistence backends write what they buffer of the live
        ``session`` now (``session/flush``); returns what they could not store (empty
        when every record is stored, or when nothing persists sessions). A front-end
        calls it when a run ends, to say so when records are lost."""
        unsaved: list[UnsavedRecords] = []
        self.home_ctx.emit("session/flush", session, unsaved, scope=session._scope)
        return unsaved

    def amend_meta(self, session_id: str, patch: Mapping[str, Any]) -> SessionHeader:
        """Amend the header of the live session ``session_id``: the keys of ``patch``
        replace those of its ``meta``. Returns the header now in effect.

        The amendment is a durable ``session/meta`` record appended to the session
        (its store commits it before this returns); every reader of the stored header
        folds it in (``load``, ``resume``, ``snapshot``, ``stored()``). Raises
        :class:`SessionError` when the session is not live in this store, and when
        ``patch`` is empty, has a key that is not a string or is not JSON data.
        """
        session = self._live.get(session_id)
        if session is None:
            raise SessionError(
                f'session "{session_id}" is not live in this store: resume it to amend its header'
            )
        checked = checked_patch(session_id, patch)
        header = session.header
        session.header = dataclasses.replace(header, meta={**header.meta, **checked})
        session.append(META_EVENT, {"session": session_id, "meta": checked})
        return session.header

    def durable_types(self) -> AbstractSet[str]:
        """The event types a persistence backend makes durable before ``append``
        returns: :data:`DURABLE_EVENTS` and the types declared ``durable``. A live view
        (it follows later declarations), so a backend keeps it for each log it writes."""
        return self._durable.keys()

    def event_types(self) -> frozenset[str]:
        """Every event type a session of this store may record now: the built-in ones
        and the declared ones."""
        return EVENT_TYPES | self._declared.keys()

    def create(
        self,
        id: str | None = None,
        cwd: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new, empty session held in the store while the calling plugin lives."""
        session = self.prepare(id, cwd, meta)
        self.enter(session)
        return session

    async def load(self, session_id: str) -> Session:
        """The stored session ``session_id`` through ``session/open``, not yet in the
        store (hand it to :meth:`enter`, or to ``agents.create(session=...)``).

        Raises :class:`SessionError` when the id is live, when no listener knows it,
        and when the stored log is malformed.
        """
        if session_id in self._live:
            raise SessionError(f'session "{session_id}" already exists')
        stored = await self.home_ctx.serial("session/open", session_id)
        if stored is None:
            raise SessionError(
                f'no stored session "{session_id}" (is a session persistence plugin loaded?)'
            )
        return _answered("session/open", session_id, stored)

    async def resume(self, session_id: str) -> Session:
        """:meth:`load`, then hold the session in the store while the calling plugin
        lives and close a turn the process died in (:meth:`Session.close_open_turn`;
        the closing events are published, so persistence records them)."""
        session = await self.load(session_id)
        leave = self.enter(session)
        try:
            session.close_open_turn()
        except BaseException:
            leave()  # the session leaves the store again: a retry can load it afresh
            raise
        return session

    async def lease(self, session_id: str) -> Lease:
        """Take the writer lease of session ``session_id`` (stored or not yet) for the
        next writer of it in this process, through ``session/lease``.

        The store's epoch of the session goes up by one, so a writer holding an older
        lease (an earlier attempt, in any process) is fenced off: its next commit
        raises :class:`SessionFencedError` and writes nothing. Then create the session
        (``Lease.stored`` false) or load it (true) here: that writer holds the new
        epoch and checks it at every commit. Raises :class:`SessionIdError` for a bad
        id, :class:`SessionInUseError` when the session is live in this store, and
        :class:`SessionError` when no persistence backend takes leases.
        """
        check_session_id(session_id)
        if session_id in self._live:
            raise SessionInUseError(f'session "{session_id}" is live in this process')
        lease = await self.home_ctx.serial("session/lease", session_id)
        if lease is None:
            raise SessionError(
                f'no session persistence plugin takes a lease of "{session_id}" (load '
                "session-jsonl or session-sqlite)"
            )
        if not isinstance(lease, Lease) or lease.session_id != session_id:
            raise SessionError(f'a session/lease listener answered "{session_id}" with {lease!r}')
        return lease

    async def snapshot(self, session_id: str) -> Session | None:
        """The stored session ``session_id`` as committed now, through
        ``session/snapshot``: a copy outside the store, read without a lock and writing
        nothing, so a session another process is writing can be read (a damaged tail
        is left out, a turn left open stays open). None when it is not stored.

        Raises :class:`SessionError` when the answer's header is not a
        :class:`SessionHeader` for that id.
        """
        stored = await self.home_ctx.serial("session/snapshot", session_id)
        if stored is None:
            return None
        return _answered("session/snapshot", session_id, stored)

    def stored(self) -> list[StoredSession]:
        """Every session the persistence backends store, most recent first."""
        found: list[StoredSession] = []
        self.home_ctx.emit("session/list", found)
        return sorted(found, key=lambda s: -(s.last_activity or 0.0))

    def find(self, prefix: str) -> StoredSession:
        """The stored session whose id is ``prefix``, else the only one whose id starts
        with it (what ``dsh run --resume`` takes).

        Raises :class:`SessionError` for an empty ``prefix``, when no stored id starts
        with it, and when several do (naming them).
        """
        if not prefix:
            raise SessionError("a session id (or the start of one) cannot be empty")
        stored = self.stored()
        for item in stored:
            if item.id == prefix:
                return item
        matches = sorted(item.id for item in stored if item.id.startswith(prefix))
        if not matches:
            raise SessionError(f'no stored session "{prefix}" (dsh sessions lists them)')
        if len(matches) > 1:
            raise SessionError(
                f'the session id prefix "{prefix}" is ambiguous: it starts '
                f"{', '.join(matches)}; give more of the id"
            )
        return next(item for item in stored if item.id == matches[0])

    def newest(self) -> StoredSession | None:
        """The readable stored session with the latest activity (what ``dsh run
        --continue`` resumes), or None when there is none."""
        return next((item for item in self.stored() if item.error is None), None)

    def get(self, session_id: str) -> Session | None:
        """The live session ``session_id``, or None."""
        return self._live.get(session_id)

    def list(self) -> list[Session]:
        """Live sessions in the order they joined the store."""
        return list(self._live.values())


def _new_id() -> str:
    """A random version-4 UUID in hex, as ``uuid.uuid4().hex`` spells it, made without
    the ``UUID`` object (a third of the time)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    return raw.hex()


def _release(counts: dict[str, int], kind: str) -> None:
    """Drop one hold of ``kind`` in ``counts`` (the entry goes with the last)."""
    count = counts[kind] - 1
    if count:
        counts[kind] = count
    else:
        del counts[kind]


def _answered(event: str, session_id: str, stored: tuple[Any, Any]) -> Session:
    """The session out of listener ``event``'s answer ``(header, events)`` for
    ``session_id``; raises :class:`SessionError` when the header is not its one."""
    header, events = stored
    if not isinstance(header, SessionHeader) or header.id != session_id:
        raise SessionError(f'a {event} listener answered "{session_id}" with the header {header!r}')
    if not isinstance(events, EventLog):
        events = list(events)  # the backend's list stays the backend's
    return Session(header, events)
