"""The store contract, run against each backend: round trips, lifecycle, resume and
crash repair (the store's, persisted by the backend), listing, ids, locking, declared
event types and data that cannot be stored."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from dsh import Context, FiberState
from dsh_llm import Message, TextBlock, TextDelta, Usage
from dsh_session import (
    ChunkRun,
    Session,
    SessionCorruptError,
    SessionDataError,
    SessionError,
    SessionExistsError,
    SessionHeader,
    SessionIdError,
    SessionInUseError,
    Sessions,
)
from tests.plugins.session_store.store_support import (
    NOT_STARTED,
    UNKNOWN_OUTCOME,
    Broken,
    Record,
    Store,
    append_user,
    chunk,
    entries,
    events_of,
    json_records,
    one_and_a_half_turns,
    same,
    turn,
    two_turns,
)

pytestmark = pytest.mark.anyio


def seqs(store: Store, session_id: str) -> list[int]:
    return [record["seq"] for record in store.records(session_id)]


# -- round trips -------------------------------------------------------------------------


async def test_round_trip_through_a_fresh_runtime(store: Store) -> None:
    async with store.runtime() as (_, sessions, plugin):
        session = sessions.create(cwd="/project", meta={"agent": "main", "model": "m"})
        turn(session, 1)
        turn(session, 2)
        written = list(session.events)
        messages = session.derive_messages()
        assert [s.id for s in plugin.list_sessions()] == [session.id]
        assert plugin.log_of(session.id) is not None
        assert repr(plugin).startswith(f"<{store.plugin.__name__}")
    assert store.header(session.id) == {
        "id": session.id,
        "created_at": session.header.created_at,
        "cwd": "/project",
        "meta": {"agent": "main", "model": "m"},
    }
    assert store.records(session.id) == json_records(session)
    async with store.runtime() as (_, sessions, _):
        resumed = await sessions.resume(session.id)
        assert resumed.header == session.header
        assert same(resumed.events, written)
        assert resumed.derive_messages() == messages
        # Appending goes on where the stored log ended.
        turn(resumed, 3)
    async with store.runtime() as (_, sessions, _):
        again = await sessions.resume(session.id)
        assert [e.seq for e in again.events] == list(range(len(again.events)))
        assert again.last_turn() == 3
        assert again.turn_end(3) == {"kind": "completed"}


async def test_unicode_and_lone_surrogates_survive(store: Store) -> None:
    texts = ["héllo 你好 🎉", "bad \ud800 surrogate"]
    async with store.runtime() as (_, sessions, _):
        session = sessions.create()
        for text in texts:
            append_user(session, text)
    async with store.runtime() as (_, sessions, _):
        resumed = await sessions.resume(session.id)
        assert [m.text for m in resumed.derive_messages()] == texts
        assert len(resumed.events) == 2  # outside any turn: nothing to repair


async def test_nothing_is_stored_until_the_first_commit(store: Store) -> None:
    async with store.runtime() as (_, sessions, plugin):
        session = sessions.create()
        assert not store.stored()  # loading a deployment writes nothing
        session.append("turn/start", {"turn": 1})
        assert not store.stored()  # buffered
        append_user(session, "hi")
        assert seqs(store, session.id) == [0, 1]
        log = plugin.log_of(session.id)
        assert log is not None
        assert log.pending == 0


# -- lifecycle ---------------------------------------------------------------------------


async def test_a_session_leaving_the_store_is_written_and_let_go(store: Store) -> None:
    async with store.runtime() as (ctx, sessions, plugin):
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
        assert store.records(session.id)[-1]["type"] == "turn/start"
        # The lock is released: the same runtime can resume it (turn 2 is repaired).
        resumed = await sessions.resume(session.id)
        assert resumed.turn_end(2) == {"kind": "interrupted"}


async def test_unloading_the_plugin_lets_go_of_every_session(store: Store) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        fiber = await store.start(ctx)
        plugin = fiber.instance
        session = ctx.sessions.create()
        turn(session, 1, close=False)
        session.append("step/start", {"turn": 1, "step": 2})  # buffered
        await fiber.dispose()
        assert plugin.log_of(session.id) is None
        assert store.records(session.id)[-1]["type"] == "step/start"
        # Not persisted any more, and free for another runtime.
        session.append("step/end", {"turn": 1, "step": 2})
        async with store.runtime() as (_, other, _):
            resumed = await other.resume(session.id)
            assert [e.type for e in resumed.events[-2:]] == ["step/end", "turn/end"]


async def test_a_restarted_plugin_continues_the_same_sessions(store: Store) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        fiber = await store.start(ctx)
        session = ctx.sessions.create()
        untouched = ctx.sessions.create()  # never written: stays unstored
        turn(session, 1)
        session.append("turn/start", {"turn": 2})
        await fiber.restart()
        assert fiber.state is FiberState.ACTIVE
        assert fiber.instance.log_of(session.id) is not None
        append_user(session, "x", turn=2)
        session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
        written = list(session.events)
        assert not store.exists(untouched.id)
    async with store.runtime() as (_, sessions, _):
        assert same((await sessions.resume(session.id)).events, written)


async def test_sessions_that_went_live_before_the_plugin_are_written(store: Store) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        session = ctx.sessions.create()
        turn(session, 1)
        empty = ctx.sessions.create()
        fiber = await store.start(ctx)
        assert fiber.state is FiberState.ACTIVE
        assert store.records(session.id) == json_records(session)
        assert not store.exists(empty.id)
        turn(session, 2)
        written = list(session.events)
    async with store.runtime() as (_, sessions, _):
        assert same((await sessions.resume(session.id)).events, written)


async def test_a_session_unknown_to_the_plugin_is_attached_on_its_first_event(
    store: Store,
) -> None:
    async with store.runtime() as (ctx, _, plugin):
        stray = Session(
            SessionHeader("stray", 5.0), on_append=lambda s, e: ctx.emit("session/event", s, e)
        )
        stray.append("turn/start", {"turn": 1})
        assert plugin.log_of("stray") is not None
        turn(stray, 2)
    assert seqs(store, "stray") == list(range(len(stray.events)))


async def test_attaching_refuses_another_session_of_that_id(store: Store) -> None:
    store.store("taken", events_of(lambda s: turn(s, 1)), created=123.0)
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        ctx.sessions.create(id="taken")
        with pytest.raises(SessionExistsError, match='holds another session "taken"'):
            await store.start(ctx)
        # The stored session was left alone and let go.
        async with store.runtime() as (_, other, _):
            assert len((await other.resume("taken")).events) == 15


async def test_attaching_drops_a_damaged_tail_then_writes_what_is_missing(
    store: Store,
) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        session = ctx.sessions.create(id="live")
        turn(session, 1)
        done: list[Record | Broken] = [*json_records(session), Broken(15)]
        turn(session, 2, close=False)
        # A previous instance of the backend stored turn 1 and died mid-record.
        store.store("live", done, created=session.header.created_at)
        await store.start(ctx)
        written = list(session.events)
    async with store.runtime() as (_, sessions, _):
        resumed = await sessions.resume("live")
        assert same(resumed.events[: len(written)], written)
        assert resumed.turn_end(2) == {"kind": "interrupted"}


async def test_creating_a_stored_id_is_refused(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        turn(sessions.create(id="dup"), 1)
    async with store.runtime() as (_, sessions, plugin):
        with pytest.raises(SessionExistsError, match='session "dup" is already stored'):
            sessions.create(id="dup")
        assert sessions.get("dup") is None
        assert plugin.log_of("dup") is None


async def test_an_id_stored_after_creation_is_refused_at_the_first_write(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        session = sessions.create(id="race")
        store.store("race", [])  # another process stored it first
        with pytest.raises(SessionExistsError, match="already exists"):
            append_user(session, "x")
        assert store.records("race") == []


async def test_an_id_live_in_another_runtime_is_refused_at_the_first_write(
    store: Store,
) -> None:
    async with store.runtime() as (_, sessions, _):
        mine = sessions.create(id="twice")
        async with store.runtime() as (_, other, _):
            theirs = other.create(id="twice")
            append_user(theirs, "first")  # published first
            with pytest.raises(SessionExistsError, match="already exists"):
                append_user(mine, "second")
        assert [r["data"]["message"]["content"][0]["text"] for r in store.records("twice")] == [
            "first"
        ]


# -- resume and crash repair -------------------------------------------------------------


async def test_resuming_an_unknown_id(store: Store) -> None:
    async with store.runtime() as (ctx, sessions, _):
        assert await ctx.serial("session/open", "nothing") is None
        with pytest.raises(SessionError, match='no stored session "nothing"'):
            await sessions.resume("nothing")
        turn(sessions.create(id="other"), 1)  # a store that exists, without that id
        assert await ctx.serial("session/open", "nothing") is None


async def test_a_corrupt_record_before_the_last_turn_end_refuses_the_load(
    store: Store,
) -> None:
    records: list[Record | Broken] = list(events_of(two_turns))
    records[4] = Broken(4)
    store.store("bad", records)
    before = store.raw("bad")
    async with store.runtime() as (_, sessions, _):
        with pytest.raises(SessionCorruptError) as info:
            await sessions.resume("bad")
        assert sessions.get("bad") is None
    error = info.value
    assert str(error).startswith(f"{store.where('bad', 4)}: ")
    assert "not JSON" in str(error)
    assert f"before the committed turn end on {store.label(14)}" in str(error)
    assert (error.path, error.line, error.code) == (
        store.location("bad"),
        store.line(4),
        "SESSION_CORRUPT",
    )
    assert store.raw("bad") == before  # a refused load changes nothing


async def test_an_invalid_record_after_the_last_turn_end_is_dropped_and_repaired(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    events = events_of(one_and_a_half_turns)
    assert events[23]["type"] == "tool/call"
    broken = dict(events[23], data={"turn": 2, "step": 1})  # fields missing
    later: list[Record | Broken] = [events[24], Broken(25, "step/end")]  # after the damage
    store.store("tail", [*events[:23], broken, *later])
    async with store.runtime() as (_, sessions, _):
        with caplog.at_level(logging.WARNING, store.logger):
            resumed = await sessions.resume("tail")
        kinds = [e.type for e in resumed.events[23:]]
        # The call never reached the log: the message asked for it.
        assert kinds == ["tool/result", "step/end", "turn/end"]
        result = resumed.events[23].data
        assert result["code"] == "TOOL_NOT_STARTED"
        assert result["content"] == NOT_STARTED
    where = store.where("tail", 23)
    assert f'{where}: "tool/call" record: data.call_id is missing or malformed' in caplog.text
    assert "dropped it and the 2 " in caplog.text
    assert seqs(store, "tail") == list(range(26))
    assert store.records("tail")[23:] == [e.to_json() for e in resumed.events[23:]]


async def test_a_seq_gap_refuses_the_load(store: Store) -> None:
    events = events_of(lambda s: turn(s, 1))
    del events[7]
    store.store("gap", list(events))
    async with store.runtime() as (_, sessions, _):
        with pytest.raises(SessionCorruptError, match="seq 8 where 7 was expected") as info:
            await sessions.resume("gap")
    assert str(info.value).startswith(store.where("gap", 7, seq=8))


async def test_an_open_turn_with_a_pending_tool_call_is_closed_durably(store: Store) -> None:
    def crashed(session: Session) -> None:
        turn(session, 1)
        turn(session, 2, close=False)
        del session.events[-2:]  # the result and the step end never reached the disk

    events = events_of(crashed)
    store.store("open", list(events))
    async with store.runtime() as (ctx, sessions, _):
        _, loaded = await ctx.serial("session/open", "open")
        assert [e.to_json() for e in loaded] == events  # loading alone writes nothing
        assert store.records("open") == events
        # The store closes the turn; its records are stored before resume returns.
        resumed = await sessions.resume("open")
        closers = [e.to_json() for e in resumed.events[len(events) :]]
        assert store.records("open") == [*events, *closers]
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
    # Closed once: a fresh runtime finds nothing to close.
    closed = store.records("open")
    assert [r["data"]["turn"] for r in closed if r["type"] == "turn/end"] == [1, 2]
    async with store.runtime() as (_, sessions, _):
        again = await sessions.resume("open")
        assert same(again.events, resumed.events)
        assert store.records("open") == closed  # resuming again added nothing
        again.append("turn/start", {"turn": 3})  # the log goes on after the repair
        append_user(again, "x", turn=3)
    assert store.records("open")[: len(closed)] == closed
    async with store.runtime() as (_, sessions, _):
        third = await sessions.resume("open")  # turn 3 is closed now, turn 2 untouched
        assert same(third.events[:27], resumed.events)
        assert [e.type for e in third.events[27:]] == ["turn/start", "user/message", "turn/end"]
    assert seqs(store, "open") == list(range(30))


async def test_a_closed_log_and_a_log_without_turns_load_unchanged(store: Store) -> None:
    def closed_then_a_message(session: Session) -> None:
        turn(session, 1)
        # A record after the turn end opens nothing.
        append_user(session, "x")

    store.store("closed", list(events_of(lambda s: turn(s, 1))))
    store.store("empty", [])
    store.store("after", list(events_of(closed_then_a_message)))
    ids = ["closed", "empty", "after"]
    before = [store.records(i) for i in ids]
    async with store.runtime() as (_, sessions, _):
        assert len((await sessions.resume("closed")).events) == 15
        assert (await sessions.resume("empty")).events == []
        assert len((await sessions.resume("after")).events) == 16
    assert [store.records(i) for i in ids] == before


@pytest.mark.parametrize("change", ["append", "remove"])
async def test_a_session_that_changed_between_load_and_adoption_is_refused(
    store: Store, change: str
) -> None:
    events = events_of(lambda s: turn(s, 1))
    store.store("moving", list(events))

    def meddle(session: Session) -> None:
        if change == "remove":
            store.remove("moving")
        else:
            store.append_raw("moving", dict(events[0], seq=15))

    async with store.runtime() as (ctx, sessions, _):
        ctx.on("session/created", meddle, prepend=True)
        with pytest.raises(SessionInUseError, match="changed after it was loaded"):
            await sessions.resume("moving")
        assert sessions.get("moving") is None


async def test_a_loaded_session_not_adopted_does_not_confuse_a_later_create(
    store: Store,
) -> None:
    store.store("loaded", list(events_of(lambda s: turn(s, 1))))
    async with store.runtime() as (ctx, sessions, _):
        header, events = await ctx.serial("session/open", "loaded")
        assert header.id == "loaded"
        assert len(events) == 15
        with pytest.raises(SessionExistsError):
            sessions.create(id="loaded")


async def test_a_live_session_cannot_be_opened_twice(store: Store) -> None:
    async with store.runtime() as (ctx, sessions, _):
        live = sessions.create(id="live")
        turn(live, 1)
        with pytest.raises(SessionError, match='session "live" already exists'):
            await sessions.resume("live")  # the store refuses before asking
        with pytest.raises(SessionInUseError, match='session "live" is live in this process'):
            await ctx.serial("session/open", "live")
        async with store.runtime() as (_, other, _):
            with pytest.raises(SessionInUseError, match="in use by a live session") as info:
                await other.resume("live")
            assert info.value.code == "SESSION_IN_USE"
        assert len(store.records("live")) == 15  # the refused reader wrote nothing


# -- listing through the store -----------------------------------------------------------


async def test_the_store_lists_stored_sessions_most_recent_first(store: Store) -> None:
    def at(when: float, build: Any) -> list[Record | Broken]:
        return [dict(record, time=when) for record in events_of(build)]

    store.store("old", at(100.0, lambda s: turn(s, 1)), created=50.0)
    store.store("crashed", at(200.0, one_and_a_half_turns), created=60.0)
    store.store("fresh", [], created=150.0)
    store.store_unreadable("broken")
    async with store.runtime() as (_, sessions, plugin):
        live = sessions.create(id="live", cwd="/w", meta={"agent": "main"})
        turn(live, 1)
        stored = sessions.stored()
        assert [s.id for s in stored] == ["live", "crashed", "fresh", "old", "broken"]
        assert stored == plugin.list_sessions() == store.summaries()
        now, crashed, fresh, old, broken = stored
        assert (now.cwd, dict(now.meta), now.turns, now.open) == ("/w", {"agent": "main"}, 1, False)
        assert now.last_activity == live.events[-1].time
        assert plugin.list_sessions()[0].events == len(live.events)
        assert (crashed.created_at, crashed.turns, crashed.open) == (60.0, 2, True)
        assert crashed.last_activity == 200.0
        assert (fresh.turns, fresh.last_activity, fresh.open) == (0, 150.0, False)
        assert (old.turns, old.last_activity, old.open, old.error) == (1, 100.0, False, None)
        assert broken.error is not None
        assert store.unreadable in broken.error
        assert (broken.created_at, broken.last_activity, broken.turns) == (None, None, 0)
        # Listing reads without locking or writing: the crashed session resumes after it.
        assert (await sessions.resume("crashed")).turn_end(2) == {"kind": "interrupted"}
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        fiber = await store.start(ctx)
        assert len(ctx.sessions.stored()) == 5
        await fiber.dispose()
        assert ctx.sessions.stored() == []  # the listener left with the plugin


def test_a_listing_reads_the_title_and_sums_the_usage(store: Store) -> None:
    def record(seq: int, kind: str, data: dict[str, Any]) -> Record:
        return {"seq": seq, "type": kind, "time": float(seq), "data": data}

    def user(seq: int, text: str, **more: str) -> Record:
        data = {"turn": 1, "message": Message.user(text).to_json(), **more}
        return record(seq, "user/message", data)

    def answer(seq: int, usage: object = None, **more: object) -> Record:
        message = Message("assistant", (TextBlock("ok"),)).to_json()
        data: dict[str, object] = {"turn": 1, "step": 1, "message": message, **more}
        if usage is not None:
            data["usage"] = usage
        return record(seq, "assistant/message", data)

    store.store(
        "s",
        [
            record(0, "turn/start", {"turn": 1}),
            # A damaged first user message (not a valid message) is not the title. (No
            # turn end follows it: a damaged tail, not damaged history, which is listed
            # as damaged: tests/plugins/session/test_store_checks.py.)
            record(1, "user/message", {"turn": 1, "message": "broken"}),
            user(2, "x" * 300),
            # Records that only mention the types are not counted.
            user(3, "a later one", usage="assistant/message"),
            answer(4, {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 5}),
            answer(5, note="usage"),
            answer(6, {"input_tokens": "many"}),
            answer(7, {"input_tokens": 3, "output_tokens": 4}),
            # A damaged answer's usage is not counted either.
            answer(8, {"input_tokens": 100, "output_tokens": 100}, message="broken"),
        ],
    )
    store.store("quiet", [answer(0)])
    summaries = {s.id: s for s in store.summaries()}
    assert summaries["s"].title == "x" * 200
    assert summaries["s"].usage == Usage(13, 6, 5, 0, 0)
    assert (summaries["quiet"].title, summaries["quiet"].usage) == (None, None)


async def test_a_packed_row_of_chunks_is_read_by_every_store(store: Store) -> None:
    # session-jsonl writes the chunks of a step as one row; any store reads one back.
    run = ChunkRun(2, 10.0, 1, 1)
    for piece, when in (("Hel", 10.0), ("lo", 10.25)):
        run.add(TextDelta(0, piece), when)
    run.close()
    answer = Message("assistant", (TextBlock("Hello"),))
    store.store(
        "packed",
        [
            {"seq": 0, "type": "turn/start", "time": 9.0, "data": {"turn": 1}},
            {"seq": 1, "type": "step/start", "time": 9.5, "data": {"turn": 1, "step": 1}},
            run.to_json(),
            {
                "seq": 4,
                "type": "assistant/message",
                "time": 10.5,
                "data": {"turn": 1, "step": 1, "message": answer.to_json()},
            },
        ],
    )
    (summary,) = store.summaries()
    assert (summary.events, summary.turns, summary.open) == (5, 1, True)
    async with store.runtime() as (_, sessions, _):
        loaded = await sessions.load("packed")
        assert [e.type for e in loaded.events][2:4] == ["assistant/chunk"] * 2
        assert [e.data["chunk"]["text"] for e in loaded.events[2:4]] == ["Hel", "lo"]
        assert loaded.events[3].time == 10.25
        assert loaded.derive_messages() == [answer]
    # A packed row last: the listing reports its last chunk.
    tail = ChunkRun(0, 20.0, 1, 1)
    tail.add(TextDelta(0, "x"), 20.0)
    tail.add(TextDelta(0, "y"), 20.5)
    tail.close()
    store.store("chunks-last", [tail.to_json()], created=3.0)
    last = next(s for s in store.summaries() if s.id == "chunks-last")
    assert (last.events, last.last_activity, last.open) == (2, 20.5, True)


async def test_an_empty_store_lists_nothing(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        assert sessions.stored() == []
    assert store.summaries() == []
    assert not store.stored()


# -- ids ---------------------------------------------------------------------------------

BAD_IDS = ["../x", "a/b", "/abs/x", "", ".", "..", "a\n", "-x", ".hidden", "x" * 129, "a b"]


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_ids_that_are_not_plain_names_are_refused(
    store: Store, tmp_path: Path, bad: str
) -> None:
    async with store.runtime() as (_, sessions, _):
        with pytest.raises(SessionIdError, match="invalid session id") as info:
            await sessions.resume(bad)
        assert repr(bad) in str(info.value)
        assert info.value.code == "SESSION_ID"
        if bad:  # an empty id makes the store pick one
            with pytest.raises(SessionIdError):
                sessions.create(id=bad)
            assert sessions.get(bad) is None
    assert entries(tmp_path) == []  # nothing written, in or out


# -- event types declared by plugins ------------------------------------------------------


async def test_a_declared_event_type_is_stored_and_resumed(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        sessions.declare_event_types("todo/write")
        session = sessions.create("todo")
        turn(session, 1, close=False)
        session.append("todo/write", {"todos": [{"content": "a", "status": "pending"}]})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        written = list(session.events)
    async with store.runtime() as (_, sessions, _):
        sessions.declare_event_types("todo/write")
        resumed = await sessions.resume("todo")
        assert same(resumed.events, written)


async def test_a_live_session_with_a_declared_type_attaches_to_what_it_stored(
    store: Store,
) -> None:
    async with Context() as root:
        await root.plugin(Sessions)
        root.sessions.declare_event_types("todo/write")
        session = root.sessions.create("late")
        session.append("turn/start", {"turn": 1})
        session.append("todo/write", {"todos": []})
        backend = await store.start(root)
        await backend.restart()  # attaches again to what it stored
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert [r["type"] for r in store.records("late")] == ["turn/start", "todo/write", "turn/end"]


# -- data that cannot be stored -------------------------------------------------------------


async def test_data_that_is_not_json_stops_persisting_the_session(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        session = sessions.create()
        append_user(session, "first")
        chunk(session, 0)
        bad = {"turn": 1, "step": 1, "header": {"temperature": float("nan")}}
        with pytest.raises(SessionDataError, match="carries data that is not JSON") as info:
            session.append("request/header", bad)
        assert info.value.code == "SESSION_DATA"
        assert isinstance(info.value, TypeError)
        assert "cannot be persisted past seq 2" in str(info.value)
        with pytest.raises(SessionDataError):
            append_user(session, "later")  # the stored log stays a gapless prefix
    assert seqs(store, session.id) == [0, 1]
    async with store.runtime() as (_, sessions, _):
        assert len((await sessions.resume(session.id)).events) == 2


async def test_a_header_that_is_not_json_vetoes_the_session(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        with pytest.raises(SessionDataError, match="its header carries data that is not JSON"):
            sessions.create(id="nan", meta={"temperature": float("nan")})
        assert sessions.get("nan") is None
    assert not store.exists("nan")
