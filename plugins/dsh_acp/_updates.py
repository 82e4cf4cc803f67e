"""``UpdatePump``: the ordered delivery of session updates to the ACP client.

Updates are queued as they are made and sent one at a time, in order, by one task
(:meth:`UpdatePump.run`); :meth:`UpdatePump.flush` waits until everything queued so far
has been sent, which is how a prompt answers only after every update of its turn.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

import anyio
from acp import Client

from ._mapping import SessionUpdate

__all__ = ["UpdatePump"]

_log = logging.getLogger("dsh.acp")


class UpdatePump:
    """The queue of ``(session id, update)`` pairs waiting to be sent to the client
    ``client()`` returns (asked for each update, when it is sent)."""

    def __init__(self, client: Callable[[], Client]) -> None:
        self._client = client
        self._outbox: deque[tuple[str, SessionUpdate]] = deque()
        self._queued = 0
        self._sent = 0
        self._wake: anyio.Event | None = None
        self._progress: anyio.Event | None = None

    def enqueue(self, session_id: str, update: SessionUpdate) -> None:
        """Queue ``update`` for the ACP session ``session_id``."""
        self._outbox.append((session_id, update))
        self._queued += 1
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Send the queued updates in order, one at a time."""
        while True:
            while not self._outbox:
                self._wake = anyio.Event()
                await self._wake.wait()
            self._wake = None
            session_id, update = self._outbox.popleft()
            try:
                await self._client().session_update(session_id=session_id, update=update)
            except Exception as exc:  # the client went away: later updates go nowhere either
                _log.debug("a session update for %s was not delivered: %s", session_id, exc)
            self._sent += 1
            progress, self._progress = self._progress, None
            if progress is not None:
                progress.set()

    async def flush(self) -> None:
        """Return once every update queued so far has been sent."""
        target = self._queued
        while self._sent < target:
            progress = self._progress = self._progress or anyio.Event()
            await progress.wait()
