"""Anthropic's failures: its error bodies, retries before the stream (429, 500, 529 with
``retry-after``), connections and timeouts, ``event: error`` mid-stream, cancellation."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest

from dsh_llm import (
    BlockStart,
    Finish,
    LlmFailure,
    TextDelta,
    Usage,
    UsageChunk,
)
from tests.plugins.llm_anthropic.anthropic_support import event, message_start
from tests.plugins.llm_http_support import (
    HTTPX_GC_WARNING,
    final_failure,
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
    server.ok("after the wait")
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
    assert (got.code, got.status, got.retry_after_ms) == ("SERVER_ERROR", 529, 0)
    assert got.message == f"{server.url} failed with HTTP 529 (attempt 3): Overloaded"
    assert len(server.requests) == 3


async def test_429_after_every_retry_is_rate_limited(server: AnthropicServer) -> None:
    for _ in range(2):
        server.reply(429, api_error("rate_limit_error", "slow down"), {"retry-after": "0"})
    got = final_failure(await server.run(max_retries=1))
    assert (got.code, got.status, got.retry_after_ms) == ("RATE_LIMITED", 429, 0)
    assert got.message.endswith("(HTTP 429, attempt 2): slow down")


# -- event: error -----------------------------------------------------------------------------


@HTTPX_GC_WARNING
async def test_an_error_event_mid_stream_is_a_server_error_and_not_retried(
    server: AnthropicServer,
) -> None:
    server.play("overloaded_midstream", headers={"request-id": "req_011CMid"})
    server.ok()  # would be the retry: it must not happen
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
