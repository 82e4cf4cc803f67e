"""Disposing an idle agent: its driver ended with its last turn (nothing to cancel),
and the session's end is still heard (awaited, not cancelled) before the disposal
returns; every disposer waits for that end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from dsh import Context
from dsh.testing import ScriptedModel, run_turn, text
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent
from dsh_session import Session

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def idle_agent() -> AsyncIterator[tuple[Context, LoopAgent, list[str]]]:
    """A root whose agent ``main`` completed one turn and is idle; the ids of the agents
    whose ``session/end`` listener (which awaits: it is not cancelled) has returned."""
    model = ScriptedModel("scripted", [*text("one")])
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        ended: list[str] = []

        async def on_end(agent: LoopAgent, session: Session) -> None:
            await anyio.lowlevel.checkpoint()  # the end may await: it is not cancelled
            ended.append(agent.id)

        root.on("session/end", on_end)
        agent: LoopAgent = root.agents.get("main")
        assert await run_turn(agent, "hi") == {"kind": "completed"}
        yield root, agent, ended


async def test_an_idle_agents_driver_returns_when_disposed() -> None:
    async with idle_agent() as (root, agent, ended):
        assert agent._driver is None  # ended with the turn: an idle agent has none
        await agent.dispose()
        assert ended == ["main"]
        assert root.agents.get("main") is None


async def test_two_disposals_of_an_idle_agent_wait_for_the_same_end() -> None:
    async with idle_agent() as (root, agent, ended):
        done: list[int] = []

        async def dispose(n: int) -> None:
            await agent.dispose()
            assert ended == ["main"]  # neither returns before the session ended
            done.append(n)

        async with anyio.create_task_group() as tg:
            tg.start_soon(dispose, 1)
            tg.start_soon(dispose, 2)
        assert sorted(done) == [1, 2]
        assert agent.status == "idle"
        assert root.agents.get("main") is None
