"""Recorded Messages API streams to dsh chunks: text, thinking with its signature, tool
use with partial JSON, usage, stop reasons, what is ignored and what is refused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

import dsh_llm as llm
from dsh_llm_anthropic import REDACTED
from tests.plugins.llm.llm_support import assemble
from tests.plugins.llm_anthropic.anthropic_support import (
    SIGNATURE,
    block_start,
    block_stop,
    delta,
    event,
    finish,
    message_start,
    recording,
    text_block,
)
from tests.plugins.llm_http_support import HTTPX_GC_WARNING, final_failure

if TYPE_CHECKING:
    from tests.plugins.llm_anthropic.anthropic_support import AnthropicServer

pytestmark = pytest.mark.anyio

THOUGHT = "The user wants the weather in Paris. I should call get_weather."
WEATHER_CALL = "toolu_01T1x1fJ34qAmk2tNTrN7Up6"


async def test_a_text_answer_is_one_text_block_with_cached_usage(
    server: AnthropicServer,
) -> None:
    server.play("text")
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "text"),
        llm.TextDelta(0, "Hello"),
        llm.TextDelta(0, " from Claude."),
        llm.BlockEnd(0),
        # Input excludes the cache, as dsh counts it: reads and writes are their own.
        llm.UsageChunk(llm.Usage(25, 15, cache_read_tokens=1800, cache_write_tokens=120)),
        llm.Finish("stop"),
    ]


async def test_thinking_keeps_its_signature_and_tool_input_arrives_as_partial_json(
    server: AnthropicServer,
) -> None:
    server.play("thinking_tool_use")
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "reasoning"),
        llm.ReasoningDelta(0, "The user wants the weather in Paris."),
        llm.ReasoningDelta(0, " I should call get_weather."),
        llm.BlockEnd(0, llm.ReasoningBlock(THOUGHT, signature=SIGNATURE)),
        llm.BlockStart(1, "text"),
        llm.TextDelta(1, "Let me check the weather."),
        llm.BlockEnd(1),
        llm.BlockStart(2, "tool-call"),
        llm.ToolCallDelta(2, WEATHER_CALL, "", name="get_weather"),
        # The JSON is cut mid-token: the fragments are passed on as they come.
        llm.ToolCallDelta(2, None, '{"location": "Par'),
        llm.ToolCallDelta(2, None, 'is, France", "unit": "cel'),
        llm.ToolCallDelta(2, None, 'sius"}'),
        llm.BlockEnd(2),
        llm.UsageChunk(llm.Usage(512, 89, cache_read_tokens=0, cache_write_tokens=0)),
        llm.Finish("tool-calls"),
    ]
    assert assemble(chunks).message.content == (
        llm.ReasoningBlock(THOUGHT, signature=SIGNATURE),
        llm.TextBlock("Let me check the weather."),
        llm.ToolCallBlock(
            WEATHER_CALL, "get_weather", '{"location": "Paris, France", "unit": "celsius"}'
        ),
    )


async def test_parallel_tool_calls_and_a_call_without_input(server: AnthropicServer) -> None:
    server.play("parallel_tools")
    result = assemble(await server.run())
    assert result.message.content == (
        llm.TextBlock("I'll list the files and read the README."),
        llm.ToolCallBlock("toolu_01A09q90qw90lq917835lq9", "list_files", ""),
        llm.ToolCallBlock("toolu_01B19r01rx01mr028946mr0", "read", '{"path": "README.md"}'),
    )
    assert result.usage == llm.Usage(402, 97, cache_read_tokens=0, cache_write_tokens=0)
    assert result.finish == llm.Finish("tool-calls")


async def test_redacted_thinking_is_kept_as_an_empty_signed_reasoning_block(
    server: AnthropicServer,
) -> None:
    server.play("redacted_thinking")
    chunks = await server.run()
    (end,) = [c for c in chunks if isinstance(c, llm.BlockEnd) and c.index == 0]
    assert end.block is not None
    assert isinstance(end.block, llm.ReasoningBlock)
    assert end.block.text == ""
    assert end.block.signature is not None
    assert end.block.signature.startswith(REDACTED + "EmwKAhgBEgy3va3p")
    assert not [c for c in chunks if isinstance(c, llm.ReasoningDelta)]  # nothing to show
    assert assemble(chunks).message.content[1] == llm.TextBlock("Here is my answer.")


async def test_a_thinking_block_that_starts_with_its_text_and_signature(
    server: AnthropicServer,
) -> None:
    server.stream(
        message_start(),
        block_start(0, type="thinking", thinking="All at once.", signature="c2ln"),
        block_stop(0),
        *text_block(1, "Done."),
        *finish(),
    )
    chunks = await server.run()
    assert chunks[:3] == [
        llm.BlockStart(0, "reasoning"),
        llm.ReasoningDelta(0, "All at once."),
        llm.BlockEnd(0, llm.ReasoningBlock("All at once.", signature="c2ln")),
    ]


async def test_unsigned_thinking_has_no_signature(server: AnthropicServer) -> None:
    server.stream(
        message_start(),
        block_start(0, type="thinking", thinking=""),
        delta(0, type="thinking_delta", thinking="hmm"),
        block_stop(0),
        *text_block(1, "ok"),
        *finish(),
    )
    chunks = await server.run()
    assert llm.BlockEnd(0, llm.ReasoningBlock("hmm")) in chunks


async def test_max_tokens_is_max_tokens_and_drops_the_truncated_call(
    server: AnthropicServer,
) -> None:
    server.play("max_tokens")
    chunks = await server.run()
    assert chunks[-1] == llm.Finish("max-tokens")
    assert assemble(chunks).message.content == (llm.TextBlock("Writing the file now."),)


async def test_stop_sequence_is_a_stop(server: AnthropicServer) -> None:
    server.stream(message_start(), *text_block(0, "1, 2, 3"), *finish("stop_sequence"))
    assert (await server.run())[-1] == llm.Finish("stop")


async def test_a_refusal_is_an_error_naming_the_reason(server: AnthropicServer) -> None:
    server.play("refusal", headers={"request-id": "req_011CRefusal"})
    chunks = await server.run()
    assert chunks[:2] == [llm.BlockStart(0, "text"), llm.TextDelta(0, "I can't help")]
    assert final_failure(chunks) == llm.LlmFailure(
        'the model stopped with stop_reason "refusal"', "REFUSAL", request_id="req_011CRefusal"
    )


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        ("pause_turn", "PAUSE_TURN"),
        ("model_context_window_exceeded", "MODEL_CONTEXT_WINDOW_EXCEEDED"),
        ("", "UNKNOWN"),
    ],
)
async def test_other_stop_reasons_are_errors(
    server: AnthropicServer, reason: str, code: str
) -> None:
    server.stream(message_start(), *text_block(0, "partial"), *finish(reason))
    got = final_failure(await server.run())
    assert got.code == code
    assert f'stop_reason "{reason}"' in got.message


@pytest.mark.parametrize("reason", ["end_turn", "tool_use"])
async def test_an_answer_with_nothing_in_it_is_empty(server: AnthropicServer, reason: str) -> None:
    server.stream(
        message_start(),
        block_start(0, type="thinking", thinking=""),
        delta(0, type="thinking_delta", thinking="Nothing to add."),
        block_stop(0),
        *text_block(1, ""),
        *finish(reason),
    )
    chunks = await server.run()
    assert chunks[-2] == llm.UsageChunk(llm.Usage(10, 5))
    assert final_failure(chunks).code == "EMPTY_RESPONSE"


async def test_message_stop_without_a_stop_reason_is_a_bad_response(
    server: AnthropicServer,
) -> None:
    server.stream(message_start(), *text_block(0, "hi"), *finish(None))
    got = final_failure(await server.run())
    assert got.code == "BAD_RESPONSE"
    assert got.message == "the stream ended (message_stop) without a stop_reason"


async def test_blocks_still_open_at_message_stop_are_closed(server: AnthropicServer) -> None:
    server.stream(
        message_start(),
        block_start(0, type="thinking", thinking=""),
        delta(0, type="thinking_delta", thinking="t"),
        delta(0, type="signature_delta", signature="c2ln"),
        block_start(1, type="text", text=""),
        delta(1, type="text_delta", text="x"),
        *finish(),
    )
    chunks = await server.run()
    assert chunks[-4:-2] == [
        llm.BlockEnd(0, llm.ReasoningBlock("t", signature="c2ln")),
        llm.BlockEnd(1),
    ]
    assert chunks[-1] == llm.Finish("stop")


async def test_a_stream_cut_before_message_stop_is_interrupted(server: AnthropicServer) -> None:
    server.stream(*recording("text")[:4])  # message_start, the block, a ping, one delta
    chunks = await server.run()
    # The open block stays open: it is not complete.
    assert chunks[:2] == [llm.BlockStart(0, "text"), llm.TextDelta(0, "Hello")]
    assert chunks[2] == llm.UsageChunk(
        llm.Usage(25, 1, cache_read_tokens=1800, cache_write_tokens=120)
    )
    got = final_failure(chunks)
    assert got.code == "STREAM_INTERRUPTED"
    assert got.message == "the stream ended before the model finished (no message_stop)"


async def test_what_follows_message_stop_is_read_and_ignored(server: AnthropicServer) -> None:
    server.stream(*recording("text"), *text_block(1, "late"), ": bye")
    chunks = await server.run()
    assert chunks[-1] == llm.Finish("stop")
    assert llm.TextDelta(1, "late") not in chunks


async def test_usage_the_last_count_wins_and_nulls_keep_the_earlier_one(
    server: AnthropicServer,
) -> None:
    server.stream(
        message_start(input_tokens=30, output_tokens=1, cache_read_input_tokens=7),
        *text_block(0, "ok"),
        event(
            "message_delta",
            delta={"stop_reason": "end_turn"},
            usage={"output_tokens": 40, "input_tokens": None, "cache_read_input_tokens": 9},
        ),
        event("message_stop"),
    )
    chunks = await server.run()
    assert chunks[-2] == llm.UsageChunk(llm.Usage(30, 40, cache_read_tokens=9))


async def test_no_usage_at_all_means_no_usage_chunk(server: AnthropicServer) -> None:
    message = {"id": "msg_x", "type": "message", "role": "assistant", "content": []}
    server.stream(
        event("message_start", message=message),
        *text_block(0, "ok"),
        event("message_delta", delta={"stop_reason": "end_turn"}),
        event("message_stop"),
    )
    chunks = await server.run()
    assert not [c for c in chunks if isinstance(c, llm.UsageChunk)]
    assert chunks[-1] == llm.Finish("stop")


async def test_what_this_adapter_does_not_know_is_ignored(server: AnthropicServer) -> None:
    """Ping, event types and delta types added later, content blocks of server tools
    (and their deltas), a message_delta without a delta, and an event whose data has no
    ``type`` (the event name says it)."""
    untyped = (
        b"event: content_block_delta\n"
        b'data: {"index": 0, "delta": {"type": "text_delta", "text": "b"}}\n\n'
    )
    citation = {"type": "char_location", "cited_text": "x", "document_index": 0}
    server.stream(
        message_start(),
        event("ping"),
        block_start(0, type="text", text=""),
        delta(0, type="text_delta", text="a"),
        untyped,
        delta(0, type="citations_delta", citation=citation),
        block_stop(0),
        block_start(1, type="server_tool_use", id="srvtoolu_1", name="web_search", input={}),
        delta(1, type="input_json_delta", partial_json='{"query": "x"}'),
        block_stop(1),
        block_start(2, type="web_search_tool_result", tool_use_id="srvtoolu_1", content=[]),
        block_stop(2),
        block_start(3, type=5),
        block_stop(3),
        delta(0, type=7),
        event("a_future_event", detail={"x": 1}),
        event("message_delta", usage={"output_tokens": 2}),
        *finish(),
    )
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "text"),
        llm.TextDelta(0, "a"),
        llm.TextDelta(0, "b"),
        llm.BlockEnd(0),
        llm.UsageChunk(llm.Usage(10, 5)),
        llm.Finish("stop"),
    ]


def _text_then(*bad: bytes) -> list[bytes]:
    return [
        message_start(),
        block_start(0, type="text", text=""),
        delta(0, type="text_delta", text="before"),
        *bad,
    ]


def _start(**block: Any) -> bytes:
    return block_start(1, **block)


@HTTPX_GC_WARNING
@pytest.mark.parametrize(
    ("frames", "problem"),
    [
        ([b"data: [1, 2]\n\n"], "expected a JSON object, got [1, 2]"),
        ([b"event: ping\ndata: {nope\n\n"], "is not JSON: '{nope'"),
        ([event("message_start", message="x")], "message_start.message is 'x', not an object"),
        (
            [event("message_start", message={"usage": "lots"})],
            "message_start.message.usage is 'lots', not an object",
        ),
        (
            [event("message_start", message={"usage": {"input_tokens": "9"}})],
            "message_start.message.usage.input_tokens is '9', not an integer",
        ),
        ([block_start(-1, type="text")], "a content_block_start index is -1, not a block index"),
        (
            [event("content_block_start", index="1", content_block={})],
            "index is '1', not an integer",
        ),
        ([block_start(0, type="text")], "block 0 started twice"),
        ([event("content_block_start", index=1, content_block="x")], "content_block is 'x'"),
        ([_start(type="text", text=5)], "a text block's text is 5, not a string"),
        ([_start(type="thinking", thinking=[1])], "a thinking block's thinking is [1]"),
        ([_start(type="thinking", signature=5)], "a thinking block's signature is 5"),
        ([_start(type="redacted_thinking")], "a redacted_thinking's data is None"),
        ([_start(type="tool_use", name="t")], "a tool_use block's id is None"),
        ([_start(type="tool_use", id="c", name=3)], "a tool_use block's name is 3"),
        ([_start(type="tool_use", id="c", name="t", input="x")], "a tool_use block's input is 'x'"),
        (
            [delta(7, type="text_delta", text="x")],
            "a content_block_delta for block 7, which never started",
        ),
        (
            [event("content_block_delta", index=0, delta="x")],
            "a content_block_delta's delta is 'x'",
        ),
        (
            [delta(0, type="input_json_delta", partial_json="{")],
            "block 0 is a text block: input_json_delta does not belong in it",
        ),
        ([delta(0, type="text_delta", text=5)], "a text_delta's text is 5, not a string"),
        ([block_stop(3)], "a content_block_stop for block 3, which never started"),
        ([event("message_delta", delta="x")], "message_delta.delta is 'x', not an object"),
        ([event("message_delta", delta={"stop_reason": 5})], "stop_reason is 5, not a string"),
        ([event("message_delta", usage=[1])], "message_delta.usage is [1], not an object"),
    ],
)
async def test_wrong_shaped_events_are_bad_responses(
    server: AnthropicServer, frames: list[bytes], problem: str
) -> None:
    server.stream(*_text_then(*frames), *text_block(2, "after"), *finish())
    chunks = await server.run()
    assert chunks[:2] == [llm.BlockStart(0, "text"), llm.TextDelta(0, "before")]
    assert chunks[-2] == llm.UsageChunk(llm.Usage(10, 1))
    got = final_failure(chunks)
    assert got.code == "BAD_RESPONSE"
    assert problem in got.message


async def test_a_body_without_events_is_a_bad_response(server: AnthropicServer) -> None:
    server.reply(200, {"id": "msg_1", "type": "message", "content": []})
    got = final_failure(await server.run())
    assert got.code == "BAD_RESPONSE"
    assert got.message.startswith(
        f"{server.url}/v1/messages answered HTTP 200 (application/json) without a single "
        "server-sent event"
    )
