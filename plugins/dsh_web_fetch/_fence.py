"""The address fence: every connection goes to a resolved address that was checked.

The check sits where the socket is opened, in an httpcore network backend: the host of
each new connection is read as an address (in any spelling the system resolver would
accept) or resolved once, every address it stands for is checked, and the connection is
made to one of those same addresses. So a redirect to another host, a
DNS name that points inside the network, and a name whose answer changes between a
check and the connect (DNS rebinding) are all caught at the same place. TLS still
verifies the certificate for the URL's host name: httpcore passes it as the server
name whatever address the stream is connected to.
"""

from __future__ import annotations

import contextlib
import re
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
    "literal_address",
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

#: The global unicast space: IANA has allotted no unicast address outside it, so
#: everything else (reserved, ULA, link- and site-local, multicast, IPv4-compatible and
#: -translated, local-use NAT64) is refused without consulting Python's tables.
_GLOBAL_UNICAST = ip_network("2000::/3")
#: The well-known NAT64 prefix (RFC 6052): the last 32 bits are the IPv4 destination.
_NAT64 = ip_network("64:ff9b::/96")
#: Ranges that are not globally reachable, named here because Python's tables differ
#: across versions: IETF protocol assignments (IPv4 192.0.0.0/24; IPv6 2001::/23, which
#: holds Teredo's 2001::/32) and IPv6 documentation (3fff::/20, RFC 9637).
_NOT_GLOBAL = tuple(ip_network(text) for text in ("192.0.0.0/24", "2001::/23", "3fff::/20"))
#: A host the C resolver reads as an IPv4 address (``inet_aton``): one to four numbers,
#: each decimal, octal (``0177``) or hex (``0x7f``), the last filling the bytes left
#: (``2130706433``, ``0x7f.1``, ``127.1``), and a final dot as browsers allow.
_NUMERIC_HOST = re.compile(
    r"(?:0[xX][0-9a-fA-F]+|[0-9]+)(?:\.(?:0[xX][0-9a-fA-F]+|[0-9]+)){0,3}\.?"
)


def literal_address(host: str) -> Address | None:
    """The address ``host`` spells, or None for a name: an IPv4 or IPv6 literal (with a
    zone, ``fe80::1%eth0``), or IPv4 in a form ``inet_aton`` reads (``2130706433``,
    ``0x7f.1``, ``0177.0.0.1``, ``127.1``), which the system resolver would otherwise
    turn into an address the fence never saw spelled out."""
    with contextlib.suppress(ValueError):
        return ip_address(host)
    if _NUMERIC_HOST.fullmatch(host):
        with contextlib.suppress(OSError):
            return IPv4Address(socket.inet_aton(host.removesuffix(".")))
    return None


def _carried(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 host a packet to ``address`` is delivered to, when it is one: an
    IPv4-mapped address (the socket speaks IPv4), a well-known NAT64 address (the
    translator forwards to it) and a 6to4 address (tunnelled to its router)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def is_blocked(address: Address) -> bool:
    """Whether a fetch may not connect to ``address``: only globally reachable unicast
    passes. Refused: loopback, private, link-local, shared, reserved, unspecified,
    multicast, documentation, IETF-assigned and metadata addresses. An IPv6 address that
    delivers to an IPv4 host (mapped, NAT64 ``64:ff9b::/96``, 6to4) is judged by that
    host; every other IPv6 address outside ``2000::/3`` is refused, which takes in the
    IPv4-compatible ``::/96``, IPv4-translated ``::ffff:0:0:0/96`` and local-use NAT64
    ``64:ff9b:1::/48`` forms, whatever IPv4 address they hold; Teredo (``2001::/32``)
    is refused with the IETF assignments around it."""
    if isinstance(address, IPv6Address):
        carried = _carried(address)
        if carried is not None:
            return is_blocked(carried)
        reachable = address in _GLOBAL_UNICAST and address.is_global
    else:
        reachable = address.is_global and not address.is_multicast
    return (
        not reachable
        or address in METADATA_ADDRESSES
        or any(address in network for network in _NOT_GLOBAL)
    )


async def resolve_host(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (an address literal resolves to itself)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class FencedBackend(httpcore.AsyncNetworkBackend):
    """Opens TCP connections only to checked addresses.

    A host that spells an address (:func:`literal_address`) is that address; any other
    is a name, which ``resolve`` turns into addresses. Unless ``allow_private``, a host
    with any blocked address (:func:`is_blocked`) is refused with
    :class:`WebBlockedUrlError` before anything is sent. The connection is then opened
    through ``inner`` to those addresses, written out plainly, in order, until one
    answers.
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
        literal = literal_address(host)
        addresses = [literal] if literal is not None else await self._addresses(host, port)
        if not self._allow_private:
            for address in addresses:
                if is_blocked(address):
                    where = host if str(address) == host else f"{host} ({address})"
                    raise WebBlockedUrlError(
                        f"refusing to connect to {where}: loopback, private, link-local and "
                        "metadata addresses are not fetched (set allow_private: true on "
                        "web-fetch to fetch them)"
                    )

        async def connect(address: Address) -> httpcore.AsyncNetworkStream:
            return await self._inner.connect_tcp(
                str(address),
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

    async def _addresses(self, host: str, port: int) -> list[Address]:
        """What the resolver answers for the name ``host``; an answer that is not an
        address (which the connection would resolve again, unchecked) fails it."""
        try:
            answers = list(await self._resolve(host, port))
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not answers:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        addresses: list[Address] = []
        for text in answers:
            try:
                addresses.append(ip_address(text))
            except ValueError:
                raise httpcore.ConnectError(
                    f"{host} resolved to {text!r}, which is not an address"
                ) from None
        return addresses


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
