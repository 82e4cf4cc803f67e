"""Registering an agent nobody hears arrive: the same registration, no event; and the
factory's plain-undo registration, which leaves the heard case to ``register``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from dsh import Context, Disposer
from dsh_agent import Agent, AgentError, AgentRegistry
from tests.plugins.agent.test_agent_registry import FakeAgent

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def quiet_registry() -> AsyncIterator[tuple[Context, AgentRegistry, FakeAgent]]:
    """A registry nobody listens to, and an agent "a" not registered yet."""
    async with Context() as root:
        await root.plugin(AgentRegistry)
        yield root, root.agents, FakeAgent("a", root)


async def test_an_unheard_registration_still_returns_its_disposer() -> None:
    async with quiet_registry() as (_, agents, agent):
        disposer = agents.register(agent)
        assert isinstance(disposer, Disposer)
        assert agents.get("a") is agent
        await disposer()
        assert agents.get("a") is None


async def test_the_factorys_registration_is_a_plain_undo_unless_heard() -> None:
    async with quiet_registry() as (root, agents, agent):
        undo = agents._register_undo(agent)
        assert undo is not None
        assert not isinstance(undo, Disposer)
        assert agents.get("a") is agent
        with pytest.raises(AgentError, match='agent "a" is already registered'):
            agents._register_undo(FakeAgent("a", root))
        undo()
        assert agents.get("a") is None
        heard: list[str] = []

        def created(agent: Agent) -> None:
            heard.append(agent.id)

        root.on("agent/created", created)
        assert agents._register_undo(agent) is None  # nothing done: register it instead
        assert agents.get("a") is None
        assert heard == []
