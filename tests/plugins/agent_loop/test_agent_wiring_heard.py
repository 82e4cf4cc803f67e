"""An agent's session entry and registration: plain undos of the agent's wiring when
nobody hears their arrival, effects of their own when someone does; the departures are
heard either way, and a vetoed arrival leaves nothing behind."""

from __future__ import annotations

import pytest

from dsh import Context
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_session import Session

pytestmark = pytest.mark.anyio


async def test_departures_are_heard_when_arrivals_are_not() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {})
        heard: list[str] = []

        def agent_gone(agent: Agent) -> None:
            heard.append(f"agent {agent.id}")

        def session_gone(session: Session) -> None:
            heard.append(f"session {session.header.meta['agent']}")

        root.on("agent/disposed", agent_gone)
        root.on("session/disposed", session_gone)
        agent = root.agents.create("a", model="scripted")
        assert root.sessions.get(agent.session.id) is agent.session
        await agent.dispose()
        assert heard == ["agent a", "session a"]
        assert root.sessions.get(agent.session.id) is None


async def test_a_vetoed_session_entry_leaves_nothing_behind() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {})
        armed = [True]

        def veto(session: Session) -> None:
            if armed:
                armed.clear()
                raise RuntimeError("no sessions today")

        root.on("session/created", veto)
        with pytest.raises(RuntimeError, match="no sessions today"):
            root.agents.create("a", model="scripted")
        await root.settle()
        assert root.agents.list() == []
        assert root.sessions.list() == []
        # Heard this time, the entry goes through: the key and the id are free again.
        agent = root.agents.create("a", model="scripted")
        assert root.sessions.list() == [agent.session]
        await agent.dispose()
