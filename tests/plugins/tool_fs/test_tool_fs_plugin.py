"""``tool-fs`` as a plugin: tools and sections, disposal, YAML, a real agent's cwd."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dsh_tool_fs
from dsh import ConfigError, Context, FiberState, load_deployment
from dsh.testing import (
    ScriptedModel,
    run_turn,
    state,
    text,
    tool_call,
    tool_calls,
    write_deployment,
)
from dsh_agent_core import AgentCore
from dsh_fs import Filesystem
from dsh_fs_local import FsLocal
from dsh_fs_policy import ObservationPolicy
from dsh_llm import ToolResultBlock
from dsh_system_prompt import SystemPrompt
from dsh_tool_fs import FsTools
from dsh_tools import Tools
from tests.plugins.fs.fs_support import Layout, envelope, fs_stack, run
from tests.support import entry_after, failed_deployment

pytestmark = pytest.mark.anyio

TOOLS = ["edit", "glob", "grep", "read", "write"]


async def registries(root: Context) -> tuple[list[tuple[str, float]], list[str]]:
    assembly = await root.system_prompt.assemble()
    return [(s.name, s.order) for s in assembly.sections], sorted(t.name for t in assembly.tools)


async def test_the_plugin_contributes_five_tools_and_their_sections() -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Filesystem)
        before = await registries(root)
        await root.plugin(FsTools, {"read_limit": 7, "read_max_bytes": 99})
        sections, tools = await registries(root)
        assembly = await root.system_prompt.assemble()
    assert dsh_tool_fs.plugin is FsTools
    assert tools == [*before[1], *TOOLS]
    assert [s for s in sections if s not in before[0]] == [
        ("tool:read", 100),
        ("tool:write", 101),
        ("tool:edit", 102),
        ("tool:glob", 103),
        ("tool:grep", 104),
    ]
    read = next(t for t in assembly.tools if t.name == "read")
    assert "at most 7 lines and 99 bytes" in read.description
    assert set(read.parameters["properties"]) == {"file_path", "offset", "limit"}
    grep = next(t for t in assembly.tools if t.name == "grep")
    assert set(grep.parameters["properties"]) == {"pattern", "path", "glob", "case_insensitive"}


@pytest.mark.usefixtures("ws")
async def test_disposal_restores_every_registry() -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        before = await registries(root)
        fs = root.plugin(Filesystem)
        local = root.plugin(FsLocal)
        policy = root.plugin(ObservationPolicy)
        tool = root.plugin(FsTools)
        for fiber in (fs, local, policy, tool):
            await fiber
        assert (await registries(root))[1] == sorted([*before[1], *TOOLS])
        await tool.dispose()
        assert await registries(root) == before
        await policy.dispose()
        await local.dispose()
        assert (root.fs.backend, root.fs.policy) == (None, None)
        await fs.dispose()
        assert root.get("fs") is None
        assert await registries(root) == before


async def test_it_waits_for_the_seam_and_stops_with_it() -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        tool = root.plugin(FsTools)
        await tool
        assert state(tool) is FiberState.PENDING
        fs = root.plugin(Filesystem)
        await fs
        await tool
        assert state(tool) is FiberState.ACTIVE
        await fs.dispose()
        assert state(tool) is FiberState.PENDING


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"read_limit": 0}, "(at read_limit)"),
        ({"read_max_bytes": -1}, "(at read_max_bytes)"),
        ({"read_max_line_length": "wide"}, "(at read_max_line_length)"),
        ({"limit": 5}, "(at limit)"),
    ],
)
async def test_bad_configs_are_located(config: dict[str, Any], where: str) -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Filesystem)
        with pytest.raises(ConfigError) as caught:
            await root.plugin(FsTools, config)
    assert "tool-fs" in str(caught.value)
    assert where in str(caught.value)


DEPLOYMENT = """\
- id: core
  name: agent-core
  config:
    model: scripted
    persona: "You edit files."
    agents: [{{id: main, cwd: {cwd}}}]
- {{id: fs, name: fs}}
- id: fs-local
  name: fs-local
  config: {{mode: workspace-write}}
- {{id: fs-policy, name: fs-policy}}
- {{id: tool-fs, name: tool-fs}}
"""


async def test_a_deployment_of_the_four_layers_writes_in_the_agents_cwd(
    tmp_path: Path, ws: Layout
) -> None:
    path = write_deployment(tmp_path, DEPLOYMENT.format(cwd=ws.root))
    model = ScriptedModel(
        tool_calls(
            tool_call("write", {"file_path": "notes/todo.md", "content": "- ship\n"}),
            tool_call("write", {"file_path": "../outside/x", "content": "no"}),
        ),
        text("Done."),
    )
    async with Context() as root:
        await load_deployment(path, root)
        model.install(root)
        assert await run_turn(root.agents.get("main"), "write it") == {"kind": "completed"}
    results = [
        block.content
        for message in model.requests[1].messages
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]
    assert results[0] == envelope(ws.root / "notes" / "todo.md", "Created file")
    assert results[1].startswith(f'Error: cannot change "{ws.outside}/x": it is outside')
    assert (ws.root / "notes" / "todo.md").read_text() == "- ship\n"
    assert ws.files_outside() == []


async def test_a_bad_layer_config_in_yaml_is_reported_with_its_line(tmp_path: Path) -> None:
    entries = entry_after("- {id: fs, name: fs}", "local", "fs-local", "{mode: everything}")
    path, error = await failed_deployment(tmp_path, entries, absent="fs")
    assert f"{path}:2" in str(error)
    assert "(at mode)" in str(error)


async def test_agent_core_and_a_plain_agent_use_the_process_cwd(
    ws: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ws.root)
    model = ScriptedModel(
        tool_calls(tool_call("write", {"file_path": "here.txt", "content": "x"})), text("ok")
    )
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        for plugin in (Filesystem, FsLocal, ObservationPolicy, FsTools):
            await root.plugin(plugin)
        assert await run_turn(root.agents.get("main"), "go") == {"kind": "completed"}
    assert (ws.root / "here.txt").read_text() == "x"


@pytest.mark.parametrize(
    ("tool", "args", "argument"),
    [
        ("read", {"file_path": "a\0b"}, "file_path"),
        ("write", {"file_path": "a\0b", "content": "x"}, "file_path"),
        ("edit", {"file_path": "a\0b", "old_string": "x", "new_string": "y"}, "file_path"),
        ("glob", {"pattern": "*", "path": "a\0b"}, "path"),
        ("glob", {"pattern": "src/a\0b/*"}, "pattern"),
        ("grep", {"pattern": "x", "path": "a\0b"}, "path"),
        ("grep", {"pattern": "x", "glob": "*.p\0y"}, "glob"),
    ],
)
async def test_a_nul_byte_in_a_path_is_an_invalid_argument_named(
    ws: Layout, tool: str, args: dict[str, Any], argument: str
) -> None:
    async with fs_stack() as root:
        result = await run(root, tool, ws.call(), **args)
    assert (result.content, result.code, result.is_error) == (
        f"invalid arguments: {argument}: must not contain a NUL byte",
        "INVALID_ARGS",
        True,
    )
    assert list(ws.root.iterdir()) == []


async def test_a_nul_byte_in_a_regular_expression_is_searched_for(ws: Layout) -> None:
    (ws.root / "f.txt").write_text("a\n")
    async with fs_stack() as root:
        result = await run(root, "grep", ws.call(), pattern="a\0")
    assert (result.content, result.code) == ("No matches found", None)
