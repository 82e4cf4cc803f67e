"""The records of the tools plugin: a tool, one call of it, and its result."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
from pydantic import BaseModel

__all__ = ["TOOL_NAME", "ArgsT", "Tool", "ToolCall", "ToolResult"]

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""Grammar of a tool name (what model APIs accept). Always apply it with ``fullmatch``."""

ArgsT = TypeVar("ArgsT", bound=BaseModel)
"""The pydantic model a tool's arguments are validated into."""


@dataclass
class ToolResult:
    """What a call produced: text for the model, whether it is an error, and a code.

    ``code`` is a stable machine-readable reason for an error (``UNKNOWN_TOOL``,
    ``INVALID_ARGS``, ``TOOL_ERROR`` or a ``DshError`` subclass's code); it is ``None``
    unless the tool sets one.
    """

    content: str
    is_error: bool = False
    code: str | None = None


@dataclass
class ToolCall:
    """One invocation, as the tool sees it.

    ``id`` is the model's call id, ``agent`` the calling agent's handle (``None`` when a
    call does not come from an agent), and ``cancel_scope`` the scope the caller runs
    the call in, if it shares it; cancelling that scope cancels the call.

    ``name`` and ``arguments`` are the tool called and what it is called with (the
    model's JSON text, or the mapping a ``tool/before`` listener replaced it by); the
    agent loop fills them in, other callers may leave them empty. ``permission`` is
    what a ``tool/before`` listener settled for the call's approval questions (see
    ``dsh_approval.Approval.request``): ``"allow"`` approves them except ``always_ask``
    ones, ``"approved"`` (a person already approved the call) approves every one, and
    None asks as usual.
    """

    id: str
    agent: Any = None
    cancel_scope: anyio.CancelScope | None = None
    name: str = ""
    arguments: str | Mapping[str, Any] = ""
    permission: str | None = None

    def input(self) -> dict[str, Any]:
        """:attr:`arguments` as a dict: the JSON object the model wrote (``{}`` when
        the text is empty, not JSON, or not an object), or a copy of the mapping."""
        arguments = self.arguments
        if not isinstance(arguments, str):
            return dict(arguments)
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}

    @property
    def cancelled(self) -> bool:
        """True once the call's cancel scope has been cancelled."""
        scope = self.cancel_scope
        return scope is not None and scope.cancel_called


@dataclass
class Tool(Generic[ArgsT]):
    """A tool the model can call.

    ``parameters`` is a pydantic model class: its JSON Schema is what the model is shown
    and an instance of it, validated from the model's arguments, is what ``execute``
    receives together with the :class:`ToolCall`. ``execute`` returns the text for the
    model, or a :class:`ToolResult`; an exception it raises becomes an error result.

    ``json_schema``, when given, is the JSON Schema the model is shown instead of the
    model's own, exactly as given (a tool that forwards a schema it did not write, such
    as an MCP server's); the arguments are still validated into ``parameters``, so pair
    it with a model that accepts what the schema describes (``extra="allow"``). Other
    argument names than a tool takes are refused (see ``dsh_tools._arguments``): a
    ``json_schema`` takes any unless it sets ``additionalProperties: false``.
    """

    name: str
    description: str
    parameters: type[ArgsT]
    execute: Callable[[ArgsT, ToolCall], Awaitable[str | ToolResult]]
    json_schema: Mapping[str, Any] | None = None
