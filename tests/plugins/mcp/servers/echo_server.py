"""A real MCP server for the ``dsh_mcp`` tests, written with the ``mcp`` package's
low-level ``Server`` (so every result and schema is exactly what a test expects).

Run as ``python echo_server.py [options]``: stdio by default, or ``--http`` for
streamable HTTP on 127.0.0.1 (a free port, printed as the first line of stdout).

Options that make it misbehave, for the failure tests:

* ``--exit-on-start``: exit with status 3 before reading anything;
* ``--silent``: read stdin to its end and never answer (a server that does not start);
* ``--announce FIFO``: write its pid to FIFO first (a test waits on it, not on a clock);
* ``--starts FILE``: append its pid to FILE at each start, and with
  ``--fail-starts A-B`` exit at once when this is start number A..B (1-based);
* ``--crash-after N``: exit in the middle of the N-th tool call;
* ``--extra-tools``: also list tools whose names need normalising;
* ``--child``: start ``sleep 1000`` in its own process group first (a grandchild of the
  client, for the tests of what survives the client);
* ``--chatter``: write INFO lines to stderr as it starts, as many servers do.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

#: The input schema of ``search``: refs, defs, enums, defaults, extra keywords.
SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "SearchInput",
    "description": "What to look for.",
    "properties": {
        "query": {"$ref": "#/$defs/Query"},
        "mode": {"type": "string", "enum": ["fast", "deep"], "default": "fast"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
    "required": ["query"],
    "additionalProperties": False,
    "$defs": {"Query": {"type": "string", "minLength": 1, "x-custom": {"keep": "me"}}},
}

#: How many tools one ``tools/list`` answer holds.
PAGE = 6

#: A tool name that needs normalising, and one that is too long.
ODD_NAME = "do it.now/please"
LONG_NAME = "a_tool_with_a_very_long_name_that_goes_on_and_on_and_on_and_on"


def _tool(tool: str, description: str, **properties: Any) -> types.Tool:
    return types.Tool(
        name=tool,
        description=description,
        inputSchema={"type": "object", "properties": properties, "required": list(properties)},
    )


def _text(value: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=value)]


def build(options: argparse.Namespace) -> Server[Any, Any]:
    server: Server[Any, Any] = Server("dsh-test-echo")
    hang_cancelled = anyio.Event()
    calls = 0
    string = {"type": "string"}
    tools = [
        _tool("echo", "Echo the text back.", text=string),
        _tool("pid", "The server's process id."),
        _tool("env", "The value of an environment variable.", name=string),
        _tool("cwd", "The server's working directory."),
        _tool("fail", "An error result with this message.", message=string),
        _tool("mixed", "Text and other kinds of content."),
        _tool("structured", "Structured content and no content blocks."),
        _tool("both", "Structured content with its JSON as text."),
        _tool("empty", "No content at all."),
        types.Tool(
            name="hang",
            description="Never returns (until cancelled); writes to the FIFO `signal` first.",
            inputSchema={"type": "object", "properties": {"signal": string}},
        ),
        _tool("cancelled", "Returns once a hang call has been cancelled."),
        _tool("crash", "Exits the server in the middle of the call."),
        _tool("header", "A header of the HTTP request (HTTP only).", name=string),
        types.Tool(name="search", description="Search with options.", inputSchema=SEARCH_SCHEMA),
        types.Tool(name="nodoc", inputSchema={"type": "object"}),
    ]
    if options.extra_tools:
        tools += [_tool(ODD_NAME, "An odd name."), _tool(LONG_NAME, "A long name.")]

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools(request: types.ListToolsRequest) -> types.ListToolsResult:
        # Pages of PAGE tools, so that a client must follow the cursor. (The server
        # passes None for its own lookups, whatever the annotation says.)
        given: types.ListToolsRequest | None = request
        cursor = given.params.cursor if given is not None and given.params else None
        start = int(cursor or 0)
        end = start + PAGE
        return types.ListToolsResult(
            tools=tools[start:end], nextCursor=str(end) if end < len(tools) else None
        )

    @server.call_tool()  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        nonlocal calls
        calls += 1
        if calls == options.crash_after or name == "crash":
            os._exit(1)
        if name == "echo":
            return _text(arguments["text"])
        if name == "pid":
            return _text(str(os.getpid()))
        if name == "env":
            return _text(os.environ.get(arguments["name"], "<unset>"))
        if name == "cwd":
            return _text(os.getcwd())
        if name == "fail":
            return types.CallToolResult(
                content=[*_text(arguments["message"]), *_text("(details)")], isError=True
            )
        if name == "mixed":
            return [
                *_text("first"),
                types.ImageContent(type="image", data="aGk=", mimeType="image/png"),
                types.AudioContent(type="audio", data="aGk=", mimeType="audio/wav"),
                types.ResourceLink(type="resource_link", uri=AnyUrl("file:///x"), name="x"),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(uri=AnyUrl("file:///y"), text="y"),
                ),
                *_text("last"),
            ]
        if name == "structured":
            return types.CallToolResult(content=[], structuredContent={"answer": 42, "ok": True})
        if name == "both":
            return {"answer": 42}
        if name == "empty":
            return []
        if name == "hang":
            if "signal" in arguments:
                await anyio.Path(arguments["signal"]).write_text("hanging")
            try:
                await anyio.sleep_forever()
            finally:
                hang_cancelled.set()
        if name == "cancelled":
            await hang_cancelled.wait()
            return _text("cancelled")
        if name == "header":
            request: Any = server.request_context.request
            return _text(request.headers.get(arguments["name"], "<unset>"))
        return _text(f"search: {sorted(arguments.items())}")

    # A name it does not list is a JSON-RPC error (a protocol error), not an error result.
    listed = {tool.name for tool in tools}
    handle = server.request_handlers[types.CallToolRequest]

    async def checked(request: Any) -> Any:
        if request.params.name not in listed:
            error = types.ErrorData(code=types.INVALID_PARAMS, message="no such tool")
            raise McpError(error)
        return await handle(request)

    server.request_handlers[types.CallToolRequest] = checked
    return server


async def serve_stdio(server: Server[Any, Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(server: Server[Any, Any]) -> None:
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Mount

    manager = StreamableHTTPSessionManager(app=server)
    app = Starlette(
        routes=[Mount("/mcp", app=manager.handle_request)],
        lifespan=lambda _: manager.run(),
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    # Listening before the port is printed: a client that connects before uvicorn
    # serves waits in the backlog instead of being refused.
    sock.listen(128)
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--exit-on-start", action="store_true")
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--announce", type=Path)
    parser.add_argument("--starts", type=Path)
    parser.add_argument("--fail-starts", default="0-0")
    parser.add_argument("--crash-after", type=int, default=0)
    parser.add_argument("--extra-tools", action="store_true")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--chatter", action="store_true")
    options = parser.parse_args()
    if options.chatter:
        sys.stderr.write("INFO echo server starting\nINFO serving 15 tools")
        sys.stderr.flush()
    if options.child:
        subprocess.Popen(["sleep", "1000"])
    if options.announce is not None:
        options.announce.write_text(str(os.getpid()), encoding="utf-8")
    if options.exit_on_start:
        sys.exit(3)
    if options.silent:
        sys.stdin.read()
        return
    if options.starts is not None:
        with options.starts.open("a", encoding="utf-8") as file:
            file.write(f"{os.getpid()}\n")
        count = len(options.starts.read_text(encoding="utf-8").splitlines())
        first, last = (int(n) for n in options.fail_starts.split("-"))
        if first <= count <= last:
            sys.exit(4)
    server = build(options)
    anyio.run(serve_http if options.http else serve_stdio, server)


if __name__ == "__main__":
    main()
