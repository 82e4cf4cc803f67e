"""Errors of the ``mcp`` plugin, and the codes of its error results."""

from __future__ import annotations

from dsh import DshError

__all__ = [
    "MCP_DISCONNECTED",
    "MCP_TIMEOUT",
    "MCP_TOOL_ERROR",
    "McpNotAServerError",
    "McpStartupError",
]

#: The server answered the call with ``isError`` (or a JSON-RPC error).
MCP_TOOL_ERROR = "MCP_TOOL_ERROR"
#: The call took longer than ``tool_call_timeout_ms``.
MCP_TIMEOUT = "MCP_TIMEOUT"
#: The server went away during the call, or was shut down.
MCP_DISCONNECTED = "MCP_DISCONNECTED"


class McpStartupError(DshError, RuntimeError):
    """With ``fail_on_startup_error: true``, a server did not start; the message has one
    line per server, ``<file>:<line>: MCP server "<name>" failed to start: <reason>``."""

    code = "MCP_STARTUP"


class McpNotAServerError(DshError, ConnectionError):
    """A command server's first output line is not what an MCP server sends (not
    JSON-RPC, or a request only a client sends: a command that repeats its input, like
    ``cat``); the server fails to start with this message."""

    code = "MCP_NOT_A_SERVER"
