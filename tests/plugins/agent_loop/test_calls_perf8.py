"""``run_tool_calls`` given the tools to use, and the lone call's cancel check (perf8)."""

from __future__ import annotations

import pytest

from dsh.testing import text, tool_call, tool_calls
from dsh_agent_loop import run_tool_calls
from dsh_llm import ToolCallBlock
from dsh_tools import ToolCall
from tests.plugins.agent_loop.test_agent_loop import Args, loop_rig
from tests.support import event_data

pytestmark = pytest.mark.anyio


async def test_run_tool_calls_runs_the_tools_it_is_given() -> None:
    async with loop_rig() as r:

        async def echo(args: Args, call: ToolCall) -> str:
            return f"echo {args.text}"

        r.tool("echo", echo)
        agent = r.agent()
        block = ToolCallBlock("c1", "echo", '{"text": "1"}')
        await run_tool_calls(agent, 1, 1, [block], 4, tools=agent.ctx.tools)
        (result,) = event_data(agent.session, "tool/result")
        assert result["content"] == "echo 1"


async def test_a_turn_cancelled_by_its_own_tool_aborts_the_next_call_before_dispatch() -> None:
    async with loop_rig() as r:

        async def stop(args: Args, call: ToolCall) -> str:
            call.agent.cancel()  # the turn's abort, noted by the agent: no scope asked
            return "stopped"

        r.tool("stop", stop)
        r.model.reply(tool_calls(tool_call("stop", {"text": "x"}, id="s1")), text("never"))
        agent = r.agent()
        agent.send("go")
        await agent.when_idle()
        (result,) = event_data(agent.session, "tool/result")
        assert result["content"] == "stopped"
        assert agent.session.turn_end(1) == {"kind": "aborted", "reason": "user"}
