"""The JSON forms of the ``dsh_llm`` vocabulary: round trips and the decoders' errors.

Every block, chunk, message, usage and failure survives ``to_json`` → ``json`` →
``from_json`` unchanged; a malformed value is an ``LlmFormatError`` that names the
type, key or value at fault.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from typing import Any

import pytest

from dsh import DshError
from dsh_llm import (
    BLOCK_TYPES,
    FINISH_REASONS,
    Block,
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    LlmError,
    LlmFailure,
    LlmFormatError,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    UsageChunk,
    block_from_json,
    block_to_json,
    chunk_from_json,
    chunk_to_json,
)

FAILURE = LlmFailure("rate limited", "RATE_LIMIT", status=429, retry_after_ms=500, request_id="r1")

BLOCKS: list[Block] = [
    TextBlock("hello"),
    TextBlock(""),
    ReasoningBlock("thinking…"),
    ReasoningBlock("signed thinking", signature="EqQBCgIYAhIM1gbcDa9GJwZA"),
    ToolCallBlock("call_1", "read", '{"path": "a.txt"}'),
    ToolResultBlock("call_1", "contents"),
    ToolResultBlock("call_2", "boom", is_error=True),
]

CHUNKS: list[Chunk] = [
    BlockStart(0, "text"),
    BlockStart(1, "reasoning"),
    BlockStart(2, "tool-call"),
    TextDelta(0, "Hel"),
    TextDelta(0, ""),
    ReasoningDelta(1, "hmm"),
    ToolCallDelta(2, "call_1", '{"pa', name="read"),
    ToolCallDelta(2, None, 'th": 1}'),
    BlockEnd(0),
    BlockEnd(2, ToolCallBlock("call_1", "read", '{"path": 1}')),
    BlockEnd(1, ReasoningBlock("hmm")),
    UsageChunk(Usage(10, 5)),
    UsageChunk(Usage(1, 2, cache_read_tokens=3, cache_write_tokens=4, reasoning_tokens=5)),
    Finish("stop"),
    Finish("tool-calls"),
    Finish("max-tokens"),
    Finish("error", FAILURE),
    Finish("aborted", LlmFailure("cancelled", "ABORTED")),
]


def through_json(data: dict[str, Any]) -> Any:
    """What a JSON file gives back."""
    return json.loads(json.dumps(data))


# --- round trips -------------------------------------------------------------------------


@pytest.mark.parametrize("block", BLOCKS, ids=repr)
def test_every_block_round_trips(block: Block) -> None:
    data = block_to_json(block)
    assert data["type"] == block.type
    assert block_from_json(through_json(data)) == block


@pytest.mark.parametrize("chunk", CHUNKS, ids=repr)
def test_every_chunk_round_trips(chunk: Chunk) -> None:
    data = chunk_to_json(chunk)
    assert data["type"] == chunk.type
    assert chunk_from_json(through_json(data)) == chunk


def test_chunk_json_is_flat_snake_case_and_omits_nones() -> None:
    assert chunk_to_json(BlockStart(3, "tool-call")) == {
        "index": 3,
        "block_type": "tool-call",
        "type": "block-start",
    }
    assert chunk_to_json(ToolCallDelta(0, None, "{}")) == {
        "index": 0,
        "arguments_delta": "{}",
        "type": "tool-call-delta",
    }
    assert chunk_to_json(BlockEnd(1)) == {"index": 1, "type": "block-end"}
    assert chunk_to_json(BlockEnd(1, TextBlock("x"))) == {
        "index": 1,
        "block": {"text": "x", "type": "text"},
        "type": "block-end",
    }
    # A reasoning block's signature is opaque provider data, kept only when there is one.
    assert block_to_json(ReasoningBlock("r")) == {"text": "r", "type": "reasoning"}
    assert block_to_json(ReasoningBlock("r", signature="sig")) == {
        "text": "r",
        "signature": "sig",
        "type": "reasoning",
    }
    assert chunk_to_json(UsageChunk(Usage(1, 2))) == {
        "usage": {"input_tokens": 1, "output_tokens": 2},
        "type": "usage",
    }
    assert chunk_to_json(Finish("stop")) == {"reason": "stop", "type": "finish"}
    assert chunk_to_json(Finish("error", LlmFailure("m", "C"))) == {
        "reason": "error",
        "failure": {"message": "m", "code": "C"},
        "type": "finish",
    }


def test_explicit_nulls_read_as_absent() -> None:
    assert chunk_from_json(
        {"type": "tool-call-delta", "index": 0, "id": None, "name": None, "arguments_delta": ""}
    ) == ToolCallDelta(0, None, "")
    assert chunk_from_json({"type": "block-end", "index": 2, "block": None}) == BlockEnd(2)
    assert chunk_from_json({"type": "finish", "reason": "stop", "failure": None}) == Finish("stop")


def test_message_round_trips_and_helpers() -> None:
    message = Message("assistant", tuple(BLOCKS))
    assert Message.from_json(through_json(message.to_json())) == message
    assert message.to_json()["role"] == "assistant"
    assert message.text == "hello"
    assert message.tool_calls == [ToolCallBlock("call_1", "read", '{"path": "a.txt"}')]
    user = Message.user("hi")
    assert user == Message("user", (TextBlock("hi"),))
    assert Message.from_json(user.to_json()) == user
    empty = Message("tool", ())
    assert Message.from_json(empty.to_json()) == empty
    assert empty.text == ""
    assert empty.tool_calls == []


def test_usage_round_trips_and_omits_unset_counts() -> None:
    assert Usage(3, 4).to_json() == {"input_tokens": 3, "output_tokens": 4}
    full = Usage(3, 4, cache_read_tokens=0, cache_write_tokens=1, reasoning_tokens=2)
    assert Usage.from_json(through_json(full.to_json())) == full
    assert full.to_json()["cache_read_tokens"] == 0


def test_failure_round_trips_and_omits_unset_fields() -> None:
    assert LlmFailure("m", "C").to_json() == {"message": "m", "code": "C"}
    assert LlmFailure.from_json(through_json(FAILURE.to_json())) == FAILURE


def test_llm_error_carries_its_failure() -> None:
    error = LlmError(FAILURE)
    assert error.failure is FAILURE
    assert str(error) == "rate limited"
    assert error.code == "LLM_ERROR"
    assert isinstance(error, DshError)
    assert isinstance(error, RuntimeError)


def test_vocabulary_constants() -> None:
    assert BLOCK_TYPES == ("text", "reasoning", "tool-call")
    assert FINISH_REASONS == ("stop", "tool-calls", "max-tokens", "aborted", "error")


# --- Finish invariants -------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["error", "aborted"])
def test_failing_finish_needs_a_failure(reason: Any) -> None:
    with pytest.raises(LlmFormatError, match=f'finish reason "{reason}" needs a failure'):
        Finish(reason)


@pytest.mark.parametrize("reason", ["stop", "tool-calls", "max-tokens"])
def test_successful_finish_takes_no_failure(reason: Any) -> None:
    with pytest.raises(LlmFormatError, match=f'finish reason "{reason}" takes no failure'):
        Finish(reason, FAILURE)


def test_unknown_finish_reason() -> None:
    bad: Any = "done"
    with pytest.raises(LlmFormatError, match="unknown finish reason 'done' \\(expected one of"):
        Finish(bad)


# --- decoding errors ---------------------------------------------------------------------


def test_format_error_is_a_value_error_with_a_code() -> None:
    error = LlmFormatError("x")
    assert isinstance(error, DshError)
    assert isinstance(error, ValueError)
    assert error.code == "LLM_FORMAT"


#: Values ``chunk_from_json`` refuses, each with the start of its error message.
CHUNK_ERRORS: list[tuple[Any, str]] = [
    (
        {"type": "image", "url": "x"},
        "unknown chunk type: type 'image' (expected one of \"block-start\", "
        '"text-delta", "reasoning-delta", "tool-call-delta", "block-end", "usage", '
        '"finish")',
    ),
    ({"index": 0}, 'unknown chunk type: no "type" key'),
    ({"type": None}, "unknown chunk type: type null"),
    ({"type": True}, "unknown chunk type: type true"),
    ({"type": ["text-delta"]}, "unknown chunk type: type an array"),
    ({"type": {"k": 1}}, "unknown chunk type: type an object"),
    ([1, 2], "a chunk must be a JSON object, got an array"),
    ("text-delta", "a chunk must be a JSON object, got 'text-delta'"),
    ({"type": "text-delta", "index": 0}, '"text-delta" chunk: missing key "text"'),
    (
        {"type": "text-delta", "index": 0, "text": "a", "extra": 1},
        '"text-delta" chunk: unknown key "extra"',
    ),
    (
        {"type": "text-delta", "index": -1, "text": "a"},
        '"text-delta" chunk: "index" must be a non-negative integer, got -1',
    ),
    (
        {"type": "text-delta", "index": True, "text": "a"},
        '"text-delta" chunk: "index" must be a non-negative integer, got true',
    ),
    (
        {"type": "text-delta", "index": 1.0, "text": "a"},
        '"text-delta" chunk: "index" must be a non-negative integer, got 1.0',
    ),
    (
        {"type": "reasoning-delta", "index": 0, "text": None},
        '"reasoning-delta" chunk: "text" must be a string, got null',
    ),
    (
        {"type": "block-start", "index": 0, "block_type": "image"},
        '"block-start" chunk: "block_type" must be one of "text", "reasoning", '
        "\"tool-call\", got 'image'",
    ),
    (
        {"type": "tool-call-delta", "index": 0, "id": 7, "arguments_delta": ""},
        '"tool-call-delta" chunk: "id" must be a string, got 7',
    ),
    (
        {"type": "block-end", "index": 0, "block": "text"},
        '"block-end" chunk: "block" must be a JSON object, got \'text\'',
    ),
    (
        {"type": "block-end", "index": 0, "block": {"type": "text"}},
        '"block-end" chunk: "text" block: missing key "text"',
    ),
    (
        {"type": "usage", "usage": {"input_tokens": 1}},
        '"usage" chunk: usage: missing key "output_tokens"',
    ),
    (
        {"type": "usage", "usage": {"input_tokens": 1, "output_tokens": 2, "type": "u"}},
        '"usage" chunk: usage: unknown key "type"',
    ),
    (
        {"type": "finish", "reason": "done"},
        '"finish" chunk: "reason" must be one of "stop", "tool-calls", "max-tokens", '
        '"aborted", "error", got \'done\'',
    ),
    ({"type": "finish", "reason": "error"}, '"finish" chunk: finish reason "error" needs'),
    (
        {"type": "finish", "reason": "error", "failure": {"message": "m"}},
        '"finish" chunk: failure: missing key "code"',
    ),
    (
        {"type": "finish", "reason": "error", "failure": {"message": "m", "code": 5}},
        '"finish" chunk: failure: "code" must be a string, got 5',
    ),
    (
        {"type": "text-delta"},
        '"text-delta" chunk: missing key "index"; missing key "text"',
    ),
]


#: Values ``block_from_json`` refuses, each with the start of its error message.
BLOCK_ERRORS: list[tuple[Any, str]] = [
    (
        {"type": "image", "url": "x"},
        "unknown content block type: type 'image' (expected one of \"text\", "
        '"reasoning", "tool-call", "tool-result")',
    ),
    (None, "a content block must be a JSON object, got null"),
    ({"type": "tool-call", "id": "c", "name": "n"}, '"tool-call" block: missing key'),
    (
        {"type": "tool-result", "tool_call_id": "c", "content": "x", "is_error": "no"},
        '"tool-result" block: "is_error" must be a boolean, got \'no\'',
    ),
    ({"type": "text", "text": "a", "b": 1}, '"text" block: unknown key "b"'),
]


#: Values ``Message.from_json`` refuses, each with the start of its error message.
MESSAGE_ERRORS: list[tuple[Any, str]] = [
    ({"role": "system", "content": []}, 'message: "role" must be one of "user"'),
    ({"role": "user"}, 'message: missing key "content"'),
    ({"role": "user", "content": "hi"}, "message: \"content\" must be a JSON array, got 'hi'"),
    (
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text"}]},
        'message content[1]: "text" block: missing key "text"',
    ),
    (["user"], "message must be a JSON object, got an array"),
]


@pytest.mark.parametrize(
    ("decode", "data", "message"),
    [
        *[(chunk_from_json, data, message) for data, message in CHUNK_ERRORS],
        *[(block_from_json, data, message) for data, message in BLOCK_ERRORS],
        *[(Message.from_json, data, message) for data, message in MESSAGE_ERRORS],
    ],
)
def test_from_json_errors(decode: Callable[[Any], object], data: Any, message: str) -> None:
    """A decoder refuses a malformed value with an error that starts with ``message``."""
    with pytest.raises(LlmFormatError) as caught:
        decode(data)
    assert str(caught.value).startswith(message)


def content(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (content({"type": "text", "text": 1}), '"text" block: "text" must be a string'),
        (content({"type": "reasoning", "text": None}), '"text" must be a string, got null'),
        (
            content({"type": "tool-call", "id": 1, "name": "n", "arguments": "{}"}),
            '"tool-call" block: "id" must be a string',
        ),
        (
            content({"type": "tool-result", "tool_call_id": "c", "content": "x", "is_error": 0}),
            '"tool-result" block: "is_error" must be a boolean',
        ),
        (content({"type": "image", "url": "x"}), "unknown content block type"),
        (content("just text"), "a content block must be a JSON object"),
    ],
)
def test_what_the_fast_decoder_passes_on_is_judged_by_the_validating_one(
    data: Any, problem: str
) -> None:
    with pytest.raises(LlmFormatError, match=problem):
        Message.from_json(data)


def test_the_fast_and_the_validating_decoders_agree_on_good_input() -> None:
    written = Message(
        "assistant",
        (
            TextBlock("t"),
            ReasoningBlock("r"),
            ToolCallBlock("c", "n", "{}"),
            ToolResultBlock("c", "out", True),
        ),
    )
    plain = written.to_json()
    assert Message.from_json(plain) == written
    # Not what to_json writes, but valid: a result without is_error, a read-only view.
    bare = content({"type": "tool-result", "tool_call_id": "c", "content": "out"})
    assert Message.from_json(bare) == Message("assistant", (ToolResultBlock("c", "out"),))
    assert Message.from_json(types.MappingProxyType(plain)) == written


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"input_tokens": 1, "output_tokens": -2}, '"output_tokens" must be a non-negative'),
        ({"input_tokens": "1", "output_tokens": 2}, '"input_tokens" must be a non-negative'),
        ({"input_tokens": 1, "output_tokens": 2, "reasoning_tokens": 0.5}, '"reasoning_tokens"'),
    ],
)
def test_usage_from_json_errors(data: Any, message: str) -> None:
    with pytest.raises(LlmFormatError, match=r"^usage: ") as caught:
        Usage.from_json(data)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"code": "C"}, 'failure: missing key "message"'),
        ({"message": "m", "code": "C", "status": "500"}, 'failure: "status" must be an integer'),
        ({"message": "m", "code": "C", "retry_after_ms": -1}, '"retry_after_ms" must be a non-n'),
        ({"message": "m", "code": "C", "request_id": 1}, '"request_id" must be a string, got 1'),
        ({"message": "m", "code": "C", "detail": 1}, 'failure: unknown key "detail"'),
    ],
)
def test_failure_from_json_errors(data: Any, message: str) -> None:
    with pytest.raises(LlmFormatError) as caught:
        LlmFailure.from_json(data)
    assert message in str(caught.value)
