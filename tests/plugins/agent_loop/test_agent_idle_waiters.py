"""``when_idle`` waiters sleep on the running driver's end: they never spin."""

from __future__ import annotations

import anyio
import pytest

from dsh import Context
from dsh.testing import Mark, ScriptedModel, Wait, run_turn, text
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent

pytestmark = pytest.mark.anyio


async def test_a_waiter_sleeps_until_the_turn_ends() -> None:
    holding = anyio.Event()
    release = anyio.Event()
    model = ScriptedModel("first", [Mark(holding), Wait(release), *text("second")])
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        agent: LoopAgent = root.agents.get("main")
        # A first turn ends and its driver with it; the next waiter must wait for the
        # driver the next message started, not the one that ended (it would spin).
        assert await run_turn(agent, "one") == {"kind": "completed"}
        agent.send("two")
        await holding.wait()
        woke = 0

        async def wait_idle() -> None:
            nonlocal woke
            await agent.when_idle()
            woke += 1

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_idle)
            driver = agent._driver
            assert driver is not None
            for _ in range(50):
                await anyio.lowlevel.checkpoint()
                assert driver.status is anyio.TaskHandle.Status.PENDING, "a waiter would spin"
            assert woke == 0
            release.set()
        assert woke == 1
        assert agent.status == "idle"
