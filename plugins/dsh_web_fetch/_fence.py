"""The address fence: every connection goes to a resolved address that was checked.

The check sits where the socket is opened, in an httpcore network backend: the host of
each new connection is resolved once, every address it resolves to is checked, and the
connection is made to one of those same addresses. So a redirect to another host, a
DNS name that points inside the network, and a name whose answer changes between a
check and the connect (DNS rebinding) are all caught at the same place. TLS still
verifies the certificate for the URL's host name: httpcore passes it as the server
name whatever address the stream is connected to.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

import anyio
import httpcore
import httpx

from dsh_web import WebBlockedUrlError

__all__ = [
    "METADATA_ADDRESSES",
    "FencedBackend",
    "FencedTransport",
    "Resolver",
    "is_blocked",
    "resolve_host",
]

Address = IPv4Address | IPv6Address

#: How a host name becomes addresses: ``await resolve(host, port)`` -> address strings.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

#: Cloud instance-metadata endpoints. Most are link-local or private anyway; Azure's
#: wire server is a public address, so it is listed by name.
METADATA_ADDRESSES = frozenset(
    ip_address(text)
    for text in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, …
        "169.254.170.2",  # AWS ECS task metadata
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wire server
        "192.0.0.192",  # Oracle Cloud
        "fd00:ec2::254",  # AWS over IPv6
    )
)

_NAT64 = ip_network("64:ff9b::/96")


def _embedded(address: Address) -> Address:
    """The IPv4 address an IPv6 address stands for (mapped, 6to4, NAT64), else itself."""
    if isinstance(address, IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def is_blocked(address: Address) -> bool:
    """Whether a fetch may not connect to ``address``: loopback, private, link-local,
    shared, reserved, unspecified, multicast or a metadata endpoint, including an IPv4
    address of these kinds inside an IPv6 one. Only globally reachable unicast passes."""
    target = _embedded(address)
    return target in METADATA_ADDRESSES or target.is_multicast or not target.is_global


async def resolve_host(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (an address literal resolves to itself)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class FencedBackend(httpcore.AsyncNetworkBackend):
    """Opens TCP connections only to checked addresses.

    ``resolve`` turns the host into addresses; unless ``allow_private``, a host with any
    blocked address (:func:`is_blocked`) is refused with :class:`WebBlockedUrlError`
    before anything is sent. The connection is then opened through ``inner`` to those
    addresses, in order, until one answers.
    """

    def __init__(
        self, *, allow_private: bool, resolve: Resolver, inner: httpcore.AsyncNetworkBackend
    ) -> None:
        self._allow_private = allow_private
        self._resolve = resolve
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = list(await self._resolve(host, port))
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        if not self._allow_private:
            for text in addresses:
                if is_blocked(ip_address(text)):
                    where = host if text == host else f"{host} ({text})"
                    raise WebBlockedUrlError(
                        f"refusing to connect to {where}: loopback, private, link-local and "
                        "metadata addresses are not fetched"
                    )

        async def connect(address: str) -> httpcore.AsyncNetworkStream:
            return await self._inner.connect_tcp(
                address,
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            )

        *others, last = addresses
        for address in others:
            with contextlib.suppress(httpcore.ConnectError):
                return await connect(address)
        return await connect(last)


class FencedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (its request mapping, error types and streams) over a
    connection pool that connects through ``backend`` and verifies TLS with
    ``ssl_context``; proxies and environment settings are not used."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        # httpx takes no network backend, so the pool it built (unused, no connection
        # made) is replaced by the same kind of pool connecting through ours.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            network_backend=backend,
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
        )
