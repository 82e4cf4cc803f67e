"""Shutting down mid-stream: the HTTP client closes only after the turn using it ended,
so the turn ends ``aborted``/``disposed`` and every record reaches the session file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from dsh import Context
from dsh_agent_core import AgentCore
from dsh_llm_openai import OpenAICompatible
from dsh_session import Session, SessionEvent
from dsh_session_jsonl import JsonlSessions
from dsh_session_jsonl._log import load_session
from tests.plugins.llm_openai.openai_support import HTTPX_GC_WARNING, final_failure

if TYPE_CHECKING:
    from tests.plugins.llm_openai.conftest import OpenAIServer

pytestmark = pytest.mark.anyio


async def test_disposing_the_root_mid_stream_ends_the_turn_disposed(
    server: OpenAIServer, tmp_path: Path
) -> None:
    d = server.delta
    server.stream(d("Hel", role="assistant"), d("lo"), server.HOLD)
    async with Context() as root:
        # The adapter first, then the bundle, then persistence: teardown runs the
        # other way round, and none of them may close under the running turn.
        root.plugin(OpenAICompatible, server.config())
        root.plugin(AgentCore, {"model": "test-model"})
        root.plugin(JsonlSessions, {"root": str(tmp_path)})
        await root.settle()
        agent = root.agents.get("main")
        session = agent.session
        streamed = anyio.Event()

        def watch(of: Session, event: SessionEvent) -> None:
            if event.type == "assistant/chunk" and event.data["chunk"].get("text") == "lo":
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
async def test_a_data_line_nested_too_deeply_is_a_bad_response(server: OpenAIServer) -> None:
    server.stream("[" * 200_000 + "]" * 200_000)
    failure = final_failure(await server.run())
    assert failure.code == "BAD_RESPONSE"
    assert "sent a data: line that nests too deeply" in failure.message
