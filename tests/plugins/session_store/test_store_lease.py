"""Writer leases and snapshots, run against each backend: epochs count per session, a
newer attempt fences the older one off (its commits raise ``SessionFencedError`` and
write nothing, so no log interleaves two attempts), leased and plain writers keep each
other out, and a snapshot reads a live session without taking it."""

from __future__ import annotations

import logging

import pytest

from dsh import Context
from dsh.testing import capture_logs
from dsh_llm import Message
from dsh_session import (
    Lease,
    Session,
    SessionError,
    SessionFencedError,
    SessionHeader,
    SessionIdError,
    SessionInUseError,
    Sessions,
)
from tests.plugins.session_store.store_support import (
    Store,
    append_user,
    chunk,
    events_of,
    json_records,
    turn,
)

pytestmark = pytest.mark.anyio


def texts(store: Store, session_id: str) -> list[str]:
    """The text of every user message stored for ``session_id``, in order."""
    return [
        Message.from_json(r["data"]["message"]).text
        for r in store.records(session_id)
        if r["type"] == "user/message"
    ]


async def test_leases_count_epochs_per_session_and_say_whether_it_is_stored(
    store: Store,
) -> None:
    async with store.runtime() as (_, sessions, _):
        first = await sessions.lease("task-1")
        assert (first.session_id, first.epoch, first.stored, first.fenced) == (
            "task-1",
            1,
            False,
            None,
        )
        session = sessions.create(id="task-1")
        turn(session, 1)
        assert (await sessions.lease("task-2")).epoch == 1  # another session's own count
    async with store.runtime() as (_, sessions, _):
        again = await sessions.lease("task-1")
        assert (again.epoch, again.stored) == (2, True)
        resumed = await sessions.resume("task-1")
        turn(resumed, 2)
    assert store.records("task-1") == json_records(resumed)


async def test_two_attempts_at_once_the_older_is_fenced_and_never_interleaves(
    store: Store,
) -> None:
    async with store.runtime() as (_, sessions, _):
        old = await sessions.lease("s")
        older = sessions.create(id="s")
        turn(older, 1, close=False)
        append_user(older, "older, before the takeover")
        chunk(older, 7)  # buffered, not yet written
        async with store.runtime() as (_, other, _):
            new = await other.lease("s")
            assert (new.epoch, new.stored) == (2, True)
            # The older writer is still live: a leased resume shares its hold.
            newer = await other.resume("s")
            assert newer.turn_end(1) == {"kind": "interrupted"}
            turn(newer, 2)
            with pytest.raises(SessionFencedError, match="epoch 1") as info:
                append_user(older, "older, after the takeover")
            assert info.value.code == "SESSION_FENCED"
            assert old.fenced is not None
            assert "epoch 2" in old.fenced
            # Fenced for good, whatever it appends next.
            with pytest.raises(SessionFencedError):
                older.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
            assert new.fenced is None
    assert texts(store, "s") == ["echo 1", "older, before the takeover", "echo 2"]
    assert store.records("s") == json_records(newer)
    seqs = [r["seq"] for r in store.records("s")]
    assert seqs == list(range(len(seqs)))


async def test_a_fenced_writer_logs_a_warning_when_it_lets_go(store: Store) -> None:
    with capture_logs("dsh", logging.WARNING) as logs:
        async with store.runtime() as (_, sessions, _):
            await sessions.lease("s")
            older = sessions.create(id="s")
            turn(older, 1, close=False)
            chunk(older, 1)  # buffered: written when the session is let go
            async with store.runtime() as (_, other, _):
                await other.lease("s")
                turn(await other.resume("s"), 2)
    fenced = [r.getMessage() for r in logs.records if r.levelno == logging.WARNING]
    assert fenced == [
        "session \"s\": this writer's lease (epoch 1) is no longer the store's (epoch 2): "
        "a newer attempt took the session over, and nothing more of this attempt is "
        "written (1 buffered record(s) dropped)"
    ]
    assert [r["type"] for r in store.records("s")].count("assistant/chunk") == 3 + 3


async def test_a_fenced_writer_of_a_new_session_creates_nothing(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        first = await sessions.lease("new")
        older = sessions.create(id="new")
        older.append("turn/start", {"turn": 1})  # nothing durable yet: nothing stored
        async with store.runtime() as (_, other, _):
            second = await other.lease("new")
            assert (first.stored, second.stored, second.epoch) == (False, False, 2)
            newer = other.create(id="new")
            turn(newer, 1)
        with pytest.raises(SessionFencedError):
            append_user(older, "too late")
    assert store.records("new") == json_records(newer)


async def test_plain_and_leased_writers_keep_each_other_out(store: Store) -> None:
    store.store("s", list(events_of(lambda s: turn(s, 1))))
    async with store.runtime() as (_, plain, _):
        held = await plain.resume("s")
        async with store.runtime() as (_, fleet, _):
            await fleet.lease("s")
            with pytest.raises(SessionInUseError):
                await fleet.resume("s")
        turn(held, 2)
    async with store.runtime() as (_, fleet, _):
        await fleet.lease("s")
        leased = await fleet.resume("s")
        async with store.runtime() as (_, plain, _):
            with pytest.raises(SessionInUseError):
                await plain.resume("s")
        turn(leased, 3)
    assert [r["data"]["turn"] for r in store.records("s") if r["type"] == "turn/end"] == [
        1,
        2,
        3,
    ]


async def test_the_last_leased_writer_to_leave_lets_a_plain_one_in(store: Store) -> None:
    store.store("s", list(events_of(lambda s: turn(s, 1))))
    async with store.runtime() as (_, first, _):
        await first.lease("s")
        one = await first.resume("s")
        async with store.runtime() as (_, second, _):
            await second.lease("s")
            turn(await second.resume("s"), 2)
        # The newer writer left first; the older, fenced one still holds the session.
        async with store.runtime() as (_, plain, _):
            with pytest.raises(SessionInUseError):
                await plain.resume("s")
        assert one.turn_end(1) == {"kind": "completed"}
    async with store.runtime() as (_, plain, _):
        turn(await plain.resume("s"), 3)
    assert store.records("s")[-1]["type"] == "turn/end"


async def test_a_lease_not_used_is_replaced_by_the_next(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        await sessions.lease("s")
        again = await sessions.lease("s")
        turn(sessions.create(id="s"), 1)
        assert again.epoch == 2
        assert again.fenced is None
    assert len(store.records("s")) == 15


async def test_a_leased_session_that_changed_before_adoption_is_refused(store: Store) -> None:
    events = events_of(lambda s: turn(s, 1))
    store.store("s", list(events))
    async with store.runtime() as (_, sessions, _):
        await sessions.lease("s")
        loaded = await sessions.load("s")
        store.append_raw("s", dict(events[0], seq=15))
        with pytest.raises(SessionInUseError, match="changed after it was loaded"):
            sessions.enter(loaded)
        assert sessions.get("s") is None


# -- snapshots -----------------------------------------------------------------------------


async def test_a_snapshot_reads_a_live_session_as_committed(store: Store) -> None:
    async with store.runtime() as (_, sessions, _):
        live = sessions.create(id="live", cwd="/w")
        turn(live, 1)
        turn(live, 2, close=False)
        chunk(live, 9)  # buffered: not committed yet
        async with store.runtime() as (_, reader, _):
            snapshot = await reader.snapshot("live")
            assert snapshot is not None
            assert snapshot.header == live.header
            assert [e.to_json() for e in snapshot.events] == json_records(live)[:-1]
            assert snapshot.turn_end(2) is None  # a snapshot repairs nothing
            assert reader.get("live") is None
            assert await reader.snapshot("missing") is None
        turn(live, 3)  # the writer goes on: the snapshot took nothing
    assert store.records("live") == json_records(live)


# -- the store's side ----------------------------------------------------------------------


async def test_lease_refuses_bad_ids_live_sessions_and_a_store_without_backends() -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        sessions: Sessions = ctx.sessions
        with pytest.raises(SessionIdError):
            await sessions.lease("../x")
        with pytest.raises(SessionError, match="no session persistence plugin takes a lease"):
            await sessions.lease("s")
        sessions.create(id="live")
        with pytest.raises(SessionInUseError, match='session "live" is live in this process'):
            await sessions.lease("live")
        assert await sessions.snapshot("s") is None


async def test_lease_and_snapshot_check_what_a_backend_answers() -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        sessions: Sessions = ctx.sessions
        ctx.on("session/lease", lambda session_id: Lease("other", 1, False))
        ctx.on("session/snapshot", lambda session_id: (SessionHeader("other", 1.0), []))
        with pytest.raises(SessionError, match="session/lease listener answered"):
            await sessions.lease("s")
        with pytest.raises(SessionError, match="session/snapshot listener answered"):
            await sessions.snapshot("s")


async def test_a_snapshot_may_be_answered_with_a_list_of_events() -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        sessions: Sessions = ctx.sessions
        written = Session(SessionHeader("s", 1.0))
        turn(written, 1)
        events = list(written.events)
        ctx.on("session/snapshot", lambda session_id: (written.header, events))
        snapshot = await sessions.snapshot("s")
        assert snapshot is not None
        assert list(snapshot.events) == events


def test_a_lease_stays_fenced_once_fenced() -> None:
    lease = Lease("s", 3, True)
    lease.check(3)
    stale = r"epoch 3\) is no longer the store's \(epoch None\)"
    with pytest.raises(SessionFencedError, match=stale):
        lease.check(None)
    with pytest.raises(SessionFencedError):
        lease.check(3)
