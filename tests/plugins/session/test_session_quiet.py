"""A session remembers that nobody hears its ``session/event`` until that can change.

The answer is asked again after any listener is added or removed on the bus, when the
session is entered under another scope, and when it moves to another store's bus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from dsh import Context
from dsh_llm import BlockEnd, BlockStart, TextDelta
from dsh_session import Session, SessionEvent, Sessions

pytestmark = pytest.mark.anyio


def _hearer(into: list[tuple[str, Any]]) -> Any:
    def on_event(session: Session, event: SessionEvent) -> None:
        into.append((event.type, event.data.get("chunk", {}).get("type")))

    return on_event


async def test_a_listener_added_after_quiet_appends_hears_the_next_ones() -> None:
    async with Context() as root:
        await root.plugin(Sessions)
        session = root.sessions.create(id="s")
        session.append("turn/start", {"turn": 1})  # nobody hears: remembered
        session.append_chunk(1, 1, BlockStart(0, "text"))
        heard: list[tuple[str, Any]] = []
        stop = root.on("session/event", _hearer(heard))
        session.append_chunk(1, 1, TextDelta(0, "hi"))
        session.append("step/end", {"turn": 1, "step": 1})
        assert heard == [("assistant/chunk", "text-delta"), ("step/end", None)]
        await stop()
        session.append_chunk(1, 2, BlockEnd(0))
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert len(heard) == 2
        # The log kept every event, heard or not.
        assert [e.type for e in session.events][-2:] == ["assistant/chunk", "turn/end"]


async def test_an_unrelated_listener_change_asks_again_with_the_same_answer() -> None:
    async with Context() as root:
        await root.plugin(Sessions)
        session = root.sessions.create(id="s")
        session.append("turn/start", {"turn": 1})
        changes = root.events.changes
        created: list[Session] = []
        root.on("session/created", created.append)
        assert root.events.changes != changes
        session.append("step/start", {"turn": 1, "step": 1})
        session.append_chunk(1, 1, BlockStart(0, "text"))
        assert created == []
        assert len(session.events) == 3


async def test_a_session_entered_under_another_scope_is_asked_again() -> None:
    mine, other = object(), object()
    async with Context() as root:
        await root.plugin(Sessions)
        heard: list[tuple[str, Any]] = []
        root.scoped(mine).on("session/event", _hearer(heard))
        session = root.sessions.prepare(id="s")
        leave = root.scoped(other).sessions.enter(session)
        session.append("turn/start", {"turn": 1})  # the other scope: nobody hears
        await leave()
        changes = root.events.changes
        root.scoped(mine).sessions.enter(session)
        assert root.events.changes == changes  # no listener changed: only the scope
        session.append("step/start", {"turn": 1, "step": 1})
        session.append_chunk(1, 1, BlockStart(0, "text"))
        assert heard == [("step/start", None), ("assistant/chunk", "block-start")]


async def test_a_session_moved_to_another_store_is_asked_on_its_bus() -> None:
    async with Context() as first, Context() as second:
        await first.plugin(Sessions)
        await second.plugin(Sessions)
        heard: list[tuple[str, Any]] = []
        first.on("session/created", lambda s: None)  # the two buses count alike
        second.on("session/event", _hearer(heard))
        assert first.events.changes == second.events.changes
        session = first.sessions.prepare(id="s")
        leave = first.sessions.enter(session)
        session.append("turn/start", {"turn": 1})  # nobody on the first bus hears
        await leave()
        second.sessions.enter(session)
        session.append("step/start", {"turn": 1, "step": 1})
        assert heard == [("step/start", None)]


@dataclass(frozen=True)
class Key:
    """A scope key equal to any other of the same name (the bus tells them apart)."""

    name: str


async def test_an_equal_but_distinct_scope_key_is_another_scope() -> None:
    mine, twin = Key("agent"), Key("agent")
    assert mine == twin
    assert mine is not twin
    async with Context() as root:
        await root.plugin(Sessions)
        heard: list[tuple[str, Any]] = []
        root.scoped(mine).on("session/event", _hearer(heard))
        session = root.sessions.prepare(id="s")
        leave = root.scoped(twin).sessions.enter(session)
        session.append("turn/start", {"turn": 1})  # the twin's scope: nobody hears
        session.append_chunk(1, 1, BlockStart(0, "text"))
        await leave()
        root.scoped(mine).sessions.enter(session)
        session.append_chunk(1, 1, TextDelta(0, "hi"))
        session.append("step/end", {"turn": 1, "step": 1})
        assert heard == [("assistant/chunk", "text-delta"), ("step/end", None)]
