"""A stored record of a type no loaded plugin declares is history, not damage
(ARCHITECTURE §6.10, RFC 0023): each store loads it as an :class:`OpaqueEvent`, counts
it, skips it in the history, never cuts it, and writes it back as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh import cli
from dsh_session import OpaqueEvent, Session, SessionError, SessionEvent, SessionHeader
from tests.plugins.session_store.store_support import Record, Store, events_of, turn
from tests.support import echo_deployment

#: The types other plugins declare (the agent loop, tool-todo, compaction, subagents, the
#: fleet), none of which the readers below load.
FOREIGN = {
    "usage/step": {"turn": 1, "step": 1, "usage": {"input_tokens": 3}},
    "todo/write": {"todos": [{"content": "a", "status": "pending"}]},
    "compaction/checkpoint": {"summary": "so far", "first_kept_seq": 2},
    "subagent/descriptor": {"turn": 1, "provider": "fork"},
    "fleet/attempt": {"task": "t1", "attempt": 2, "epoch": 2},
}


def with_foreign(records: list[Record], at: int) -> list[Record]:
    """``records`` with one record of each foreign type inserted at ``at`` (seqs
    renumbered)."""
    extra = [{"seq": 0, "type": k, "time": 5.5, "data": v} for k, v in FOREIGN.items()]
    merged = [*records[:at], *extra, *records[at:]]
    return [{**record, "seq": seq} for seq, record in enumerate(merged)]


def kept(before: object, after: object) -> bool:
    """Whether what was stored ``before`` is still stored, unchanged, at the start of
    what is stored ``after`` (bytes of a file, rows of a database)."""
    assert isinstance(before, bytes | list)
    assert isinstance(after, bytes | list)
    return after[: len(before)] == before


def opaque_types(session: Session) -> list[str]:
    return [e.type for e in session.events if type(e) is OpaqueEvent]


@pytest.mark.anyio
async def test_a_completed_session_with_undeclared_types_resumes(store: Store) -> None:
    records = with_foreign(events_of(lambda s: turn(s, 1)), at=9)
    store.store("done", records)
    before = store.raw("done")
    plain = events_of(lambda s: turn(s, 1))
    async with store.runtime() as (_, sessions, _):
        session = await sessions.resume("done")
        assert [e.to_json() for e in session.events] == records
        assert opaque_types(session) == list(FOREIGN)
        # Skipped by the history; counted in the seqs.
        reference = Session(SessionHeader("r", 1.0), [SessionEvent.from_json(r) for r in plain])
        assert session.derive_messages() == reference.derive_messages()
        assert not session.close_open_turn()
        turn(session, 2)
        assert session.events[len(records)].seq == len(records)
        # Appending an undeclared type stays an error.
        with pytest.raises(SessionError, match='unknown session event type "todo/write"'):
            session.append("todo/write", {"todos": []})
    assert kept(before, store.raw("done"))
    assert store.records("done")[: len(records)] == records
    (summary,) = store.summaries()
    assert (summary.turns, summary.open, summary.error) == (2, False, None)


@pytest.mark.anyio
async def test_an_open_turn_with_undeclared_types_keeps_them_and_is_closed_after(
    store: Store,
) -> None:
    # The turn a crash left open: its tool call has no result yet.
    partial = events_of(lambda s: turn(s, 1, close=False))[:9]
    records = with_foreign(partial, at=4)
    store.store("open", records)
    before = store.raw("open")
    async with store.runtime() as (_, sessions, _):
        snapshot = await sessions.snapshot("open")
        assert snapshot is not None
        assert [e.to_json() for e in snapshot.events] == records  # nothing left out
        session = await sessions.resume("open")
        assert [e.to_json() for e in session.events[: len(records)]] == records
        repair = [(e.seq, e.type) for e in session.events[len(records) :]]
        n = len(records)
        assert repair == [(n, "tool/result"), (n + 1, "step/end"), (n + 2, "turn/end")]
    # Nothing cut: every stored record is still there, the repair after it.
    assert kept(before, store.raw("open"))
    stored = store.records("open")
    assert stored[:n] == records
    assert [r["type"] for r in stored[n:]] == ["tool/result", "step/end", "turn/end"]


@pytest.mark.anyio
async def test_a_tail_after_an_undeclared_type_is_cut_only_where_a_record_is_damaged(
    store: Store,
) -> None:
    partial = events_of(lambda s: turn(s, 1, close=False))[:8]
    records = with_foreign(partial, at=8)
    broken = {"seq": len(records), "type": "Not A Type", "time": 1.0, "data": {}}
    store.store("cut", [*records, broken])
    async with store.runtime() as (_, sessions, _):
        session = await sessions.resume("cut")
        assert [e.to_json() for e in session.events[: len(records)]] == records
        assert session.events[len(records)].type == "tool/result"  # the repair
    assert store.records("cut")[: len(records)] == records


@pytest.mark.anyio
async def test_a_session_seeded_from_one_with_opaque_events_carries_them(store: Store) -> None:
    records = with_foreign(events_of(lambda s: turn(s, 1)), at=3)
    store.store("parent", records)
    async with store.runtime() as (_, sessions, _):
        parent = await sessions.snapshot("parent")
        assert parent is not None
        child = Session(SessionHeader("child", 2.0), list(parent.events))
        sessions.enter(child)
        turn(child, 2)
    assert store.records("child")[: len(records)] == records
    async with store.runtime() as (_, sessions, _):
        sessions.declare_event_types(*FOREIGN)  # a deployment that knows them
        child = await sessions.resume("child")
        assert opaque_types(child) == []
        assert [e.to_json() for e in child.events[: len(records)]] == records


@pytest.mark.anyio
async def test_a_listing_counts_trailing_opaque_records(store: Store) -> None:
    records = with_foreign(events_of(lambda s: turn(s, 1)), at=len(events_of(lambda s: turn(s, 1))))
    store.store("tail", records)
    (summary,) = store.summaries()
    assert (summary.events, summary.turns, summary.open) == (len(records), 1, False)
    assert summary.last_activity == 5.5
    store.store("only", with_foreign([], at=0), created=7.0)
    only = next(s for s in store.summaries() if s.id == "only")
    assert (only.events, only.turns, only.open, only.error) == (len(FOREIGN), 0, False, None)


MARKER = '''\
"""Declares ``marker/note`` and records one before every step of an agent."""

name = "marker"
inject = ["sessions"]


def apply(ctx, config):
    yield ctx.sessions.declare_event_types("marker/note")

    async def note(agent, messages, turn, step, call_next):
        agent.session.append("marker/note", {"turn": turn, "step": step})
        return await call_next()

    yield ctx.on("agent/pre-step", note)
'''


def test_dsh_sessions_and_resume_under_a_deployment_without_the_declaring_plugin(
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    writer, reader = tmp_path / "writer", tmp_path / "reader"
    writer.mkdir()
    reader.mkdir()
    (writer / "marker.py").write_text(MARKER)
    marker = "- {id: marker, name: ./marker.py}\n"
    # (echo_deployment dedents its entries: each line of ``extra`` is indented like them)
    entries = f"{store.yaml_entry()}\n        {marker}"
    with_marker = echo_deployment(writer, "{model: echo-mock}", entries)
    without = echo_deployment(reader, "{model: echo-mock}", store.yaml_entry())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(with_marker), "-p", "echo one"]) == 0
    capsys.readouterr()
    assert cli.main(["sessions", str(without)]) == 0
    line = capsys.readouterr().out
    session_id = line.split()[0]
    assert "  1 turn  " in line
    assert "unreadable" not in line
    assert "interrupted" not in line
    stored = store.records(session_id)
    notes = [r for r in stored if r["type"] == "marker/note"]
    assert [r["data"] for r in notes] == [{"turn": 1, "step": 1}, {"turn": 1, "step": 2}]
    before = store.raw(session_id)
    assert cli.main(["run", str(without), "--resume", session_id, "-p", "echo two"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: two\n"
    assert kept(before, store.raw(session_id))
    assert cli.main(["sessions", str(without)]) == 0
    assert "  2 turns  " in capsys.readouterr().out
    # And the writer's deployment goes on with it, its notes read as its own.
    assert cli.main(["run", str(with_marker), "--resume", session_id, "-p", "echo three"]) == 0
    assert capsys.readouterr().out == "The echo tool returned: three\n"
    assert [r["type"] for r in store.records(session_id)].count("marker/note") == 4
