"""MCP servers as tool providers: each server's tools become dsh tools.

YAML name ``mcp``; it injects ``tools``. The ``mcp`` package (the ``mcp`` extra) is
imported when the plugin starts, not with this package. See this package's README.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._config import McpConfig, McpServerConfig
from ._errors import (
    MCP_DISCONNECTED,
    MCP_TIMEOUT,
    MCP_TOOL_ERROR,
    McpNotAServerError,
    McpStartupError,
)
from ._names import tool_name
from ._plugin import Mcp, McpArguments

if TYPE_CHECKING:
    from ._server import McpServer, backoff

plugin = Mcp

__all__ = [
    "MCP_DISCONNECTED",
    "MCP_TIMEOUT",
    "MCP_TOOL_ERROR",
    "Mcp",
    "McpArguments",
    "McpConfig",
    "McpNotAServerError",
    "McpServer",
    "McpServerConfig",
    "McpStartupError",
    "backoff",
    "plugin",
    "tool_name",
]


def __getattr__(name: str) -> Any:
    # The names that need the mcp package load it on first use.
    if name in ("McpServer", "backoff"):
        from . import _server

        return getattr(_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
