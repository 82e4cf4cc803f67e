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
        # Undone last to first: the route goes before the client closes.
        yield client.aclose
        self.adapter = OpenAIAdapter(config, client)
        registration: Disposer = self.ctx.llm.register_adapter(config.models, self.adapter)
        yield registration
