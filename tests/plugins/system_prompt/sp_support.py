"""Helpers of the ``SystemPrompt`` service tests: starting it, tool schemas and providers,
and reading an assembly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import dsh
from dsh_system_prompt import (
    AssembleContext,
    PromptAssembly,
    SystemPrompt,
    ToolProvider,
    ToolProviderResult,
    ToolSchema,
)

#: The sections every assembly starts with.
BUILTINS = ["harness:identity", "deployment:persona"]

#: The ``call_next`` of a ``system-prompt/assemble`` listener.
CallNext = Callable[[], Awaitable[PromptAssembly]]


async def start_system_prompt(root: dsh.Context, **config: Any) -> SystemPrompt:
    """Start the ``SystemPrompt`` service on ``root`` with ``config``; the service."""
    await root.plugin(SystemPrompt, config)
    sp: SystemPrompt = root.system_prompt
    return sp


def schema(name: str, description: str = "") -> ToolSchema:
    return ToolSchema(name=name, description=description, parameters={"type": "object"})


def provider(*names: str, description: str = "", known: list[str] | None = None) -> ToolProvider:
    """A tool provider contributing a schema per name (and ``known`` names, if given)."""

    def provide(context: AssembleContext) -> ToolProviderResult:
        return ToolProviderResult(
            schemas=[schema(n, description) for n in names], known_names=known
        )

    return provide


def section_names(assembly: PromptAssembly) -> list[str]:
    return [s.name for s in assembly.sections]


def tool_names(assembly: PromptAssembly) -> list[str]:
    return [t.name for t in assembly.tools]
