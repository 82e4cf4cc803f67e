"""Sessions: the event log, the derived history, the store and its events, resume."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh import Context, Disposer, Plugin
from dsh_llm import Message, TextBlock, ToolCallBlock, ToolResultBlock
from dsh_session import (
    COMMIT_EVENTS,
    EVENT_TYPES,
    META_EVENT,
    EventLog,
    Session,
    SessionError,
    SessionEvent,
    SessionHeader,
    Sessions,
)
from tests.plugins.session.session_support import fresh

pytestmark = pytest.mark.anyio


@dataclass
class HeardSessions:
    created: list[Session] = field(default_factory=list)
    disposed: list[Session] = field(default_factory=list)
    events: list[tuple[Session, SessionEvent]] = field(default_factory=list)


@asynccontextmanager
async def store() -> AsyncIterator[tuple[Context, Sessions, HeardSessions]]:
    async with Context() as root:
        await root.plugin(Sessions)
        heard = HeardSessions()

        def on_event(session: Session, event: SessionEvent) -> None:
            heard.events.append((session, event))

        root.on("session/created", heard.created.append)
        root.on("session/disposed", heard.disposed.append)
        root.on("session/event", on_event)
        yield root, root.sessions, heard


def user(text: str) -> dict[str, Any]:
    return {"turn": 1, "step": 1, "message": Message.user(text).to_json()}


def assistant(*blocks: Any, step: int = 1, **extra: Any) -> dict[str, Any]:
    return {"turn": 1, "step": step, "message": Message("assistant", blocks).to_json(), **extra}


def result(call_id: str, content: str, step: int = 1) -> dict[str, Any]:
    return {
        "turn": 1,
        "step": step,
        "call_id": call_id,
        "name": "echo",
        "content": content,
        "is_error": False,
    }


# -- the log ------------------------------------------------------------------------------


def test_append_records_contiguous_events() -> None:
    session = fresh()
    first = session.append("turn/start", {"turn": 1})
    second = session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert [(e.seq, e.type) for e in session.events] == [(0, "turn/start"), (1, "turn/end")]
    assert session.events == [first, second]
    assert first.time <= second.time
    assert repr(session) == "<Session 's' (2 events)>"
    assert session.id == "s"


def test_append_of_an_unknown_type_records_nothing() -> None:
    session = fresh()
    with pytest.raises(SessionError, match='unknown session event type "turn/begin"') as info:
        session.append("turn/begin", {"turn": 1})
    assert "known types: assistant/chunk" in str(info.value)
    assert info.value.code == "SESSION"
    assert isinstance(info.value, ValueError)
    assert session.events == []


def test_event_types() -> None:
    assert COMMIT_EVENTS < EVENT_TYPES
    assert {"turn/start", "tool/result", "request/header"} <= EVENT_TYPES


def test_derive_messages_is_incremental_and_matches_a_full_derivation() -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user("hi"))
    assert session.derive_messages() == [Message.user("hi")]
    call = ToolCallBlock("c1", "echo", "{}")
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "finish"}})
    session.append("assistant/message", assistant(TextBlock("calling"), call))
    session.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "echo"})
    session.append("tool/result", result("c1", "pong"))
    # An assistant message without content is not part of the history.
    session.append("assistant/message", assistant(step=2))
    session.append("assistant/message", assistant(TextBlock("done"), step=3))
    expected = [
        Message.user("hi"),
        Message("assistant", (TextBlock("calling"), call)),
        Message("tool", (ToolResultBlock("c1", "pong", False),)),
        Message("assistant", (TextBlock("done"),)),
    ]
    derived = session.derive_messages()
    assert derived == expected
    assert Session(session.header, list(session.events)).derive_messages() == expected
    # Each call returns a fresh list: mutating it changes nothing.
    derived.clear()
    assert session.derive_messages() == expected


def test_last_turn_and_turn_end() -> None:
    session = fresh()
    assert session.last_turn() == 0
    assert session.turn_end(1) is None
    session.append("turn/start", {"turn": 1})
    assert session.last_turn() == 1
    assert session.turn_end(1) is None
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": 2})
    session.append("turn/end", {"turn": 2, "reason": {"kind": "blocked", "message": "no"}})
    assert session.last_turn() == 2
    assert session.turn_end(1) == {"kind": "completed"}
    assert session.turn_end(2) == {"kind": "blocked", "message": "no"}
    assert session.turn_end(3) is None
    # A session built over stored events knows its last turn too.
    assert Session(session.header, list(session.events)).last_turn() == 2


def test_a_stored_log_must_be_contiguous() -> None:
    events = [SessionEvent(0, "turn/start", 0.0, {"turn": 1}), SessionEvent(2, "x", 0.0, {})]
    with pytest.raises(SessionError, match="not contiguous: event 1 has seq 2"):
        Session(SessionHeader("s", 0.0), events)


def test_json_round_trips() -> None:
    header = SessionHeader("s", 1.5, "/srv", {"agent": "a"})
    assert header.to_json() == {
        "id": "s",
        "created_at": 1.5,
        "cwd": "/srv",
        "meta": {"agent": "a"},
    }
    assert SessionHeader.from_json(header.to_json()) == header
    bare = SessionHeader("t", 2.0)
    assert bare.to_json() == {"id": "t", "created_at": 2.0}
    assert SessionHeader.from_json(bare.to_json()) == bare
    event = SessionEvent(3, "turn/start", 4.5, {"turn": 1})
    assert event.to_json() == {"seq": 3, "type": "turn/start", "time": 4.5, "data": {"turn": 1}}
    assert SessionEvent.from_json(event.to_json()) == event


# -- closing a turn a crash left open -----------------------------------------------------


def test_close_open_turn_answers_every_call_and_ends_the_turn() -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user("go"))
    session.append("step/start", {"turn": 1, "step": 1})
    calls = (ToolCallBlock("c1", "echo", "{}"), ToolCallBlock("c2", "read", "{}"))
    session.append("assistant/message", assistant(*calls))
    session.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "echo"})
    assert session.close_open_turn() is True
    closing = [(e.type, dict(e.data)) for e in session.events[5:]]
    assert closing == [
        (
            "tool/result",
            {
                "turn": 1,
                "step": 1,
                "call_id": "c1",
                "name": "echo",
                "content": (
                    "Error: the session was interrupted while this tool call ran; its "
                    "outcome is unknown"
                ),
                "is_error": True,
                "code": "TOOL_OUTCOME_UNKNOWN",
            },
        ),
        (
            "tool/result",
            {
                "turn": 1,
                "step": 1,
                "call_id": "c2",
                "name": "read",
                "content": "Error: the session was interrupted before this tool call started",
                "is_error": True,
                "code": "TOOL_NOT_STARTED",
            },
        ),
        ("step/end", {"turn": 1, "step": 1}),
        ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}}),
    ]
    # The history is valid again: every call has its result.
    assert [m.role for m in session.derive_messages()] == ["user", "assistant", "tool", "tool"]
    assert session.close_open_turn() is False


def test_close_open_turn_keeps_answered_calls_and_closed_steps() -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("assistant/message", assistant(ToolCallBlock("c1", "echo", "{}")))
    session.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "echo"})
    session.append("tool/result", result("c1", "pong"))
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    interrupted = assistant(TextBlock("half"), ToolCallBlock("c9", "x", ""), interrupted=True)
    session.append("assistant/message", interrupted | {"step": 2})
    session.append("step/end", {"turn": 1, "step": 2})
    assert session.close_open_turn() is True
    assert [e.type for e in session.events[-1:]] == ["turn/end"]
    assert len(session.events) == 10


def test_close_open_turn_with_no_open_turn() -> None:
    session = fresh()
    assert session.close_open_turn() is False
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert session.close_open_turn() is False
    assert len(session.events) == 2


# -- the store ----------------------------------------------------------------------------


async def test_create_get_list_and_publish() -> None:
    async with store() as (_root, sessions, heard):
        session = sessions.create(id="one", cwd="/srv", meta={"agent": "a"})
        other = sessions.create()
        assert len(other.id) == 32
        assert session.header.cwd == "/srv"
        assert session.header.meta == {"agent": "a"}
        assert sessions.get("one") is session
        assert sessions.get("nope") is None
        assert sessions.list() == [session, other]
        assert heard.created == [session, other]
        event = session.append("turn/start", {"turn": 1})
        assert heard.events == [(session, event)]


async def test_a_scoped_listener_hears_only_the_sessions_of_its_scope() -> None:
    mine, other = object(), object()
    async with store() as (root, sessions, heard):
        scoped: list[tuple[str, Session]] = []

        def on_event(session: Session, event: SessionEvent) -> None:
            scoped.append((event.type, session))

        root.scoped(mine).on("session/created", lambda s: scoped.append(("created", s)))
        root.scoped(mine).on("session/event", on_event)
        root.scoped(mine).on("session/disposed", lambda s: scoped.append(("disposed", s)))
        own = root.scoped(mine).sessions.prepare(id="own")
        leave_own = root.scoped(mine).sessions.enter(own)
        theirs = root.scoped(other).sessions.create(id="theirs")
        unscoped = sessions.create(id="global")
        for session in (own, theirs, unscoped):
            session.append("turn/start", {"turn": 1})
        await leave_own()
        assert scoped == [("created", own), ("turn/start", own), ("disposed", own)]
        # A global listener hears every session.
        assert [s.id for s, _ in heard.events] == ["own", "theirs", "global"]
        assert [s.id for s in heard.created] == ["own", "theirs", "global"]
        assert [s.id for s in heard.disposed] == ["own"]
        # Back out of the store and in globally: the session is no longer scoped.
        sessions.enter(own)
        own.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert len(scoped) == 3


async def test_a_duplicate_id_is_refused() -> None:
    async with store() as (_root, sessions, heard):
        sessions.create(id="one")
        with pytest.raises(SessionError, match='session "one" already exists'):
            sessions.create(id="one")
        assert len(heard.created) == 1


async def test_prepare_then_enter() -> None:
    async with store() as (_root, sessions, heard):
        session = sessions.prepare(id="later")
        session.append("turn/start", {"turn": 1})
        assert sessions.get("later") is None
        assert heard.events == []
        disposer = sessions.enter(session)
        assert isinstance(disposer, Disposer)
        assert sessions.get("later") is session
        event = session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert heard.events == [(session, event)]
        await disposer()
        assert sessions.get("later") is None
        assert heard.disposed == [session]
        # Out of the store, its appends are no longer published.
        session.append("turn/start", {"turn": 2})
        assert len(heard.events) == 1


async def test_a_raising_event_listener_makes_append_raise_after_recording() -> None:
    async with store() as (root, sessions, _heard):
        session = sessions.create()

        def broken(session: Session, event: SessionEvent) -> None:
            raise RuntimeError("disk full")

        root.on("session/event", broken)
        with pytest.raises(RuntimeError, match="disk full"):
            session.append("turn/start", {"turn": 1})
        assert [e.type for e in session.events] == ["turn/start"]


async def test_a_raising_created_listener_vetoes_the_session() -> None:
    async with store() as (root, sessions, heard):

        def veto(session: Session) -> None:
            raise RuntimeError("not today")

        stop = root.on("session/created", veto)
        with pytest.raises(RuntimeError, match="not today"):
            sessions.create(id="vetoed")
        assert sessions.list() == []
        assert [s.id for s in heard.disposed] == ["vetoed"]
        await stop()
        sessions.create(id="vetoed")
        assert [s.id for s in sessions.list()] == ["vetoed"]


async def test_a_session_leaves_the_store_with_its_owner() -> None:
    async with store() as (root, _sessions, heard):
        made: list[Session] = []

        def owner(ctx: Context, config: None) -> None:
            made.append(ctx.sessions.create(id="owned"))

        fiber = await root.plugin(owner)
        assert root.sessions.get("owned") is made[0]
        await fiber.dispose()
        assert root.sessions.get("owned") is None
        assert heard.disposed == made


# -- resume -------------------------------------------------------------------------------


def stored_log() -> tuple[SessionHeader, EventLog]:
    session = Session(SessionHeader("stored", 1.0, "/srv"))
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user("hi"))
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return session.header, session.events


async def test_resume_loads_through_session_open() -> None:
    async with store() as (root, sessions, heard):
        asked: list[str] = []

        async def open_session(session_id: str) -> Any:
            asked.append(session_id)
            return stored_log() if session_id == "stored" else None

        root.on("session/open", open_session)
        session = await sessions.resume("stored")
        assert asked == ["stored"]
        assert sessions.get("stored") is session
        assert heard.created == [session]
        assert session.header.cwd == "/srv"
        assert session.last_turn() == 1
        assert session.derive_messages() == [Message.user("hi")]
        # A closed last turn is left as it is.
        assert len(session.events) == 3
        with pytest.raises(SessionError, match='session "stored" already exists'):
            await sessions.resume("stored")
        with pytest.raises(SessionError, match='no stored session "other"'):
            await sessions.resume("other")
        assert asked == ["stored", "other"]


async def test_resume_closes_a_turn_left_open_and_publishes_the_closing_events() -> None:
    async with store() as (root, sessions, heard):
        header, stored = stored_log()
        events = [*stored, SessionEvent(3, "turn/start", 2.0, {"turn": 2})]

        def open_session(session_id: str) -> Any:
            return header, events

        root.on("session/open", open_session)
        session = await sessions.resume("stored")
        assert session.turn_end(2) == {"kind": "interrupted"}
        assert [(s.id, e.type) for s, e in heard.events] == [("stored", "turn/end")]


async def test_a_resume_whose_repair_cannot_be_recorded_leaves_nothing_behind() -> None:
    async with store() as (root, sessions, _heard):
        header, stored = stored_log()
        events = [*stored, SessionEvent(3, "turn/start", 2.0, {"turn": 2})]
        failing = [True]

        def open_session(session_id: str) -> Any:
            return header, list(events)

        def refuse(session: Session, event: SessionEvent) -> None:
            if failing[0]:
                raise OSError("disk full")

        root.on("session/open", open_session)
        root.on("session/event", refuse)
        with pytest.raises(OSError, match="disk full"):
            await sessions.resume("stored")
        assert sessions.get("stored") is None
        failing[0] = False
        session = await sessions.resume("stored")
        assert session.turn_end(2) == {"kind": "interrupted"}


async def test_resume_refuses_a_header_for_another_session() -> None:
    async with store() as (root, sessions, _heard):

        def open_session(session_id: str) -> Any:
            return SessionHeader("someone-else", 0.0), []

        root.on("session/open", open_session)
        with pytest.raises(SessionError, match='answered "mine" with the header'):
            await sessions.resume("mine")
        assert sessions.list() == []


# -- what the history keeps of turns that did not complete (RFC 0009) ------------------------


def turn_of(session: Session, turn: int, *events: tuple[str, dict[str, Any]], end: str) -> None:
    session.append("turn/start", {"turn": turn})
    for kind, data in events:
        session.append(kind, {**data, "turn": turn})
    session.append("turn/end", {"turn": turn, "reason": {"kind": end}})


@pytest.mark.parametrize("end", ["error", "aborted", "blocked", "interrupted"])
def test_a_turn_the_model_never_answered_leaves_nothing_in_the_history(end: str) -> None:
    session = fresh()
    turn_of(session, 1, ("user/message", user("too long")), end=end)
    assert session.derive_messages() == []
    assert session.unanswered(1) == [Message.user("too long")]
    turn_of(
        session,
        2,
        ("user/message", user("shorter")),
        ("assistant/message", assistant(TextBlock("fine"))),
        end="completed",
    )
    # Never two user messages in a row: the refused one is not sent again.
    assert [m.role for m in session.derive_messages()] == ["user", "assistant"]
    assert session.unanswered(2) == []
    # Derived again from the stored log (a resume), the history is the same.
    again = Session(session.header, list(session.events))
    assert again.derive_messages() == session.derive_messages()


def test_a_turn_that_broke_after_some_output_keeps_it() -> None:
    session = fresh()
    turn_of(
        session,
        1,
        ("user/message", user("read it")),
        ("assistant/message", assistant(ToolCallBlock("c1", "read", "{}"))),
        ("tool/result", result("c1", "the text")),
        ("assistant/message", assistant(TextBlock("It say"), step=2, interrupted=True)),
        end="error",
    )
    assert [m.role for m in session.derive_messages()] == ["user", "assistant", "tool", "assistant"]
    assert session.derive_messages()[-1].text == "It say"
    assert session.unanswered(1) == []


def test_the_turn_in_progress_is_in_the_history_until_it_ends() -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user("now"))
    assert session.derive_messages() == [Message.user("now")]  # the request of step 1
    session.append("turn/end", {"turn": 1, "reason": {"kind": "aborted", "reason": "user"}})
    assert session.derive_messages() == []
    assert session.unanswered(7) == []  # no such turn
    session.append("turn/start", {"turn": 2})
    assert session.unanswered(2) == []  # still open


async def test_the_store_is_named_sessions_in_logs_and_errors() -> None:
    # Mutant: `name = "sessions"` dropped from the Sessions service.
    async with store() as (root, _, _):
        assert root.sessions.home_ctx.fiber.name == "sessions"


# -- event types declared by plugins ------------------------------------------------------


async def test_a_declared_event_type_is_recorded_while_its_declaration_lives() -> None:
    async with store() as (_, sessions, heard):
        session = sessions.create("s1")
        with pytest.raises(SessionError, match='unknown session event type "todo/write"'):
            session.append("todo/write", {"todos": []})
        declared = sessions.declare_event_types("todo/write", "usage/step")
        assert sessions.event_types() == EVENT_TYPES | {META_EVENT, "todo/write", "usage/step"}
        event = session.append("todo/write", {"todos": []})
        assert heard.events[-1] == (session, event)
        with pytest.raises(SessionError, match=r"known types: .*step/start, todo/write, tool/call"):
            session.append("todo/read", {})
        await declared()
        assert sessions.event_types() == EVENT_TYPES | {META_EVENT}
        with pytest.raises(SessionError, match="unknown session event type"):
            session.append("todo/write", {"todos": []})
        assert [e.type for e in session.events] == ["todo/write"]


async def test_a_type_stays_declared_until_its_last_declaration_goes() -> None:
    async with store() as (_, sessions, _):
        first = sessions.declare_event_types("todo/write")
        second = sessions.declare_event_types("todo/write")
        session = sessions.create()
        await first()
        session.append("todo/write", {"todos": []})
        await second()
        assert sessions._declared == {META_EVENT: 1}  # the store's own, held for good


async def test_declarations_go_with_the_plugin_that_made_them() -> None:
    class Todo(Plugin):
        inject = ("sessions",)

        def setup(self) -> Disposer:
            declared: Disposer = self.ctx.sessions.declare_event_types("todo/write")
            return declared

    async with store() as (root, sessions, _):
        fiber = await root.plugin(Todo)
        assert "todo/write" in sessions.event_types()
        await fiber.dispose()
        assert sessions._declared == {META_EVENT: 1}


async def test_a_session_outside_the_store_knows_only_the_built_in_types() -> None:
    async with store() as (_, sessions, _):
        sessions.declare_event_types("todo/write")
        prepared = sessions.prepare("p")
        with pytest.raises(SessionError, match="unknown session event type"):
            prepared.append("todo/write", {})
        leave = sessions.enter(prepared)
        prepared.append("todo/write", {})
        await leave()
        with pytest.raises(SessionError, match="unknown session event type"):
            prepared.append("todo/write", {})


@pytest.mark.parametrize(
    ("types", "message"),
    [
        ((), "needs at least one event type"),
        (("ok/first", 7), "must be a string, got int"),
        (("todo",), 'invalid session event type "todo": it must be lower-case words'),
        (("Todo/Write",), 'invalid session event type "Todo/Write"'),
        (("todo/",), 'invalid session event type "todo/"'),
        (("turn/start",), '"turn/start" is a built-in session event type'),
        (("a/b", "a/b"), "repeats a type: a/b, a/b"),
    ],
)
async def test_bad_declarations_declare_nothing(types: tuple[Any, ...], message: str) -> None:
    async with store() as (_, sessions, _):
        with pytest.raises(SessionError, match=message):
            sessions.declare_event_types(*types)
        assert sessions._declared == {META_EVENT: 1}
