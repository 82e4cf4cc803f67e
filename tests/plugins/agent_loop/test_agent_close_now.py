"""Closing an idle agent whose session's end nobody hears (RFC 0052): the whole undo is
synchronous, last in first out, and done when its disposer returns; a heard end still
makes it wait for the listeners."""

from __future__ import annotations

import anyio
import pytest

from dsh import Context
from dsh.testing import ScriptedModel, run_turn, text
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent
from dsh_scope import ScopeError, create_scope
from dsh_session import Session

pytestmark = pytest.mark.anyio


async def test_an_idle_agent_that_ran_a_turn_is_undone_before_its_disposer_returns() -> None:
    model = ScriptedModel("scripted", [*text("one")])
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        agent: LoopAgent = root.agents.get("main")
        session = agent.session
        assert await run_turn(agent, "hi") == {"kind": "completed"}
        agent.ctx.fiber.dispose()  # not awaited: nothing is left to wait for
        assert root.agents.get("main") is None
        assert root.sessions.get(session.id) is None
        assert session.events[-1].type == "turn/end"


async def test_the_agents_scope_is_still_live_while_its_departure_is_heard() -> None:
    """LIFO: the agent leaves the registry (``agent/disposed``) and its session leaves
    the store before its scope's own registration is undone, whether or not the agent
    ever ran a turn."""
    model = ScriptedModel("scripted", [*text("one")])
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        refused: list[str] = []

        def on_disposed(agent: LoopAgent) -> None:
            with pytest.raises(ScopeError):
                create_scope(root, agent)
            refused.append(agent.id)

        root.on("agent/disposed", on_disposed)
        ran: LoopAgent = root.agents.create("ran", model="scripted")
        assert await run_turn(ran, "hi") == {"kind": "completed"}
        await ran.dispose()
        idle: LoopAgent = root.agents.create("idle", model="scripted")
        await idle.dispose()
        assert refused == ["ran", "idle"]


async def test_a_heard_session_end_is_awaited_by_the_close() -> None:
    model = ScriptedModel("scripted", [*text("one")])
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        ended: list[str] = []

        async def on_end(agent: LoopAgent, session: Session) -> None:
            await anyio.lowlevel.checkpoint()
            ended.append(agent.id)

        root.on("session/end", on_end)
        agent: LoopAgent = root.agents.get("main")
        assert await run_turn(agent, "hi") == {"kind": "completed"}
        undo = agent.ctx.fiber.dispose()
        assert ended == []  # the end is awaited: not before the disposer returns
        assert root.agents.get("main") is agent
        await undo
        assert ended == ["main"]
        assert root.agents.get("main") is None
