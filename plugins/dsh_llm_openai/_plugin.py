"""The ``llm-openai`` plugin: one adapter, one HTTP client, both undone on unload."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from dsh import Disposer, Plugin

from ._adapter import OpenAIAdapter
from ._config import OpenAICompatibleConfig

__all__ = ["OpenAICompatible"]


class OpenAICompatible(Plugin):
    """Serves ``config.models`` from an OpenAI-compatible chat-completions server."""

    name = "llm-openai"
    Config = OpenAICompatibleConfig
    inject = ("llm",)

    config: OpenAICompatibleConfig
    #: The adapter registered for the configured models (set by :meth:`setup`).
    adapter: OpenAIAdapter

    def setup(self) -> Iterator[Any]:
        config = self.config
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(
                config.read_timeout,
                connect=config.connect_timeout,
                pool=config.connect_timeout,
            ),
            follow_redirects=False,
        )
        adapter = self.adapter = OpenAIAdapter(config, client)

        async def close_client() -> None:
            # Turns still streaming end first (their agents are being disposed too,
            # or they finish): a client closed under them would fail them instead.
            await adapter.inflight.idle()
            await client.aclose()

        # Undone last to first: the route goes, then the client closes.
        yield close_client
        registration: Disposer = self.ctx.llm.register_adapter(config.models, adapter)
        yield registration
