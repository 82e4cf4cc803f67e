"""The address fence and the URL rules: nothing private is reached, and a refused
fetch sends nothing.

Private and metadata addresses appear only in the test network's name table (never as
URLs), and that network connects nowhere but the loopback site.
"""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from dsh_web import WebBlockedUrlError, WebFetchError, WebInvalidUrlError
from dsh_web_fetch import MAX_URL_LENGTH, METADATA_ADDRESSES, is_blocked, literal_address
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
    # IPv4 of every kind refused, whatever the version of Python's tables
    "240.0.0.1",  # reserved
    "233.252.0.1",  # multicast
    "192.0.0.8",  # IETF protocol assignments
    "192.0.2.1",  # documentation
    # IPv6 that Python calls global though it is not
    "::127.0.0.1",  # IPv4-compatible (deprecated, reserved)
    "::8.8.8.8",  # ... whatever IPv4 address it holds
    "::ffff:0:127.0.0.1",  # IPv4-translated (reserved)
    "::ffff:0:8.8.8.8",
    "64:ff9b:1::7f00:1",  # local-use NAT64 (RFC 8215)
    "64:ff9b:1::808:808",
    "fec0::1",  # site-local (deprecated)
    "ff0e::1",  # global-scope multicast
    "5f00::1",  # SRv6 SIDs
    "4000::1",  # reserved
    "3fff::1",  # documentation (RFC 9637)
    # IPv6 that delivers to an IPv4 host refused by it
    "::ffff:0.0.0.0",
    "::ffff:7f00:1",  # mapped 127.0.0.1, written in hex
    "64:ff9b::",  # NAT64 of 0.0.0.0
    "64:ff9b::7f00:1",
    "64:ff9b::a83f:8110",  # NAT64 of Azure's wire server, a public address
    "2002::",  # 6to4 of 0.0.0.0
    "2002:7f00:1::1",
    "2002:a9fe:a9fe::1",
    # the rest of the space
    "2001::1",  # Teredo
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo, public server and client
    "2001:2::1",  # benchmarking
    "2001:db8::1",  # documentation
    "100::1",  # discard
    "fe80::1%eth0",  # link-local, with a zone
    "ff02::1%2",
]
ALLOWED = [
    PUBLIC,
    "1.1.1.1",
    "8.8.8.8",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:82b::200e",
    "::ffff:8.8.8.8",
    "::ffff:101:101",
    "64:ff9b::808:808",  # DNS64 on an IPv6-only network
    "2002:808:808::1",  # 6to4 behind a public router
]


@pytest.mark.parametrize("address", BLOCKED)
def test_private_and_metadata_addresses_are_blocked(address: str) -> None:
    assert is_blocked(ip_address(address))


@pytest.mark.parametrize("address", ALLOWED)
def test_globally_reachable_addresses_pass(address: str) -> None:
    assert not is_blocked(ip_address(address))


def test_every_metadata_address_is_blocked() -> None:
    assert all(is_blocked(address) for address in METADATA_ADDRESSES)


SPELLED_URLS = [
    ("http://2130706433/", "2130706433 (127.0.0.1)"),
    ("http://0x7f000001/", "0x7f000001 (127.0.0.1)"),
    ("http://017700000001/", "017700000001 (127.0.0.1)"),
    ("http://0x7f.1/", "0x7f.1 (127.0.0.1)"),
    ("http://0177.1/", "0177.1 (127.0.0.1)"),
    ("http://127.1:8080/", "127.1 (127.0.0.1)"),
    ("http://127.0.0.1./", "127.0.0.1. (127.0.0.1)"),
    ("http://0/", "0 (0.0.0.0)"),
    ("http://0xa9.0xfe.0xa9.0xfe/", "0xa9.0xfe.0xa9.0xfe (169.254.169.254)"),
    ("http://10.1/", "10.1 (10.0.0.1)"),
    ("http://[::127.0.0.1]/", "::127.0.0.1 (::7f00:1)"),
    ("http://[::ffff:0:127.0.0.1]/", "::ffff:0:127.0.0.1 (::ffff:0:7f00:1)"),
    ("http://[64:ff9b:1::7f00:1]/", "64:ff9b:1::7f00:1"),
    ("http://[64:ff9b::7f00:1]/", "64:ff9b::7f00:1"),
    ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1 (::ffff:7f00:1)"),
    ("http://[2002:7f00:1::]/", "2002:7f00:1::"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "2001:0:4136:e378:8000:63bf:3fff:fdd2"),
    ("https://[0:0:0:0:0:0:0:1]/", "0:0:0:0:0:0:0:1 (::1)"),
    ("http://[::]/", "::"),
    ("http://[fec0::1]/", "fec0::1"),
    ("http://[ff02::1]/", "ff02::1"),
    ("http://[fe80::1%25eth0]/", "fe80::1%25eth0"),
]


@pytest.mark.parametrize(("url", "shown"), SPELLED_URLS)
async def test_an_address_in_any_spelling_is_refused_unresolved_and_unconnected(
    url: str, shown: str
) -> None:
    network = Network(fail_unrouted=True)
    async with mounted(network) as web:
        with pytest.raises(WebBlockedUrlError) as info:
            await web.fetch(url)
    assert str(info.value) == (
        f"refusing to connect to {shown}: loopback, private, link-local and metadata "
        "addresses are not fetched (set allow_private: true on web-fetch to fetch them)"
    )
    assert network.looked_up == []  # read as an address: no resolver, no DNS query
    assert network.attempts == []


@pytest.mark.parametrize("address", BLOCKED)
async def test_a_name_resolving_to_any_refused_address_is_not_connected(address: str) -> None:
    network = Network(names={"spelled.test": [address]}, fail_unrouted=True)
    async with mounted(network) as web:
        with pytest.raises(WebBlockedUrlError, match=r"^refusing to connect to spelled\.test \("):
            await web.fetch("https://spelled.test/")
    assert network.looked_up == ["spelled.test"]
    assert network.attempts == []


@pytest.mark.parametrize("url", ["http://0x7f.1/admin", "http://[::127.0.0.1]/admin"])
async def test_a_redirect_to_a_spelled_address_is_refused(site: Site, url: str) -> None:
    network = Network(
        names={"www.site.test": [PUBLIC]}, routes={PUBLIC: site.port}, fail_unrouted=True
    )
    site.redirect("/go", url)
    async with mounted(network) as web:
        with pytest.raises(WebBlockedUrlError):
            await web.fetch("http://www.site.test/go")
    assert network.attempts == [(PUBLIC, 80)]
    assert site.paths == ["/go"]


@pytest.mark.parametrize("answer", ["64:ff9b::808:808", "::ffff:8.8.8.8"])
async def test_an_ipv6_form_of_a_public_ipv4_address_is_fetched(site: Site, answer: str) -> None:
    site.page("/", "reached", content_type="text/plain")
    canonical = str(ip_address(answer))
    network = Network(
        names={"www.site.test": [answer]}, routes={canonical: site.port}, fail_unrouted=True
    )
    async with mounted(network) as web:
        assert (await web.fetch("http://www.site.test/")).content == "reached"
    assert network.attempts == [(canonical, 80)]


async def test_allow_private_connects_to_the_address_a_spelling_stands_for(site: Site) -> None:
    site.page("/", "inside", content_type="text/plain")
    network = Network(routes={"127.0.0.1": site.port}, fail_unrouted=True)
    async with mounted(network, allow_private=True) as web:
        assert (await web.fetch("http://0x7f.1/")).content == "inside"
    assert network.looked_up == []
    assert network.attempts == [("127.0.0.1", 80)]


async def test_a_resolver_answer_that_is_not_an_address_is_not_connected() -> None:
    # Handed on, a name would be resolved again by the connection, unchecked.
    network = Network(names={"odd.test": ["localhost"]}, fail_unrouted=True)
    async with mounted(network, allow_private=True) as web:
        with pytest.raises(WebFetchError) as info:
            await web.fetch("http://odd.test/")
    assert str(info.value) == (
        "fetching http://odd.test/ failed: odd.test resolved to 'localhost', which is not an "
        "address"
    )
    assert network.attempts == []


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("8.8.8.8", "8.8.8.8"),
        ("134744072", "8.8.8.8"),
        ("0x8.0x8.0x8.0x8", "8.8.8.8"),
        ("010.010.010.010", "8.8.8.8"),
        ("8.8.2056", "8.8.8.8"),
        ("8.8.8.8.", "8.8.8.8"),
        ("::ffff:8.8.8.8", "::ffff:808:808"),
        ("fe80::1%eth0", "fe80::1%eth0"),
    ],
)
def test_a_host_spelling_an_address_is_read_as_it(host: str, address: str) -> None:
    assert literal_address(host) == ip_address(address)


@pytest.mark.parametrize(
    "host",
    ["www.site.test", "8.8.8.8 x", "0x", "1.2.3.4.5", "4294967296", "1.2.3.256", "8.8.8.8.."],
)
def test_a_host_spelling_no_address_is_a_name(host: str) -> None:
    assert literal_address(host) is None


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
