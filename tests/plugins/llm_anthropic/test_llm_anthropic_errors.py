"""Anthropic's failures: its error bodies, retries before the stream (429, 500, 529 with
``retry-after``), connections and timeouts, ``event: error`` mid-stream, cancellation."""

from __future__ import annotations

import logging
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from dsh_llm import (
    BlockStart,
    Chunk,
    Finish,
    LlmFailure,
    LlmRequest,
    Message,
    ReasoningDelta,
    TextDelta,
    Usage,
    UsageChunk,
)
from tests.plugins.llm_anthropic.anthropic_support import event, message_start, recording
from tests.plugins.llm_http_support import (
    HTTPX_GC_WARNING,
    closed_port,
    final_failure,
    full_backlog,
)

if TYPE_CHECKING:
    from tests.plugins.llm_anthropic.anthropic_support import AnthropicServer

pytestmark = pytest.mark.anyio

KEY = "sk-ant-api03-secret-key"


def api_error(kind: str, message: str) -> dict[str, Any]:
    """An error body as the Messages API sends it."""
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}


# -- HTTP statuses --------------------------------------------------------------------------


async def test_a_rejected_key_is_auth_and_never_printed(server: AnthropicServer) -> None:
    body = api_error("authentication_error", f"invalid x-api-key {KEY}")
    server.reply(401, body, {"request-id": "req_011CAuth"})
    got = final_failure(await server.run(api_key=KEY))
    assert got == LlmFailure(
        f"the API key was rejected by {server.url} (HTTP 401): invalid x-api-key ***",
        "AUTH",
        status=401,
        request_id="req_011CAuth",
    )
    assert len(server.requests) == 1  # not retried


async def test_auth_without_a_key_says_the_key_is_missing(server: AnthropicServer) -> None:
    server.reply(401, api_error("authentication_error", "x-api-key header is required"))
    got = final_failure(await server.run(api_key=None))
    assert got.message == (
        f"{server.url} requires an API key (HTTP 401) and api_key is not set: "
        "x-api-key header is required"
    )


@pytest.mark.parametrize(
    ("status", "kind", "message", "code"),
    [
        (404, "not_found_error", "model: claude-nonexistent", "NOT_FOUND"),
        (400, "invalid_request_error", "messages.1.content.0.type: Field required", "BAD_REQUEST"),
        (
            413,
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes",
            "BAD_REQUEST",
        ),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 215000 tokens > 200000 maximum",
            "CONTEXT_LENGTH",
        ),
        (
            400,
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000",
            "CONTEXT_LENGTH",
        ),
    ],
)
async def test_refusals_are_classified_and_not_retried(
    server: AnthropicServer, status: int, kind: str, message: str, code: str
) -> None:
    server.reply(status, api_error(kind, message))
    got = final_failure(await server.run())
    assert (got.code, got.status) == (code, status)
    assert got.message.endswith(f": {message}")
    assert len(server.requests) == 1


# -- retries before the stream ----------------------------------------------------------------


@pytest.mark.parametrize("statuses", [(429,), (500,), (529,), (529, 500)])
async def test_429_500_and_529_are_retried_then_stream(
    server: AnthropicServer, caplog: pytest.LogCaptureFixture, statuses: tuple[int, ...]
) -> None:
    for status in statuses:
        headers = {"retry-after": "0", "request-id": f"req_{status}"}
        server.reply(status, api_error("overloaded_error", "Overloaded"), headers)
    server.answer("after the wait")
    with caplog.at_level(logging.INFO, logger="dsh.llm-anthropic"):
        chunks = await server.run(retry_backoff=60, max_retries=3)  # retry-after: 0 wins
    assert chunks[1] == TextDelta(0, "after the wait")
    assert chunks[-1] == Finish("stop")
    assert len(server.requests) == len(statuses) + 1
    # Each retry is an INFO line naming the attempt and the server's request id.
    assert [r.levelno for r in caplog.records] == [logging.INFO] * len(statuses)
    first = caplog.records[0].getMessage()
    assert "attempt 2 of 4" in first
    assert first.endswith(f"(request id req_{statuses[0]})")


async def test_529_after_every_retry_is_a_server_error(server: AnthropicServer) -> None:
    for _ in range(3):
        server.reply(529, api_error("overloaded_error", "Overloaded"), {"retry-after": "0"})
    got = final_failure(await server.run())
    assert got.code == "SERVER_ERROR"
    assert got.status == 529
    assert got.retry_after_ms == 0
    assert got.message == f"{server.url} failed with HTTP 529 (attempt 3): Overloaded"
    assert len(server.requests) == 3


async def test_429_after_every_retry_is_rate_limited(server: AnthropicServer) -> None:
    for _ in range(2):
        server.reply(429, api_error("rate_limit_error", "slow down"), {"retry-after": "0"})
    got = final_failure(await server.run(max_retries=1))
    assert (got.code, got.status, got.retry_after_ms) == ("RATE_LIMITED", 429, 0)
    assert got.message.endswith("(HTTP 429, attempt 2): slow down")


async def test_every_attempt_sends_the_same_request(server: AnthropicServer) -> None:
    server.reply(500, api_error("api_error", "Internal server error"))
    server.answer()
    await server.run("same")
    first, second = server.requests
    assert first.body == second.body
    assert first.headers["x-api-key"] == second.headers["x-api-key"]


# -- connections and timeouts ----------------------------------------------------------------


async def test_a_hang_up_before_the_response_is_retried(server: AnthropicServer) -> None:
    server.hang_up()
    server.answer()
    assert (await server.run())[-1] == Finish("stop")
    assert len(server.requests) == 2


async def test_connection_refused_is_a_connection_error(server: AnthropicServer) -> None:
    root = f"http://127.0.0.1:{closed_port()}"
    got = final_failure(await server.run(base_url=root))
    assert got.code == "CONNECTION"
    assert got.message.startswith(f"cannot connect to {root}/v1/messages: ")
    assert got.message.endswith("(attempt 3 of 3)")


async def test_a_connect_timeout_is_a_timeout(server: AnthropicServer) -> None:
    with full_backlog() as root:
        got = final_failure(await server.run(base_url=root, connect_timeout=0.2, max_retries=0))
    assert got.code == "TIMEOUT"
    assert got.message.startswith(f"connecting to {root}/v1/messages timed out after 0.2s")


async def test_no_response_within_read_timeout_is_a_timeout(server: AnthropicServer) -> None:
    server.stall()
    got = final_failure(await server.run(read_timeout=0.2))
    assert got.code == "TIMEOUT"
    assert got.message == f"{server.url}/v1/messages sent no response within 0.2s (read_timeout)"
    assert len(server.requests) == 1  # the request went out: not retried


@HTTPX_GC_WARNING
async def test_silence_mid_stream_is_a_timeout(server: AnthropicServer) -> None:
    server.stream(*recording("text")[:4], server.STALL)
    chunks = await server.run(read_timeout=0.2)
    assert chunks[:2] == [BlockStart(0, "text"), TextDelta(0, "Hello")]
    got = final_failure(chunks)
    assert got.code == "TIMEOUT"
    assert "mid-stream (read_timeout)" in got.message


async def test_a_connection_dropped_mid_stream_is_interrupted_and_not_retried(
    server: AnthropicServer,
) -> None:
    server.stream(*recording("thinking_tool_use")[:3], server.DROP, headers={"request-id": "req_d"})
    server.answer()  # would be the retry: it must not happen
    chunks = await server.run()
    assert chunks[:2] == [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "The user wants the weather in Paris."),
    ]
    got = final_failure(chunks)
    assert got.code == "STREAM_INTERRUPTED"
    assert got.request_id == "req_d"
    assert got.message.startswith(f"the connection to {server.url}/v1/messages dropped mid-stream")
    assert len(server.requests) == 1


# -- event: error -----------------------------------------------------------------------------


@HTTPX_GC_WARNING
async def test_an_error_event_mid_stream_is_a_server_error_and_not_retried(
    server: AnthropicServer,
) -> None:
    server.play("overloaded_midstream", headers={"request-id": "req_011CMid"})
    server.answer()  # would be the retry: it must not happen
    chunks = await server.run()
    assert chunks == [
        BlockStart(0, "text"),
        TextDelta(0, "The first part of"),
        UsageChunk(Usage(1204, 1, cache_read_tokens=0, cache_write_tokens=0)),
        Finish(
            "error",
            LlmFailure(
                "the server reported an error mid-stream: overloaded_error: Overloaded "
                "(request id req_011CMid)",
                "SERVER_ERROR",
                request_id="req_011CMid",
            ),
        ),
    ]
    assert len(server.requests) == 1


@HTTPX_GC_WARNING
@pytest.mark.parametrize(
    ("error", "text"),
    [
        ({"type": "api_error"}, "api_error"),
        ({"message": "Internal server error"}, "Internal server error"),
        ("boom", "boom"),
        ({"code": 5}, '{"code": 5}'),
        (None, "null"),
    ],
)
async def test_an_error_event_names_what_it_can(
    server: AnthropicServer, error: Any, text: str
) -> None:
    server.stream(message_start(), event("error", error=error))
    got = final_failure(await server.run())
    assert got.code == "SERVER_ERROR"
    assert got.message == f"the server reported an error mid-stream: {text}"


# -- cancellation ---------------------------------------------------------------------------


@HTTPX_GC_WARNING
async def test_cancelling_the_consumer_closes_the_connection(server: AnthropicServer) -> None:
    server.stream(*recording("text")[:4], server.HOLD)
    request = LlmRequest(model="test-model", messages=(Message.user("hi"),))
    seen: list[Chunk] = []
    async with server.llm() as llm:
        with anyio.CancelScope() as scope:
            async with aclosing(llm.stream(request)) as stream:
                async for chunk in stream:
                    seen.append(chunk)
                    if isinstance(chunk, TextDelta):
                        scope.cancel()
        assert scope.cancelled_caught
        await server.wait_disconnect()
    assert seen == [BlockStart(0, "text"), TextDelta(0, "Hello")]
