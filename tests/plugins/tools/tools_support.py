"""Helpers of the ``dsh_tools`` tests: a runtime with the service and simple tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic import BaseModel

from dsh import Context
from dsh_system_prompt import SystemPrompt
from dsh_tools import Tool, ToolCall, Tools


class NoArgs(BaseModel):
    """No arguments."""


async def answer(args: BaseModel, call: ToolCall) -> str:
    """A tool body answering with the call's id and its arguments."""
    return f"{call.id}: {args.model_dump()}"


def make_tool(
    name: str, parameters: type[BaseModel] = NoArgs, *, execute: Any = answer
) -> Tool[Any]:
    """Tool ``name`` ("the <name> tool") taking ``parameters``; ``execute`` is its body."""
    return Tool(name=name, description=f"the {name} tool", parameters=parameters, execute=execute)


@asynccontextmanager
async def tools_runtime(
    config: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[Context, Tools]]:
    """A root with the system prompt (with ``config``) and the tools service."""
    async with Context() as root:
        await root.plugin(SystemPrompt, config)
        await root.plugin(Tools)
        yield root, root.tools
