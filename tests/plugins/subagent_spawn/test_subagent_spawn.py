"""The ``spawn`` provider: a fresh child that sees nothing of its parent."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh import Context, FiberState, load_deployment
from dsh.testing import state, write_deployment
from dsh_agent_core import AgentCore
from dsh_subagent import Subagents
from dsh_subagent_inprocess import DESCRIPTOR_EVENT, InProcessProvider
from dsh_subagent_spawn import SubagentSpawn
from tests.plugins.subagent_support import (
    delegate_in_second_turn,
    second_turn_delegation,
    subagent_runtime,
    texts,
)
from tests.support import event_data

pytestmark = pytest.mark.anyio


async def test_spawn_registers_a_provider_that_starts_fresh() -> None:
    async with subagent_runtime(providers=(SubagentSpawn,)) as rig:
        [provider] = rig.subagents.list()
        assert isinstance(provider, InProcessProvider)
        assert (provider.name, provider.inherits_parent_context) == ("spawn", False)
        assert provider.capabilities == frozenset({"persona", "tool_filter", "depth_limit"})


async def test_a_spawned_child_sees_nothing_of_its_parent() -> None:
    async with subagent_runtime(*second_turn_delegation("spawn")) as rig:
        run = await delegate_in_second_turn(rig)
        child = run.agent.session
        assert child.header.meta["seed_length"] == 0
        assert child.events[0].type == "turn/start"
        assert child.events[0].data == {"turn": 1}
        assert not any(e in child.events for e in rig.parent.session.events)
        [request] = rig.requests_of(child)
        assert texts(request) == [("user", "review")]
        assert event_data(child, DESCRIPTOR_EVENT)[0]["provider"] == "spawn"


async def test_spawn_waits_for_the_sessions_it_declares_an_event_type_in() -> None:
    async with Context() as root:
        await root.plugin(Subagents)
        fiber = await root.plugin(SubagentSpawn)
        assert fiber.state is FiberState.PENDING  # no session store yet
        assert root.subagents.list() == []
        await root.plugin(AgentCore)
        await root.settle()
        assert state(fiber) is FiberState.ACTIVE
        assert [p.name for p in root.subagents.list()] == ["spawn"]
        assert DESCRIPTOR_EVENT in root.sessions.event_types()


async def test_unloading_spawn_removes_the_provider_and_the_event_type() -> None:
    async with subagent_runtime(providers=()) as rig:
        before = rig.root.sessions.event_types()
        fiber = await rig.root.plugin(SubagentSpawn)
        await fiber.dispose()
        assert rig.subagents.list() == []
        assert rig.root.sessions.event_types() == before


async def test_spawn_from_yaml(tmp_path: Path) -> None:
    path = write_deployment(
        tmp_path,
        """\
        - {id: spawn, name: subagent-spawn}
        - {id: core, name: agent-core}
        - {id: subagent, name: subagent}
        """,
    )
    async with Context() as root:
        deployment = await load_deployment(path, root)
        assert [p.name for p in root.subagents.list()] == ["spawn"]
        await deployment.dispose()
        assert root.get("subagents") is None
