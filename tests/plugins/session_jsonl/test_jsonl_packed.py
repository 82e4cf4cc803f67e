"""Packed rows: each step's chunks stored as one ``assistant/chunks`` row (format 2),
read back as one event per chunk; version-1 files keep a row per chunk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh import Context
from dsh_llm import BlockEnd, BlockStart, Chunk, Finish, Message, TextBlock, TextDelta
from dsh_session import ChunkRun, Session, Sessions
from dsh_session_jsonl import (
    FILE_NAME,
    FORMAT_VERSION,
    JsonlSessions,
    SessionDataError,
    list_sessions,
)
from dsh_session_jsonl._format import InvalidRecord, parse_event, parse_record
from dsh_session_jsonl._load import load_session
from tests.plugins.session_jsonl.jsonl_support import (
    event_record,
    file_records,
    header_record,
    jsonl_runtime,
    record_line,
    write_session_file,
)

pytestmark = pytest.mark.anyio

ANSWER: list[Chunk] = [
    BlockStart(0, "text"),
    *(TextDelta(0, piece) for piece in ("Pa", "ck", "ed", "!")),
    BlockEnd(0),
    Finish("stop"),
]


def step(session: Session, turn: int, *, close: bool = True) -> None:
    """One turn whose single step streams :data:`ANSWER`."""
    session.append("turn/start", {"turn": turn})
    user = Message.user(f"question {turn}")
    session.append("user/message", {"turn": turn, "step": 1, "message": user.to_json()})
    session.append("step/start", {"turn": turn, "step": 1})
    for chunk in ANSWER:
        session.append_chunk(turn, 1, chunk)
    if not close:
        return
    answer = Message("assistant", (TextBlock("Packed!"),))
    data = {"turn": turn, "step": 1, "message": answer.to_json()}
    session.append("assistant/message", data, message=answer)
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def as_json(session: Session) -> list[dict[str, object]]:
    return [e.to_json() for e in session.events]


async def test_a_step_is_written_as_one_row_and_read_back_as_its_events(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        session = sessions.create()
        step(session, 1, close=False)
        log = plugin.log_of(session.id)
        assert log is not None
        assert log.pending == 2  # the step start and the run of chunks, until a commit
        rest = Message("assistant", (TextBlock("Packed!"),))
        session.append("assistant/message", {"turn": 1, "step": 1, "message": rest.to_json()})
        assert log.pending == 0
        session.append("step/end", {"turn": 1, "step": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        written = as_json(session)
    records = file_records(tmp_path / session.id / FILE_NAME)
    assert records[0]["version"] == FORMAT_VERSION == 2
    assert [r["type"] for r in records[1:]] == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/chunks",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    packed = records[4]
    assert packed["seq"] == 3
    assert packed["data"]["chunks"][1:5] == [
        {"index": 0, "text": "Pa", "type": "text-delta"},
        "ck",
        "ed",
        "!",
    ]
    assert records[5]["seq"] == 3 + len(ANSWER)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        resumed = await sessions.resume(session.id)
        assert as_json(resumed) == written
        assert resumed.derive_messages()[-1].text == "Packed!"
        step(resumed, 2)  # and appending goes on packed
    again = load_session(tmp_path / session.id, session.id, fsync=False)
    assert again is not None
    assert [e.type for e in again.events].count("assistant/chunk") == 2 * len(ANSWER)
    assert [e.seq for e in again.events] == list(range(len(again.events)))


async def test_a_turn_cut_short_mid_stream_is_closed_on_resume(tmp_path: Path) -> None:
    # The process dies while the model streams: the chunks were never committed.
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        session = sessions.create()
        step(session, 1)
        step(session, 2, close=False)
        log = plugin.log_of(session.id)
        assert log is not None
        log._pending.clear()  # what a SIGKILL loses: the buffered records
        committed = len(file_records(tmp_path / session.id / FILE_NAME))
    assert len(file_records(tmp_path / session.id / FILE_NAME)) == committed
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        resumed = await sessions.resume(session.id)
        kinds = [e.type for e in resumed.events]
        # The step start and the chunks were buffered only: the turn ends after its
        # committed user message.
        assert kinds[-3:] == ["turn/start", "user/message", "turn/end"]
        assert resumed.turn_end(2) == {"kind": "interrupted"}
        assert resumed.turn_end(1) == {"kind": "completed"}


async def test_closing_with_a_run_pending_writes_it_as_the_last_row(tmp_path: Path) -> None:
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create()
        step(session, 1, close=False)
        written = as_json(session)
    records = file_records(tmp_path / session.id / FILE_NAME)
    assert records[-1]["type"] == "assistant/chunks"
    loaded = load_session(tmp_path / session.id, session.id, fsync=False)
    assert loaded is not None
    assert [e.to_json() for e in loaded.events] == written
    (summary,) = list_sessions(tmp_path)
    assert (summary.events, summary.turns, summary.open) == (len(written), 1, True)
    assert summary.last_activity == written[-1]["time"]


async def test_a_version_1_file_keeps_a_row_per_chunk(tmp_path: Path) -> None:
    old = [
        event_record(0, "turn/start", {"turn": 1}),
        event_record(1, "assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "x"}}),
        event_record(2, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    path = write_session_file(tmp_path, "old", [header_record("old"), *old])
    async with jsonl_runtime(tmp_path) as (_, sessions, plugin):
        resumed = await sessions.resume("old")
        assert [e.to_json() for e in resumed.events] == old
        log = plugin.log_of("old")
        assert log is not None
        assert not log.packs
        step(resumed, 2)
        written = as_json(resumed)
    records = file_records(path)
    assert records[0]["version"] == 1
    assert [r["type"] for r in records].count("assistant/chunk") == 1 + len(ANSWER)
    assert records[1:] == written


async def test_a_backend_that_starts_mid_stream_still_packs_the_run(tmp_path: Path) -> None:
    async with Context() as ctx:
        await ctx.plugin(Sessions)
        session = ctx.sessions.create()
        session.append("turn/start", {"turn": 1})
        for chunk in ANSWER[:3]:
            session.append_chunk(1, 1, chunk)
        fiber = await ctx.plugin(JsonlSessions, {"root": str(tmp_path)})
        for chunk in ANSWER[3:]:
            session.append_chunk(1, 1, chunk)
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        written = as_json(session)
        await fiber.dispose()
    records = file_records(tmp_path / session.id / FILE_NAME)
    assert [r["type"] for r in records[1:]] == ["turn/start", "assistant/chunks", "turn/end"]
    loaded = load_session(tmp_path / session.id, session.id, fsync=False)
    assert loaded is not None
    assert [e.to_json() for e in loaded.events] == written


def test_a_packed_row_is_a_record_but_not_one_event() -> None:
    finish = {"type": "finish", "reason": "stop"}
    data = {"turn": 1, "step": 1, "chunks": [finish], "dt": []}
    line = record_line(event_record(4, "assistant/chunks", data))
    run = parse_record(line)
    assert isinstance(run, ChunkRun)
    assert [(e.seq, e.data["chunk"]) for e in run] == [(4, finish)]
    with pytest.raises(InvalidRecord, match='"assistant/chunks" record: a packed row'):
        parse_event(line)
    bad = record_line(event_record(4, "assistant/chunks", {**data, "dt": [1]}))
    with pytest.raises(InvalidRecord, match=r'"assistant/chunks" record: data\.dt is not'):
        parse_record(bad)


async def test_a_damaged_packed_row_before_a_turn_end_refuses_the_load(tmp_path: Path) -> None:
    good = {"turn": 1, "step": 1, "chunks": [{"type": "finish", "reason": "stop"}], "dt": []}
    records = [
        header_record("bad"),
        event_record(0, "turn/start", {"turn": 1}),
        event_record(1, "assistant/chunks", {**good, "chunks": ["orphan text"]}),
        event_record(2, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    write_session_file(tmp_path, "bad", records)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(Exception, match="no delta comes before it"):
            await sessions.resume("bad")
    # The same row as the tail of an open turn is dropped, and the turn closed.
    records[2:] = [event_record(1, "assistant/chunks", {**good, "chunks": ["orphan"]})]
    write_session_file(tmp_path, "tail", [header_record("tail"), *records[1:]])
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        resumed = await sessions.resume("tail")
        assert [e.type for e in resumed.events] == ["turn/start", "turn/end"]
    # And a good packed row counts all its chunks for the seqs after it.
    records = [
        header_record("seqs"),
        event_record(0, "assistant/chunks", {**good, "chunks": [{"type": "x"}, {"type": "y"}]}),
        event_record(1, "turn/start", {"turn": 1}),
    ]
    records[1]["data"]["dt"] = [0]
    write_session_file(tmp_path, "seqs", records)
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        with pytest.raises(Exception, match="seq 1 where 2 was expected"):
            await sessions.resume("seqs")


async def test_a_chunk_that_is_not_json_stops_persisting_the_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    raw: Any = b"bytes"
    async with jsonl_runtime(tmp_path) as (_, sessions, _):
        session = sessions.create()
        session.append("turn/start", {"turn": 1})
        session.append_chunk(1, 1, TextDelta(0, raw))
        answer = Message("assistant", (TextBlock("x"),)).to_json()
        with pytest.raises(SessionDataError, match="past seq 1: a chunk of turn 1, step 1"):
            session.append("assistant/message", {"turn": 1, "step": 1, "message": answer})
        with pytest.raises(SessionDataError, match="past seq 1"):
            session.append("step/end", {"turn": 1, "step": 1})
        session.append_chunk(1, 2, TextDelta(0, "later"))
        with pytest.raises(SessionDataError, match="past seq 1"):
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    # Closing the file logs what could not be written instead of raising.
    assert not (tmp_path / session.id / FILE_NAME).exists()
    assert "records lost when closing" in caplog.text
