"""HTTP errors, retries, timeouts, dropped connections and cancellation."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from contextlib import aclosing, suppress
from typing import TYPE_CHECKING

import anyio
import pytest

from dsh_llm import (
    BlockStart,
    Chunk,
    Finish,
    LlmRequest,
    Message,
    TextDelta,
    Usage,
    UsageChunk,
)
from dsh_llm_openai import retry_after
from tests.plugins.llm_openai.openai_support import HTTPX_GC_WARNING, final_failure, stream_ok

if TYPE_CHECKING:
    from tests.plugins.llm_openai.conftest import LoopbackServer

pytestmark = pytest.mark.anyio

KEY = "sk-secret-key-1234"


# -- HTTP statuses --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_a_rejected_key_is_auth_and_never_printed(
    server: LoopbackServer, status: int
) -> None:
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


async def test_a_short_placeholder_key_is_not_masked(server: LoopbackServer) -> None:
    server.reply(401, {"error": {"message": "key EMPTY is not valid"}})
    got = final_failure(await server.run(api_key="EMPTY"))
    assert got.message.endswith(": key EMPTY is not valid")


async def test_auth_without_a_key_says_the_key_is_missing(server: LoopbackServer) -> None:
    server.reply(401, {"error": {"message": "Missing bearer token"}})
    got = final_failure(await server.run(api_key=None))
    assert got.code == "AUTH"
    assert got.message == (
        f"{server.url} requires an API key (HTTP 401) and api_key is not set: Missing bearer token"
    )


async def test_not_found_names_the_url_and_the_model(server: LoopbackServer) -> None:
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
    server: LoopbackServer, status: int, body: object, detail: str
) -> None:
    server.reply(status, body)
    got = final_failure(await server.run())
    assert got.code == "BAD_REQUEST"
    assert got.status == status
    assert got.message.startswith(f"{server.url} rejected the request (HTTP {status})")
    assert got.message.endswith(detail)
    assert len(server.requests) == 1


@HTTPX_GC_WARNING
async def test_an_error_body_is_read_only_so_far(server: LoopbackServer) -> None:
    server.stream(b"e" * 40_000, status=400, headers={"Content-Type": "text/plain"})
    got = final_failure(await server.run())
    assert got.code == "BAD_REQUEST"
    assert got.message.endswith(": " + "e" * 299 + "…")


async def test_a_redirect_is_a_bad_response(server: LoopbackServer) -> None:
    server.reply(307, b"", {"Location": "https://elsewhere.example/v1/chat/completions"})
    got = final_failure(await server.run())
    assert got.code == "BAD_RESPONSE"
    assert got.message == (
        f"{server.url}/chat/completions answered with an unexpected HTTP 307 "
        "to https://elsewhere.example/v1/chat/completions"
    )


async def test_an_unexpected_status_without_location(server: LoopbackServer) -> None:
    server.reply(304)
    assert final_failure(await server.run()).message.endswith("unexpected HTTP 304")


# -- retries --------------------------------------------------------------------------------


async def test_429_is_retried_then_streams(
    server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.reply(429, {"error": {"message": "slow down"}})
    stream_ok(server, "after the wait")
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


async def test_429_after_every_retry_is_rate_limited(server: LoopbackServer) -> None:
    for _ in range(3):
        server.reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})
    got = final_failure(await server.run())
    assert got.code == "RATE_LIMITED"
    assert got.status == 429
    assert got.retry_after_ms == 0
    assert got.message == f"{server.url} is rate limiting requests (HTTP 429, attempt 3): slow down"
    assert len(server.requests) == 3


@pytest.mark.parametrize("statuses", [(500, 502), (503,)])
async def test_5xx_is_retried_then_streams(
    server: LoopbackServer, statuses: tuple[int, ...]
) -> None:
    for status in statuses:
        server.reply(status, {"error": {"message": "overloaded"}})
    stream_ok(server)
    assert (await server.run())[-1] == Finish("stop")
    assert len(server.requests) == len(statuses) + 1


async def test_5xx_after_every_retry_is_a_server_error(server: LoopbackServer) -> None:
    for _ in range(4):
        server.reply(503, "upstream down")
    got = final_failure(await server.run(max_retries=3))
    assert got.code == "SERVER_ERROR"
    assert got.status == 503
    assert got.message == f"{server.url} failed with HTTP 503 (attempt 4): upstream down"
    assert len(server.requests) == 4


async def test_no_retries_when_max_retries_is_zero(server: LoopbackServer) -> None:
    server.reply(503)
    stream_ok(server)
    assert final_failure(await server.run(max_retries=0)).code == "SERVER_ERROR"
    assert len(server.requests) == 1


async def test_every_attempt_sends_the_same_request(server: LoopbackServer) -> None:
    server.reply(500)
    stream_ok(server)
    await server.run("same")
    first, second = server.requests
    assert first.body == second.body
    assert first.headers["authorization"] == second.headers["authorization"]


async def test_retry_after_is_honoured_over_the_backoff(server: LoopbackServer) -> None:
    # A 60 s backoff would outlast the guard; Retry-After: 0 lets the retry go at once.
    server.reply(429, b"", {"Retry-After": "0"})
    stream_ok(server)
    with anyio.fail_after(30):
        chunks = await server.run(retry_backoff=60)
    assert chunks[-1] == Finish("stop")


async def test_retry_after_is_capped(server: LoopbackServer) -> None:
    server.reply(503, b"", {"Retry-After": "3600"})
    stream_ok(server)
    with anyio.fail_after(30):
        chunks = await server.run(max_retry_after=0)
    assert chunks[-1] == Finish("stop")


async def test_a_failed_error_body_read_still_reports_the_status(server: LoopbackServer) -> None:
    server.stream(b"partial error bo", server.DROP, status=502)
    got = final_failure(await server.run(max_retries=0))
    assert got.code == "SERVER_ERROR"
    assert got.message == f"{server.url} failed with HTTP 502 (attempt 1): partial error bo"


def test_retry_after_parsing() -> None:
    assert retry_after({}) is None
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "1.5"}) == 1.5
    assert retry_after({"retry-after": "-3"}) == 0.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    future = retry_after({"retry-after": "Fri, 01 Jan 2100 00:00:00 GMT"})
    assert future is not None
    assert future > 1e9
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({"retry-after": "nan"}) is None
    assert retry_after({"retry-after-ms": "inf"}) is None


# -- connections and timeouts ----------------------------------------------------------------


async def test_a_hang_up_before_the_response_is_retried(server: LoopbackServer) -> None:
    server.hang_up()
    stream_ok(server)
    assert (await server.run())[-1] == Finish("stop")
    assert len(server.requests) == 2


async def test_hang_ups_on_every_attempt_are_a_connection_error(server: LoopbackServer) -> None:
    for _ in range(3):
        server.hang_up()
    got = final_failure(await server.run())
    assert got.code == "CONNECTION"
    assert got.message.startswith(f"cannot connect to {server.url}/chat/completions: ")
    assert got.message.endswith("(attempt 3 of 3)")
    assert len(server.requests) == 3


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_nothing_listening_is_a_connection_error(server: LoopbackServer) -> None:
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    got = final_failure(await server.run(base_url=base))
    assert got.code == "CONNECTION"
    assert got.message.startswith(f"cannot connect to {base}/chat/completions: ")
    assert got.message.endswith("(attempt 3 of 3)")


@pytest.fixture
def full_backlog() -> Iterator[str]:
    """A base_url whose listening socket never accepts: connecting times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        with suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


async def test_a_connect_timeout_is_a_timeout(server: LoopbackServer, full_backlog: str) -> None:
    chunks = await server.run(base_url=full_backlog, connect_timeout=0.2, max_retries=1)
    got = final_failure(chunks)
    assert got.code == "TIMEOUT"
    assert got.message == (
        f"connecting to {full_backlog}/chat/completions timed out after 0.2s "
        "(connect_timeout) (attempt 2 of 2)"
    )


async def test_no_response_within_read_timeout_is_a_timeout(server: LoopbackServer) -> None:
    server.stall()
    got = final_failure(await server.run(read_timeout=0.2))
    assert got.code == "TIMEOUT"
    assert got.message == (
        f"{server.url}/chat/completions sent no response within 0.2s (read_timeout)"
    )
    assert len(server.requests) == 1  # the request went out: not retried


@HTTPX_GC_WARNING
async def test_silence_mid_stream_is_a_timeout(server: LoopbackServer) -> None:
    server.stream(server.delta("so far"), server.usage(1, 1), server.STALL)
    chunks = await server.run(read_timeout=0.2)
    assert chunks[:2] == [BlockStart(0, "text"), TextDelta(0, "so far")]
    assert chunks[2] == UsageChunk(Usage(1, 1))
    got = final_failure(chunks)
    assert got.code == "TIMEOUT"
    assert got.message == (
        f"{server.url}/chat/completions sent nothing for 0.2s mid-stream (read_timeout)"
    )
    assert len(server.requests) == 1


async def test_a_connection_dropped_mid_stream_is_interrupted_and_not_retried(
    server: LoopbackServer,
) -> None:
    server.stream(server.delta("half an ans"), server.DROP, headers={"x-request-id": "req-drop"})
    stream_ok(server)  # would be the retry: it must not happen
    chunks = await server.run()
    assert chunks[:2] == [BlockStart(0, "text"), TextDelta(0, "half an ans")]
    got = final_failure(chunks)
    assert got.code == "STREAM_INTERRUPTED"
    assert got.request_id == "req-drop"
    assert got.message.startswith(
        f"the connection to {server.url}/chat/completions dropped mid-stream: "
    )
    assert len(server.requests) == 1


async def test_what_follows_done_is_read_and_ignored(server: LoopbackServer) -> None:
    server.stream(server.delta("ok", finish="stop"), "[DONE]", server.delta("late"), ": bye")
    assert (await server.run())[-1] == Finish("stop")


async def test_a_drop_after_done_still_completes(server: LoopbackServer) -> None:
    server.stream(server.delta("ok", finish="stop"), "[DONE]", server.DROP)
    assert (await server.run())[-1] == Finish("stop")


@HTTPX_GC_WARNING
async def test_a_server_that_keeps_the_body_open_after_done(server: LoopbackServer) -> None:
    server.stream(server.delta("ok", finish="stop"), "[DONE]", server.STALL)
    assert (await server.run())[-1] == Finish("stop")


async def test_the_connection_is_reused_after_a_complete_stream(server: LoopbackServer) -> None:
    stream_ok(server)
    stream_ok(server)
    request = LlmRequest(model="test-model", messages=(Message.user("hi"),))
    async with server.llm() as llm:
        for _ in range(2):
            async with aclosing(llm.stream(request)) as stream:
                assert [c async for c in stream][-1] == Finish("stop")
    assert len(server.requests) == 2
    assert server.requests[0].client == server.requests[1].client


# -- cancellation ---------------------------------------------------------------------------


@HTTPX_GC_WARNING
async def test_cancelling_the_consumer_closes_the_connection(server: LoopbackServer) -> None:
    server.stream(server.delta("first"), server.HOLD)
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
    assert seen == [BlockStart(0, "text"), TextDelta(0, "first")]


@HTTPX_GC_WARNING
async def test_leaving_the_stream_early_closes_the_connection(server: LoopbackServer) -> None:
    server.stream(server.delta("first"), server.HOLD)
    request = LlmRequest(model="test-model", messages=(Message.user("hi"),))
    async with server.llm() as llm:
        async with aclosing(llm.stream(request)) as stream:
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    break
        await server.wait_disconnect()


async def test_cancelling_during_the_backoff_sends_no_retry(server: LoopbackServer) -> None:
    server.reply(503)
    stream_ok(server)
    request = LlmRequest(model="test-model", messages=(Message.user("hi"),))
    scope = anyio.CancelScope()

    class CancelOnRetry(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            scope.cancel()  # logged just before the backoff starts

    logger = logging.getLogger("dsh.llm-openai")
    handler = CancelOnRetry()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        async with server.llm(retry_backoff=60) as llm:
            with scope:
                async with aclosing(llm.stream(request)) as stream:
                    chunks = [chunk async for chunk in stream]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert scope.cancelled_caught
    assert "chunks" not in locals()
    assert len(server.requests) == 1
