"""The observers of each stream (RFC 0042): ``llm/start`` with the request an adapter
gets and its provider, ``llm/response`` with the chunks the stream yielded."""

from __future__ import annotations

import dataclasses
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from dsh import Context
from dsh.testing import capture_logs, errors_logged
from dsh_llm import (
    Chunk,
    Finish,
    Llm,
    LlmRequest,
    TextDelta,
    Usage,
    UsageChunk,
)
from tests.plugins.llm.llm_support import collect, request

pytestmark = pytest.mark.anyio


class Adapter:
    """Plays ``chunks``; holds before the last one when ``hold`` is given."""

    def __init__(self, *chunks: Any, hold: anyio.Event | None = None) -> None:
        self.chunks = list(chunks)
        self.hold = hold

    async def stream(self, request: LlmRequest) -> Any:
        for n, chunk in enumerate(self.chunks):
            if self.hold is not None and n == len(self.chunks) - 1:
                await self.hold.wait()
            yield chunk


class Seen:
    def __init__(self, root: Context) -> None:
        self.started: list[tuple[LlmRequest, str]] = []
        self.responses: list[tuple[LlmRequest, tuple[Chunk, ...] | None]] = []
        root.on("llm/start", lambda request, provider: self.started.append((request, provider)))
        root.on("llm/response", lambda request, result: self.responses.append((request, result)))


ANSWER = (TextDelta(0, "hello"), UsageChunk(Usage(7, 2)), Finish("stop"))


async def test_start_sees_the_request_the_adapter_gets_and_response_the_assembled_answer() -> None:
    async with Context() as root:
        await root.plugin(Llm)
        seen = Seen(root)
        root.llm.register_adapter(["m", "n"], Adapter(*ANSWER))

        async def route(req: LlmRequest, call_next: Any) -> LlmRequest:
            return dataclasses.replace(req, model="n")

        root.on("llm/request", route)
        chunks = await collect(root.llm, request("m"))
    assert chunks == list(ANSWER)
    ((sent, provider),) = seen.started
    assert sent.model == "n"
    assert provider == "root"  # the plugin that registered the adapter
    ((answered, result),) = seen.responses
    assert answered is sent
    assert result == ANSWER


async def test_an_adapter_may_name_its_provider() -> None:
    adapter = Adapter(*ANSWER)
    adapter.provider = "deepseek"  # type: ignore[attr-defined]
    async with Context() as root:
        await root.plugin(Llm)
        seen = Seen(root)
        root.llm.register_adapter(["m"], adapter)
        await collect(root.llm, request())
    assert [provider for _, provider in seen.started] == ["deepseek"]


async def test_no_adapter_is_an_empty_provider_and_a_failed_finish() -> None:
    async with Context() as root:
        await root.plugin(Llm)
        seen = Seen(root)
        await collect(root.llm, request("nobody"))
    assert [provider for _, provider in seen.started] == [""]
    ((_, result),) = seen.responses
    assert result is not None
    (finish,) = result
    assert isinstance(finish, Finish)
    assert finish.failure is not None
    assert finish.failure.code == "NO_ADAPTER"


async def test_a_cancelled_stream_is_a_response_without_a_result() -> None:
    hold = anyio.Event()
    async with Context() as root:
        await root.plugin(Llm)
        seen = Seen(root)
        root.llm.register_adapter(["m"], Adapter(*ANSWER, hold=hold))
        with anyio.move_on_after(0) as scope:
            await collect(root.llm, request())
    assert scope.cancelled_caught
    assert [result for _, result in seen.responses] == [None]


async def test_a_stream_closed_early_is_a_response_without_a_result() -> None:
    async with Context() as root:
        await root.plugin(Llm)
        seen = Seen(root)
        root.llm.register_adapter(["m"], Adapter(*ANSWER))
        async with aclosing(root.llm.stream(request())) as chunks:
            async for _ in chunks:
                break
    assert [result for _, result in seen.responses] == [None]


async def test_a_failing_observer_is_logged_and_the_stream_goes_on() -> None:
    async with Context() as root:
        await root.plugin(Llm)
        root.llm.register_adapter(["m"], Adapter(*ANSWER))

        def broken(*args: Any) -> None:
            raise RuntimeError("observer broke")

        root.on("llm/start", broken)
        root.on("llm/response", broken)
        with capture_logs() as logs:
            chunks = await collect(root.llm, request())
    assert chunks == list(ANSWER)
    assert [r.getMessage() for r in errors_logged(logs)] == [
        "a listener of llm/start failed",
        "a listener of llm/response failed",
    ]


async def test_a_request_the_waterfall_refuses_is_neither_started_nor_answered() -> None:
    async with Context() as root:
        await root.plugin(Llm)
        seen = Seen(root)
        root.llm.register_adapter(["m"], Adapter(*ANSWER))

        async def refuse(req: LlmRequest, call_next: Any) -> LlmRequest:
            raise RuntimeError("no")

        root.on("llm/request", refuse)
        with pytest.raises(RuntimeError, match="no"):
            await collect(root.llm, request())
    assert seen.started == []
    assert seen.responses == []
