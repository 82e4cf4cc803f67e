"""What every ``tool-subagent`` instance of one runtime shares: the tool names they
claimed, and the ``send_message`` and ``list_agents`` tools (registered once)."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from dsh import Context, Disposer, DshError, Fiber
from dsh_tools import Tool, ToolCall, ToolResult

__all__ = [
    "SubagentNotFoundError",
    "ToolNameTakenError",
    "claim_tool_name",
    "remember",
    "share_control_tools",
]


class SubagentNotFoundError(DshError, LookupError):
    """``send_message`` named no live subagent of the calling agent."""

    code = "SUBAGENT_NOT_FOUND"


class ToolNameTakenError(DshError, ValueError):
    """Two ``tool-subagent`` instances asked for the same ``tool_name``."""

    code = "DUPLICATE_TOOL_NAME"


@dataclass
class _Shared:
    claims: dict[str, Fiber] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    users: int = 0
    control: Disposer | None = None


_BY_RUNTIME: weakref.WeakKeyDictionary[Any, _Shared] = weakref.WeakKeyDictionary()


def _shared(ctx: Context) -> _Shared:
    runtime = ctx.fiber.runtime
    state = _BY_RUNTIME.get(runtime)
    if state is None:
        state = _BY_RUNTIME[runtime] = _Shared()
    return state


def claim_tool_name(ctx: Context, name: str) -> Disposer:
    """Reserve tool ``name`` for the calling instance while it lives (the exact
    disposer); a name another instance holds raises :class:`ToolNameTakenError`
    naming that instance."""
    state = _shared(ctx)
    holder = state.claims.get(name)
    if holder is not None:
        raise ToolNameTakenError(
            f'tool_name "{name}" is already used by {holder.describe()}; give each '
            "tool-subagent instance its own tool_name"
        )
    fiber = ctx.fiber

    def body() -> Callable[[], None]:
        state.claims[name] = fiber
        # (Not claims.pop: an undo step's result is awaited when it is awaitable, and a
        # Fiber is awaitable.)
        return functools.partial(state.claims.__delitem__, name)

    return ctx.effect(body, label=f"subagent tool name {name}")


def remember(ctx: Context, child: Any, description: str) -> None:
    """Keep the label of subagent ``child`` for ``list_agents`` while the child lives
    (it is forgotten with the child's scope)."""
    descriptions = _shared(ctx).descriptions
    child_id: str = child.id

    def body() -> Callable[[], None]:
        descriptions[child_id] = description
        return functools.partial(_forget, descriptions, child_id)

    child.ctx.effect(body, label=f"subagent label {child_id}")


def _forget(descriptions: dict[str, str], child_id: str) -> None:
    del descriptions[child_id]


class SendMessageArgs(BaseModel):
    subagent_id: str = Field(description="The id a background subagent was started with.")
    message: str = Field(description="What the subagent should do next.")


class ListAgentsArgs(BaseModel):
    pass


def _children(call: ToolCall) -> list[Any]:
    parent = call.agent
    if parent is None:
        return []
    agents = parent.ctx.agents
    session_id = parent.session.id
    return [
        agent
        for agent in agents.list()
        if agent.session.header.meta.get("parent_session") == session_id
    ]


def share_control_tools(ctx: Context) -> Disposer:
    """Hold a share of ``send_message`` and ``list_agents`` while the caller lives: the
    first share registers them (through the ``subagents`` service's context, so they
    outlive any one instance), the last one to go removes them. The exact disposer."""
    state = _shared(ctx)
    home: Context = ctx.subagents.home_ctx

    async def send_message(args: SendMessageArgs, call: ToolCall) -> str | ToolResult:
        for child in _children(call):
            if child.id == args.subagent_id:
                if not args.message.strip():
                    return ToolResult(
                        "Error: invalid message: expected a non-empty string",
                        True,
                        "INVALID_ARGS",
                    )
                child.send(args.message)
                return f"message queued as the next turn for subagent {child.id}"
        raise SubagentNotFoundError(
            f'no subagent "{args.subagent_id}" of this agent (list_agents shows them)'
        )

    async def list_agents(args: ListAgentsArgs, call: ToolCall) -> str:
        lines = [
            f"{child.id} [{child.status}] — {state.descriptions.get(child.id, '')}".rstrip()
            for child in _children(call)
        ]
        return "\n".join(lines) or "(no subagents)"

    def body() -> Iterator[Callable[[], None]]:
        if not state.users:
            tools = home.tools

            def register() -> Iterator[Disposer]:
                yield tools.register(
                    Tool(
                        name="send_message",
                        description="Give one of your background subagents more work: "
                        "the message becomes its next turn.",
                        parameters=SendMessageArgs,
                        execute=send_message,
                    )
                )
                yield tools.register(
                    Tool(
                        name="list_agents",
                        description="List your subagents with their status (running or idle).",
                        parameters=ListAgentsArgs,
                        execute=list_agents,
                    )
                )

            state.control = home.effect(register, label="subagent control tools")
        state.users += 1
        yield _release(state)

    return ctx.effect(body, label="subagent control tools share")


def _release(state: _Shared) -> Callable[[], None]:
    def release() -> None:
        state.users -= 1
        if not state.users and state.control is not None:
            state.control()
            state.control = None

    return release
