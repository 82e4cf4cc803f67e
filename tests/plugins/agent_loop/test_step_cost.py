"""What the step loop's cheaper paths must keep: each tool call runs in a cancel scope
of its own (of the running backend's class), whether it is a step's only call or one of
several, and cancelling it aborts that call only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from pydantic import BaseModel

from dsh import Context
from dsh.testing import ScriptedModel, text, tool_call, tool_calls
from dsh_agent import AgentRegistry
from dsh_agent_loop import AgentLoop, LoopAgent
from dsh_llm import Llm
from dsh_session import Sessions
from dsh_system_prompt import SystemPrompt
from dsh_tools import Tool, ToolCall, Tools
from tests.support import event_data

pytestmark = pytest.mark.anyio


class Args(BaseModel):
    text: str = ""


@asynccontextmanager
async def rig() -> AsyncIterator[tuple[Context, ScriptedModel]]:
    async with Context() as root:
        for plugin in (SystemPrompt, Llm, Sessions, AgentRegistry, Tools, AgentLoop):
            await root.plugin(plugin)
        model = ScriptedModel(models=["mock"])
        model.install(root)
        yield root, model


class ScopeProbe:
    """A tool that notes its call's scope; ``quit`` cancels it."""

    def __init__(self) -> None:
        self.scopes: list[object] = []
        self.native: list[type] = []

    async def __call__(self, args: Args, call: ToolCall) -> str:
        scope = call.cancel_scope
        assert scope is not None
        self.scopes.append(scope)
        self.native.append(type(anyio.CancelScope()))
        if args.text == "quit":
            scope.cancel()
            await anyio.lowlevel.checkpoint()
        return f"done {args.text}"


async def _turn(calls: list[str]) -> tuple[ScopeProbe, LoopAgent]:
    async with rig() as (root, model):
        probe = ScopeProbe()
        root.tools.register(Tool(name="probe", description="p", parameters=Args, execute=probe))
        asked = [tool_call("probe", {"text": arg}, id=f"c{i}") for i, arg in enumerate(calls)]
        model.reply(tool_calls(*asked), tool_calls(tool_call("probe", id="last")), text("ok"))
        agent: LoopAgent = root.agents.create("a", model="mock")
        agent.send("go")
        await agent.when_idle()
        return probe, agent


@pytest.mark.parametrize("calls", [["solo"], ["one", "two"]], ids=["one call", "two calls"])
async def test_each_call_gets_a_new_scope_of_the_backend(calls: list[str]) -> None:
    probe, agent = await _turn(calls)
    assert len(probe.scopes) == len(calls) + 1
    assert len({id(scope) for scope in probe.scopes}) == len(probe.scopes)
    assert all(
        type(scope) is native for scope, native in zip(probe.scopes, probe.native, strict=True)
    )
    results = event_data(agent.session, "tool/result")
    assert [r["content"] for r in results] == [f"done {c}" for c in calls] + ["done "]


@pytest.mark.parametrize("calls", [["quit"], ["quit", "two"]], ids=["one call", "two calls"])
async def test_a_cancelled_call_scope_aborts_that_call_only(calls: list[str]) -> None:
    _, agent = await _turn(calls)
    results = event_data(agent.session, "tool/result")
    assert [r.get("code") for r in results] == ["ABORTED"] + [None] * len(calls)
    ends = event_data(agent.session, "turn/end")
    assert [end["reason"] for end in ends] == [{"kind": "completed"}]
