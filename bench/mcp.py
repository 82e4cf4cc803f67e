"""MCP benchmark: what an MCP tool costs through dsh beside the mcp client's own call.

Run: ``.venv/bin/python -m bench.mcp`` (asyncio backend, as every MCP path; ``--quick``
for a smoke run). No peers to install: the floor is the ``mcp`` package's own client.

One server program, the stdio test server ``tests/plugins/mcp/servers/echo_server.py``
(the ``echo`` tool answers its ``text``), run as two processes:

* dsh tool: ``root.tools.execute("mcp__echo__echo", {"text": "hi"})`` on a root with
  ``system-prompt``, ``tools`` and ``mcp`` (argument validation into the permissive
  arguments model, the server's call with its deadline and cancel scope, the pump that
  hands the server's messages to the session, the render to a ``ToolResult``);
* floor: ``ClientSession.call_tool("echo", {"text": "hi"})`` on a session of the
  package's own ``stdio_client`` to the second process: what a program using the ``mcp``
  package alone does;
* and, to split the difference, ``call_tool`` on the session the plugin holds (the first
  process, through the plugin's pump, without the tools executor and the server's call).

Rounds are interleaved (one call of each per round). Reported: the median wall time per
call, whose ratio to the floor is the goal (at most 1.2x), and the median CPU time of this
process per call (the server's own work is in the other process, so this is the client's
share alone: the sharpest view of what dsh adds).

Each call is checked (untimed) for its answer, so the workload cannot shrink.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from dsh import Context
from dsh_mcp import Mcp
from dsh_system_prompt import SystemPrompt
from dsh_tools import ToolCall, ToolResult, Tools

SERVER = Path(__file__).parents[1] / "tests" / "plugins" / "mcp" / "servers" / "echo_server.py"

Call = Callable[[], Awaitable[object]]


async def _rounds(
    calls: dict[str, Call], rounds: int, check: Callable[[str, object], None]
) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU seconds of each call, ``rounds`` samples each, interleaved."""
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            wall, cpu = time.perf_counter(), time.process_time()
            result = await fn()
            cpu = time.process_time() - cpu
            wall = time.perf_counter() - wall
            samples[name][0].append(wall)
            samples[name][1].append(cpu)
            check(name, result)
    return samples


def _check(name: str, result: object) -> None:
    if isinstance(result, ToolResult):
        assert result == ToolResult("hi"), result
    else:
        content = getattr(result, "content", None)
        assert content is not None, result
        assert content[0].text == "hi", result


async def main(quick: bool) -> None:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    server = {"command": sys.executable, "args": [str(SERVER)]}
    async with (
        Context() as root,
        stdio_client(params) as (read, write),
        ClientSession(read, write) as floor,
    ):
        await floor.initialize()
        await floor.list_tools()
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        fiber = await root.plugin(Mcp, {"servers": {"echo": server}})
        plugin: Mcp = fiber.instance
        conn = plugin.servers["echo"]._conn
        assert conn is not None
        held = conn.session
        tools: Tools = root.tools
        call = ToolCall("bench")
        arguments = {"text": "hi"}

        async def dsh_tool() -> object:
            return await tools.execute("mcp__echo__echo", arguments, call)

        async def own_client() -> object:
            return await floor.call_tool("echo", arguments)

        async def held_session() -> object:
            return await held.call_tool("echo", arguments)

        calls: dict[str, Call] = {
            "dsh tool": dsh_tool,
            "floor": own_client,
            "plugin's session": held_session,
        }
        await _rounds(calls, 20, _check)  # warm up every path
        samples = await _rounds(calls, 30 if quick else 600, _check)

    wall = {name: statistics.median(s[0]) for name, s in samples.items()}
    cpu = {name: statistics.median(s[1]) for name, s in samples.items()}
    print(f"\nMCP tool call vs the mcp client's own call_tool ({len(samples['floor'][0])} rounds)")
    print(f"{'':<28}{'wall ms':>10}{'ratio':>8}{'client CPU ms':>16}{'ratio':>8}")
    for name in calls:
        print(
            f"{name:<28}{wall[name] * 1e3:>10.3f}{wall[name] / wall['floor']:>7.2f}x"
            f"{cpu[name] * 1e3:>16.3f}{cpu[name] / cpu['floor']:>7.2f}x"
        )
    ratio = wall["dsh tool"] / wall["floor"]
    print(f"goal: per call <= 1.2x the floor ({'met' if ratio <= 1.2 else 'MISSED'}: {ratio:.2f}x)")


if __name__ == "__main__":
    anyio.run(main, "--quick" in sys.argv, backend="asyncio")
