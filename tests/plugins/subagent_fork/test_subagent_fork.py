"""The ``fork`` provider: a child seeded with the parent's completed turns, never the
turn in flight."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh import Context, FiberState, load_deployment
from dsh.testing import write_deployment
from dsh_subagent_fork import SubagentFork
from dsh_subagent_inprocess import DESCRIPTOR_EVENT, InProcessProvider
from tests.plugins.subagent_support import (
    delegate_in_second_turn,
    second_turn_delegation,
    subagent_runtime,
    texts,
    turn_end_index,
)
from tests.support import event_data

pytestmark = pytest.mark.anyio


async def test_fork_registers_a_provider_that_inherits_the_parents_context() -> None:
    async with subagent_runtime(providers=(SubagentFork,)) as rig:
        [provider] = rig.subagents.list()
        assert isinstance(provider, InProcessProvider)
        assert (provider.name, provider.inherits_parent_context) == ("fork", True)
        assert provider.capabilities == frozenset({"persona", "tool_filter", "depth_limit"})


async def test_a_fork_sees_turn_one_and_nothing_of_turn_two() -> None:
    async with subagent_runtime(*second_turn_delegation("fork")) as rig:
        run = await delegate_in_second_turn(rig)
        parent, child = rig.parent.session, run.agent.session
        # The seed: every parent event up to and including turn 1's end, as recorded.
        seed = turn_end_index(parent, 1) + 1
        assert child.header.meta["seed_length"] == seed
        # Equal, not the same objects: a packed run of chunks is read out afresh.
        assert list(child.events[:seed]) == list(parent.events[:seed])
        assert not any(e in child.events for e in parent.events[seed:])
        # What the child's model saw: turn 1's messages and its own prompt, not "second".
        [request] = rig.requests_of(child)
        assert texts(request) == [
            ("user", "first"),
            ("assistant", "turn one answer"),
            ("user", "review"),
        ]
        # The child's own first turn follows the seeded one.
        assert child.events[seed].type == "turn/start"
        assert child.events[seed].data == {"turn": 2}
        assert event_data(child, DESCRIPTOR_EVENT)[0]["provider"] == "fork"
        assert event_data(parent, "tool/result")[0]["content"] == "child answer"


async def test_a_fork_in_the_first_turn_has_no_seed() -> None:
    replies = second_turn_delegation("fork")[1:]  # delegate in turn 1 already
    async with subagent_runtime(*replies) as rig:
        from dsh.testing import run_turn
        from tests.plugins.subagent_support import delegate_tool

        seen, _ = delegate_tool(rig.root)
        assert await run_turn(rig.parent, "first") == {"kind": "completed"}
        [run] = seen.runs
        child = run.agent.session
        assert child.header.meta["seed_length"] == 0
        assert child.events[0].type == "turn/start"
        [request] = rig.requests_of(child)
        assert texts(request) == [("user", "review")]


async def test_unloading_fork_removes_the_provider() -> None:
    async with subagent_runtime(providers=()) as rig:
        fiber = await rig.root.plugin(SubagentFork)
        assert [p.name for p in rig.subagents.list()] == ["fork"]
        await fiber.dispose()
        assert rig.subagents.list() == []


async def test_fork_from_yaml_waits_for_the_registry_and_the_sessions(tmp_path: Path) -> None:
    path = write_deployment(
        tmp_path,
        """\
        - {id: fork, name: subagent-fork}
        - {id: subagent, name: subagent}
        - {id: core, name: agent-core}
        """,
    )
    async with Context() as root:
        deployment = await load_deployment(path, root)
        assert [p.name for p in root.subagents.list()] == ["fork"]
        await deployment.dispose()
        assert root.get("subagents") is None
        assert deployment.state is FiberState.DISPOSED
