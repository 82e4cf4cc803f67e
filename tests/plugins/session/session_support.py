"""Helpers of the session tests: an empty session and a clock the session reads."""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

from dsh_session import Session, SessionHeader


def fresh() -> Session:
    """An empty session outside any store."""
    return Session(SessionHeader("s", 0.0))


class Clock:
    """A clock for the times a session records: it moves only when told to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Sessions read this clock (instead of ``time.time``) inside the block."""
        fake = types.SimpleNamespace(time=lambda: self.now)
        with mock.patch("dsh_session._session.time", fake):
            yield
