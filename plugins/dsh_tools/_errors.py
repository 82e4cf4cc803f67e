"""Errors of the tools plugin.

Registration and restriction problems are raised synchronously to the caller. The
execution errors are never raised by ``Tools.execute``: their ``code`` ends up on the
error :class:`~dsh_tools.ToolResult` instead, and a tool may raise one of them itself
(for example :class:`ToolArgumentsError` for a semantic problem with its arguments) to
report that code.
"""

from __future__ import annotations

from dsh import DshError, DuplicateNameError

__all__ = [
    "DuplicateToolError",
    "ToolArgumentsError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolRegistrationError",
    "ToolRestrictionError",
    "ToolTypeError",
]


class ToolRegistrationError(DshError, ValueError):
    """A tool cannot be registered: a bad name, a duplicate, or no usable JSON Schema."""

    code = "TOOL_REGISTRATION"


class DuplicateToolError(ToolRegistrationError, DuplicateNameError):
    """A tool name is already registered in that layer (by ``holder``)."""


class ToolTypeError(DshError, TypeError):
    """An argument of ``register`` or ``restrict`` has the wrong type."""

    code = "TOOL_TYPE"


class ToolRestrictionError(DshError, ValueError):
    """``restrict`` was called outside a scope, with nothing to do, or with unknown names."""

    code = "TOOL_RESTRICTION"


class ToolNotFoundError(DshError, LookupError):
    """No tool of that name is visible to the caller (result code ``UNKNOWN_TOOL``)."""

    code = "UNKNOWN_TOOL"


class ToolArgumentsError(DshError, ValueError):
    """A call's arguments are not valid for the tool (result code ``INVALID_ARGS``)."""

    code = "INVALID_ARGS"


class ToolExecutionError(DshError, RuntimeError):
    """A tool failed or misbehaved (result code ``TOOL_ERROR``)."""

    code = "TOOL_ERROR"
