"""Closing an idle agent whose session's end nobody hears (RFC 0052): the whole undo is
synchronous, last in first out, and done when its disposer returns; a heard end still
makes it wait for the listeners."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from dsh import Context
from dsh.testing import ScriptedModel, run_turn, text
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent
from dsh_scope import ScopeError, create_scope

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def ran_a_turn() -> AsyncIterator[tuple[Context, LoopAgent]]:
    """A root with agent-core and a scripted model, whose "main" agent ran one turn."""
    model = ScriptedModel("scripted", [*text("one")])
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        agent: LoopAgent = root.agents.get("main")
        assert await run_turn(agent, "hi") == {"kind": "completed"}
        yield root, agent


async def test_an_idle_agent_that_ran_a_turn_is_undone_before_its_disposer_returns() -> None:
    async with ran_a_turn() as (root, agent):
        session = agent.session
        agent.ctx.fiber.dispose()  # not awaited: nothing is left to wait for
        assert root.agents.get("main") is None
        assert root.sessions.get(session.id) is None
        assert session.events[-1].type == "turn/end"


async def test_the_agents_scope_is_still_live_while_its_departure_is_heard() -> None:
    """LIFO: the agent leaves the registry (``agent/disposed``) and its session leaves
    the store before its scope's own registration is undone, whether or not the agent
    ever ran a turn."""
    async with ran_a_turn() as (root, ran):
        refused: list[str] = []

        def on_disposed(agent: LoopAgent) -> None:
            with pytest.raises(ScopeError):
                create_scope(root, agent)
            refused.append(agent.id)

        root.on("agent/disposed", on_disposed)
        await ran.dispose()
        idle: LoopAgent = root.agents.create("idle", model="scripted")
        await idle.dispose()
        assert refused == ["main", "idle"]


async def test_a_heard_session_end_is_awaited_by_the_close() -> None:
    async with ran_a_turn() as (root, agent):
        heard = anyio.Event()
        root.on("session/end", lambda agent, session: heard.wait())
        undo = agent.ctx.fiber.dispose()
        # The end is awaited: the agent is still there when the disposer returns.
        assert root.agents.get("main") is agent
        heard.set()
        await undo
        assert root.agents.get("main") is None
