"""A server that crashes: the call it was serving fails, the server is started again
with backoff, and calls made meanwhile wait for it within their own timeout."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from dsh.testing import capture_logs
from dsh_tools import ToolResult
from tests.plugins.bash.bash_support import alive
from tests.plugins.mcp.mcp_support import (
    call,
    mcp_runtime,
    pid_of,
    server_of,
    stdio,
    waiting_for_reconnect,
)

pytestmark = pytest.mark.anyio

#: A backoff the tests never see the end of.
FOREVER = {"reconnect_initial_ms": 600_000, "reconnect_max_ms": 600_000}

LOST = ToolResult(
    'Error: MCP server "echo" was lost during the call (it is reconnecting)',
    True,
    "MCP_DISCONNECTED",
)


def pids(path: Path) -> list[int]:
    """The pids the test server wrote at each start."""
    return [int(line) for line in path.read_text().split()]


def delays(messages: list[str]) -> list[int]:
    """The waits the reconnect warnings announce, in order."""
    return [int(m) for text in messages for m in re.findall(r"in (\d+) ms$", text)]


async def test_a_crash_mid_call_fails_that_call_and_the_next_waits_for_the_restart() -> None:
    with capture_logs("dsh.mcp") as logs:
        async with mcp_runtime({"echo": stdio()}, reconnect_initial_ms=1) as (root, fiber):
            server = server_of(fiber, "echo")
            first = await pid_of(server)
            assert await call(root, "mcp__echo__crash") == LOST
            assert not alive(first)
            # Made while the server is down: waits for the new process.
            assert await call(root, "mcp__echo__echo", {"text": "back"}) == ToolResult("back")
            second = await pid_of(server)
            assert second != first
            assert (server.connections, server.connected) == (2, True)
        assert alive(second) is False
    assert logs.messages() == [
        'MCP server "echo" disconnected: the server closed the connection; reconnecting in 1 ms',
        'MCP server "echo" reconnected',
    ]


async def test_a_server_that_crashes_after_n_calls_is_restarted() -> None:
    servers = {"echo": stdio("--crash-after", "3")}
    async with mcp_runtime(servers, reconnect_initial_ms=1) as (root, fiber):
        answers = [await call(root, "mcp__echo__echo", {"text": str(i)}) for i in range(5)]
        assert answers == [ToolResult("0"), ToolResult("1"), LOST, ToolResult("3"), ToolResult("4")]
        assert server_of(fiber, "echo").connections == 2


async def test_failed_restarts_back_off_and_a_success_resets_the_backoff(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    # Starts 2 to 4 exit at once; start 5 serves, and after the second crash, start 6.
    server = stdio("--starts", str(starts), "--fail-starts", "2-4")
    with capture_logs("dsh.mcp") as logs:
        async with mcp_runtime({"echo": server}, reconnect_initial_ms=1, reconnect_max_ms=3) as (
            root,
            fiber,
        ):
            assert await call(root, "mcp__echo__crash") == LOST
            assert await call(root, "mcp__echo__echo", {"text": "up"}) == ToolResult("up")
            assert len(pids(starts)) == 5
            assert server_of(fiber, "echo").connections == 2
            assert await call(root, "mcp__echo__crash") == LOST
            assert await call(root, "mcp__echo__echo", {"text": "again"}) == ToolResult("again")
    messages = logs.messages()
    assert delays(messages) == [1, 2, 3, 3, 1]
    assert messages[1] == (
        'MCP server "echo" failed to reconnect: the server closed the connection '
        "(a command server: it exited); next attempt in 2 ms"
    )
    assert messages.count('MCP server "echo" reconnected') == 2


async def test_a_call_waiting_for_a_reconnect_times_out() -> None:
    async with mcp_runtime({"echo": stdio()}, **FOREVER) as (root, fiber):
        assert await call(root, "mcp__echo__crash") == LOST
        server = server_of(fiber, "echo")
        assert await server.call("echo", {"text": "x"}, timeout_ms=50) == ToolResult(
            'Error: MCP tool "echo" of server "echo" timed out after 50 ms waiting for the '
            "server to reconnect",
            True,
            "MCP_TIMEOUT",
        )


async def test_a_call_waiting_for_a_reconnect_ends_when_the_plugin_is_disposed() -> None:
    async with mcp_runtime({"echo": stdio()}, **FOREVER) as (root, fiber):
        assert await call(root, "mcp__echo__crash") == LOST
        server = server_of(fiber, "echo")
        results: list[ToolResult] = []

        async def wait() -> None:
            results.append(await call(root, "mcp__echo__echo", {"text": "x"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await waiting_for_reconnect(server)
            await fiber.dispose()
        assert results == [
            ToolResult('Error: MCP server "echo" is shut down', True, "MCP_DISCONNECTED")
        ]
        assert server.closed
