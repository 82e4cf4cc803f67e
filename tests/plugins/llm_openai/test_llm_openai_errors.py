"""HTTP errors, retries, timeouts, dropped connections and cancellation."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest

from dsh_llm import (
    Finish,
    TextDelta,
)
from tests.plugins.llm_openai.openai_support import HTTPX_GC_WARNING, final_failure

if TYPE_CHECKING:
    from tests.plugins.llm_openai.openai_support import OpenAIServer

pytestmark = pytest.mark.anyio

KEY = "sk-secret-key-1234"


# -- HTTP statuses --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_a_rejected_key_is_auth_and_never_printed(server: OpenAIServer, status: int) -> None:
    server.reply(
        status,
        {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}},
        {"x-request-id": "req-auth"},
    )
    chunks = await server.run(api_key=KEY)
    assert chunks == [Finish("error", final_failure(chunks))]
    got = final_failure(chunks)
    assert got.code == "AUTH"
    assert got.status == status
    assert got.request_id == "req-auth"
    assert f"the API key was rejected by {server.url} (HTTP {status})" in got.message
    assert KEY not in got.message
    assert "Incorrect API key provided: ***" in got.message
    assert len(server.requests) == 1  # not retried


async def test_a_short_placeholder_key_is_not_masked(server: OpenAIServer) -> None:
    server.reply(401, {"error": {"message": "key EMPTY is not valid"}})
    got = final_failure(await server.run(api_key="EMPTY"))
    assert got.message.endswith(": key EMPTY is not valid")


async def test_auth_without_a_key_says_the_key_is_missing(server: OpenAIServer) -> None:
    server.reply(401, {"error": {"message": "Missing bearer token"}})
    got = final_failure(await server.run(api_key=None))
    assert got.code == "AUTH"
    assert got.message == (
        f"{server.url} requires an API key (HTTP 401) and api_key is not set: Missing bearer token"
    )


async def test_not_found_names_the_url_and_the_model(server: OpenAIServer) -> None:
    server.reply(404, {"detail": "Not Found"})
    got = final_failure(await server.run())
    assert got.code == "NOT_FOUND"
    assert got.status == 404
    assert got.message == (
        f'{server.url}/chat/completions answered HTTP 404 for model "test-model" '
        "(check base_url and the model name): Not Found"
    )


@pytest.mark.parametrize(
    ("status", "body", "detail"),
    [
        (400, {"error": {"message": "max_tokens is too large", "code": None}}, "too large"),
        (422, "unprocessable: messages[0].content", "unprocessable: messages[0].content"),
        (400, {"message": "vLLM style"}, "vLLM style"),
        (400, {"error": "plain string error"}, "plain string error"),
        (400, {"error": {"code": "x"}}, '{"error": {"code": "x"}}'),
        (400, "x" * 2000, ": " + "x" * 299 + "…"),
        # A server's long, multi-line message is shown on one line, shortened.
        (400, {"error": {"message": "7 validation errors:\n  a\n" + "b" * 400}}, "b…"),
        (409, b"", "HTTP 409)"),
    ],
)
async def test_other_client_errors_are_bad_request_with_the_server_message(
    server: OpenAIServer, status: int, body: object, detail: str
) -> None:
    server.reply(status, body)
    got = final_failure(await server.run())
    assert got.code == "BAD_REQUEST"
    assert got.status == status
    assert got.message.startswith(f"{server.url} rejected the request (HTTP {status})")
    assert got.message.endswith(detail)
    assert len(server.requests) == 1


# -- retries --------------------------------------------------------------------------------


async def test_429_is_retried_then_streams(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.reply(429, {"error": {"message": "slow down"}})
    server.ok("after the wait")
    with caplog.at_level(logging.INFO, logger="dsh.llm-openai"):
        chunks = await server.run()
    assert chunks[1] == TextDelta(0, "after the wait")
    assert chunks[-1] == Finish("stop")
    assert len(server.requests) == 2
    # A retry is not a warning (a person sees a failure once, with its attempt count).
    (record,) = caplog.records
    assert record.levelno == logging.INFO
    assert "RATE_LIMITED" in record.getMessage()
    assert "attempt 2 of 3" in record.getMessage()
    # What the terminal chat shows instead of the log line.
    assert getattr(record, "dsh_status", None) == "RATE_LIMITED: retrying in 0.0s (attempt 2 of 3)"


async def test_429_after_every_retry_is_rate_limited(server: OpenAIServer) -> None:
    for _ in range(3):
        server.reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})
    got = final_failure(await server.run())
    assert got.code == "RATE_LIMITED"
    assert got.status == 429
    assert got.retry_after_ms == 0
    assert got.message == f"{server.url} is rate limiting requests (HTTP 429, attempt 3): slow down"
    assert len(server.requests) == 3


@pytest.mark.parametrize("statuses", [(500, 502), (503,)])
async def test_5xx_is_retried_then_streams(server: OpenAIServer, statuses: tuple[int, ...]) -> None:
    for status in statuses:
        server.reply(status, {"error": {"message": "overloaded"}})
    server.ok()
    assert (await server.run())[-1] == Finish("stop")
    assert len(server.requests) == len(statuses) + 1


async def test_5xx_after_every_retry_is_a_server_error(server: OpenAIServer) -> None:
    for _ in range(4):
        server.reply(503, "upstream down")
    got = final_failure(await server.run(max_retries=3))
    assert got.code == "SERVER_ERROR"
    assert got.status == 503
    assert got.message == f"{server.url} failed with HTTP 503 (attempt 4): upstream down"
    assert len(server.requests) == 4


# -- the end of the stream -----------------------------------------------------------------


async def test_what_follows_done_is_read_and_ignored(server: OpenAIServer) -> None:
    server.stream(server.delta("ok", finish="stop"), "[DONE]", server.delta("late"), ": bye")
    assert (await server.run())[-1] == Finish("stop")


async def test_a_drop_after_done_still_completes(server: OpenAIServer) -> None:
    server.stream(server.delta("ok", finish="stop"), "[DONE]", server.DROP)
    assert (await server.run())[-1] == Finish("stop")


@HTTPX_GC_WARNING
async def test_a_server_that_keeps_the_body_open_after_done(server: OpenAIServer) -> None:
    server.stream(server.delta("ok", finish="stop"), "[DONE]", server.STALL)
    assert (await server.run())[-1] == Finish("stop")
