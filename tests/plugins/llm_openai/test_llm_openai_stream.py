"""Server-sent events to dsh chunks: blocks, deltas, tool-call merging, usage, finish."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

import dsh_llm as llm
from tests.plugins.llm.llm_support import assemble
from tests.plugins.llm_openai.openai_support import HTTPX_GC_WARNING, final_failure

if TYPE_CHECKING:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

pytestmark = pytest.mark.anyio


async def test_text_deltas_become_one_text_block(server: OpenAIServer) -> None:
    d = server.delta
    server.stream(
        d("", role="assistant"),  # DeepSeek opens with an empty content delta
        d("Hel"),
        ": keep-alive",
        d("lo"),
        d(finish="stop"),
        server.usage(12, 3),
        "[DONE]",
    )
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "text"),
        llm.TextDelta(0, "Hel"),
        llm.TextDelta(0, "lo"),
        llm.BlockEnd(0),
        llm.UsageChunk(llm.Usage(input_tokens=12, output_tokens=3)),
        llm.Finish("stop"),
    ]


async def test_reasoning_then_text_with_deepseek_usage_on_the_finish_chunk(
    server: OpenAIServer,
) -> None:
    d = server.delta
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 40,
        "total_tokens": 140,
        "prompt_tokens_details": {"cached_tokens": 64},
        "prompt_cache_hit_tokens": 64,
        "prompt_cache_miss_tokens": 36,
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    server.stream(
        d(None, reasoning="Let me ", role="assistant"),
        d(None, reasoning="think."),
        d("Four."),
        d("", finish="stop", usage=usage),
        "[DONE]",
    )
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "reasoning"),
        llm.ReasoningDelta(0, "Let me "),
        llm.ReasoningDelta(0, "think."),
        llm.BlockEnd(0),
        llm.BlockStart(1, "text"),
        llm.TextDelta(1, "Four."),
        llm.BlockEnd(1),
        llm.UsageChunk(llm.Usage(36, 40, cache_read_tokens=64, reasoning_tokens=30)),
        llm.Finish("stop"),
    ]
    result = assemble(chunks)
    assert result.message.content == (llm.ReasoningBlock("Let me think."), llm.TextBlock("Four."))


async def test_openai_cached_tokens_are_taken_out_of_the_input(server: OpenAIServer) -> None:
    server.stream(
        server.delta("ok"),
        server.delta(finish="stop"),
        server.usage(50, 5, cached=20, reasoning=0),
        "[DONE]",
    )
    chunks = await server.run()
    assert chunks[-2] == llm.UsageChunk(llm.Usage(30, 5, cache_read_tokens=20, reasoning_tokens=0))


async def test_the_last_usage_wins_and_there_is_one_usage_chunk(server: OpenAIServer) -> None:
    server.stream(
        server.delta("ok", usage={"prompt_tokens": 1, "completion_tokens": 1}),
        server.delta(finish="stop"),
        server.usage(7, 2),
        "[DONE]",
    )
    chunks = await server.run()
    assert [c for c in chunks if isinstance(c, llm.UsageChunk)] == [llm.UsageChunk(llm.Usage(7, 2))]


async def test_usage_with_missing_counts_reads_as_zero(server: OpenAIServer) -> None:
    server.stream(server.delta("ok", finish="stop", usage={}), "[DONE]")
    assert (await server.run())[-2] == llm.UsageChunk(llm.Usage(0, 0))


async def test_ollama_reasoning_field_is_reasoning(server: OpenAIServer) -> None:
    d = server.delta
    ollama = d(None)
    ollama["choices"][0]["delta"]["reasoning"] = "hmm"
    odd = d("yes")
    odd["choices"][0]["delta"]["reasoning"] = {"summary": "not a string"}
    server.stream(ollama, odd, d(finish="stop"), "[DONE]")
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "reasoning"),
        llm.ReasoningDelta(0, "hmm"),
        llm.BlockEnd(0),
        llm.BlockStart(1, "text"),
        llm.TextDelta(1, "yes"),
        llm.BlockEnd(1),
        llm.Finish("stop"),
    ]


async def test_alternating_text_and_reasoning_open_new_blocks(server: OpenAIServer) -> None:
    d = server.delta
    server.stream(d("a"), d(None, reasoning="r"), d("b"), d(finish="stop"), "[DONE]")
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "text"),
        llm.TextDelta(0, "a"),
        llm.BlockEnd(0),
        llm.BlockStart(1, "reasoning"),
        llm.ReasoningDelta(1, "r"),
        llm.BlockEnd(1),
        llm.BlockStart(2, "text"),
        llm.TextDelta(2, "b"),
        llm.BlockEnd(2),
        llm.Finish("stop"),
    ]


async def test_split_tool_calls_merge_by_index(server: OpenAIServer) -> None:
    d, t = server.delta, server.tool
    server.stream(
        d("Reading both."),
        d(tool_calls=[t(0, id="call_a", name="read", arguments="")]),
        d(tool_calls=[t(0, arguments='{"pa')]),
        ": keep-alive",
        d(tool_calls=[t(0, arguments='th": "a"}')]),
        d(tool_calls=[t(1, id="call_b", name="read", arguments='{"path"')]),
        d(tool_calls=[t(1, arguments=': "b"}')]),
        d(finish="tool_calls"),
        server.usage(10, 20),
        "[DONE]",
    )
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "text"),
        llm.TextDelta(0, "Reading both."),
        llm.BlockEnd(0),
        llm.BlockStart(1, "tool-call"),
        llm.ToolCallDelta(1, "call_a", "", name="read"),
        llm.ToolCallDelta(1, None, '{"pa'),
        llm.ToolCallDelta(1, None, 'th": "a"}'),
        llm.BlockStart(2, "tool-call"),
        llm.ToolCallDelta(2, "call_b", '{"path"', name="read"),
        llm.ToolCallDelta(2, None, ': "b"}'),
        llm.BlockEnd(1),
        llm.BlockEnd(2),
        llm.UsageChunk(llm.Usage(10, 20)),
        llm.Finish("tool-calls"),
    ]
    assert assemble(chunks).message.content == (
        llm.TextBlock("Reading both."),
        llm.ToolCallBlock("call_a", "read", '{"path": "a"}'),
        llm.ToolCallBlock("call_b", "read", '{"path": "b"}'),
    )


async def test_tool_call_quirks(server: OpenAIServer) -> None:
    """No index or a null one (position instead), the id on a later fragment, a
    repeated name, an empty fragment, arguments sent as an object, and tool calls in
    the same chunk as their finish."""
    d, t = server.delta, server.tool
    no_index = {"function": {"name": "ls", "arguments": "{}"}}
    null_index = {"index": None, "function": {"name": "cat", "arguments": {"path": "x"}}}
    server.stream(
        d(tool_calls=[t(5, name="grep")]),
        d(tool_calls=[t(5)]),  # nothing new: no delta
        d(tool_calls=[t(5, id="call_g", name="grep", arguments='{"q": 1}')]),
        d(tool_calls=[t(5, id="call_other", arguments="")]),  # a second id is dropped
        d(tool_calls=[t(9), no_index, null_index], finish="tool_calls"),
        "[DONE]",
    )
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "tool-call"),
        llm.ToolCallDelta(0, None, "", name="grep"),
        llm.ToolCallDelta(0, "call_g", '{"q": 1}'),
        llm.BlockStart(1, "tool-call"),
        llm.BlockStart(2, "tool-call"),
        llm.ToolCallDelta(2, None, "{}", name="ls"),
        llm.BlockStart(3, "tool-call"),
        llm.ToolCallDelta(3, None, '{"path": "x"}', name="cat"),
        llm.BlockEnd(0),
        llm.BlockEnd(1),
        llm.BlockEnd(2),
        llm.BlockEnd(3),
        llm.Finish("tool-calls"),
    ]
    assert assemble(chunks).message.content == (
        llm.ToolCallBlock("call_g", "grep", '{"q": 1}'),
        llm.ToolCallBlock("call-1", "", ""),
        llm.ToolCallBlock("call-2", "ls", "{}"),
        llm.ToolCallBlock("call-3", "cat", '{"path": "x"}'),
    )


async def test_tool_call_with_text_content_alongside(server: OpenAIServer) -> None:
    """Text and a tool call in one delta: the text block closes when the call starts."""
    d, t = server.delta, server.tool
    server.stream(
        d("x", tool_calls=[t(0, id="c", name="n", arguments="{}")], finish="tool_calls"),
        "[DONE]",
    )
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "text"),
        llm.TextDelta(0, "x"),
        llm.BlockEnd(0),
        llm.BlockStart(1, "tool-call"),
        llm.ToolCallDelta(1, "c", "{}", name="n"),
        llm.BlockEnd(1),
        llm.Finish("tool-calls"),
    ]


async def test_length_is_max_tokens_even_without_content(server: OpenAIServer) -> None:
    d = server.delta
    server.stream(d(None, reasoning="long thought"), d(finish="length"), "[DONE]")
    chunks = await server.run()
    assert chunks[-1] == llm.Finish("max-tokens")
    assert chunks[-2] == llm.BlockEnd(0)


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        ("content_filter", "CONTENT_FILTER"),
        ("insufficient_system_resource", "INSUFFICIENT_SYSTEM_RESOURCE"),
        ("function-call", "FUNCTION_CALL"),
        ("", "UNKNOWN"),
    ],
)
async def test_other_finish_reasons_are_errors(
    server: OpenAIServer, reason: str, code: str
) -> None:
    server.stream(server.delta("partial"), server.delta(finish=reason), "[DONE]")
    chunks = await server.run()
    assert chunks[:3] == [llm.BlockStart(0, "text"), llm.TextDelta(0, "partial"), llm.BlockEnd(0)]
    got = final_failure(chunks)
    assert got.code == code
    assert f'finish_reason "{reason}"' in got.message


@pytest.mark.parametrize("kind", ["stop", "tool_calls"])
async def test_an_empty_answer_is_an_error(server: OpenAIServer, kind: str) -> None:
    d = server.delta
    server.stream(
        d("", role="assistant"),
        d(None, reasoning="nothing to say"),
        d(finish=kind),
        server.usage(5, 1),
        "[DONE]",
        headers={"x-request-id": "req-empty"},
    )
    chunks = await server.run()
    assert chunks[-2] == llm.UsageChunk(llm.Usage(5, 1))
    assert final_failure(chunks) == llm.LlmFailure(
        "the model returned an empty answer (no text and no tool calls)",
        "EMPTY_RESPONSE",
        request_id="req-empty",
    )


async def test_done_without_a_finish_reason_is_interrupted(server: OpenAIServer) -> None:
    server.stream(server.delta("cut"), server.usage(3, 1), "[DONE]")
    chunks = await server.run()
    # The open block stays open: it is not complete.
    assert chunks[:2] == [llm.BlockStart(0, "text"), llm.TextDelta(0, "cut")]
    assert chunks[2] == llm.UsageChunk(llm.Usage(3, 1))
    got = final_failure(chunks)
    assert got.code == "STREAM_INTERRUPTED"
    assert "no finish_reason" in got.message


async def test_eof_without_done_or_finish_is_interrupted(server: OpenAIServer) -> None:
    server.stream(server.delta("cut"))
    chunks = await server.run()
    assert [type(c) for c in chunks] == [llm.BlockStart, llm.TextDelta, llm.Finish]
    assert final_failure(chunks).code == "STREAM_INTERRUPTED"


async def test_eof_after_a_finish_without_done_is_fine(server: OpenAIServer) -> None:
    server.stream(server.delta("ok"), server.delta(finish="stop"))
    assert (await server.run())[-1] == llm.Finish("stop")


async def test_sse_framing_variants(server: OpenAIServer) -> None:
    """``data:`` without a space, a payload split over two data lines, other fields,
    ``\\r\\n`` line ends, a stray blank line, and a last event the server closes
    right after (no blank line)."""
    server.stream(
        b"\n",
        b"event: message\nid: 1\nretry: 100\n",
        b'data:{"choices": [{"delta": {"content": "a"}}]}\n\n',
        b'data: {"choices":\r\ndata: [{"delta": {"content": "b"}}]}\r\n\r\n',
        b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}',
    )
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "text"),
        llm.TextDelta(0, "a"),
        llm.TextDelta(0, "b"),
        llm.BlockEnd(0),
        llm.Finish("stop"),
    ]


async def test_done_the_server_closes_right_after(server: OpenAIServer) -> None:
    server.stream(server.delta("ok", finish="stop"), b"data: [DONE]")
    assert (await server.run())[-1] == llm.Finish("stop")


async def test_nothing_after_the_finish_reason_but_usage(server: OpenAIServer) -> None:
    d = server.delta
    server.stream(d("a"), d(finish="stop"), d("late"), server.usage(1, 1), "[DONE]")
    chunks = await server.run()
    assert chunks == [
        llm.BlockStart(0, "text"),
        llm.TextDelta(0, "a"),
        llm.BlockEnd(0),
        llm.UsageChunk(llm.Usage(1, 1)),
        llm.Finish("stop"),
    ]


async def test_only_the_first_choice_counts(server: OpenAIServer) -> None:
    two = server.delta("first")
    two["choices"].append({"index": 1, "delta": {"content": "second"}, "finish_reason": None})
    server.stream(two, server.delta(finish="stop"), "[DONE]")
    chunks = await server.run()
    assert [c.text for c in chunks if isinstance(c, llm.TextDelta)] == ["first"]


def _choice(**fields: Any) -> dict[str, Any]:
    return {"choices": [fields]}


@HTTPX_GC_WARNING
@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"data: nope\n\n", "not JSON: 'nope'"),
        ([1, 2], "expected a JSON object"),
        ({"choices": {"0": {}}}, "choices is"),
        ({"choices": ["x"]}, "a choice is 'x'"),
        (_choice(delta="x"), "delta is 'x'"),
        (_choice(delta={"content": 5}), "a text delta is 5"),
        (_choice(delta={"reasoning_content": ["r"]}), "a reasoning delta is ['r']"),
        (_choice(delta={"tool_calls": {"index": 0}}), "tool_calls is"),
        (_choice(delta={"tool_calls": ["c"]}), "a tool call is 'c'"),
        (_choice(delta={"tool_calls": [{"index": "0"}]}), "a tool call index is '0'"),
        (_choice(delta={"tool_calls": [{"index": 0, "function": "f"}]}), "function is 'f'"),
        (_choice(delta={"tool_calls": [{"index": 0, "id": 7}]}), "a tool call's id is 7"),
        (
            _choice(delta={"tool_calls": [{"index": 0, "function": {"name": 1}}]}),
            "a tool call's name is 1",
        ),
        (
            _choice(delta={"tool_calls": [{"index": 0, "function": {"arguments": [1]}}]}),
            "a tool call's arguments is [1]",
        ),
        (_choice(finish_reason=1), "finish_reason is 1"),
        ({"choices": [], "usage": "lots"}, "usage is 'lots'"),
        ({"usage": {"prompt_tokens": "9"}}, "usage.prompt_tokens is '9'"),
        ({"usage": {"prompt_tokens": True}}, "usage.prompt_tokens is True"),
        (
            {"usage": {"prompt_tokens_details": {"cached_tokens": 1.5}}},
            "usage.prompt_tokens_details.cached_tokens is 1.5",
        ),
    ],
)
async def test_wrong_shaped_payloads_are_bad_responses(
    server: OpenAIServer, payload: Any, problem: str
) -> None:
    server.stream(server.delta("before"), server.usage(2, 2), payload, server.delta("after"))
    chunks = await server.run()
    assert chunks[:2] == [llm.BlockStart(0, "text"), llm.TextDelta(0, "before")]
    assert chunks[-2] == llm.UsageChunk(llm.Usage(2, 2))
    got = final_failure(chunks)
    assert got.code == "BAD_RESPONSE"
    assert problem in got.message


@HTTPX_GC_WARNING
async def test_a_long_non_json_payload_is_quoted_shortly(server: OpenAIServer) -> None:
    server.stream(f"x{'y' * 1000}")
    got = final_failure(await server.run())
    assert got.code == "BAD_RESPONSE"
    assert "yyy…'" in got.message
    assert len(got.message) < 400


@HTTPX_GC_WARNING
@pytest.mark.parametrize(
    ("error", "text"),
    [
        ({"message": "overloaded", "type": "server_error"}, "overloaded"),
        ("boom", "boom"),
        ({"code": 503}, '{"code": 503}'),
    ],
)
async def test_an_error_object_mid_stream_is_a_server_error(
    server: OpenAIServer, error: Any, text: str
) -> None:
    server.stream(server.delta("so far"), {"error": error}, headers={"x-request-id": "req-mid"})
    chunks = await server.run()
    assert chunks[:2] == [llm.BlockStart(0, "text"), llm.TextDelta(0, "so far")]
    got = final_failure(chunks)
    assert got.code == "SERVER_ERROR"
    assert got.message == f"the server reported an error mid-stream: {text} (request id req-mid)"
    assert got.request_id == "req-mid"


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b"<html>Welcome to the proxy</html>", "text/html", "(text/html)"),
        (b'{"choices": [{"message": {"content": "hi"}}]}', "application/json", '{"choices'),
        (b"", None, "(no content-type) without a single server-sent event"),
        (b": just a comment\n\n", "text/event-stream", "event-stream) without"),
    ],
)
async def test_a_body_without_events_is_a_bad_response(
    server: OpenAIServer, body: bytes, content_type: str | None, expected: str
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    server.reply(200, body, headers)
    got = final_failure(await server.run())
    assert got.code == "BAD_RESPONSE"
    assert f"{server.url}/chat/completions answered HTTP 200" in got.message
    assert expected in got.message


@HTTPX_GC_WARNING
async def test_an_undecodable_body_is_a_bad_response(server: OpenAIServer) -> None:
    server.stream(b"this is not gzip", headers={"Content-Encoding": "gzip"})
    got = final_failure(await server.run())
    assert got.code == "BAD_RESPONSE"
    assert "cannot decode the response body" in got.message
