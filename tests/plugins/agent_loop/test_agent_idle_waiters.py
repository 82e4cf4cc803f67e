"""``when_idle`` waiters sleep on an event that is not set yet: they never spin."""

from __future__ import annotations

import anyio
import pytest

from dsh import Context
from dsh.testing import Mark, ScriptedModel, Wait, run_turn, text, until
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
        # A first turn ends and releases its waiters; the next waiter must get a fresh
        # event, not the one already set (which would make it spin).
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
            await until(lambda: agent._idle is not None)
            for _ in range(50):
                await anyio.lowlevel.checkpoint()
                assert agent._idle is not None
                assert not agent._idle.is_set(), "a when_idle waiter would spin"
            assert woke == 0
            release.set()
        assert woke == 1
        assert agent.status == "idle"
