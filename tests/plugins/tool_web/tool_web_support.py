"""A runtime with the web tools over stand-in providers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from dsh import Context, Fiber
from dsh_system_prompt import SystemPrompt
from dsh_tool_web import ToolWeb
from dsh_tools import ToolResult, Tools
from dsh_web import FetchProvider, SearchProvider, Web


@dataclass
class WebTools:
    root: Context
    fiber: Fiber

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        result: ToolResult = await self.root.tools.execute(name, arguments)
        return result


@asynccontextmanager
async def web_tools(
    *providers: FetchProvider | SearchProvider, **config: Any
) -> AsyncIterator[WebTools]:
    """``system-prompt``, ``tools``, ``web`` with ``providers`` registered, and
    ``tool-web`` with ``config``."""
    async with Context() as root:
        await root.plugin(SystemPrompt)
        await root.plugin(Tools)
        await root.plugin(Web)
        web: Web = root.web
        for provider in providers:
            if hasattr(provider, "fetch"):
                web.register_fetch_provider(provider)  # type: ignore[arg-type]
            else:
                web.register_search_provider(provider)
        fiber = await root.plugin(ToolWeb, config)
        yield WebTools(root, fiber)
