"""The ``web-fetch`` plugin: a fenced HTTP client and the ``http`` fetch provider on it."""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Sequence
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpcore
import httpx

from dsh import Disposer, Plugin

from ._config import WebFetchConfig
from ._convert import load_converter
from ._fence import FencedBackend, FencedTransport, resolve_host
from ._fetcher import ACCEPT, HttpFetcher

__all__ = ["WebFetch"]


class WebFetch(Plugin):
    """Registers an :class:`HttpFetcher` with the ``web`` service (which it injects)."""

    name = "web-fetch"
    Config = WebFetchConfig
    inject = ("web",)

    config: WebFetchConfig
    #: The provider registered (set by :meth:`setup`).
    fetcher: HttpFetcher

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        """The addresses ``host`` resolves to, each checked before a connection; a
        subclass may resolve differently (the tests answer from a table)."""
        return await resolve_host(host, port)

    def network_backend(self) -> httpcore.AsyncNetworkBackend:
        """What connections to checked addresses are opened through; a subclass may
        replace it (the tests refuse every connection, or route one to loopback)."""
        return httpcore.AnyIOBackend()

    def ssl_context(self) -> ssl.SSLContext:
        """How HTTPS servers are verified: certifi's CAs, against the URL's host name; a
        subclass may trust other CAs (the tests trust their own)."""
        return httpx.create_ssl_context(trust_env=False)

    def setup(self) -> Iterator[Any]:
        config = self.config
        convert = load_converter()
        backend = FencedBackend(
            allow_private=config.allow_private,
            resolve=self.resolve,
            inner=self.network_backend(),
        )
        client = httpx.AsyncClient(
            transport=FencedTransport(backend, self.ssl_context()),
            follow_redirects=False,
            timeout=None,  # the fetcher bounds the whole fetch instead
            trust_env=False,
            # Cookies are never kept: one fetch must not carry another's session.
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            headers={"User-Agent": config.user_agent, "Accept": ACCEPT},
        )
        fetcher = self.fetcher = HttpFetcher(config, client, convert)

        async def close_client() -> None:
            # Fetches still running finish (or are cancelled by their owners) first.
            await fetcher.inflight.idle()
            await client.aclose()

        # Undone last to first: the provider goes, then the client closes.
        yield close_client
        registration: Disposer = self.ctx.web.register_fetch_provider(fetcher)
        yield registration
