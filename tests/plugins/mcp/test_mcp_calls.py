"""A call that hangs: it times out, the server is told to stop, and the server stays
connected; a call its caller cancels is cancelled at the server too."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from dsh_tools import ToolResult
from tests.plugins.bash.bash_support import make_fifo, read_fifo
from tests.plugins.mcp.mcp_support import call, in_flight, mcp_runtime, server_of, stdio

pytestmark = pytest.mark.anyio

#: Long enough for any call the tests expect to finish.
PATIENT = 600_000


async def test_a_call_that_hangs_times_out_and_the_server_still_answers() -> None:
    async with mcp_runtime({"echo": stdio()}, tool_call_timeout_ms=300) as (root, fiber):
        timed_out = await call(root, "mcp__echo__hang")
        assert timed_out == ToolResult(
            'Error: MCP tool "hang" of server "echo" timed out after 300 ms', True, "MCP_TIMEOUT"
        )
        server = server_of(fiber, "echo")
        assert server.connected
        # The server got notifications/cancelled: its hanging handler was cancelled.
        assert await server.call("cancelled", {}, timeout_ms=PATIENT) == ToolResult("cancelled")
        assert await server.call("echo", {"text": "x"}, timeout_ms=PATIENT) == ToolResult("x")
        assert server.connections == 1


async def test_a_call_cancelled_by_its_caller_is_cancelled_at_the_server(
    tmp_path: Path,
) -> None:
    signal = make_fifo(tmp_path)
    async with mcp_runtime({"echo": stdio()}, tool_call_timeout_ms=PATIENT) as (root, fiber):
        server = server_of(fiber, "echo")
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, root, "mcp__echo__hang", {"signal": str(signal)})
            assert await read_fifo(signal) == "hanging"
            tg.cancel_scope.cancel()
        assert await server.call("cancelled", {}) == ToolResult("cancelled")
        assert server.connections == 1


async def test_a_call_running_when_the_plugin_is_disposed_ends() -> None:
    async with mcp_runtime({"echo": stdio()}, tool_call_timeout_ms=PATIENT) as (root, fiber):
        server = server_of(fiber, "echo")
        results: list[ToolResult] = []

        async def hang() -> None:
            results.append(await call(root, "mcp__echo__hang"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(hang)
            await in_flight(server)
            await fiber.dispose()
        assert results == [
            ToolResult(
                'Error: MCP server "echo" was shut down during the call', True, "MCP_DISCONNECTED"
            )
        ]
