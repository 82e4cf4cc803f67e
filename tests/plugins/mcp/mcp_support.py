"""Helpers of the ``dsh_mcp`` tests: the test server, a runtime with the plugin, calls."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from dsh import Context, Fiber
from dsh.testing import until, write_deployment
from dsh_mcp import Mcp, McpServer
from dsh_system_prompt import SystemPrompt
from dsh_tools import ToolResult, Tools

#: The MCP server the tests run (see its docstring for the options).
SERVER = Path(__file__).parent / "servers" / "echo_server.py"


def mcp_deployment(directory: Path, servers: str, extra: str = "") -> Path:
    """A deployment with the system prompt, the tools and ``mcp`` with ``servers``
    (YAML lines at the depth of the server names; the first is the file's line 7) and
    the ``extra`` config lines."""
    return write_deployment(
        directory,
        "- name: system-prompt\n- name: tools\n- id: mcp\n  name: mcp\n  config:\n"
        f"{extra}    servers:\n{servers}",
    )


def stdio(*options: str, **fields: Any) -> dict[str, Any]:
    """The config of a stdio server running the test server with ``options``."""
    return {"command": sys.executable, "args": [str(SERVER), *options], **fields}


@asynccontextmanager
async def mcp_runtime(
    servers: dict[str, dict[str, Any]], **config: Any
) -> AsyncIterator[tuple[Context, Fiber]]:
    """A root with the system prompt, the tools and ``mcp`` serving ``servers``."""
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        fiber = await root.plugin(Mcp, {"servers": servers, **config})
        yield root, fiber


def server_of(fiber: Fiber, name: str) -> McpServer:
    """The plugin's server ``name``."""
    plugin: Mcp = fiber.instance
    return plugin.servers[name]


async def call(root: Context, name: str, arguments: dict[str, Any] | None = None) -> ToolResult:
    """Run tool ``name`` as the model would."""
    tools: Tools = root.tools
    result: ToolResult = await tools.execute(name, arguments or {})
    return result


async def tool_names(root: Context) -> list[str]:
    """The names of the tools the model is shown."""
    return [tool.name for tool in (await root.system_prompt.assemble()).tools]


async def in_flight(server: McpServer, calls: int = 1) -> None:
    """Wait until ``calls`` calls are running on the server's session."""
    await until(lambda: server._conn is not None and len(server._conn.calls) == calls)


async def waiting_for_reconnect(server: McpServer) -> None:
    """Wait until a call is waiting for the server to come back."""
    await until(lambda: server._up.statistics().tasks_waiting == 1)


async def pid_of(server: McpServer) -> int:
    """The process id of the server's current process."""
    return int((await server.call("pid", {})).content)


@asynccontextmanager
async def http_server(*options: str) -> AsyncIterator[str]:
    """The test server serving streamable HTTP on a free loopback port, as a process of
    its own; yields its endpoint URL and terminates it afterwards."""
    process = await anyio.open_process([sys.executable, str(SERVER), "--http", *options])
    try:
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            line += await process.stdout.receive(1)
        yield f"http://127.0.0.1:{int(line)}/mcp"
    finally:
        process.terminate()
        await process.aclose()
