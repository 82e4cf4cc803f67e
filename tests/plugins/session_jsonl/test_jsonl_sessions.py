"""``session-jsonl`` with a real store: round trips, lifecycle, resume and crash repair
(the store's, persisted by the backend), listing, ids, locking."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh import ConfigError, Context, FiberState
from dsh_llm import Message, TextBlock, ToolCallBlock
from dsh_session import Session, SessionError, SessionEvent, SessionHeader, Sessions
from dsh_session_jsonl import (
    FILE_NAME,
    FORMAT_VERSION,
    JsonlSessions,
    SessionCorruptError,
    SessionExistsError,
    SessionIdError,
    SessionInUseError,
    SessionReadError,
    check_session_id,
)
from tests.plugins.session_jsonl.jsonl_support import file_records, jsonl_runtime, write_log

pytestmark = pytest.mark.anyio

#: The store's crash repair results (``dsh_session._session``).
UNKNOWN_OUTCOME = (
    "Error: the session was interrupted while this tool call ran; its outcome is unknown"
)
NOT_STARTED = "Error: the session was interrupted before this tool call started"


def turn(session: Session, n: int, *, close: bool = True) -> None:
    """A realistic turn: a tool call step with streamed chunks, then an answer."""
    session.append("turn/start", {"turn": n})
    session.append("user/message", {"turn": n, "message": Message.user(f"echo {n}").to_json()})
    session.append("step/start", {"turn": n, "step": 1})
    session.append("request/header", {"turn": n, "step": 1, "header": {"model": "m"}})
    for i in range(3):
        session.append("assistant/chunk", {"turn": n, "step": 1, "chunk": {"i": i}})
    call = ToolCallBlock(f"call-{n}", "echo", '{"text": "x"}')
    message = Message("assistant", (TextBlock("calling"), call))
    session.append("assistant/message", {"turn": n, "step": 1, "message": message.to_json()})
    session.append(
        "tool/call",
        {"turn": n, "step": 1, "call_id": call.id, "name": "echo", "arguments": call.arguments},
    )
    session.append(
        "tool/result",
        {
            "turn": n,
            "step": 1,
            "call_id": call.id,
            "name": "echo",
            "content": "x",
            "is_error": False,
        },
    )
    session.append("step/end", {"turn": n, "step": 1})
    if close:
        answer = Message("assistant", (TextBlock(f"done {n}"),))
        session.append("step/start", {"turn": n, "step": 2})
        session.append("assistant/message", {"turn": n, "step": 2, "message": answer.to_json()})
        session.append("step/end", {"turn": n, "step": 2})
        session.append("turn/end", {"turn": n, "reason": {"kind": "completed"}})


def json_records(session: Session) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(e.to_json())) for e in session.events]


def events_of(build: Callable[[Session], None]) -> list[dict[str, Any]]:
    """The records ``build`` appends to an in-memory session (no persistence)."""
    session = Session(SessionHeader("scratch", 1.0))
    build(session)
    return json_records(session)


def two_turns(session: Session) -> None:
    turn(session, 1)
    turn(session, 2)


def one_and_a_half_turns(session: Session) -> None:
    turn(session, 1)
    turn(session, 2, close=False)


def entries(path: Path) -> list[str]:
    return sorted(os.listdir(path))


def same(a: Sequence[SessionEvent], b: Sequence[SessionEvent]) -> bool:
    return [e.to_json() for e in a] == [e.to_json() for e in b]


# -- round trips -------------------------------------------------------------------------


async def test_round_trip_through_a_fresh_runtime(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        session = sessions.create(cwd="/work", meta={"agent": "main", "model": "m"})
        turn(session, 1)
        turn(session, 2)
        written = list(session.events)
        messages = session.derive_messages()
        assert plugin.root == tmp_path
        assert [s.id for s in plugin.list_sessions()] == [session.id]
        assert plugin.log_of(session.id) is not None
        assert repr(plugin).startswith("<JsonlSessions")
    path = tmp_path / session.id / FILE_NAME
    lines = file_records(path)
    assert lines[0] == {
        "type": "session",
        "version": FORMAT_VERSION,
        "id": session.id,
        "created_at": session.header.created_at,
        "cwd": "/work",
        "meta": {"agent": "main", "model": "m"},
    }
    assert lines[1:] == [json.loads(json.dumps(e.to_json())) for e in written]
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        resumed = await sessions.resume(session.id)
        assert resumed.header == session.header
        assert same(resumed.events, written)
        assert resumed.derive_messages() == messages
        # Appending goes on where the file ended.
        turn(resumed, 3)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        again = await sessions.resume(session.id)
        assert [e.seq for e in again.events] == list(range(len(again.events)))
        assert again.last_turn() == 3
        assert again.turn_end(3) == {"kind": "completed"}


async def test_unicode_and_lone_surrogates_survive(tmp_path: Path) -> None:
    texts = ["héllo 你好 🎉", "bad \ud800 surrogate"]
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create()
        for text in texts:
            session.append("user/message", {"turn": 1, "message": Message.user(text).to_json()})
    assert "\\ud800" in (tmp_path / session.id / FILE_NAME).read_text()
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        resumed = await sessions.resume(session.id)
        assert [m.text for m in resumed.derive_messages()] == texts
        assert len(resumed.events) == 2  # outside any turn: nothing to repair


async def test_no_file_until_the_first_write(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        session = sessions.create()
        assert not (tmp_path / session.id).exists()  # loading a deployment writes nothing
        session.append("turn/start", {"turn": 1})
        assert not (tmp_path / session.id).exists()  # buffered
        session.append("user/message", {"turn": 1, "message": Message.user("hi").to_json()})
        path = tmp_path / session.id / FILE_NAME
        assert [line.get("seq") for line in file_records(path)] == [None, 0, 1]
        log = plugin.log_of(session.id)
        assert log is not None
        assert log.path == path
        assert log.length == path.stat().st_size
        assert log.pending == 0
        assert repr(log).startswith("<SessionLog")
        assert list(path.parent.iterdir()) == [path]  # the temporary name is gone


# -- lifecycle ---------------------------------------------------------------------------


async def test_a_session_leaving_the_store_flushes_and_closes_its_file(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (ctx, sessions, plugin):
        made: list[Session] = []

        def owner(octx: Context, config: None) -> None:
            session = octx.sessions.create()
            turn(session, 1)
            session.append("turn/start", {"turn": 2})  # buffered when the owner leaves
            made.append(session)

        fiber = await ctx.plugin(owner)
        session = made[0]
        assert plugin.log_of(session.id) is not None
        await fiber.dispose()
        assert plugin.log_of(session.id) is None
        assert file_records(tmp_path / session.id / FILE_NAME)[-1]["type"] == "turn/start"
        # The lock is released: the same runtime can resume it (turn 2 is repaired).
        resumed = await sessions.resume(session.id)
        assert resumed.turn_end(2) == {"kind": "interrupted"}


async def test_unloading_the_plugin_closes_every_file(tmp_path: Path) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        fiber = await ctx.plugin(JsonlSessions, {"root": str(tmp_path)})
        plugin = fiber.instance
        session = ctx.sessions.create()
        turn(session, 1, close=False)
        session.append("step/start", {"turn": 1, "step": 2})  # buffered
        await fiber.dispose()
        assert plugin.log_of(session.id) is None
        lines = file_records(tmp_path / session.id / FILE_NAME)
        assert lines[-1]["type"] == "step/start"
        # Not persisted any more, and the file is free for another runtime.
        session.append("step/end", {"turn": 1, "step": 2})
        async with jsonl_runtime(tmp_path) as (_, other, _):
            resumed = await other.resume(session.id)
            assert [e.type for e in resumed.events[-2:]] == ["step/end", "turn/end"]


async def test_a_restarted_plugin_continues_the_same_files(tmp_path: Path) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        fiber = await ctx.plugin(JsonlSessions, {"root": str(tmp_path)})
        session = ctx.sessions.create()
        untouched = ctx.sessions.create()  # never written: stays without a file
        turn(session, 1)
        session.append("turn/start", {"turn": 2})
        await fiber.restart()
        assert fiber.state is FiberState.ACTIVE
        assert fiber.instance.log_of(session.id) is not None
        session.append("user/message", {"turn": 2, "message": Message.user("x").to_json()})
        session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
        written = list(session.events)
        assert not (tmp_path / untouched.id).exists()
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        assert same((await sessions.resume(session.id)).events, written)


async def test_sessions_that_went_live_before_the_plugin_are_written(tmp_path: Path) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        session = ctx.sessions.create()
        turn(session, 1)
        empty = ctx.sessions.create()
        fiber = await ctx.plugin(JsonlSessions, {"root": str(tmp_path)})
        assert fiber.state is FiberState.ACTIVE
        assert len(file_records(tmp_path / session.id / FILE_NAME)) == len(session.events) + 1
        assert not (tmp_path / empty.id).exists()
        turn(session, 2)
        written = list(session.events)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        assert same((await sessions.resume(session.id)).events, written)


async def test_a_session_unknown_to_the_plugin_is_attached_on_its_first_event(
    tmp_path: Path,
) -> None:
    async with jsonl_runtime(tmp_path) as (ctx, _, plugin):
        header = SessionHeader("stray", 5.0)
        stray = Session(header, on_append=lambda s, e: ctx.emit("session/event", s, e))
        stray.append("turn/start", {"turn": 1})
        assert plugin.log_of("stray") is not None
        turn(stray, 2)
    lines = file_records(tmp_path / "stray" / FILE_NAME)
    assert [line.get("seq") for line in lines] == [None, *range(len(stray.events))]


async def test_attach_refuses_a_file_of_another_session_with_that_id(tmp_path: Path) -> None:
    write_log(tmp_path, "taken", events_of(lambda s: turn(s, 1)), created=123.0)
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        ctx.sessions.create(id="taken")
        fiber = ctx.plugin(JsonlSessions, {"root": str(tmp_path)})
        with pytest.raises(SessionExistsError, match='holds another session "taken"'):
            await fiber
        # The file was left alone and unlocked.
        async with jsonl_runtime(tmp_path) as (_, other, _):
            assert len((await other.resume("taken")).events) == 15


async def test_attach_cuts_a_damaged_tail_then_writes_what_is_missing(tmp_path: Path) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        session = ctx.sessions.create(id="live")
        turn(session, 1)
        done = json_records(session)
        turn(session, 2, close=False)
        # A previous backend instance wrote turn 1 and died mid-record.
        created = session.header.created_at
        write_log(tmp_path, "live", done, tail=b'{"seq": 15, "ty', created=created)
        await ctx.plugin(JsonlSessions, {"root": str(tmp_path)})
        written = list(session.events)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        resumed = await sessions.resume("live")
        assert same(resumed.events[: len(written)], written)
        assert resumed.turn_end(2) == {"kind": "interrupted"}


async def test_creating_a_stored_id_is_refused(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        turn(sessions.create(id="dup"), 1)
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        with pytest.raises(SessionExistsError, match='session "dup" is already stored'):
            sessions.create(id="dup")
        assert sessions.get("dup") is None
        assert plugin.log_of("dup") is None


async def test_an_id_taken_on_disk_after_creation_is_refused_at_the_first_write(
    tmp_path: Path,
) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create(id="race")
        write_log(tmp_path, "race", [])  # another process published it first
        with pytest.raises(SessionExistsError, match="already exists"):
            session.append("user/message", {"turn": 1, "message": Message.user("x").to_json()})
        assert file_records(tmp_path / "race" / FILE_NAME)[1:] == []
        assert [p.name for p in (tmp_path / "race").iterdir()] == [FILE_NAME]


# -- resume and crash repair -------------------------------------------------------------


async def test_resuming_an_unknown_id(tmp_path: Path) -> None:
    (tmp_path / "nofile").mkdir()
    async with jsonl_runtime(tmp_path) as (ctx, sessions, _):
        assert await ctx.serial("session/open", "nothing") is None
        assert await ctx.serial("session/open", "nofile") is None
        with pytest.raises(SessionError, match='no stored session "nothing"'):
            await sessions.resume("nothing")


async def test_a_torn_last_line_is_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = events_of(lambda s: turn(s, 1))
    path = write_log(tmp_path, "torn", events, tail=b'{"seq": 15, "type": "turn/st')
    good = len(path.read_bytes()) - len(b'{"seq": 15, "type": "turn/st')
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with caplog.at_level(logging.WARNING, "dsh.session-jsonl"):
            resumed = await sessions.resume("torn")
        assert [e.to_json() for e in resumed.events] == events
    assert f"{path}:17: dropped a torn last line" in caplog.text
    assert path.stat().st_size == good


async def test_a_corrupt_record_before_the_last_turn_end_refuses_the_load(
    tmp_path: Path,
) -> None:
    events = events_of(two_turns)
    path = write_log(tmp_path, "bad", events)
    raw = path.read_bytes().split(b"\n")
    raw[5] = b'{"seq": 4, "type": "assistant/chunk", "time": 1, "da'  # line 6
    path.write_bytes(b"\n".join(raw))
    before = path.read_bytes()
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(SessionCorruptError) as info:
            await sessions.resume("bad")
        assert sessions.get("bad") is None
    error = info.value
    assert str(error).startswith(f"{path}:6: not JSON")
    assert "before the committed turn end on line 16" in str(error)
    assert (error.path, error.line, error.code) == (str(path), 6, "SESSION_CORRUPT")
    assert path.read_bytes() == before  # a refused load changes nothing


async def test_an_invalid_record_after_the_last_turn_end_truncates_and_repairs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = events_of(one_and_a_half_turns)
    assert events[23]["type"] == "tool/call"
    broken = dict(events[23], data={"turn": 2, "step": 1})  # line 25: fields missing
    later = [events[24], {"not": "a record"}, events[25]]  # lines 26-28: after the damage
    path = write_log(tmp_path, "tail", [*events[:23], broken, *later])
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with caplog.at_level(logging.WARNING, "dsh.session-jsonl"):
            resumed = await sessions.resume("tail")
        kinds = [e.type for e in resumed.events[23:]]
        # The call on line 22 never reached the log: the message asked for it.
        assert kinds == ["tool/result", "step/end", "turn/end"]
        result = resumed.events[23].data
        assert result["code"] == "TOOL_NOT_STARTED"
        assert result["content"] == NOT_STARTED
    assert f'{path}:25: "tool/call" record: data.call_id is missing or malformed' in caplog.text
    assert "dropped it and the 3 line(s) after it" in caplog.text
    lines = file_records(path)
    assert [line.get("seq") for line in lines] == [None, *range(26)]
    assert lines[24:] == [e.to_json() for e in resumed.events[23:]]


async def test_a_seq_gap_refuses_the_load(tmp_path: Path) -> None:
    events = events_of(lambda s: turn(s, 1))
    del events[7]
    path = write_log(tmp_path, "gap", events)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(SessionCorruptError, match=f"{path}:9: seq 8 where 7 was expected"):
            await sessions.resume("gap")


async def test_an_open_turn_with_a_pending_tool_call_is_closed_durably(tmp_path: Path) -> None:
    def crashed(session: Session) -> None:
        turn(session, 1)
        turn(session, 2, close=False)
        del session.events[-2:]  # the result and the step end never reached the disk

    events = events_of(crashed)
    path = write_log(tmp_path, "open", events)
    before = path.read_bytes()
    async with jsonl_runtime(tmp_path) as (ctx, sessions, _):
        _, loaded = await ctx.serial("session/open", "open")
        assert [e.to_json() for e in loaded] == events  # loading alone writes nothing
        assert path.read_bytes() == before
        # The store closes the turn; its records reach the file before resume returns.
        resumed = await sessions.resume("open")
        closers = [e.to_json() for e in resumed.events[len(events) :]]
        assert file_records(path)[1:] == [*events, *closers]
        assert [c["seq"] for c in closers] == [24, 25, 26]
        assert [(c["type"], c["data"]) for c in closers] == [
            (
                "tool/result",
                {
                    "turn": 2,
                    "step": 1,
                    "call_id": "call-2",
                    "name": "echo",
                    "content": UNKNOWN_OUTCOME,
                    "is_error": True,
                    "code": "TOOL_OUTCOME_UNKNOWN",
                },
            ),
            ("step/end", {"turn": 2, "step": 1}),
            ("turn/end", {"turn": 2, "reason": {"kind": "interrupted"}}),
        ]
        history = resumed.derive_messages()
        assert history[-1].role == "tool"
        assert history[-2].tool_calls[0].id == "call-2"
    # Closed on disk exactly once: a fresh runtime finds nothing to close.
    closed = path.read_bytes()
    ends = [line for line in file_records(path) if line.get("type") == "turn/end"]
    assert [end["data"]["turn"] for end in ends] == [1, 2]
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        again = await sessions.resume("open")
        assert same(again.events, resumed.events)
        assert path.read_bytes() == closed  # resuming again added nothing
        again.append("turn/start", {"turn": 3})  # the log goes on after the repair
        again.append("user/message", {"turn": 3, "message": Message.user("x").to_json()})
    assert path.read_bytes().startswith(closed)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        third = await sessions.resume("open")  # turn 3 is closed now, turn 2 untouched
        assert same(third.events[:27], resumed.events)
        assert [e.type for e in third.events[27:]] == ["turn/start", "user/message", "turn/end"]
    assert [line.get("seq") for line in file_records(path)] == [None, *range(30)]


async def test_a_closed_log_and_a_log_without_turns_load_unchanged(tmp_path: Path) -> None:
    def closed_then_a_message(session: Session) -> None:
        turn(session, 1)
        # A record after the turn end opens nothing.
        session.append("user/message", {"turn": 1, "message": Message.user("x").to_json()})

    closed = write_log(tmp_path, "closed", events_of(lambda s: turn(s, 1)))
    empty = write_log(tmp_path, "empty", [])
    after = write_log(tmp_path, "after", events_of(closed_then_a_message))
    paths = [closed, empty, after]
    before = [path.read_bytes() for path in paths]
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        assert len((await sessions.resume("closed")).events) == 15
        assert (await sessions.resume("empty")).events == []
        assert len((await sessions.resume("after")).events) == 16
    assert [path.read_bytes() for path in paths] == before


@pytest.mark.parametrize("change", ["append", "delete"])
async def test_a_file_that_changed_between_load_and_adoption_is_refused(
    tmp_path: Path, change: str
) -> None:
    path = write_log(tmp_path, "moving", events_of(lambda s: turn(s, 1)))

    def meddle(session: Session) -> None:
        if change == "delete":
            path.unlink()
        else:
            with path.open("ab") as file:
                file.write(b"{}\n")

    async with jsonl_runtime(tmp_path) as (ctx, sessions, _):
        ctx.on("session/created", meddle, prepend=True)
        with pytest.raises(SessionInUseError, match="changed after it was loaded"):
            await sessions.resume("moving")
        assert sessions.get("moving") is None


async def test_a_loaded_session_not_adopted_does_not_confuse_a_later_create(
    tmp_path: Path,
) -> None:
    write_log(tmp_path, "loaded", events_of(lambda s: turn(s, 1)))
    async with jsonl_runtime(tmp_path) as (ctx, sessions, _):
        header, events = await ctx.serial("session/open", "loaded")
        assert header.id == "loaded"
        assert len(events) == 15
        with pytest.raises(SessionExistsError):
            sessions.create(id="loaded")


async def test_a_live_session_cannot_be_opened_twice(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (ctx, sessions, _):
        live = sessions.create(id="live")
        turn(live, 1)
        with pytest.raises(SessionError, match='session "live" already exists'):
            await sessions.resume("live")  # the store refuses before asking
        with pytest.raises(SessionInUseError, match='session "live" is live in this process'):
            await ctx.serial("session/open", "live")
        async with jsonl_runtime(tmp_path) as (_, other, _):
            with pytest.raises(SessionInUseError, match="in use by a live session"):
                await other.resume("live")


async def test_unreadable_session_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dir" / FILE_NAME).mkdir(parents=True)
    write_log(tmp_path, "eio", events_of(lambda s: turn(s, 1)))
    real_read = os.read

    def failing_read(fd: int, size: int) -> bytes:
        if Path(f"/proc/self/fd/{fd}").resolve().name == FILE_NAME:
            raise OSError(5, "Input/output error")
        return real_read(fd, size)

    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(SessionReadError, match="cannot open session file"):
            await sessions.resume("dir")
        monkeypatch.setattr(os, "read", failing_read)
        with pytest.raises(SessionReadError, match="cannot read session file") as info:
            await sessions.resume("eio")
        monkeypatch.undo()
        assert info.value.code == "SESSION_READ"
        assert isinstance(info.value, OSError)
        assert len((await sessions.resume("eio")).events) == 15  # the lock was released


# -- listing through the store -----------------------------------------------------------


async def test_the_store_lists_stored_sessions_most_recent_first(tmp_path: Path) -> None:
    def at(when: float, build: Callable[[Session], None]) -> list[dict[str, Any]]:
        return [dict(record, time=when) for record in events_of(build)]

    write_log(tmp_path, "old", at(100.0, lambda s: turn(s, 1)), created=50.0)
    write_log(tmp_path, "crashed", at(200.0, one_and_a_half_turns), created=60.0)
    write_log(tmp_path, "fresh", [], created=150.0)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / FILE_NAME).write_text('{"type": "nope"}\n')
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        live = sessions.create(id="live", cwd="/w", meta={"agent": "main"})
        turn(live, 1)
        stored = sessions.stored()
        assert [s.id for s in stored] == ["live", "crashed", "fresh", "old", "broken"]
        assert stored == plugin.list_sessions()
        now, crashed, fresh, old, broken = stored
        assert (now.cwd, dict(now.meta), now.turns, now.open) == ("/w", {"agent": "main"}, 1, False)
        assert now.last_activity == live.events[-1].time
        assert (crashed.created_at, crashed.turns, crashed.open) == (60.0, 2, True)
        assert crashed.last_activity == 200.0
        assert (fresh.turns, fresh.last_activity, fresh.open) == (0, 150.0, False)
        assert (old.turns, old.last_activity, old.open, old.error) == (1, 100.0, False, None)
        assert broken.error is not None
        assert "line 1 is not a session header" in broken.error
        assert (broken.created_at, broken.last_activity, broken.turns) == (None, None, 0)
        # Listing reads without locking or writing: the crashed session resumes after it.
        assert (await sessions.resume("crashed")).turn_end(2) == {"kind": "interrupted"}
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        fiber = await ctx.plugin(JsonlSessions, {"root": str(tmp_path)})
        assert len(ctx.sessions.stored()) == 5
        await fiber.dispose()
        assert ctx.sessions.stored() == []  # the listener left with the plugin


# -- ids ---------------------------------------------------------------------------------

BAD_IDS = ["../x", "a/b", "/abs/x", "", ".", "..", "a\n", "-x", ".hidden", "x" * 129, "a b"]


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_ids_that_could_escape_the_root_are_refused(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "root"
    async with jsonl_runtime(root) as (_, sessions, _):
        with pytest.raises(SessionIdError, match="invalid session id") as info:
            await sessions.resume(bad)
        assert repr(bad) in str(info.value)
        assert info.value.code == "SESSION_ID"
        if bad:  # an empty id makes the store pick one
            with pytest.raises(SessionIdError):
                sessions.create(id=bad)
            assert sessions.get(bad) is None
    assert entries(tmp_path) == []  # nothing written, inside the root or out


def test_good_ids_are_accepted() -> None:
    for good in ["a", "0", "A.b_c-1", "x" * 128, "1af196fd5b7f48e08ec8313bb233323a"]:
        assert check_session_id(good) == good
    with pytest.raises(SessionIdError):
        check_session_id(None)


# -- config ------------------------------------------------------------------------------


async def test_a_relative_root_is_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        default = await ctx.plugin(JsonlSessions)
        assert default.instance.root == tmp_path / ".dsh" / "sessions"
        await default.dispose()
        home = await ctx.plugin(JsonlSessions, {"root": "~/s", "fsync": False})
        assert home.instance.root == tmp_path / "home" / "s"
        with pytest.raises(ConfigError, match="root"):
            await ctx.plugin(JsonlSessions, {"root": ""})
        with pytest.raises(ConfigError, match="nope"):
            await ctx.plugin(JsonlSessions, {"nope": 1})


# -- event types declared by plugins ------------------------------------------------------


async def test_a_declared_event_type_is_stored_and_resumed(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        sessions.declare_event_types("todo/write")
        session = sessions.create("todo")
        turn(session, 1, close=False)
        session.append("todo/write", {"todos": [{"content": "a", "status": "pending"}]})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        written = list(session.events)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        sessions.declare_event_types("todo/write")
        resumed = await sessions.resume("todo")
        assert same(resumed.events, written)


async def test_a_stored_type_nobody_declares_refuses_the_load(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        sessions.declare_event_types("todo/write")
        session = sessions.create("todo")
        session.append("turn/start", {"turn": 1})
        session.append("todo/write", {"todos": []})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(SessionCorruptError) as info:
            await sessions.resume("todo")
    assert "unknown event type 'todo/write' (not built in, and no loaded plugin declares it)" in (
        str(info.value)
    )
    assert info.value.line == 3


async def test_a_live_session_with_a_declared_type_attaches_to_its_file(tmp_path: Path) -> None:
    async with Context() as root:
        await root.plugin(Sessions)
        root.sessions.declare_event_types("todo/write")
        session = root.sessions.create("late")
        session.append("turn/start", {"turn": 1})
        session.append("todo/write", {"todos": []})
        backend = await root.plugin(JsonlSessions, {"root": str(tmp_path)})
        await backend.restart()  # attaches again to the file it wrote
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    kinds = [r.get("type") for r in file_records(tmp_path / "late" / FILE_NAME)[1:]]
    assert kinds == ["turn/start", "todo/write", "turn/end"]
