"""The address fence and the URL rules: nothing private is reached, and a refused
fetch sends nothing.

Private and metadata addresses appear only in the test network's name table (never as
URLs), and that network connects nowhere but the loopback site.
"""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from dsh_web import WebBlockedUrlError, WebFetchError, WebInvalidUrlError
from dsh_web_fetch import MAX_URL_LENGTH, METADATA_ADDRESSES, is_blocked
from tests.plugins.web.web_support import Site, serving
from tests.plugins.web_fetch.fetch_support import Network, mounted, site_tls

pytestmark = pytest.mark.anyio

PUBLIC = "192.88.99.1"
PUBLIC_TOO = "192.88.99.2"

BLOCKED = [
    "127.0.0.1",
    "127.8.9.10",
    "0.0.0.0",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.0.7",
    "169.254.169.254",
    "100.64.0.1",
    "100.100.100.200",
    "168.63.129.16",
    "192.0.0.192",
    "198.18.0.1",
    "224.0.0.251",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fc00::5",
    "fd00:ec2::254",
    "ff02::1",
    "::ffff:10.0.0.1",
    "::ffff:127.0.0.1",
    "2002:a00:1::",  # 6to4 of 10.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
]
ALLOWED = [PUBLIC, "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", BLOCKED)
def test_private_and_metadata_addresses_are_blocked(address: str) -> None:
    assert is_blocked(ip_address(address))


@pytest.mark.parametrize("address", ALLOWED)
def test_globally_reachable_addresses_pass(address: str) -> None:
    assert not is_blocked(ip_address(address))


def test_every_metadata_address_is_blocked() -> None:
    assert all(is_blocked(address) for address in METADATA_ADDRESSES)


async def test_by_default_the_loopback_site_is_never_reached(site: Site) -> None:
    site.page("/", "secret")
    async with mounted() as web:
        for url in (site.url("/"), f"http://localhost:{site.port}/", f"http://[::1]:{site.port}/"):
            with pytest.raises(WebBlockedUrlError) as info:
                await web.fetch(url)
            assert "loopback, private, link-local and metadata addresses" in str(info.value)
    assert site.requests == []


async def test_a_literal_address_is_named_once(site: Site) -> None:
    async with mounted() as web:
        with pytest.raises(WebBlockedUrlError) as info:
            await web.fetch(site.url("/"))
    assert str(info.value).startswith("refusing to connect to 127.0.0.1: loopback")


@pytest.mark.parametrize(
    ("names", "shown"),
    [
        (["10.20.30.40"], "10.20.30.40"),
        (["169.254.169.254"], "169.254.169.254"),
        (["fd00:ec2::254"], "fd00:ec2::254"),
        ([PUBLIC, "192.168.0.10"], "192.168.0.10"),  # one bad address spoils the name
    ],
)
async def test_a_name_resolving_inside_the_network_is_refused_unconnected(
    names: list[str], shown: str
) -> None:
    network = Network(names={"intranet.test": names}, routes={PUBLIC: 9})
    async with mounted(network) as web:
        with pytest.raises(WebBlockedUrlError) as info:
            await web.fetch("https://intranet.test/")
    assert str(info.value).startswith(f"refusing to connect to intranet.test ({shown}):")
    assert info.value.code == "WEB_BLOCKED_URL"
    assert network.attempts == []


async def test_a_public_name_is_fetched_at_the_address_that_was_checked(site: Site) -> None:
    site.page("/page", "<h1>Hello</h1>")
    network = Network(names={"www.site.test": [PUBLIC]}, routes={PUBLIC: site.port})
    async with mounted(network) as web:
        result = await web.fetch("http://www.site.test/page")
    assert result.content == "# Hello\n"
    assert network.attempts == [(PUBLIC, 80)]
    assert site.requests[0].headers["host"] == "www.site.test"


async def test_the_next_address_is_tried_when_one_does_not_answer(site: Site) -> None:
    site.page("/", "up", content_type="text/plain")
    network = Network(names={"www.site.test": [PUBLIC, PUBLIC_TOO]}, routes={PUBLIC_TOO: site.port})
    async with mounted(network) as web:
        assert (await web.fetch("http://www.site.test:8080/")).content == "up"
    assert network.attempts == [(PUBLIC, 8080), (PUBLIC_TOO, 8080)]


async def test_allow_private_lets_a_private_name_through() -> None:
    network = Network(names={"intranet.test": ["10.20.30.40"]})
    async with mounted(network, allow_private=True) as web:
        with pytest.raises(WebFetchError, match=r"no route to 10\.20\.30\.40"):
            await web.fetch("http://intranet.test/")
    # The fence let it pass; the test network, which reaches nothing, refused it.
    assert network.attempts == [("10.20.30.40", 80)]


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        ({}, "cannot resolve nowhere.test: [Errno -2] Name or service not known"),
        ({"nowhere.test": []}, "nowhere.test resolves to no address"),
    ],
)
async def test_a_name_that_does_not_resolve_fails_the_fetch(
    names: dict[str, list[str]], problem: str
) -> None:
    network = Network(names=names)
    async with mounted(network) as web:
        with pytest.raises(WebFetchError) as info:
            await web.fetch("http://nowhere.test/")
    assert str(info.value) == f"fetching http://nowhere.test/ failed: {problem}"
    assert info.value.code == "WEB_FETCH_FAILED"
    assert network.attempts == []


@pytest.mark.parametrize(
    ("url", "error", "message"),
    [
        (
            "ftp://files.test/a",
            WebInvalidUrlError,
            'cannot fetch "ftp://files.test/a": only http:// and https:// URLs can be fetched',
        ),
        (
            "files.test/a",
            WebInvalidUrlError,
            'cannot fetch "files.test/a": only http:// and https:// URLs can be fetched',
        ),
        ("http:///a", WebInvalidUrlError, 'cannot fetch "http:///a": the URL has no host'),
        ("http://[::1/", WebInvalidUrlError, 'cannot fetch "http://[::1/": Invalid port'),
        (
            "https://me:pw@www.site.test/a?b=1",
            WebBlockedUrlError,
            'refusing to fetch "https://www.site.test/a?b=1" with a user name or password in '
            "the URL",
        ),
        (
            "http://www.site.test/" + "a" * MAX_URL_LENGTH,
            WebInvalidUrlError,
            f"cannot fetch a URL of {MAX_URL_LENGTH + 21} characters: the limit is 2048",
        ),
    ],
)
async def test_the_url_rules_refuse_before_any_lookup(
    url: str, error: type[Exception], message: str
) -> None:
    network = Network(names={"www.site.test": [PUBLIC]})
    async with mounted(network) as web:
        with pytest.raises(error) as info:
            await web.fetch(url)
    assert str(info.value).startswith(message)
    assert network.looked_up == []
    assert network.attempts == []


async def test_https_is_verified_for_the_url_host_though_an_address_is_connected() -> None:
    network = Network(
        names={"www.site.test": [PUBLIC], "other.test": [PUBLIC_TOO]},
    )
    with serving(site_tls()) as secure:
        secure.page("/", "<h1>Secure</h1>")
        network.routes = {PUBLIC: secure.port, PUBLIC_TOO: secure.port}
        async with mounted(network) as web:
            result = await web.fetch("https://www.site.test/")
            # Same server, same certificate, but the URL names another host.
            with pytest.raises(WebFetchError, match="certificate verify failed"):
                await web.fetch("https://other.test/")
    assert result.content == "# Secure\n"
    assert network.attempts == [(PUBLIC, 443), (PUBLIC_TOO, 443)]
    assert secure.paths == ["/"]
