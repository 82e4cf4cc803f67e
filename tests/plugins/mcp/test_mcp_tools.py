"""The tools of a real stdio MCP server as dsh tools: names, schemas, results, the
server's environment and working directory, and disposal."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

import dsh_mcp
from dsh import Context, load_deployment
from dsh.testing import ScriptedModel, run_turn, text, tool_call, tool_calls
from dsh_agent_core import AgentCore
from dsh_mcp import Mcp, McpArguments, backoff, tool_name
from dsh_tools import ToolResult
from tests.plugins.bash.bash_support import alive
from tests.plugins.mcp.mcp_support import (
    SERVER,
    call,
    mcp_deployment,
    mcp_runtime,
    pid_of,
    server_of,
    stdio,
    tool_names,
)
from tests.plugins.mcp.servers.echo_server import LONG_NAME, ODD_NAME, SEARCH_SCHEMA
from tests.support import event_data

pytestmark = pytest.mark.anyio

ECHO_TOOLS = [
    "both",
    "cancelled",
    "crash",
    "cwd",
    "echo",
    "empty",
    "env",
    "fail",
    "hang",
    "header",
    "mixed",
    "nodoc",
    "pid",
    "search",
    "structured",
]


def hashed(original: str, kept: str) -> str:
    return f"{kept}_{hashlib.sha256(original.encode()).hexdigest()[:8]}"


# -- the package ------------------------------------------------------------------------


def test_entry_point_and_exports() -> None:
    (entry,) = importlib.metadata.entry_points(group="dsh.plugins", name="mcp")
    assert entry.load() is Mcp
    assert dsh_mcp.plugin is Mcp
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = dsh_mcp.nothing


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("fs", "read_file", "mcp__fs__read_file"),
        ("my-srv_2", "Get-It", "mcp__my-srv_2__Get-It"),
        ("a.b", "x", hashed("mcp__a.b__x", "mcp__a_b__x")),
        ("fs", "do it/now", hashed("mcp__fs__do it/now", "mcp__fs__do_it_now")),
        ("fs", "ünï", hashed("mcp__fs__ünï", "mcp__fs___n_")),
        # 64 characters is still a name; 65 is cut to 55 + "_" + 8 hex digits.
        ("s", "t" * 56, "mcp__s__" + "t" * 56),
        ("s", "t" * 57, hashed("mcp__s__" + "t" * 57, ("mcp__s__" + "t" * 57)[:55])),
        ("s", "é" * 80, hashed("mcp__s__" + "é" * 80, ("mcp__s__" + "_" * 80)[:55])),
    ],
)
def test_tool_names(server: str, tool: str, expected: str) -> None:
    name = tool_name(server, tool)
    assert name == expected
    assert len(name) <= 64


def test_backoff_doubles_up_to_its_limit() -> None:
    delays = backoff(500, 30_000)
    assert [next(delays) for _ in range(9)] == [
        500,
        1000,
        2000,
        4000,
        8000,
        16000,
        30000,
        30000,
        30000,
    ]


# -- tools, schemas and results ---------------------------------------------------------


async def test_every_tool_is_registered_with_its_schema_and_description() -> None:
    async with mcp_runtime({"echo": stdio()}) as (root, fiber):
        assert await tool_names(root) == [f"mcp__echo__{name}" for name in ECHO_TOOLS]
        schemas = {tool.name: tool for tool in (await root.system_prompt.assemble()).tools}
        search = schemas["mcp__echo__search"]
        assert search.parameters == SEARCH_SCHEMA
        assert search.description == "Search with options."
        assert schemas["mcp__echo__nodoc"].description == ""
        assert schemas["mcp__echo__nodoc"].parameters == {"type": "object"}
        assert schemas["mcp__echo__echo"].parameters == {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        server = server_of(fiber, "echo")
        assert server.connected
        assert server.connections == 1
        assert server.failure is None
        assert sorted(tool.name for tool in server.tools) == ECHO_TOOLS


async def test_arguments_reach_the_server_as_given() -> None:
    async with mcp_runtime({"echo": stdio()}) as (root, _):
        assert await call(root, "mcp__echo__echo", {"text": "héllo"}) == ToolResult("héllo")
        found = await call(root, "mcp__echo__search", {"query": "q", "tags": ["a"], "limit": 2})
        assert found == ToolResult("search: [('limit', 2), ('query', 'q'), ('tags', ['a'])]")
        # The server validates against the schema it published.
        refused = await call(root, "mcp__echo__search", {"query": ""})
        assert refused.is_error
        assert refused.code == "MCP_TOOL_ERROR"
        assert refused.content.startswith("Error: Input validation error: ")
        # A name its schema closes out (additionalProperties: false): refused by dsh;
        # a schema open to other names gets them as they are.
        closed = await call(root, "mcp__echo__search", {"query": "q", "limt": 2})
        assert closed == ToolResult(
            'invalid arguments: unknown argument "limt" (mcp__echo__search takes: query, '
            "mode, limit, tags)",
            True,
            "INVALID_ARGS",
        )
        assert await call(root, "mcp__echo__nodoc", {"any": 1}) == ToolResult(
            "search: [('any', 1)]"
        )
        # Not an object: refused by dsh before the server sees it.
        tools = root.tools
        bad = await tools.execute("mcp__echo__echo", "[1]")
        assert (bad.is_error, bad.code) == (True, "INVALID_ARGS")


async def test_results_map_to_text() -> None:
    async with mcp_runtime({"echo": stdio()}) as (root, _):
        mixed = await call(root, "mcp__echo__mixed")
        assert mixed == ToolResult("first\n[image]\n[audio]\n[resource_link]\n[resource]\nlast")
        # Structured content alone is shown as JSON; beside its text block, once.
        assert await call(root, "mcp__echo__structured") == ToolResult('{"answer": 42, "ok": true}')
        assert await call(root, "mcp__echo__both") == ToolResult('{\n  "answer": 42\n}')
        assert await call(root, "mcp__echo__empty") == ToolResult("")


async def test_an_error_result_is_an_mcp_tool_error() -> None:
    async with mcp_runtime({"echo": stdio()}) as (root, _):
        failed = await call(root, "mcp__echo__fail", {"message": "no such file"})
        assert failed == ToolResult("Error: no such file\n(details)", True, "MCP_TOOL_ERROR")


async def test_a_protocol_error_is_an_mcp_tool_error() -> None:
    async with mcp_runtime({"echo": stdio()}) as (_, fiber):
        server = server_of(fiber, "echo")
        unknown = await server.call("no-such-tool", {})
        assert unknown == ToolResult("Error: no such tool", True, "MCP_TOOL_ERROR")
        assert server.connected


async def test_names_that_need_normalising_are_hashed() -> None:
    servers = {"echo": stdio("--extra-tools"), "my.echo": stdio()}
    async with mcp_runtime(servers) as (root, _):
        names = await tool_names(root)
        odd = hashed(f"mcp__echo__{ODD_NAME}", "mcp__echo__do_it_now_please")
        long = hashed(f"mcp__echo__{LONG_NAME}", f"mcp__echo__{LONG_NAME}"[:55])
        assert odd in names
        assert long in names
        assert await call(root, odd) == ToolResult("search: []")
        renamed = hashed("mcp__my.echo__echo", "mcp__my_echo__echo")
        assert renamed in names
        assert await call(root, renamed, {"text": "via my.echo"}) == ToolResult("via my.echo")


def test_arguments_model_accepts_any_object() -> None:
    args = McpArguments.model_validate({"a": 1, "_b": [None]})
    assert args.model_extra == {"a": 1, "_b": [None]}


# -- the process: environment, working directory, disposal ------------------------------


async def test_env_is_added_to_the_default_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_MCP_NOT_PASSED", "secret")
    server = stdio(env={"DSH_MCP_GIVEN": "yes", "HOME": "/nowhere"})
    async with mcp_runtime({"echo": server}) as (root, _):
        assert await call(root, "mcp__echo__env", {"name": "DSH_MCP_GIVEN"}) == ToolResult("yes")
        assert await call(root, "mcp__echo__env", {"name": "HOME"}) == ToolResult("/nowhere")
        path = await call(root, "mcp__echo__env", {"name": "PATH"})
        assert path == ToolResult(os.environ["PATH"])
        hidden = await call(root, "mcp__echo__env", {"name": "DSH_MCP_NOT_PASSED"})
        assert hidden == ToolResult("<unset>")


async def test_a_relative_cwd_is_relative_to_the_deployment_file(tmp_path: Path) -> None:
    (tmp_path / "deploy" / "work").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    command = f"command: {sys.executable}, args: [{SERVER}]"
    path = mcp_deployment(
        tmp_path / "deploy",
        f"      here: {{{command}, cwd: work}}\n"
        f"      there: {{{command}, cwd: {tmp_path}/elsewhere}}\n",
    )
    async with Context() as root:
        await load_deployment(path, root)
        here = await call(root, "mcp__here__cwd")
        assert here == ToolResult(str(tmp_path / "deploy" / "work"))
        there = await call(root, "mcp__there__cwd")
        assert there == ToolResult(str(tmp_path / "elsewhere"))


async def test_without_a_deployment_a_relative_cwd_is_the_process_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    async with mcp_runtime({"echo": stdio(cwd="work")}) as (root, _):
        assert await call(root, "mcp__echo__cwd") == ToolResult(str(tmp_path / "work"))


async def test_disposal_closes_every_server_process_and_unregisters() -> None:
    async with mcp_runtime({"a": stdio(), "b": stdio()}) as (root, fiber):
        pids = [await pid_of(server_of(fiber, name)) for name in ("a", "b")]
        assert all(alive(pid) for pid in pids)
        await fiber.dispose()
        assert [alive(pid) for pid in pids] == [False, False]
        assert await tool_names(root) == []
        for name in ("a", "b"):
            server = server_of(fiber, name)
            assert server.closed
            assert not server.connected
            assert await server.call("pid", {}) == ToolResult(
                f'Error: MCP server "{name}" is shut down', True, "MCP_DISCONNECTED"
            )


async def test_no_servers_is_no_tools() -> None:
    async with mcp_runtime({}) as (root, fiber):
        assert await tool_names(root) == []
        plugin: Mcp = fiber.instance
        assert plugin.servers == {}


# -- end to end -------------------------------------------------------------------------


async def test_an_agent_calls_an_mcp_tool() -> None:
    model = ScriptedModel(
        tool_calls(tool_call("mcp__echo__echo", {"text": "from the model"})), text("done")
    )
    async with Context() as root:
        await root.plugin(AgentCore, {"model": "scripted"})
        model.install(root)
        await root.plugin(Mcp, {"servers": {"echo": stdio()}})
        agent = root.agents.get("main")
        assert await run_turn(agent, "echo it") == {"kind": "completed"}
        (result,) = event_data(agent.session, "tool/result")
        assert (result["content"], result["is_error"]) == ("from the model", False)
        listed = {tool.name: tool for tool in model.requests[0].tools}
        assert listed["mcp__echo__search"].parameters == SEARCH_SCHEMA
