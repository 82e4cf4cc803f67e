"""A reload waits for the agents' steps in flight and holds new ones while it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from dsh.testing import tool_call, tool_calls
from dsh_hot_reload import ReloadReport, Steps
from dsh_tools import Tool, ToolCall
from tests.plugins.hot_reload.reload_support import rig, tool_of, tool_source

pytestmark = pytest.mark.anyio


class NoArgs(BaseModel):
    pass


async def test_an_edit_during_a_long_tool_call_waits_for_the_step_to_end(
    tmp_path: Path,
) -> None:
    started, release, waiting = anyio.Event(), anyio.Event(), anyio.Event()

    async def slow(args: NoArgs, call: ToolCall) -> str:
        started.set()
        await release.wait()
        return "slow done"

    async with rig(tmp_path) as r:
        r.root.tools.register(
            Tool(name="slow", description="Slow.", parameters=NoArgs, execute=slow)
        )
        r.root.on("hot-reload/waiting", lambda changed: waiting.set())
        agent = r.root.agents.create(model="scripted")
        r.model.reply(tool_calls(tool_call("slow")), "finished")
        old = r.fibers["tool"]
        reports: list[ReloadReport] = []
        agent.send("go")
        await started.wait()
        r.write("tool.py", tool_source("Version two.", "v2"))

        async def reload() -> None:
            reports.append(await r.reload("tool.py"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reload)
            await waiting.wait()
            assert r.fibers["tool"] is old
            assert not reports
            release.set()
        await agent.when_idle()
        assert reports[0].reloaded == ("tool",)
        first, second = r.model.requests
        assert tool_of(first).description == "Version one."
        assert tool_of(second).description == "Version two."  # the step after the call
        results = [e.data["content"] for e in agent.session.events if e.type == "tool/result"]
        assert results == ["slow done"]


async def test_unloading_during_a_step_forgets_it(tmp_path: Path) -> None:
    started, release = anyio.Event(), anyio.Event()

    async def slow(args: NoArgs, call: ToolCall) -> str:
        started.set()
        await release.wait()
        return "slow done"

    async with rig(tmp_path) as r:
        r.root.tools.register(
            Tool(name="slow", description="Slow.", parameters=NoArgs, execute=slow)
        )
        steps = r.hot.steps
        agent = r.root.agents.create(model="scripted")
        r.model.reply(tool_calls(tool_call("slow")), "finished")
        agent.send("go")
        await started.wait()
        assert steps.running == {agent.session}
        await r.fibers["reload"].dispose()
        assert steps.running == set()
        release.set()
        await agent.when_idle()


async def test_a_hold_that_is_cancelled_leaves_the_gate_open() -> None:
    steps = Steps()
    await steps.enter("session")
    with anyio.move_on_after(0):
        await steps.hold()
    assert not steps.closed
    steps.leave("session")
    assert not steps.closed  # nobody waits any more
    await steps.enter("again")  # not held
    assert steps.running == {"again"}


async def test_steps_started_while_closed_wait_for_the_release() -> None:
    steps = Steps()
    await steps.hold()
    assert steps.closed
    entered: list[Any] = []

    async def step() -> None:
        await steps.enter("s")
        entered.append("s")

    async with anyio.create_task_group() as tg:
        tg.start_soon(step)
        tg.start_soon(step)
        await anyio.wait_all_tasks_blocked()
        assert entered == []
        steps.release()
    assert entered == ["s", "s"]
