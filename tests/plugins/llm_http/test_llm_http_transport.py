"""``dsh_llm.http`` through each adapter: retries before the stream, connections and
timeouts, a dropped or silent stream, cancellation, connection reuse."""

from __future__ import annotations

import logging
from contextlib import aclosing

import anyio
import pytest

from dsh_llm import BlockStart, Chunk, Finish, LlmRequest, Message, TextDelta
from dsh_llm.http import retry_after
from tests.plugins.llm_http_support import (
    HTTPX_GC_WARNING,
    LoopbackServer,
    closed_port,
    final_failure,
    full_backlog,
)

pytestmark = pytest.mark.anyio

REQUEST = LlmRequest(model="test-model", messages=(Message.user("hi"),))


def endpoint(server: LoopbackServer, root: str) -> str:
    """The adapter's URL with ``root`` in place of the server's."""
    return server.endpoint.replace(server.root, root)


# -- odd statuses and error bodies ----------------------------------------------------------


@HTTPX_GC_WARNING
async def test_an_error_body_is_read_only_so_far(server: LoopbackServer) -> None:
    server.stream(b"e" * 40_000, status=400, headers={"Content-Type": "text/plain"})
    got = final_failure(await server.run())
    assert got.code == "BAD_REQUEST"
    assert got.message.endswith(": " + "e" * 299 + "…")


async def test_a_redirect_is_a_bad_response(server: LoopbackServer) -> None:
    server.reply(307, b"", {"Location": "https://elsewhere.example/v1/x"})
    got = final_failure(await server.run())
    assert got.code == "BAD_RESPONSE"
    assert got.message == (
        f"{server.endpoint} answered with an unexpected HTTP 307 to https://elsewhere.example/v1/x"
    )


async def test_an_unexpected_status_without_location(server: LoopbackServer) -> None:
    server.reply(304)
    assert final_failure(await server.run()).message.endswith("unexpected HTTP 304")


async def test_a_failed_error_body_read_still_reports_the_status(server: LoopbackServer) -> None:
    server.stream(b"partial error bo", server.DROP, status=502)
    got = final_failure(await server.run(max_retries=0))
    assert got.code == "SERVER_ERROR"
    assert got.message == f"{server.url} failed with HTTP 502 (attempt 1): partial error bo"


# -- retries --------------------------------------------------------------------------------


async def test_no_retries_when_max_retries_is_zero(server: LoopbackServer) -> None:
    server.reply(503)
    server.ok()
    assert final_failure(await server.run(max_retries=0)).code == "SERVER_ERROR"
    assert len(server.requests) == 1


async def test_every_attempt_sends_the_same_request(server: LoopbackServer) -> None:
    server.reply(500)
    server.ok()
    await server.run("same")
    first, second = server.requests
    assert first.body == second.body
    assert first.headers == second.headers


async def test_retry_after_is_honoured_over_the_backoff(server: LoopbackServer) -> None:
    # A 60 s backoff would outlast the guard; Retry-After: 0 lets the retry go at once.
    server.reply(429, b"", {"Retry-After": "0"})
    server.ok()
    with anyio.fail_after(30):
        chunks = await server.run(retry_backoff=60)
    assert chunks[-1] == Finish("stop")


async def test_retry_after_is_capped(server: LoopbackServer) -> None:
    server.reply(503, b"", {"Retry-After": "3600"})
    server.ok()
    with anyio.fail_after(30):
        chunks = await server.run(max_retry_after=0)
    assert chunks[-1] == Finish("stop")


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


async def test_cancelling_during_the_backoff_sends_no_retry(server: LoopbackServer) -> None:
    server.reply(503)
    server.ok()
    scope = anyio.CancelScope()

    class CancelOnRetry(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            scope.cancel()  # logged just before the backoff starts

    logger = logging.getLogger(f"dsh.{server.plugin.name}")
    handler = CancelOnRetry()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        async with server.llm(retry_backoff=60) as llm:
            with scope:
                async with aclosing(llm.stream(REQUEST)) as stream:
                    chunks = [chunk async for chunk in stream]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert scope.cancelled_caught
    assert "chunks" not in locals()
    assert len(server.requests) == 1


# -- connections and timeouts ----------------------------------------------------------------


async def test_a_hang_up_before_the_response_is_retried(server: LoopbackServer) -> None:
    server.hang_up()
    server.ok()
    assert (await server.run())[-1] == Finish("stop")
    assert len(server.requests) == 2


async def test_hang_ups_on_every_attempt_are_a_connection_error(server: LoopbackServer) -> None:
    for _ in range(3):
        server.hang_up()
    got = final_failure(await server.run())
    assert got.code == "CONNECTION"
    assert got.message.startswith(f"cannot connect to {server.endpoint}: ")
    assert got.message.endswith("(attempt 3 of 3)")
    assert len(server.requests) == 3


async def test_nothing_listening_is_a_connection_error(server: LoopbackServer) -> None:
    root = f"http://127.0.0.1:{closed_port()}"
    got = final_failure(await server.run(base_url=root + server.api_root))
    assert got.code == "CONNECTION"
    assert got.message.startswith(f"cannot connect to {endpoint(server, root)}: ")
    assert got.message.endswith("(attempt 3 of 3)")


async def test_a_connect_timeout_is_a_timeout(server: LoopbackServer) -> None:
    with full_backlog() as root:
        base = root + server.api_root
        chunks = await server.run(base_url=base, connect_timeout=0.2, max_retries=1)
    got = final_failure(chunks)
    assert got.code == "TIMEOUT"
    assert got.message == (
        f"connecting to {endpoint(server, root)} timed out after 0.2s "
        "(connect_timeout) (attempt 2 of 2)"
    )


async def test_no_response_within_read_timeout_is_a_timeout(server: LoopbackServer) -> None:
    server.stall()
    got = final_failure(await server.run(read_timeout=0.2))
    assert got.code == "TIMEOUT"
    assert got.message == f"{server.endpoint} sent no response within 0.2s (read_timeout)"
    assert len(server.requests) == 1  # the request went out: not retried


@HTTPX_GC_WARNING
async def test_silence_mid_stream_is_a_timeout(server: LoopbackServer) -> None:
    server.stream(*server.partial("so far"), server.STALL)
    chunks = await server.run(read_timeout=0.2)
    assert chunks[:2] == [BlockStart(0, "text"), TextDelta(0, "so far")]
    got = final_failure(chunks)
    assert got.code == "TIMEOUT"
    assert got.message == f"{server.endpoint} sent nothing for 0.2s mid-stream (read_timeout)"
    assert len(server.requests) == 1


async def test_a_connection_dropped_mid_stream_is_interrupted_and_not_retried(
    server: LoopbackServer,
) -> None:
    server.stream(*server.partial("half an ans"), server.DROP, headers={"request-id": "req-drop"})
    server.ok()  # would be the retry: it must not happen
    chunks = await server.run()
    assert chunks[:2] == [BlockStart(0, "text"), TextDelta(0, "half an ans")]
    got = final_failure(chunks)
    assert got.code == "STREAM_INTERRUPTED"
    assert got.request_id == "req-drop"
    assert got.message.startswith(f"the connection to {server.endpoint} dropped mid-stream: ")
    assert got.message.endswith(" (request id req-drop)")
    assert len(server.requests) == 1


async def test_the_connection_is_reused_after_a_complete_stream(server: LoopbackServer) -> None:
    server.ok()
    server.ok()
    async with server.llm() as llm:
        for _ in range(2):
            async with aclosing(llm.stream(REQUEST)) as stream:
                assert [c async for c in stream][-1] == Finish("stop")
    assert len(server.requests) == 2
    assert server.requests[0].client == server.requests[1].client


# -- cancellation ---------------------------------------------------------------------------


@HTTPX_GC_WARNING
async def test_cancelling_the_consumer_closes_the_connection(server: LoopbackServer) -> None:
    server.stream(*server.partial("first"), server.HOLD)
    seen: list[Chunk] = []
    async with server.llm() as llm:
        with anyio.CancelScope() as scope:
            async with aclosing(llm.stream(REQUEST)) as stream:
                async for chunk in stream:
                    seen.append(chunk)
                    if isinstance(chunk, TextDelta):
                        scope.cancel()
        assert scope.cancelled_caught
        await server.wait_disconnect()
    assert seen == [BlockStart(0, "text"), TextDelta(0, "first")]


@HTTPX_GC_WARNING
async def test_leaving_the_stream_early_closes_the_connection(server: LoopbackServer) -> None:
    server.stream(*server.partial("first"), server.HOLD)
    async with server.llm() as llm:
        async with aclosing(llm.stream(REQUEST)) as stream:
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    break
        await server.wait_disconnect()
