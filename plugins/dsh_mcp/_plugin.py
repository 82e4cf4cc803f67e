"""The ``mcp`` plugin: the tools of MCP servers as dsh tools."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from dsh import Context, Disposer, DshError, EntryInfo, Plugin, PluginLoadError
from dsh_tools import Tool, ToolCall, ToolResult

from ._config import McpConfig
from ._errors import McpStartupError
from ._names import tool_name

if TYPE_CHECKING:
    from ._server import McpServer

__all__ = ["Mcp", "McpArguments"]


class McpArguments(BaseModel):
    """The arguments of an MCP tool: any JSON object, passed on as it is (the server
    checks it against the schema it published)."""

    model_config = ConfigDict(extra="allow")


def _load_server_module() -> ModuleType:
    try:
        from . import _server
    except ImportError as exc:
        raise PluginLoadError(
            "mcp talks to MCP servers with the mcp package, which is not installed: "
            "pip install 'dsh-harness[mcp]'"
        ) from exc
    return _server


def _base(entry: EntryInfo | None) -> Path:
    """The directory a relative ``cwd`` is taken from: the deployment file's, else the
    process's."""
    if entry is None:
        return Path.cwd()
    file, _, _ = entry.locate(()).rpartition(":")
    return Path(file).absolute().parent


class Mcp(Plugin):
    """Starts the configured MCP servers and registers their tools (``inject =
    ("tools",)``). ACTIVE once every server has started or failed; ``servers`` holds
    them by name."""

    name = "mcp"
    Config = McpConfig
    inject = ("tools",)

    def __init__(self, ctx: Context, config: McpConfig) -> None:
        super().__init__(ctx, config)
        #: The servers by config name, while the plugin is loaded.
        self.servers: dict[str, McpServer] = {}

    async def setup(self) -> AsyncIterator[Callable[[], object]]:
        module = _load_server_module()
        config: McpConfig = self.config
        ctx = self.ctx
        entry = ctx.fiber.entry
        base = _base(entry)
        servers = [
            module.McpServer(
                name,
                spec,
                config,
                where="" if entry is None else entry.locate(("servers", name)),
                base=base,
                logger=ctx.logger,
            )
            for name, spec in config.servers.items()
        ]
        self.servers = {server.name: server for server in servers}
        for server in servers:
            yield ctx.task(server.run, label=f'MCP server "{server.name}"')
        # Undone before the tasks are cancelled: each server is shut down as the
        # protocol says, not killed.
        yield functools.partial(_close, servers)
        for server in servers:
            await server.started.wait()
        failures: list[str] = []
        for server in servers:
            if server.failure is None:
                try:
                    yield ctx.effect(
                        functools.partial(self._register, server),
                        label=f'tools of MCP server "{server.name}"',
                    )
                except DshError as exc:
                    server.failure = str(exc)
                    server.stop()
            if server.failure is not None:
                prefix = f"{server.where}: " if server.where else ""
                failures.append(
                    f'{prefix}MCP server "{server.name}" failed to start: {server.failure}'
                )
        if failures and config.fail_on_startup_error:
            raise McpStartupError("\n".join(failures))
        for line in failures:
            ctx.logger.warning(line)

    def _register(self, server: McpServer) -> Iterator[Disposer]:
        """Register every tool of ``server``: all of them, or (when one is refused)
        none."""
        tools = self.ctx.tools
        for tool in server.tools:
            yield tools.register(
                Tool(
                    name=tool_name(server.name, tool.name),
                    description=tool.description or "",
                    parameters=McpArguments,
                    execute=_executor(server, tool.name),
                    json_schema=tool.inputSchema,
                )
            )


def _executor(
    server: McpServer, name: str
) -> Callable[[McpArguments, ToolCall], Awaitable[ToolResult]]:
    async def execute(args: McpArguments, call: ToolCall) -> ToolResult:
        arguments: dict[str, Any] = args.model_extra or {}
        return await server.call(name, arguments)

    return execute


def _close(servers: Sequence[McpServer]) -> Awaitable[None]:
    for server in servers:
        server.stop()
    return _closed(servers)


async def _closed(servers: Sequence[McpServer]) -> None:
    for server in servers:
        await server.finished.wait()
