"""Each adapter plugin built on ``dsh_llm.http``: registration and disposal, the
adapter without the runtime, shutting down mid-stream, the entry point."""

from __future__ import annotations

import importlib.metadata
from contextlib import aclosing
from pathlib import Path

import anyio
import httpx
import pytest

from dsh import Context, FiberState
from dsh_agent_core import AgentCore
from dsh_llm import Finish, Llm, LlmRequest, Message, TextDelta
from dsh_session import Session, SessionEvent
from dsh_session_jsonl import JsonlSessions
from dsh_session_jsonl._load import load_session
from tests.plugins.llm_http_support import HTTPX_GC_WARNING, LoopbackServer, final_failure

pytestmark = pytest.mark.anyio


async def test_mounting_registers_the_models_and_disposing_removes_them(
    server: LoopbackServer,
) -> None:
    async with Context() as root:
        await root.plugin(Llm)
        before = root.llm.models()
        fiber = root.plugin(server.plugin, server.config(models=["a", "b"]))
        await fiber
        assert fiber.state is FiberState.ACTIVE
        assert root.llm.models() == [*before, "a", "b"]
        plugin = fiber.instance
        assert isinstance(plugin, server.plugin)
        adapter = plugin.adapter
        assert isinstance(adapter, server.plugin.Adapter)
        assert repr(adapter) == f"<{type(adapter).__name__} {server.endpoint} models=['a', 'b']>"
        client = adapter._client
        assert not client.is_closed
        await fiber.dispose()
        assert root.llm.models() == before
        assert client.is_closed


async def test_the_adapter_works_without_the_runtime(server: LoopbackServer) -> None:
    server.ok("standalone")
    assert server.plugin.Config is not None
    config = server.plugin.Config.model_validate(server.config())
    async with httpx.AsyncClient() as client:
        adapter = server.plugin.Adapter(config, client)
        request = LlmRequest(model="test-model", messages=(Message.user("hi"),))
        async with aclosing(adapter.stream(request)) as stream:
            chunks = [chunk async for chunk in stream]
    assert TextDelta(0, "standalone") in chunks
    assert chunks[-1] == Finish("stop")


@HTTPX_GC_WARNING
async def test_disposing_the_root_mid_stream_ends_the_turn_disposed(
    server: LoopbackServer, tmp_path: Path
) -> None:
    """The HTTP client closes only after the turn using it ended, so the turn ends
    ``aborted``/``disposed`` and every record reaches the session file."""
    server.stream(*server.partial("Hello"), server.HOLD)
    async with Context() as root:
        # The adapter first, then the bundle, then persistence: teardown runs the
        # other way round, and none of them may close under the running turn.
        root.plugin(server.plugin, server.config())
        root.plugin(AgentCore, {"model": "test-model"})
        root.plugin(JsonlSessions, {"root": str(tmp_path)})
        await root.settle()
        agent = root.agents.get("main")
        session = agent.session
        streamed = anyio.Event()

        def watch(of: Session, event: SessionEvent) -> None:
            if event.type == "assistant/chunk" and event.data["chunk"].get("text") == "Hello":
                streamed.set()

        root.on("session/event", watch)
        agent.send("hi")
        await streamed.wait()
    assert session.turn_end(1) == {"kind": "aborted", "reason": "disposed"}
    loaded = load_session(tmp_path / session.id, session.id, fsync=False)
    assert loaded is not None
    assert [(e.seq, e.type, e.data) for e in loaded.events] == [
        (e.seq, e.type, e.data) for e in session.events
    ]
    await server.wait_disconnect()


@HTTPX_GC_WARNING
async def test_a_data_line_nested_too_deeply_is_a_bad_response(server: LoopbackServer) -> None:
    server.stream("[" * 200_000 + "]" * 200_000)
    failure = final_failure(await server.run())
    assert failure.code == "BAD_RESPONSE"
    assert "sent a data: line that nests too deeply" in failure.message


def test_the_entry_point_names_the_plugin(server: LoopbackServer) -> None:
    plugin = server.plugin
    assert plugin.name is not None
    (entry,) = [
        e for e in importlib.metadata.entry_points(group="dsh.plugins") if e.name == plugin.name
    ]
    assert entry.load() is plugin
    assert plugin.Adapter.name == plugin.name
    assert tuple(plugin.inject) == ("llm",)
