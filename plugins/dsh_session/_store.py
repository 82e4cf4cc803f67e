"""The ``Sessions`` service: holds live sessions and publishes what they record."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from dsh import Context, Disposer, Service, hookspec

from ._session import Session, SessionError, SessionEvent, SessionHeader

__all__ = ["SessionSpecs", "Sessions", "StoredSession"]


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


class Sessions(Service):
    """The store of live sessions (ctx key ``sessions``)."""

    key = "sessions"
    name = "sessions"
    hookspecs = SessionSpecs

    def __init__(self, ctx: Context, config: Any) -> None:
        super().__init__(ctx, config)
        self._live: dict[str, Session] = {}

    def _publish(self, session: Session, event: SessionEvent) -> None:
        self.home_ctx.emit("session/event", session, event)

    def prepare(
        self,
        id: str | None = None,
        cwd: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new, empty session that is not in the store yet (see :meth:`enter`)."""
        header = SessionHeader(id or uuid.uuid4().hex, time.time(), cwd, dict(meta or {}))
        return Session(header)

    def enter(self, session: Session) -> Disposer:
        """Hold ``session`` in the store while the calling plugin lives; returns the
        exact disposer. From now on its appends publish ``session/event``; on removal
        they stop and ``session/disposed`` is emitted. A live id raises
        :class:`SessionError`."""
        sid = session.id
        if sid in self._live:
            raise SessionError(f'session "{sid}" already exists')

        def body() -> Iterator[Callable[[], None]]:
            self._live[sid] = session
            session._on_append = self._publish
            yield functools.partial(self._drop, session)
            self.home_ctx.emit("session/created", session)

        return self.ctx.effect(body, label=f"session {sid}")

    def _drop(self, session: Session) -> None:
        del self._live[session.id]
        session._on_append = None
        self.home_ctx.emit("session/disposed", session)

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
        header, events = stored
        if not isinstance(header, SessionHeader) or header.id != session_id:
            raise SessionError(
                f'a session/open listener answered "{session_id}" with the header {header!r}'
            )
        return Session(header, list(events))

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

    def stored(self) -> list[StoredSession]:
        """Every session the persistence backends store, most recent first."""
        found: list[StoredSession] = []
        self.home_ctx.emit("session/list", found)
        return sorted(found, key=lambda s: -(s.last_activity or 0.0))

    def get(self, session_id: str) -> Session | None:
        """The live session ``session_id``, or None."""
        return self._live.get(session_id)

    def list(self) -> list[Session]:
        """Live sessions in the order they joined the store."""
        return list(self._live.values())
