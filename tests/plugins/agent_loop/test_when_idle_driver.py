"""``when_idle`` waits for the driver's end (RFC 0058): every turn queued before it
ends has run, and a message dropped before its turn started leaves nothing to wait for."""

from __future__ import annotations

import pytest

from dsh import Context
from dsh.testing import ScriptedModel, text
from dsh_agent_core import AgentCore
from dsh_agent_loop import LoopAgent

pytestmark = pytest.mark.anyio


async def test_a_message_cancelled_before_its_turn_leaves_the_agent_idle() -> None:
    model = ScriptedModel(text("unused"))
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        agent: LoopAgent = root.agents.get("main")
        agent.send("dropped")
        agent.cancel()
        await agent.when_idle()
        assert agent.status == "idle"
        assert agent._driver is None
        assert [e.type for e in agent.session.events if e.type.startswith("turn/")] == []
        assert model.requests == []


async def test_a_message_an_idle_listener_queues_is_waited_for_too() -> None:
    model = ScriptedModel(text("one"), text("two"))
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        agent: LoopAgent = root.agents.get("main")
        queued: list[str] = []

        def on_status(who: LoopAgent, status: str) -> None:
            if status == "idle" and not queued:
                queued.append("again")
                who.send("again")

        root.on("agent/status", on_status)
        agent.send("first")
        await agent.when_idle()
        ends = [e.data["reason"] for e in agent.session.events if e.type == "turn/end"]
        assert ends == [{"kind": "completed"}, {"kind": "completed"}]
        assert agent.status == "idle"
        assert agent._driver is None
