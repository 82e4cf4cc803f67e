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
from tests.plugins.hot_reload.reload_support import Rig, rig, tool_of, tool_source

pytestmark = pytest.mark.anyio


class NoArgs(BaseModel):
    pass


async def in_a_slow_call(r: Rig, release: anyio.Event) -> Any:
    """A new agent of ``r`` sent "go", once it is inside a call of the tool ``slow``
    (answering "slow done" once ``release`` is set); the model answers "finished" next."""
    started = anyio.Event()

    async def slow(args: NoArgs, call: ToolCall) -> str:
        started.set()
        await release.wait()
        return "slow done"

    r.root.tools.register(Tool(name="slow", description="Slow.", parameters=NoArgs, execute=slow))
    agent = r.root.agents.create(model="scripted")
    r.model.reply(tool_calls(tool_call("slow")), "finished")
    agent.send("go")
    await started.wait()
    return agent


async def test_an_edit_during_a_long_tool_call_waits_for_the_step_to_end(
    tmp_path: Path,
) -> None:
    release, waiting = anyio.Event(), anyio.Event()
    async with rig(tmp_path) as r:
        r.root.on("hot-reload/waiting", lambda changed: waiting.set())
        old = r.fibers["tool"]
        reports: list[ReloadReport] = []
        agent = await in_a_slow_call(r, release)
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
    release = anyio.Event()
    async with rig(tmp_path) as r:
        steps = r.hot.steps
        agent = await in_a_slow_call(r, release)
        assert steps.running == set()  # nothing is followed while no reload is pending
        assert steps.begin()  # a reload would wait: the busy agent is in a step
        assert steps.running == {agent.session}
        await r.fibers["reload"].dispose()
        assert steps.running == set()
        assert steps.follow is None
        assert not steps.begin()
        release.set()
        await agent.when_idle()
        steps.release()  # what the gate registered went with its fiber: nothing to undo


def listened(r: Any) -> tuple[int, int]:
    events = r.root.events
    return len(events.event("agent/pre-step").listeners()), len(
        events.event("agent/status").listeners()
    )


async def test_steps_are_followed_only_while_a_reload_is_pending(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        idle = listened(r)
        agent = r.root.agents.create(model="scripted")
        r.model.reply("one")
        agent.send("go")
        await agent.when_idle()
        assert listened(r) == idle  # an agent's steps cost the gate nothing
        seen: list[tuple[int, int]] = []
        r.root.on("hot-reload/done", lambda report: seen.append(listened(r)))
        r.write("tool.py", tool_source("Version two.", "v2"))
        report = await r.reload("tool.py")
        assert report.reloaded == ("tool",)
        assert seen == [idle]  # the gate is gone again once the reload is done
        steps = r.hot.steps
        assert not steps.begin()  # no agent busy: nothing in flight
        assert listened(r) == (idle[0] + 1, idle[1] + 1)  # following while pending
        steps.release()
        assert listened(r) == idle


async def test_a_step_starting_during_a_reload_waits_for_it(tmp_path: Path) -> None:
    # The gate is mounted when the reload begins, before it applies: a turn that
    # starts while the new version is being started runs its first step on it.
    async with rig(tmp_path) as r:
        steps = r.hot.steps
        await steps.hold()  # as a reload does, with no step in flight
        agent = r.root.agents.create(model="scripted")
        r.model.reply("one")
        agent.send("go")
        await anyio.wait_all_tasks_blocked()
        assert agent.status == "running"
        assert r.model.requests == []  # held at its pre-step
        steps.release()
        await agent.when_idle()
        assert len(r.model.requests) == 1


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


async def test_a_busy_agent_whose_turn_ends_lets_a_waiting_reload_go(tmp_path: Path) -> None:
    started, waiting = anyio.Event(), anyio.Event()

    async def stuck(args: NoArgs, call: ToolCall) -> str:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("cancelled")  # pragma: no cover - the turn is cancelled

    async with rig(tmp_path) as r:
        r.root.tools.register(
            Tool(name="stuck", description="Stuck.", parameters=NoArgs, execute=stuck)
        )
        r.root.on("hot-reload/waiting", lambda changed: waiting.set())
        agent = r.root.agents.create(model="scripted")
        r.model.reply(tool_calls(tool_call("stuck")))
        agent.send("go")
        await started.wait()  # busy before the reload began: in a step
        r.write("tool.py", tool_source("Version two.", "v2"))
        reports: list[ReloadReport] = []

        async def reload() -> None:
            reports.append(await r.reload("tool.py"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reload)
            await waiting.wait()
            assert not reports
            agent.cancel()  # the turn ends: the agent goes idle, its step is over
        assert reports[0].reloaded == ("tool",)
        assert agent.status == "idle"
