"""A subagent tool follows its provider whatever the load order; instances share
``send_message`` and ``list_agents``; a taken ``tool_name`` or a ``max_depth`` the
provider cannot enforce fails the instance and leaves nothing registered."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh import ConfigError, Context
from dsh.testing import text
from dsh_agent_core import AgentCore
from dsh_subagent import Subagents
from dsh_subagent_spawn import SubagentSpawn
from dsh_tool_subagent import SubagentToolError, ToolNameTakenError, ToolSubagent
from tests.plugins.tool_subagent.tool_subagent_support import (
    BACKGROUND,
    FORK,
    FORK_SEES,
    SPAWN,
    SPAWN_SEES,
    Provider,
    Rig,
    subagent_rig,
)
from tests.support import failed_deployment

pytestmark = pytest.mark.anyio

CONTROL = ["list_agents", "send_message"]
FOLLOWING = ("subagent/provider-added", "subagent/provider-removed")
NO_DEPTH = (
    'tool "subagent": subagent provider "spawn" cannot enforce max_depth 3 (no depth_limit '
    "capability); set max_depth: null to leave the depth to the provider"
)


def listeners(rig: Rig) -> list[int]:
    return [len(rig.root.events.event(name).listeners()) for name in FOLLOWING]


async def answers(rig: Rig, tool: str = "subagent") -> str:
    """What a foreground call of ``tool`` returns when the child says "ok"."""
    rig.route([], [text("ok")])
    done = await rig.call(tool, {"description": "check", "prompt": "say ok"})
    assert not done.is_error, done
    return done.content


async def test_a_tool_loaded_before_its_provider_appears_with_it_and_follows_it() -> None:
    async with subagent_rig(providers=()) as rig:
        assert await rig.tool_names() == ["echo", *CONTROL]
        spawn = await rig.root.plugin(SubagentSpawn)
        assert await rig.tool_names() == ["echo", *CONTROL, "subagent"]
        assert (await rig.schema("subagent")).description == SPAWN_SEES + BACKGROUND
        assert await answers(rig) == "ok"
        await spawn.dispose()
        assert await rig.tool_names() == ["echo", *CONTROL]
        # Another provider under the same name, which passes the conversation on.
        remove = rig.root.subagents.register_provider(Provider(inherits_parent_context=True))
        assert (await rig.schema("subagent")).description == FORK_SEES + BACKGROUND
        assert (await rig.schema("subagent")).parameters["title"] == "ForkArgs"
        remove()
        assert await rig.tool_names() == ["echo", *CONTROL]


async def test_a_tool_loaded_after_its_provider_is_there_at_once() -> None:
    async with subagent_rig() as rig:
        assert await rig.tool_names() == ["echo", *CONTROL, "subagent"]
        assert await answers(rig) == "ok"


async def test_other_providers_come_and_go_without_touching_the_tool() -> None:
    async with subagent_rig() as rig:
        remove = rig.root.subagents.register_provider(Provider("other"))
        remove()
        assert await rig.tool_names() == ["echo", *CONTROL, "subagent"]


async def test_unloading_the_tool_removes_it_and_its_listeners() -> None:
    async with subagent_rig(tools=()) as rig:
        before = listeners(rig)
        tools_before = dict(rig.root.tools._global.tools)
        fiber = await rig.root.plugin(ToolSubagent, SPAWN)
        assert listeners(rig) == [n + 1 for n in before]
        await fiber.dispose()
        assert listeners(rig) == before
        assert rig.root.tools._global.tools == tools_before
        # Nothing comes back with the provider, and the name is free again.
        remove = rig.root.subagents.register_provider(Provider("again"))
        remove()
        assert await rig.tool_names() == ["echo"]
        await rig.root.plugin(ToolSubagent, SPAWN)
        assert await answers(rig) == "ok"


async def test_a_provider_added_while_the_tool_unloads_mounts_nothing() -> None:
    async with subagent_rig(providers=()) as rig:
        (fiber,) = rig.tools
        unloading = fiber.dispose()  # the unload is under way, its listeners still on
        remove = rig.root.subagents.register_provider(Provider())
        await unloading
        assert await rig.tool_names() == ["echo"]
        assert rig.root.subagents.get_provider("spawn") is not None
        remove()


async def test_the_registry_going_away_takes_every_tool_and_they_come_back_with_it() -> None:
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        registry = await root.plugin(Subagents)
        spawn = await root.plugin(SubagentSpawn)
        tool = await root.plugin(ToolSubagent, SPAWN)
        await registry.dispose()
        assert [t.name for t in (await root.system_prompt.assemble()).tools] == []
        # The provider and the tool wait for a registry, and load again with it.
        await root.plugin(Subagents)
        await spawn
        await tool
        names = [t.name for t in (await root.system_prompt.assemble()).tools]
        assert names == [*CONTROL, "subagent"]


# -- several instances --------------------------------------------------------------------


async def test_instances_with_their_own_names_share_the_control_tools() -> None:
    async with subagent_rig([SPAWN, FORK]) as rig:
        assert await rig.tool_names() == ["echo", *CONTROL, "subagent", "subagent_fork"]
        assert (await rig.schema("subagent")).description == SPAWN_SEES + BACKGROUND
        assert (await rig.schema("subagent_fork")).description == FORK_SEES + BACKGROUND
        spawn, fork = rig.tools
        await spawn.dispose()
        assert await rig.tool_names() == ["echo", *CONTROL, "subagent_fork"]
        await fork.dispose()
        assert await rig.tool_names() == ["echo"]


async def test_a_taken_tool_name_fails_the_second_instance_only() -> None:
    async with subagent_rig() as rig:
        tools_before = dict(rig.root.tools._global.tools)
        counts = listeners(rig)
        with pytest.raises(ToolNameTakenError) as caught:
            await rig.root.plugin(ToolSubagent, {"provider": "fork"})
        assert str(caught.value) == (
            'tool_name "subagent" is already used by plugin "tool-subagent"; give each '
            "tool-subagent instance its own tool_name"
        )
        assert caught.value.code == "DUPLICATE_TOOL_NAME"
        assert rig.root.tools._global.tools == tools_before
        assert listeners(rig) == counts
        assert (await rig.schema("subagent")).description == SPAWN_SEES + BACKGROUND
        assert await answers(rig) == "ok"
        (first,) = rig.tools
        await first.dispose()
        assert await rig.tool_names() == ["echo"]


async def test_a_taken_tool_name_in_a_deployment_names_both_entries(tmp_path: Path) -> None:
    _, error = await failed_deployment(
        tmp_path,
        """\
        - {id: core, name: agent-core, config: {model: scripted}}
        - {id: subagent, name: subagent}
        - {id: spawn, name: subagent-spawn}
        - {id: one, name: tool-subagent, config: {provider: spawn}}
        - {id: two, name: tool-subagent, config: {provider: spawn}}
        """,
        absent="subagents",
    )
    message = str(error)
    assert 'tool_name "subagent" is already used by plugin "tool-subagent"' in message
    assert "entry 'one'" in message
    assert "entry 'two'" in message


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({}, "(at provider)"),
        ({"provider": ""}, "(at provider)"),
        ({"provider": "spawn", "tool_name": "no spaces"}, "(at tool_name)"),
        ({"provider": "spawn", "tool_filter": {}}, "(at tool_filter)"),
        ({"provider": "spawn", "tool_filter": {"keep": ["echo"]}}, "(at tool_filter.keep)"),
        ({"provider": "spawn", "max_depth": -1}, "(at max_depth)"),
        ({"provider": "spawn", "depth": 2}, "(at depth)"),
    ],
)
async def test_a_bad_config_fails_the_instance_and_registers_nothing(
    config: dict[str, object], where: str
) -> None:
    async with subagent_rig(tools=()) as rig:
        with pytest.raises(ConfigError) as caught:
            await rig.root.plugin(ToolSubagent, config)
        assert where in str(caught.value)
        assert await rig.tool_names() == ["echo"]


# -- a max_depth the provider cannot enforce ----------------------------------------------


async def test_max_depth_on_a_provider_without_depth_limit_fails_the_tool() -> None:
    async with subagent_rig(tools=(), providers=()) as rig:
        counts = listeners(rig)
        rig.root.subagents.register_provider(Provider(capabilities=()))
        with pytest.raises(SubagentToolError) as caught:
            await rig.root.plugin(ToolSubagent, SPAWN)
        assert str(caught.value) == NO_DEPTH
        assert caught.value.code == "SUBAGENT_TOOL"
        assert await rig.tool_names() == ["echo"]
        assert listeners(rig) == counts
        # The name was given back: an instance leaving the depth to the provider loads.
        await rig.root.plugin(ToolSubagent, SPAWN | {"max_depth": None})
        assert await rig.tool_names() == ["echo", *CONTROL, "subagent"]
        assert await answers(rig) == "ok"


async def test_max_depth_refuses_a_provider_without_depth_limit_added_later() -> None:
    async with subagent_rig(providers=()) as rig:
        with pytest.raises(SubagentToolError) as caught:
            rig.root.subagents.register_provider(Provider(capabilities=()))
        assert str(caught.value) == NO_DEPTH
        assert rig.root.subagents.get_provider("spawn") is None
        assert await rig.tool_names() == ["echo", *CONTROL]
        rig.root.subagents.register_provider(Provider())
        assert await answers(rig) == "ok"


async def test_a_failing_instance_gives_back_its_share_of_the_control_tools() -> None:
    async with subagent_rig(tools=(), providers=()) as rig:
        rig.root.subagents.register_provider(Provider(capabilities=()))
        rig.root.subagents.register_provider(Provider("fork", inherits_parent_context=True))
        fork = await rig.root.plugin(ToolSubagent, FORK)
        with pytest.raises(SubagentToolError):
            await rig.root.plugin(ToolSubagent, SPAWN)
        assert await rig.tool_names() == ["echo", *CONTROL, "subagent_fork"]
        await fork.dispose()
        assert await rig.tool_names() == ["echo"]
