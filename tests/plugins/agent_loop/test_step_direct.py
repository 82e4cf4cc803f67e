"""The step's stream straight from the adapter (``Llm.direct``), and what ends it."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from pydantic import BaseModel

import dsh_llm as llm
from dsh import Context
from dsh.testing import ScriptedModel, text, tool_call, tool_calls
from dsh_agent import AgentRegistry
from dsh_agent_loop import AgentLoop, LoopAgent
from dsh_session import Sessions
from dsh_system_prompt import SystemPrompt
from dsh_tools import Tool, ToolCall, Tools
from tests.support import event_data

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _root() -> AsyncIterator[Context]:
    async with Context() as root:
        await root.plugin(SystemPrompt, {})
        await root.plugin(llm.Llm)
        await root.plugin(Sessions)
        await root.plugin(AgentRegistry)
        await root.plugin(Tools)
        await root.plugin(AgentLoop, {})
        yield root


async def _turn(root: Context, model: str) -> LoopAgent:
    agent: LoopAgent = root.agents.create(model=model)
    agent.send("go")
    await agent.when_idle()
    return agent


class _RefusesAtOnce:
    def stream(self, request: llm.LlmRequest) -> AsyncIterator[llm.Chunk]:
        raise llm.LlmError(llm.LlmFailure("no quota", "QUOTA"))


class _FailsMidway:
    async def stream(self, request: llm.LlmRequest) -> AsyncIterator[llm.Chunk]:
        yield llm.BlockStart(0, "text")
        yield llm.TextDelta(0, "half")
        raise RuntimeError("broke")


class _PlainIterator:
    """An async iterator with no ``aclose``: one text answer."""

    def __init__(self) -> None:
        self.left: list[llm.Chunk] = [
            llm.BlockStart(0, "text"),
            llm.TextDelta(0, "plain"),
            llm.Finish("stop"),
        ]

    def stream(self, request: llm.LlmRequest) -> _PlainIterator:
        return self

    def __aiter__(self) -> _PlainIterator:
        return self

    async def __anext__(self) -> llm.Chunk:
        if not self.left:
            raise StopAsyncIteration
        return self.left.pop(0)


async def test_an_adapter_that_raises_at_once_ends_the_turn_with_its_failure() -> None:
    async with _root() as root:
        root.llm.register_adapter(["m"], _RefusesAtOnce())
        agent = await _turn(root, "m")
        (end,) = event_data(agent.session, "turn/end")
        assert end["reason"] == {"kind": "error", "message": "no quota", "code": "QUOTA"}


async def test_an_adapter_that_raises_midway_keeps_the_partial_answer() -> None:
    async with _root() as root:
        root.llm.register_adapter(["m"], _FailsMidway())
        agent = await _turn(root, "m")
        (kept,) = event_data(agent.session, "assistant/message")
        assert kept["interrupted"] is True
        assert kept["message"]["content"] == [{"type": "text", "text": "half"}]
        (end,) = event_data(agent.session, "turn/end")
        assert end["reason"]["code"] == "ADAPTER_ERROR"
        assert end["reason"]["message"] == "model call failed: broke"


async def test_an_adapter_stream_without_aclose_is_read_to_its_end() -> None:
    async with _root() as root:
        root.llm.register_adapter(["m"], _PlainIterator())
        agent = await _turn(root, "m")
        (answer,) = event_data(agent.session, "assistant/message")
        assert answer["message"]["content"] == [{"type": "text", "text": "plain"}]


async def test_the_direct_path_is_left_as_soon_as_someone_listens() -> None:
    async with _root() as root:
        model = ScriptedModel(models=["mock"])
        model.install(root)
        assert root.llm.direct(llm.LlmRequest(model="mock", messages=())) is not None
        seen: list[str] = []
        root.on("llm/start", lambda request, provider: seen.append(request.model))
        assert root.llm.direct(llm.LlmRequest(model="mock", messages=())) is None
        model.reply(text("ok"))
        await _turn(root, "mock")
        assert seen == ["mock"]


async def test_a_header_is_logged_once_for_tools_that_change_but_keep_their_names() -> None:
    # Each step's tools are new objects (an agent/request listener rewrites their
    # descriptions): the header, which names the tools, is recorded once.
    async with _root() as root:
        model = ScriptedModel(models=["mock"])
        model.install(root)

        async def echo(args: Any, call: ToolCall) -> str:
            return "echoed"

        class Args(BaseModel):
            pass

        root.tools.register(Tool(name="echo", description="d", parameters=Args, execute=echo))

        async def rewrite(
            agent: LoopAgent, request: llm.LlmRequest, call_next: Any
        ) -> llm.LlmRequest:
            request = await call_next()
            tools = tuple(
                dataclasses.replace(t, description=f"step {request.step}") for t in request.tools
            )
            return dataclasses.replace(request, tools=tools)

        root.on("agent/request", rewrite)
        model.reply(tool_calls(tool_call("echo")), text("done"))
        agent = await _turn(root, "mock")
        assert len(event_data(agent.session, "request/header")) == 1
        assert len(model.requests) == 2


def test_the_assembler_refuses_what_is_not_a_chunk() -> None:
    with pytest.raises(llm.AssemblyError, match="unknown chunk"):
        llm.BlockAssembler().push(object())  # type: ignore[arg-type]


class _OwnDelta(llm.TextDelta):
    """A subclass of a chunk class: handled as the class it derives from."""


def test_the_assembler_takes_a_chunk_subclass_as_its_base_class() -> None:
    assembler = llm.BlockAssembler()
    assembler.push(_OwnDelta(0, "sub"))
    assert assembler.result().message.text == "sub"
