"""The replay file format: what ``parse_replay`` accepts and refuses, and
``record_session`` turning a session's ``assistant/chunk`` events into that format."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh import DshError
from dsh_llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    LlmFailure,
    LlmFormatError,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
    chunk_to_json,
)
from dsh_llm_replay import ReplayFileError, parse_replay, record_session
from dsh_session import Session, SessionHeader
from tests.plugins.llm_replay.replay_support import replay_line

STEP_ONE: list[Chunk] = [
    BlockStart(0, "tool-call"),
    ToolCallDelta(0, "call_1", '{"key": ', name="lookup"),
    ToolCallDelta(0, None, '"answer"}'),
    BlockEnd(0),
    UsageChunk(Usage(10, 3)),
    Finish("tool-calls"),
]
STEP_TWO: list[Chunk] = [TextDelta(0, "The answer is 42."), Finish("stop")]


def problems_of(text: str) -> list[str]:
    with pytest.raises(ReplayFileError) as caught:
        parse_replay(text, "rec.jsonl")
    error = caught.value
    assert str(error) == "invalid replay file rec.jsonl:\n" + "\n".join(
        f"  - {p}" for p in error.problems
    )
    return error.problems


# --- accepted ----------------------------------------------------------------------------


def test_parse_indexes_streams_by_turn_and_step() -> None:
    text = (
        "\n".join([replay_line(1, 1, STEP_ONE), replay_line(1, 2, STEP_TWO), replay_line(2, 1, [])])
        + "\n"
    )
    assert parse_replay(text) == {
        (1, 1): tuple(STEP_ONE),
        (1, 2): tuple(STEP_TWO),
        (2, 1): (),
    }


def test_blank_lines_and_crlf_are_fine() -> None:
    text = f"\n   \n{replay_line(3, 2, STEP_TWO)}\r\n\t\n{replay_line(1, 1, [])}"
    assert parse_replay(text) == {(3, 2): tuple(STEP_TWO), (1, 1): ()}
    assert parse_replay("") == {}
    assert parse_replay("\n\n") == {}


def test_a_recording_without_finish_is_kept_as_it_is() -> None:
    chunks: list[Chunk] = [TextDelta(0, "cut off")]
    assert parse_replay(replay_line(1, 1, chunks)) == {(1, 1): (TextDelta(0, "cut off"),)}


def test_an_error_finish_is_a_valid_recording() -> None:
    chunks: list[Chunk] = [Finish("error", LlmFailure("overloaded", "HTTP_529", status=529))]
    assert parse_replay(replay_line(1, 1, chunks))[(1, 1)] == tuple(chunks)


def test_unicode_line_separators_inside_strings_do_not_split_lines() -> None:
    text = json.dumps(
        {"turn": 1, "step": 1, "chunks": [{"type": "text-delta", "index": 0, "text": "a\u2028b"}]},
        ensure_ascii=False,
    )
    assert "\u2028" in text
    assert parse_replay(text) == {(1, 1): (TextDelta(0, "a\u2028b"),)}


# --- refused -----------------------------------------------------------------------------


def test_replay_file_error_class() -> None:
    error = ReplayFileError("m", ["a"])
    assert isinstance(error, DshError)
    assert isinstance(error, ValueError)
    assert error.code == "REPLAY_FILE"
    assert error.problems == ["a"]
    assert ReplayFileError("m").problems == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "bad JSON: Expecting property name enclosed in double quotes (column 2)"),
        ('{"turn": 1, "step": 1, "chunks": []} trailing', "bad JSON: Extra data (column 38)"),
        ("[1, 2]", 'expected a JSON object {"turn", "step", "chunks"}, got an array'),
        ("42", 'expected a JSON object {"turn", "step", "chunks"}, got 42'),
        ('{"turn": 1, "step": 1}', 'missing key "chunks"'),
        (
            '{"chunks": [], "extra": true}',
            'missing key "turn"; missing key "step"; unknown key "extra"',
        ),
        ('{"turn": 0, "step": 1, "chunks": []}', '"turn" must be a positive integer, got 0'),
        (
            '{"turn": true, "step": "2", "chunks": []}',
            '"turn" must be a positive integer, got true; '
            '"step" must be a positive integer, got "2"',
        ),
        ('{"turn": 1.0, "step": 1, "chunks": []}', '"turn" must be a positive integer, got 1.0'),
        ('{"turn": 1, "step": 1, "chunks": {}}', '"chunks" must be a JSON array, got an object'),
        (
            '{"turn": 1, "step": 1, "chunks": [{"type": "text-delta", "index": 0}]}',
            'chunk 0: "text-delta" chunk: missing key "text"',
        ),
        (
            '{"turn": 1, "step": 1, "chunks": [{"type": "finish", "reason": "stop"}, '
            '{"type": "nope"}]}',
            "chunk 1: unknown chunk type: type 'nope'",
        ),
        (
            '{"turn": 1, "step": 1, "chunks": [{"type": "finish", "reason": "stop"}, '
            '{"type": "usage", "usage": {"input_tokens": 1, "output_tokens": 1}}]}',
            "chunk 1: a usage chunk after the finish (chunk 0)",
        ),
        (
            '{"turn": 1, "step": 1, "chunks": [{"type": "text-delta", "index": 0, "text": ""}, '
            '{"type": "reasoning-delta", "index": 0, "text": ""}]}',
            "chunk 1: block 0 is a text block, but a reasoning-delta chunk targets it",
        ),
    ],
)
def test_a_bad_line_is_named_with_file_and_line(text: str, problem: str) -> None:
    [found] = problems_of("\n" + text + "\n")
    assert found.startswith(f"rec.jsonl:2: {problem}")


def test_bad_json_columns_count_from_the_start_of_the_line() -> None:
    assert problems_of('   {"turn": 1,,}') == [
        "rec.jsonl:1: bad JSON: Expecting property name enclosed in double quotes (column 15)"
    ]


def test_every_bad_line_is_listed_and_duplicates_name_the_first() -> None:
    text = "\n".join(
        [
            replay_line(1, 1, STEP_ONE),
            "oops",
            "",
            replay_line(1, 2, STEP_TWO),
            replay_line(1, 1, STEP_TWO),
            replay_line(1, 2, []),
        ]
    )
    assert problems_of(text) == [
        "rec.jsonl:2: bad JSON: Expecting value (column 1)",
        "rec.jsonl:5: a second recording for turn 1, step 1 (the first is on line 1)",
        "rec.jsonl:6: a second recording for turn 1, step 2 (the first is on line 4)",
    ]


def test_the_default_source_name() -> None:
    with pytest.raises(ReplayFileError, match=r"^invalid replay file <replay>:\n  - <replay>:1:"):
        parse_replay("x")


# --- recording ---------------------------------------------------------------------------


def session_with(events: list[tuple[str, dict[str, Any]]]) -> Session:
    session = Session(SessionHeader(id="s1", created_at=0.0))
    for kind, data in events:
        session.append(kind, data)
    return session


def chunk_events(turn: int, step: int, chunks: list[Chunk]) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk_to_json(c)}) for c in chunks
    ]


def test_record_session_groups_chunks_by_turn_and_step_and_round_trips() -> None:
    session = session_with(
        [
            ("turn/start", {"turn": 1}),
            ("step/start", {"turn": 1, "step": 1}),
            *chunk_events(1, 1, STEP_ONE),
            ("step/end", {"turn": 1, "step": 1}),
            ("step/start", {"turn": 1, "step": 2}),
            *chunk_events(1, 2, STEP_TWO),
            ("step/end", {"turn": 1, "step": 2}),
            ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
            ("turn/start", {"turn": 2}),
            *chunk_events(2, 1, [TextDelta(0, "interrupted — naïve")]),
        ]
    )
    text = record_session(session)
    lines = text.split("\n")
    assert lines[-1] == ""
    assert [json.loads(x)["turn"] for x in lines[:-1]] == [1, 1, 2]
    assert json.loads(lines[0]) == {
        "turn": 1,
        "step": 1,
        "chunks": [chunk_to_json(c) for c in STEP_ONE],
    }
    assert "naïve" in lines[2]  # readable, not escaped
    assert parse_replay(text) == {
        (1, 1): tuple(STEP_ONE),
        (1, 2): tuple(STEP_TWO),
        (2, 1): (TextDelta(0, "interrupted — naïve"),),
    }


def test_record_session_without_model_calls_is_empty() -> None:
    assert record_session(session_with([("turn/start", {"turn": 1})])) == ""


def test_record_session_refuses_a_malformed_chunk() -> None:
    session = session_with(
        [("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "bogus"}})]
    )
    with pytest.raises(LlmFormatError, match="unknown chunk type"):
        record_session(session)
