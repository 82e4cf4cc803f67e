"""The ``Sessions`` service: creates sessions and publishes what they record."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from dsh import Context, Service, hookspec

from ._session import Session, SessionError, SessionEvent, SessionHeader

__all__ = ["SessionSpecs", "Sessions"]


class SessionSpecs:
    """The events owned by the session store."""

    @hookspec
    def session_created(self, session: Session) -> None:
        """A session joined the store (new or resumed)."""

    @hookspec
    def session_event(self, session: Session, event: SessionEvent) -> None:
        """An event was appended; persistence listens here. A listener that raises
        makes the append raise (after the event is in memory)."""

    @hookspec
    def session_open(self, session_id: str) -> Any:
        """Serial: a persistence backend returns ``(header, events)`` of a stored
        session, or None when it has no such session."""


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

    def _adopt(self, session: Session) -> Session:
        """Hold ``session`` for as long as the calling plugin lives."""
        sid = session.id
        if sid in self._live:
            raise SessionError(f'session "{sid}" already exists')

        def body() -> Iterator[Callable[[], None]]:
            self._live[sid] = session
            yield functools.partial(self._live.pop, sid, None)
            self.home_ctx.emit("session/created", session)

        self.ctx.effect(body, label=f"session {sid}")
        return session

    def create(
        self,
        id: str | None = None,
        cwd: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new, empty session owned by the calling plugin."""
        header = SessionHeader(id or uuid.uuid4().hex, time.time(), cwd, dict(meta or {}))
        return self._adopt(Session(header, on_append=self._publish))

    async def resume(self, session_id: str) -> Session:
        """The stored session ``session_id``, loaded by a persistence backend."""
        stored = await self.home_ctx.serial("session/open", session_id)
        if stored is None:
            raise SessionError(
                f'no stored session "{session_id}" (is a persistence plugin loaded?)'
            )
        header, events = stored
        return self._adopt(Session(header, list(events), on_append=self._publish))

    def get(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def list(self) -> list[Session]:
        return list(self._live.values())
