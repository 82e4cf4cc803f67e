"""A streamable HTTP server on 127.0.0.1: its tools, their schemas, headers, disposal."""

from __future__ import annotations

import pytest

from dsh_tools import ToolResult
from tests.plugins.mcp.mcp_support import call, http_server, mcp_runtime, server_of, tool_names
from tests.plugins.mcp.servers.echo_server import SEARCH_SCHEMA

pytestmark = pytest.mark.anyio


async def test_a_url_server_serves_its_tools_over_streamable_http() -> None:
    async with http_server() as url:
        server = {"url": url, "headers": {"X-Dsh-Test": "hello"}}
        async with mcp_runtime({"web": server}) as (root, fiber):
            assert "mcp__web__search" in await tool_names(root)
            (search,) = [
                tool
                for tool in (await root.system_prompt.assemble()).tools
                if tool.name == "mcp__web__search"
            ]
            assert search.parameters == SEARCH_SCHEMA
            assert await call(root, "mcp__web__echo", {"text": "over http"}) == ToolResult(
                "over http"
            )
            header = await call(root, "mcp__web__header", {"name": "x-dsh-test"})
            assert header == ToolResult("hello")
            failed = await call(root, "mcp__web__fail", {"message": "nope"})
            assert failed == ToolResult("Error: nope\n(details)", True, "MCP_TOOL_ERROR")
            await fiber.dispose()
            assert await tool_names(root) == []
            assert server_of(fiber, "web").closed


async def test_a_url_server_call_times_out_and_the_server_still_answers() -> None:
    async with (
        http_server() as url,
        mcp_runtime({"web": {"url": url}}, tool_call_timeout_ms=300) as (root, fiber),
    ):
        timed_out = await call(root, "mcp__web__hang")
        assert timed_out.code == "MCP_TIMEOUT"
        server = server_of(fiber, "web")
        assert await server.call("cancelled", {}, timeout_ms=600_000) == ToolResult("cancelled")
