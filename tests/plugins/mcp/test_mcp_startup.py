"""Servers that do not start: reported with file, line and name, the others kept
running, or the plugin failed; and the config's checks."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.shared.exceptions import McpError
from mcp.types import ErrorData

import dsh_mcp
from dsh import ConfigError, Context, DshError, FiberState, PluginLoadError, load_deployment
from dsh.testing import capture_logs, state
from dsh_mcp import Mcp, McpStartupError
from dsh_mcp._server import _reason
from dsh_system_prompt import SystemPrompt
from dsh_tools import Tool, ToolResult, Tools
from tests.plugins.bash.bash_support import alive, make_fifo, read_fifo
from tests.plugins.mcp.mcp_support import (
    SERVER,
    call,
    mcp_deployment,
    mcp_runtime,
    server_of,
    stdio,
    tool_names,
)
from tests.plugins.tools.tools_support import NoArgs, answer

pytestmark = pytest.mark.anyio

MISSING = "no-such-mcp-server-command"
NOT_FOUND = f"[Errno 2] No such file or directory: '{MISSING}'"


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on (bound, so nobody else takes it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def line_of(path: Path, text: str) -> int:
    """The 1-based line of ``path`` that contains ``text``."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


# -- failing servers --------------------------------------------------------------------


async def test_a_server_that_does_not_start_is_a_warning_and_the_rest_runs(
    closed_port: int,
) -> None:
    servers = {
        "missing": {"command": MISSING},
        "exits": stdio("--exit-on-start"),
        "refused": {"url": f"http://127.0.0.1:{closed_port}/mcp"},
        "echo": stdio(),
    }
    with capture_logs("dsh.mcp") as logs:
        async with mcp_runtime(servers) as (root, fiber):
            assert fiber.state is FiberState.ACTIVE
            assert sorted(logs.messages()) == [
                'MCP server "exits" failed to start: the server closed the connection '
                "(a command server: it exited)",
                f'MCP server "missing" failed to start: {NOT_FOUND}',
                'MCP server "refused" failed to start: ConnectError: All connection attempts '
                "failed",
            ]
            assert all(r.levelname == "WARNING" for r in logs.records)
            assert {name.split("__")[1] for name in await tool_names(root)} == {"echo"}
            assert await call(root, "mcp__echo__echo", {"text": "still here"}) == ToolResult(
                "still here"
            )
            missing = server_of(fiber, "missing")
            assert (missing.failure, missing.closed, missing.tools) == (NOT_FOUND, True, [])


async def test_a_server_that_never_answers_times_out() -> None:
    with capture_logs("dsh.mcp") as logs:
        async with mcp_runtime({"silent": stdio("--silent")}, startup_timeout_ms=200) as (
            root,
            _,
        ):
            assert logs.messages() == [
                'MCP server "silent" failed to start: it did not answer within 200 ms'
            ]
            assert await tool_names(root) == []


async def test_disposing_the_plugin_while_a_server_starts_kills_it(tmp_path: Path) -> None:
    announce = make_fifo(tmp_path)
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        fiber = root.plugin(
            Mcp, {"servers": {"slow": stdio("--announce", str(announce), "--silent")}}
        )
        pid = int(await read_fifo(announce))
        assert fiber.state is FiberState.LOADING
        await fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
        assert not alive(pid)
        assert await tool_names(root) == []


async def test_the_warning_names_the_deployment_file_and_line(tmp_path: Path) -> None:
    path = mcp_deployment(
        tmp_path,
        f"      echo: {{command: {sys.executable}, args: [{SERVER}]}}\n"
        f"      broken:\n        command: {MISSING}\n",
    )
    with capture_logs("dsh.mcp") as logs:
        async with Context() as root:
            await load_deployment(path, root)
            assert logs.messages() == [
                f'{path}:{line_of(path, "broken:")}: MCP server "broken" failed to start: '
                f"{NOT_FOUND}"
            ]
            assert len(await tool_names(root)) > 0


async def test_fail_on_startup_error_fails_the_plugin_and_stops_the_rest(
    tmp_path: Path,
) -> None:
    starts = tmp_path / "starts"
    servers = {"echo": stdio("--starts", str(starts)), "broken": {"command": MISSING}}
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        fiber = root.plugin(Mcp, {"servers": servers, "fail_on_startup_error": True})
        with pytest.raises(McpStartupError) as info:
            await fiber
        assert str(info.value) == f'MCP server "broken" failed to start: {NOT_FOUND}'
        assert info.value.code == "MCP_STARTUP"
        assert fiber.state is FiberState.FAILED
        assert await tool_names(root) == []
        (pid,) = (int(line) for line in starts.read_text().split())
        assert not alive(pid)


async def test_fail_on_startup_error_in_a_deployment_names_file_line_and_server(
    tmp_path: Path,
) -> None:
    path = mcp_deployment(
        tmp_path,
        f"      first:\n        command: {MISSING}\n      second: {{command: {MISSING}-too}}\n",
        extra="    fail_on_startup_error: true\n",
    )
    async with Context() as root:
        with pytest.raises(DshError) as info:
            await load_deployment(path, root)
    message = str(info.value)
    assert f'plugin "mcp" failed: McpStartupError: {path}:{line_of(path, "first:")}: ' in message
    assert f'MCP server "first" failed to start: {NOT_FOUND}' in message
    assert f'{path}:{line_of(path, "second:")}: MCP server "second" failed to start: ' in message


async def test_a_server_whose_tool_names_are_taken_does_not_start() -> None:
    taken = Tool(name="mcp__echo__pid", description="", parameters=NoArgs, execute=answer)
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        root.tools.register(taken)
        with capture_logs("dsh.mcp") as logs:
            fiber = await root.plugin(Mcp, {"servers": {"echo": stdio(), "other": stdio()}})
        (message,) = logs.messages()
        assert message.startswith(
            'MCP server "echo" failed to start: tool "mcp__echo__pid" is already registered'
        )
        # None of its tools stays registered; the other server is not affected.
        names = await tool_names(root)
        assert [n for n in names if n.startswith("mcp__echo__")] == ["mcp__echo__pid"]
        assert "mcp__other__pid" in names
        echo = server_of(fiber, "echo")
        await echo.finished.wait()
        assert echo.closed


# -- the package and its config ---------------------------------------------------------


async def test_without_the_mcp_package_the_plugin_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    monkeypatch.delitem(sys.modules, "dsh_mcp._server")
    monkeypatch.delattr(dsh_mcp, "_server")
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        with pytest.raises(PluginLoadError) as info:
            await root.plugin(Mcp, {"servers": {"echo": stdio()}})
    assert "pip install 'dsh-harness[mcp]'" in str(info.value)


def test_a_failure_reason_is_one_line() -> None:
    assert _reason(ExceptionGroup("x", [ValueError("deep")])) == "ValueError: deep"
    assert _reason(ValueError()) == "ValueError"
    assert _reason(McpError(ErrorData(code=-32603, message="internal"))) == "internal"


@pytest.mark.parametrize(
    ("servers", "problem"),
    [
        ({"x": {}}, "a server needs `command` (a stdio server) or `url`"),
        ({"x": {"command": "a", "url": "http://h"}}, "not both (at servers.x)"),
        (
            {"x": {"url": "http://h", "args": [], "cwd": "c"}},
            "`args`, `cwd` apply to a `command` server only",
        ),
        ({"x": {"command": "a", "headers": {}}}, "`headers` apply to a `url` server only"),
        ({"x": {"url": "ftp://h"}}, "starts with http:// or https:// (at servers.x.url)"),
        ({"x": {"command": ""}}, "at least 1 character (at servers.x.command)"),
        ({"x": {"command": "a", "argv": []}}, 'servers.x.argv); did you mean "args"?'),
        ({"": {"command": "a"}}, "at least 1 character"),
    ],
)
async def test_bad_server_configs(servers: object, problem: str) -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        with pytest.raises(ConfigError) as info:
            await root.plugin(Mcp, {"servers": servers})
    assert problem in str(info.value)


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"tool_call_timeout_ms": 0}, "greater than 0 (at tool_call_timeout_ms)"),
        (
            {"reconnect_initial_ms": 2000, "reconnect_max_ms": 1000},
            "reconnect_initial_ms (2000) is longer than reconnect_max_ms (1000)",
        ),
        ({"fail_on_start_error": True}, 'did you mean "fail_on_startup_error"?'),
    ],
)
async def test_bad_configs(config: dict[str, object], problem: str) -> None:
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        with pytest.raises(ConfigError) as info:
            await root.plugin(Mcp, config)
    assert problem in str(info.value)
