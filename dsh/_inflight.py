"""Counting work in progress, so that whoever closes a shared resource can wait for it."""

from __future__ import annotations

from types import TracebackType

import anyio

__all__ = ["InFlight"]


class InFlight:
    """A count of operations in progress: ``with inflight:`` around each one, and
    ``await inflight.idle()`` to wait until none is.

    A plugin that owns a shared resource (an HTTP client, a process pool) undoes it with
    ``await inflight.idle()`` first, so the callers still using it finish (or are
    cancelled by their own owners) before it closes under them.
    """

    __slots__ = ("_count", "_idle")

    def __init__(self) -> None:
        self._count = 0
        self._idle: anyio.Event | None = None

    @property
    def count(self) -> int:
        """How many operations are in progress."""
        return self._count

    def __enter__(self) -> InFlight:
        self._count += 1
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._count -= 1
        if not self._count and self._idle is not None:
            self._idle.set()
            self._idle = None

    async def idle(self) -> None:
        """Return once no operation is in progress (at once when none is)."""
        while self._count:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()
