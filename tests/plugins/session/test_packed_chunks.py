"""Chunks packed per step (``Session.append_chunk``), read back as one event each, and
the history handed over by the appender instead of decoded again."""

from __future__ import annotations

from typing import Any

import pytest

import dsh_llm as llm
from dsh_session import CHUNKS_ROW, ChunkRun, EventLog, Session, SessionError, SessionEvent
from tests.plugins.session.session_support import Clock, fresh

STREAM: list[llm.Chunk] = [
    llm.BlockStart(0, "reasoning"),
    llm.ReasoningDelta(0, "think"),
    llm.ReasoningDelta(0, "ing"),
    llm.BlockEnd(0),
    llm.TextDelta(1, "Hel"),
    llm.TextDelta(1, "lo"),
    llm.TextDelta(1, " you"),
    llm.ToolCallDelta(2, "c1", '{"a"', name="echo"),
    llm.ToolCallDelta(2, None, ": 1"),
    llm.ToolCallDelta(2, None, "}"),
    llm.BlockEnd(1),
    llm.UsageChunk(llm.Usage(3, 4)),
    llm.Finish("stop"),
]


def streamed(session: Session, chunks: list[llm.Chunk], turn: int = 1, step: int = 1) -> None:
    for chunk in chunks:
        session.append_chunk(turn, step, chunk)


def chunk_json(session: Session) -> list[Any]:
    return [e.data["chunk"] for e in session.events if e.type == "assistant/chunk"]


def runs(session: Session) -> list[ChunkRun]:
    return [row for row in session.events.rows() if isinstance(row, ChunkRun)]


# -- one event per chunk, packed ----------------------------------------------------------


def test_a_streamed_step_reads_back_as_one_chunk_event_each() -> None:
    session = fresh()
    session.append("step/start", {"turn": 1, "step": 1})
    streamed(session, STREAM)
    session.append("step/end", {"turn": 1, "step": 1})
    events = session.events
    assert len(events) == len(STREAM) + 2
    assert [e.seq for e in events] == list(range(len(events)))
    assert chunk_json(session) == [llm.chunk_to_json(c) for c in STREAM]
    assert {(e.type, e.data["turn"], e.data["step"]) for e in events[1:-1]} == {
        ("assistant/chunk", 1, 1)
    }
    (run,) = runs(session)
    assert len(run) == len(STREAM)
    assert len(events.rows()) == 3  # step/start, the run, step/end
    assert not run.open
    assert repr(run) == f"<ChunkRun seq 1+{len(STREAM)} closed>"
    # Indexing (from either end), slices and reversal agree with iteration.
    listed = list(events)
    assert [events[i] for i in range(len(events))] == listed
    assert events[-1] == listed[-1]
    assert events[-2] == listed[-2]
    assert events[2:6] == listed[2:6]
    assert events[::3] == listed[::3]
    assert list(reversed(events)) == listed[::-1]
    assert events.run_at(0) is None
    assert events.run_at(1) is run
    assert events.run_at(len(events) - 1) is None
    with pytest.raises(IndexError):
        events[len(events)]
    with pytest.raises(IndexError):
        events[-len(events) - 1]


def test_an_open_run_reads_back_while_it_grows() -> None:
    session = fresh()
    streamed(session, STREAM[:3])
    (run,) = runs(session)
    assert run.open
    assert repr(run) == "<ChunkRun seq 0+3 open>"
    assert session.events[2].data["chunk"] == llm.chunk_to_json(STREAM[2])
    assert chunk_json(session) == [llm.chunk_to_json(c) for c in STREAM[:3]]
    streamed(session, STREAM[3:])
    assert chunk_json(session) == [llm.chunk_to_json(c) for c in STREAM]


def test_another_event_or_another_step_starts_a_new_run() -> None:
    session = fresh()
    streamed(session, STREAM[:2])
    session.append("step/start", {"turn": 1, "step": 1})
    streamed(session, STREAM[2:4])
    streamed(session, STREAM[4:6], step=2)
    streamed(session, STREAM[6:7], turn=2, step=2)
    assert [(r.seq0, len(r), r.turn, r.step) for r in runs(session)] == [
        (0, 2, 1, 1),
        (3, 2, 1, 1),
        (5, 2, 1, 2),
        (7, 1, 2, 2),
    ]
    assert [e.seq for e in session.events] == list(range(8))
    assert session.events[2].type == "step/start"
    assert session.events[4].data["chunk"] == llm.chunk_to_json(STREAM[3])


def test_what_is_not_a_packable_delta_is_kept_as_it_came() -> None:
    seven: Any = 7
    odd: list[llm.Chunk] = [
        llm.TextDelta(0, seven),
        llm.ToolCallDelta(1, "", "x"),
        llm.TextDelta(0, "a"),
    ]
    session = fresh()
    streamed(session, odd)
    assert chunk_json(session) == [llm.chunk_to_json(c) for c in odd]


def test_only_chunks_are_recorded() -> None:
    session = fresh()
    with pytest.raises(SessionError, match="append_chunk\\(\\) takes a dsh_llm chunk"):
        session.append_chunk(1, 1, {"type": "text-delta"})  # type: ignore[arg-type]
    assert len(session.events) == 0


def test_published_chunk_events_equal_the_stored_ones() -> None:
    heard: list[SessionEvent] = []
    session = Session(fresh().header, on_append=lambda s, e: heard.append(e))
    clock = Clock(100.0)
    with clock.installed():
        for chunk in STREAM:
            clock.advance(0.0123)
            session.append_chunk(1, 1, chunk)
    assert heard == list(session.events)
    assert [e.time for e in heard][:3] == [100.0123, 100.0123 + 0.012, 100.0123 + 0.025]


# -- times and sizes ----------------------------------------------------------------------


def test_times_are_kept_to_the_millisecond_in_order_and_widen_as_needed() -> None:
    session = fresh()
    clock = Clock(1000.0)
    gaps = [0.0004, 0.3, 70.0, -5.0, 5_000_000.0, 0.001]
    with clock.installed():
        session.append_chunk(1, 1, llm.TextDelta(0, "first"))
        for gap in gaps:
            clock.advance(gap)
            session.append_chunk(1, 1, llm.TextDelta(0, "x"))
    times = [e.time for e in session.events]
    assert times == [
        1000.0,
        1000.0,  # under half a millisecond after the first
        1000.0 + 300 / 1000,
        1000.0 + 70_300 / 1000,
        1000.0 + 70_300 / 1000,  # the clock went back: kept at the time before
        1000.0 + 5_000_065_300 / 1000,
        1000.0 + 5_000_065_301 / 1000,
    ]
    (run,) = runs(session)
    assert run.time_of(len(run) - 1) == times[-1]


def test_long_deltas_keep_their_lengths() -> None:
    pieces = ["a" * 300, "b" * 70_000, "c"]
    session = fresh()
    streamed(session, [llm.TextDelta(0, p) for p in pieces])
    session.append("step/end", {"turn": 1, "step": 1})
    assert [c["text"] for c in chunk_json(session)] == pieces
    assert runs(session)[0].texts() == ["".join(pieces)]


# -- the stored form ----------------------------------------------------------------------


def test_a_run_round_trips_through_its_stored_row() -> None:
    session = fresh()
    clock = Clock(50.0)
    with clock.installed():
        for chunk in STREAM:
            clock.advance(0.25)
            session.append_chunk(2, 3, chunk)
    (run,) = runs(session)
    run.close()
    row = run.to_json()
    assert row["type"] == CHUNKS_ROW
    assert (row["seq"], row["time"]) == (0, 50.25)
    data = row["data"]
    assert (data["turn"], data["step"]) == (2, 3)
    assert data["dt"] == [250] * (len(STREAM) - 1)
    # A delta that continues the one before it is stored as its bare text.
    assert data["chunks"][1:3] == [llm.chunk_to_json(STREAM[1]), "ing"]
    assert data["chunks"][4:7] == [llm.chunk_to_json(STREAM[4]), "lo", " you"]
    assert data["chunks"][7:10] == [llm.chunk_to_json(STREAM[7]), ": 1", "}"]
    again = ChunkRun.from_json(row["seq"], row["time"], data)
    assert list(again) == list(run)
    assert again.to_json() == row


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"turn": "1", "step": 1, "chunks": [{"type": "finish"}], "dt": []}, "data.turn"),
        ({"turn": 1, "step": 1, "chunks": [], "dt": []}, "data.chunks is not a non-empty"),
        ({"turn": 1, "step": 1, "chunks": {}, "dt": []}, "data.chunks is not a non-empty"),
        ({"turn": 1, "step": 1, "chunks": [{"type": "finish"}], "dt": [1]}, "data.dt is not"),
        ({"turn": 1, "step": 1, "chunks": [{"type": "finish"}]}, "data.dt is not"),
        ({"turn": 1, "step": 1, "chunks": ["x"], "dt": []}, r"data.chunks\[0\] is text"),
        (
            {"turn": 1, "step": 1, "chunks": [{"type": "finish"}, "x"], "dt": [0]},
            r"data.chunks\[1\] is text",
        ),
        ({"turn": 1, "step": 1, "chunks": [3], "dt": []}, r"data.chunks\[0\] is neither"),
        ({"turn": 1, "step": 1, "chunks": [{"type": 3}], "dt": []}, r"data.chunks\[0\] is neither"),
        (
            {"turn": 1, "step": 1, "chunks": [{"type": "finish"}, {"type": "x"}], "dt": [-1]},
            r"data.dt\[0\] is not a non-negative",
        ),
        (
            {"turn": 1, "step": 1, "chunks": [{"type": "finish"}, {"type": "x"}], "dt": [0.5]},
            r"data.dt\[0\] is not a non-negative",
        ),
    ],
)
def test_a_malformed_stored_row_is_refused(data: dict[str, Any], problem: str) -> None:
    with pytest.raises(SessionError, match=problem):
        ChunkRun.from_json(0, 1.0, data)


def test_bare_text_continues_a_stored_delta_that_carries_an_id() -> None:
    head = {"type": "tool-call-delta", "index": 4, "id": "c9", "name": "n", "arguments_delta": "{"}
    run = ChunkRun.from_json(5, 1.0, {"turn": 1, "step": 1, "chunks": [head, "}"], "dt": [2]})
    assert [e.data["chunk"] for e in run] == [
        head,
        {"index": 4, "arguments_delta": "}", "type": "tool-call-delta"},
    ]
    assert [e.seq for e in run] == [5, 6]
    assert run.time_of(1) == 1.002


# -- the log as a sequence ----------------------------------------------------------------


def test_the_log_compares_like_a_list_and_deletes_only_a_tail() -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    streamed(session, STREAM[:5])
    session.append("step/end", {"turn": 1, "step": 1})
    events = session.events
    listed = list(events)
    assert events == listed
    assert events == tuple(listed)
    assert events == EventLog(list(events.rows()))
    assert events != listed[:-1]
    assert (events == "nope") is False
    assert repr(events).startswith("EventLog([SessionEvent(seq=0")
    with pytest.raises(TypeError):
        hash(events)
    for bad in (0, slice(1, 3), slice(0, None, 2)):
        with pytest.raises(SessionError, match="only a tail"):
            del events[bad]
    del events[len(events) :]  # nothing
    del events[-1]  # the step end
    assert events == listed[:-1]
    del events[4:]  # into the run: its first three chunks stay
    assert events == listed[:4]
    assert len(runs(session)[0]) == 3
    del events[1:]  # the whole run
    assert events == listed[:1]
    assert runs(session) == []
    streamed(session, STREAM[:2])
    assert [e.data for e in events[1:]] == [e.data for e in listed[1:3]]


def test_a_session_takes_over_a_list_or_a_log_and_copies_anything_else() -> None:
    header = fresh().header
    events = [SessionEvent(0, "turn/start", 1.0, {"turn": 1})]
    assert Session(header, events).events.rows() is events
    log = EventLog()
    assert Session(header, log).events is log
    assert Session(header, tuple(events)).events == events
    assert Session(header).events == []


# -- the history handed over --------------------------------------------------------------


def user(text: str) -> tuple[dict[str, Any], llm.Message]:
    message = llm.Message.user(text)
    return {"turn": 1, "step": 1, "message": message.to_json()}, message


def test_messages_handed_to_append_are_taken_as_they_are() -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    data, message = user("hi")
    session.append("user/message", data, message=message)
    answer = llm.Message(
        "assistant",
        (llm.ReasoningBlock("hm"), llm.TextBlock("yes"), llm.ToolCallBlock("c", "t", "{}")),
    )
    step: list[llm.Chunk] = [
        llm.BlockStart(0, "reasoning"),
        llm.ReasoningDelta(0, "h"),
        llm.ReasoningDelta(0, "m"),
    ]
    streamed(
        session, [*step, llm.TextDelta(1, "yes"), llm.TextDelta(2, "n"), llm.TextDelta(2, "o")]
    )
    session.append(
        "assistant/message", {"turn": 1, "step": 1, "message": answer.to_json()}, message=answer
    )
    history = session.history()
    assert history == (message, answer)
    assert history[0] is message
    assert history[1] is answer
    assert session.history() is history  # the same until an event changes it
    assert session.derive_messages() == list(history)
    # The step's deltas keep the answer's strings rather than copies.
    texts = runs(session)[0].texts()
    assert texts == ["hm", "yes", "no"]
    assert texts[0] is answer.content[0].text  # type: ignore[union-attr]
    assert texts[1] is answer.content[1].text  # type: ignore[union-attr]
    # "no" has the length of the call's arguments, "ok", but not their text: its own.
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert session.history() is not history
    assert session.history() == history


def test_a_handed_over_message_counts_only_for_message_events() -> None:
    session = fresh()
    data, message = user("typed")
    session.append("tool/call", {"turn": 1, "call_id": "c", "name": "n"}, message=message)
    session.append("user/message", data)
    empty = llm.Message("assistant", ())
    session.append(
        "assistant/message", {"turn": 1, "step": 1, "message": empty.to_json()}, message=empty
    )
    assert session.derive_messages() == [message]
    assert session.history()[0] is not message  # decoded: it was not handed over with it


def test_handed_over_messages_nobody_reads_are_let_go() -> None:
    session = fresh()
    for i in range(70):
        data, message = user(f"m{i}")
        session.append("user/message", data, message=message)
    assert [m.text for m in session.derive_messages()] == [f"m{i}" for i in range(70)]


def test_a_stored_session_has_its_history_derived_when_it_is_made() -> None:
    session = fresh()
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user("again")[0])
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    stored = Session(session.header, list(session.events))
    assert stored._derived == 3
    assert stored.derive_messages() == [llm.Message.user("again")]
