"""Running ``web-fetch`` in a test, with name resolution and connections under control.

``Network`` stands in for the resolver and the socket layer at once: host names resolve
from its table, and a connection is opened only to an address routed to a loopback
port; any other attempt is recorded and fails (or, with ``fail_unrouted``, fails the
test at once). So a test can name hosts that "resolve" to private or public addresses
while no packet ever leaves 127.0.0.1.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpcore
import pytest

from dsh import Context
from dsh_web import FetchResult, Web
from dsh_web_fetch import HttpFetcher, WebFetch


@dataclass
class Network:
    """Resolves from ``names`` and connects only to ``routes`` (address -> loopback
    port); ``attempts`` records every ``(address, port)`` a connection was tried to, and
    with ``fail_unrouted`` an attempt to any other address fails the test."""

    names: dict[str, list[str]] = field(default_factory=dict)
    routes: dict[str, int] = field(default_factory=dict)
    fail_unrouted: bool = False
    attempts: list[tuple[str, int]] = field(default_factory=list)
    looked_up: list[str] = field(default_factory=list)

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        self.looked_up.append(host)
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.names[host]

    def backend(self) -> httpcore.AsyncNetworkBackend:
        return _Routed(self)


class _Routed(httpcore.AsyncNetworkBackend):
    def __init__(self, network: Network) -> None:
        self.network = network
        self.loopback = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.network.attempts.append((host, port))
        target = self.network.routes.get(host)
        if target is None and self.network.fail_unrouted:
            pytest.fail(f"test network: a connection to {host}:{port} was attempted")
        if target is None:
            raise httpcore.ConnectError(f"test network: no route to {host}")
        return await self.loopback.connect_tcp("127.0.0.1", target, timeout=timeout)


#: A test CA and a certificate it signed for ``www.site.test`` (test use only).
TLS_FILES = Path(__file__).parent / "tls"


def site_tls() -> ssl.SSLContext:
    """The server side of ``www.site.test``'s certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS_FILES / "site.pem", TLS_FILES / "site.key")
    return context


def fenced_by(network: Network) -> type[WebFetch]:
    """``WebFetch`` resolving and connecting through ``network``, and trusting the
    test CA."""

    class Fenced(WebFetch):
        def ssl_context(self) -> ssl.SSLContext:
            return ssl.create_default_context(cafile=TLS_FILES / "ca.pem")

        async def resolve(self, host: str, port: int) -> Sequence[str]:
            return await network.resolve(host, port)

        def network_backend(self) -> httpcore.AsyncNetworkBackend:
            return network.backend()

    return Fenced


@dataclass
class Mounted:
    root: Context
    web: Web
    fetcher: HttpFetcher

    async def fetch(self, url: str) -> FetchResult:
        return await self.web.fetch(url)


@asynccontextmanager
async def mounted(network: Network | None = None, **config: Any) -> AsyncIterator[Mounted]:
    """A runtime with ``web`` and ``web-fetch`` (``config``); without ``network`` the
    real resolver and sockets are used, so the test must only name 127.0.0.1."""
    plugin = WebFetch if network is None else fenced_by(network)
    async with Context() as root:
        await root.plugin(Web)
        await root.plugin(plugin, config)
        web: Web = root.web
        fetcher = web.fetch_provider()
        assert isinstance(fetcher, HttpFetcher)
        yield Mounted(root, web, fetcher)
