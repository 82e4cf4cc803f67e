"""The file format of ``session-jsonl``: record and header checks, and ``list_sessions``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_llm import Message
from dsh_session import EVENT_TYPES, OpaqueEvent, SessionEvent
from dsh_session._persistence import FIELDS
from dsh_session_jsonl import (
    FILE_NAME,
    SessionCorruptError,
    SessionReadError,
    SessionSummary,
    list_sessions,
)
from dsh_session_jsonl._format import InvalidRecord, parse_event, parse_log
from dsh_session_jsonl._listing import _scan
from tests.plugins.session_jsonl.jsonl_support import (
    event_record,
    header_record,
    record_line,
    write_session_file,
)

USER = Message.user("hi").to_json()


def test_every_event_type_has_its_field_checks() -> None:
    assert set(FIELDS) == EVENT_TYPES


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b'{"seq": 0', "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (record_line([1, 2]), "not an event record"),
        (
            record_line({**event_record(0, "turn/start", {"turn": 1}), "extra": 1}),
            "not an event record",
        ),
        (
            record_line(event_record(-1, "turn/start", {"turn": 1})),
            "seq -1 is not a non-negative integer",
        ),
        (record_line(event_record(True, "turn/start", {"turn": 1})), "seq True is not"),
        (
            record_line(event_record(0, "Turn Begin", {"turn": 1})),
            "type 'Turn Begin' is not an event type",
        ),
        (
            record_line({**event_record(0, "turn/start", {"turn": 1}), "type": ["turn/start"]}),
            "is not an event type",
        ),
        (record_line(event_record(0, "turn", {"turn": 1})), "type 'turn' is not an event type"),
        (
            record_line({**event_record(0, "turn/start", {"turn": 1}), "time": "now"}),
            "time 'now' is not",
        ),
        (
            record_line({**event_record(0, "turn/start", {"turn": 1}), "time": False}),
            "time False is not",
        ),
        (record_line({**event_record(0, "turn/start", {}), "data": []}), "data is not an object"),
        (record_line(event_record(0, "turn/start", {})), "data.turn is missing or malformed"),
        (
            record_line(event_record(0, "turn/start", {"turn": "1"})),
            "data.turn is missing or malformed",
        ),
        (record_line(event_record(0, "turn/end", {"turn": 1, "reason": "done"})), "data.reason"),
        (record_line(event_record(0, "turn/end", {"turn": 1, "reason": {}})), "data.reason"),
        (
            record_line(event_record(0, "user/message", {"turn": 1, "message": "hi"})),
            "data.message",
        ),
        (
            record_line(
                event_record(
                    0, "user/message", {"turn": 1, "message": {"role": "x", "content": []}}
                )
            ),
            "data.message",
        ),
        (
            record_line(event_record(0, "assistant/chunk", {"turn": 1, "step": 1, "chunk": 1})),
            "data.chunk",
        ),
        (
            record_line(
                event_record(
                    0,
                    "tool/result",
                    {
                        "turn": 1,
                        "step": 1,
                        "call_id": "c",
                        "name": "n",
                        "content": "x",
                        "is_error": 0,
                    },
                )
            ),
            "data.is_error",
        ),
    ],
)
def test_invalid_records(raw: bytes, problem: str) -> None:
    with pytest.raises(InvalidRecord, match=problem.replace("(", r"\(")):
        parse_event(raw)


@pytest.mark.parametrize("kind", ["turn/begin", "todo/write", "future/kind/of-record"])
def test_a_record_of_a_type_nobody_declares_is_an_opaque_event(kind: str) -> None:
    record = event_record(4, kind, {"anything": [1, {"x": None}]}, 2.5)
    event = parse_event(record_line(record))
    assert type(event) is OpaqueEvent
    assert event.to_json() == record
    assert event == SessionEvent(4, kind, 2.5, {"anything": [1, {"x": None}]})
    # Declared by the reader's deployment: a plain event.
    assert type(parse_event(record_line(record), EVENT_TYPES | {kind})) is SessionEvent
    # A built-in type is checked whatever the reader declares.
    with pytest.raises(InvalidRecord, match=r"data\.turn"):
        parse_event(record_line(event_record(0, "turn/start", {})), frozenset())


def test_events_are_equal_by_their_fields_whatever_their_class() -> None:
    plain = SessionEvent(0, "x/y", 1.0, {"a": 1})
    assert plain == OpaqueEvent(0, "x/y", 1.0, {"a": 1})
    assert plain != OpaqueEvent(1, "x/y", 1.0, {"a": 1})
    assert plain != (0, "x/y", 1.0, {"a": 1})
    assert hash(SessionEvent(0, "x/y", 1.0, ())) == hash(OpaqueEvent(0, "x/y", 1.0, ()))  # type: ignore[arg-type]


def test_a_valid_record_round_trips() -> None:
    record = event_record(3, "user/message", {"turn": 1, "step": 1, "message": USER}, 2.5)
    assert parse_event(record_line(record)).to_json() == record


HEADER = {"type": "session", "version": 1, "id": "s", "created_at": 1.0}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"", "the file has no complete header line"),
        (record_line(HEADER), "the file has no complete header line"),  # no newline
        (b"{nope\n", "the header is not JSON"),
        (record_line([HEADER]) + b"\n", "line 1 is not a session header"),
        (record_line({**HEADER, "type": "turn/start"}) + b"\n", "line 1 is not a session header"),
        (record_line({**HEADER, "version": 3}) + b"\n", "unsupported format version 3"),
        (record_line({**HEADER, "version": True}) + b"\n", "unsupported format version True"),
        (record_line({k: v for k, v in HEADER.items() if k != "version"}) + b"\n", "version None"),
        (record_line({**HEADER, "id": "t"}) + b"\n", "the header names session 't'"),
        (record_line({**HEADER, "created_at": "x"}) + b"\n", "created_at or cwd is malformed"),
        (record_line({**HEADER, "cwd": 3}) + b"\n", "created_at or cwd is malformed"),
        (record_line({**HEADER, "meta": []}) + b"\n", "meta is not an object"),
    ],
)
def test_invalid_headers(raw: bytes, problem: str) -> None:
    with pytest.raises(SessionCorruptError, match=f"^f.jsonl:1: .*{problem}"):
        parse_log(raw, "f.jsonl", "s")


def test_a_full_header_is_read_back() -> None:
    header = {**HEADER, "cwd": "/w", "meta": {"agent": "a"}}
    parsed = parse_log(record_line(header) + b"\n", "f", "s")
    assert parsed.header.to_json() == {
        k: v for k, v in header.items() if k not in ("type", "version")
    }
    assert (list(parsed.events), parsed.length, parsed.notes) == (
        [],
        len(record_line(header)) + 1,
        [],
    )


# -- listing -----------------------------------------------------------------------------


def test_list_sessions(tmp_path: Path) -> None:
    assert list_sessions(tmp_path / "missing") == []
    write_session_file(
        tmp_path,
        "done",
        [
            header_record("done", 10.0, cwd="/w", meta={"agent": "main", "model": "m"}),
            event_record(0, "turn/start", {"turn": 1}, 11.0),
            event_record(1, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}, 12.0),
            event_record(2, "turn/start", {"turn": 2}, 13.0),
            event_record(3, "turn/end", {"turn": 2, "reason": {"kind": "completed"}}, 14.0),
        ],
    )
    write_session_file(
        tmp_path,
        "crashed",
        [header_record("crashed", 20.0), event_record(0, "turn/start", {"turn": 1}, 30.0)],
        tail=b'{"seq": 1, "type": "us',
    )
    write_session_file(tmp_path, "fresh", [header_record("fresh", 25.0)])
    write_session_file(tmp_path, "badheader", [{"type": "nope"}])
    write_session_file(
        tmp_path, "tornheader", [], tail=record_line(header_record("tornheader", 1.0))
    )
    (tmp_path / "nofile").mkdir()  # a crash before the file was published: not listed
    (tmp_path / "stray.txt").write_text("not a session")
    (tmp_path / ".hidden").mkdir()
    os.symlink(tmp_path / "done", tmp_path / "link")

    summaries = list_sessions(tmp_path)
    assert [s.id for s in summaries] == [
        "crashed",
        "fresh",
        "done",
        "badheader",
        "tornheader",
    ]
    crashed, fresh, done = summaries[:3]
    assert crashed == SessionSummary(
        "crashed",
        tmp_path / "crashed" / FILE_NAME,
        created_at=20.0,
        events=1,
        turns=1,
        last_activity=30.0,
        open=True,
    )
    assert (fresh.events, fresh.turns, fresh.last_activity, fresh.open) == (0, 0, 25.0, False)
    assert (done.cwd, dict(done.meta)) == ("/w", {"agent": "main", "model": "m"})
    assert (done.events, done.turns, done.last_activity, done.open) == (4, 2, 14.0, False)
    errors = {s.id: s.error for s in summaries[3:]}
    assert "line 1 is not a session header" in str(errors["badheader"])
    assert "no complete header" in str(errors["tornheader"])
    assert all(s.created_at is None for s in summaries[3:])
    # An unreadable session reports nothing it could not read.
    assert all((s.events, s.turns, s.open) == (0, 0, False) for s in summaries[3:])


def test_list_sessions_reads_only_the_tail_of_a_long_log(tmp_path: Path) -> None:
    records = [header_record("long", 1.0)]
    records += [
        event_record(seq, "turn/start", {"turn": seq + 1}, float(seq)) for seq in range(2000)
    ]
    # The last 100 KB are one unparsable line: the tail is read in growing blocks.
    write_session_file(tmp_path, "long", records, tail=b"x" * 100_000 + b"\n")
    (summary,) = list_sessions(tmp_path)
    assert (summary.events, summary.turns, summary.open) == (2000, 2000, True)
    write_session_file(tmp_path, "junk", [header_record("junk", 1.0)], tail=b"y" * 70_000 + b"\n")
    junk = next(s for s in list_sessions(tmp_path) if s.id == "junk")
    assert (junk.events, junk.last_activity, junk.error) == (0, 1.0, None)


def test_list_sessions_of_a_root_that_is_not_a_directory(tmp_path: Path) -> None:
    root = tmp_path / "file"
    root.write_text("x")
    with pytest.raises(SessionReadError, match="cannot list the session root"):
        list_sessions(root)


def test_the_listing_scan_stops_at_the_size_it_was_given(tmp_path: Path) -> None:
    first = record_line(event_record(0, "user/message", {"turn": 1, "message": USER})) + b"\n"
    path = tmp_path / "log"
    path.write_bytes(first + first)
    with path.open("rb") as file:
        assert _scan(file, 0, len(first) - 1) == (None, None, [])  # a record still being written
        assert _scan(file, 0, len(first)) == ("hi", None, [])
