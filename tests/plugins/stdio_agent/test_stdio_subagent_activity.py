"""The terminal shows a subagent's activity indented under the parent's tool call: its
tool calls and its final text, one level deeper per delegation; nothing of sessions
that are not the agent's subagents."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from dsh.testing import Mark, Reply, Wait, text, tool_call, tool_calls
from dsh_llm import BlockStart, TextDelta
from dsh_stdio_agent import EXIT_INTERRUPTED, EXIT_OK
from dsh_subagent import SubagentRun, Subagents
from dsh_subagent_spawn import SubagentSpawn
from dsh_tool_subagent import ToolSubagent
from dsh_tools import Tool, ToolCall
from tests.plugins.stdio_agent.stdio_support import FrontRig, front_rig

pytestmark = pytest.mark.anyio

SUBAGENTS: tuple[tuple[Any, Any], ...] = (
    (Subagents, None),
    (SubagentSpawn, None),
    (ToolSubagent, {"provider": "spawn"}),
)
ASK = '{"description": "look", "prompt": "find it"}'


def delegate() -> Reply:
    return tool_calls(tool_call("subagent", ASK))


def runs_of(r: FrontRig) -> list[SubagentRun]:
    runs: list[SubagentRun] = []
    r.root.on("subagent/start", runs.append)
    return runs


async def test_a_childs_tool_calls_and_final_text_are_indented_under_the_call() -> None:
    replies: list[Reply] = [
        delegate(),
        tool_calls(tool_call("echo", '{"text": "hi"}'), before="Looking."),
        text("Found ", "it."),
        text("All done."),
    ]
    async with front_rig(*replies, plugins=SUBAGENTS) as r:
        runs = runs_of(r)
        assert await r.front.run(prompt="go") == EXIT_OK
        (run,) = runs
    child = f"[{run.id}]"
    assert r.both.getvalue() == (
        f"[tool] subagent {ASK}\n"
        f"  {child} Looking.\n"
        f'  {child} [tool] echo {{"text": "hi"}}\n'
        f"  {child} Found it.\n"
        "[tool] subagent -> Found it.\n"
        "All done.\n"
    )
    assert r.out.getvalue() == "All done.\n"  # the child's text never reaches stdout


async def test_each_delegation_is_one_level_deeper() -> None:
    replies: list[Reply] = [delegate(), delegate(), text("Deep."), text("Mid."), text("Top.")]
    async with front_rig(*replies, plugins=SUBAGENTS) as r:
        runs = runs_of(r)
        assert await r.front.run(prompt="go") == EXIT_OK
        child, grandchild = (f"[{run.id}]" for run in runs)
    assert r.both.getvalue() == (
        f"[tool] subagent {ASK}\n"
        f"  {child} [tool] subagent {ASK}\n"
        f"    {grandchild} Deep.\n"
        f"  {child} Mid.\n"
        "[tool] subagent -> Mid.\n"
        "Top.\n"
    )


async def test_an_interrupted_child_shows_no_text() -> None:
    streamed = anyio.Event()
    hanging = [BlockStart(0, "text"), TextDelta(0, "thinking"), Mark(streamed), Wait(anyio.Event())]
    done: list[int] = []
    async with (
        front_rig(delegate(), hanging, plugins=SUBAGENTS) as r,
        anyio.create_task_group() as tg,
    ):

        async def run() -> None:
            done.append(await r.front.run(prompt="go"))

        tg.start_soon(run)
        await streamed.wait()
        r.front.interrupt()
    assert done == [EXIT_INTERRUPTED]
    assert r.both.getvalue() == (
        f"[tool] subagent {ASK}\n"
        "[tool] subagent failed (ABORTED): Error: tool call aborted\n"
        "[aborted] the turn was cancelled (user)\n"
    )


class PokeArgs(BaseModel):
    pass


async def poke(args: PokeArgs, call: ToolCall) -> str:
    """Record activity in sessions around the calling agent's: one whose parent is not
    in the store, one of no agent at all, and one that is its subagent but names no
    agent (shown as ``[?]``), with events the display leaves out."""
    assert call.agent is not None
    sessions = call.agent.ctx.sessions
    called = {"name": "ls", "arguments": "{}"}
    sessions.create(meta={"parent_session": "gone", "agent": "orphan"}).append("tool/call", called)
    sessions.create(meta={"parent_session": 7, "agent": "odd"}).append("tool/call", called)
    sessions.create().append("tool/call", called)
    anonymous = sessions.create(meta={"parent_session": call.agent.session.id})
    anonymous.append("tool/call", called)
    anonymous.append("tool/result", {"name": "ls", "content": "a b", "is_error": False})
    for message, more in (("   ", {}), ("half", {"interrupted": True}), ("Bye.", {})):
        content = {"content": [{"type": "text", "text": message}]}
        anonymous.append("assistant/message", {"message": content, **more})
    return "poked"


async def test_only_the_agents_subagents_are_shown() -> None:
    async with front_rig(tool_calls(tool_call("poke")), text("ok"), plugins=SUBAGENTS) as r:
        r.root.tools.register(
            Tool(name="poke", description="Poke.", parameters=PokeArgs, execute=poke)
        )
        assert await r.front.run(prompt="go") == EXIT_OK
    assert r.err.getvalue() == (
        "[tool] poke {}\n  [?] [tool] ls {}\n  [?] Bye.\n[tool] poke -> poked\n"
    )
