"""The ``web-searxng`` plugin: an HTTP client and the SearXNG search provider on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from dsh import Disposer, Plugin

from ._config import SearxngConfig
from ._provider import SearxngProvider

__all__ = ["SearxngSearch"]


class SearxngSearch(Plugin):
    """Registers a :class:`SearxngProvider` with the ``web`` service (which it injects)."""

    name = "web-searxng"
    Config = SearxngConfig
    inject = ("web",)

    config: SearxngConfig
    #: The provider registered (set by :meth:`setup`).
    provider: SearxngProvider

    def setup(self) -> Iterator[Any]:
        config = self.config
        client = httpx.AsyncClient(
            timeout=None,  # the provider bounds each search instead
            follow_redirects=True,
            headers={"Accept": "application/json", **config.headers},
        )
        provider = self.provider = SearxngProvider(config, client)

        async def close_client() -> None:
            await provider.inflight.idle()
            await client.aclose()

        yield close_client
        registration: Disposer = self.ctx.web.register_search_provider(provider)
        yield registration
