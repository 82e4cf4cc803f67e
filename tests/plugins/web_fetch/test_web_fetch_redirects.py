"""Redirects: at most five, any origin, every hop checked like the first."""

from __future__ import annotations

import pytest

from dsh_web import WebBlockedUrlError, WebInvalidUrlError, WebTooManyRedirectsError
from tests.plugins.web.web_support import Page, Seen, Site, serving
from tests.plugins.web_fetch.fetch_support import Network, mounted

pytestmark = pytest.mark.anyio

#: A globally routable address, as far as the fence can tell; the test network routes
#: it to the loopback site, so nothing is ever sent to it.
PUBLIC = "192.88.99.1"


def chain(site: Site, hops: int) -> None:
    """``/hop/0`` redirects to ``/hop/1`` … up to ``/hop/<hops>``, which is a page."""
    for n in range(hops):
        site.redirect(f"/hop/{n}", f"/hop/{n + 1}", status=(301, 302, 303, 307, 308)[n % 5])
    site.page(f"/hop/{hops}", "arrived", content_type="text/plain")


async def test_five_redirects_are_followed(site: Site) -> None:
    chain(site, 5)
    async with mounted(allow_private=True) as web:
        result = await web.fetch(site.url("/hop/0"))
    assert (result.url, result.content) == (site.url("/hop/5"), "arrived")
    assert site.paths == [f"/hop/{n}" for n in range(6)]


async def test_a_sixth_redirect_fails_the_fetch(site: Site) -> None:
    chain(site, 6)
    async with mounted(allow_private=True) as web:
        with pytest.raises(WebTooManyRedirectsError) as info:
            await web.fetch(site.url("/hop/0"))
    assert str(info.value) == (
        f"fetching {site.url('/hop/0')} was redirected more than 5 times (the last hop "
        f"pointed to {site.url('/hop/6')})"
    )
    assert info.value.code == "WEB_TOO_MANY_REDIRECTS"
    assert site.paths == [f"/hop/{n}" for n in range(6)]


async def test_max_redirects_is_configurable(site: Site) -> None:
    chain(site, 1)
    async with mounted(allow_private=True, max_redirects=0) as web:
        with pytest.raises(WebTooManyRedirectsError, match="more than 0 times"):
            await web.fetch(site.url("/hop/0"))


async def test_a_redirect_may_cross_origins(site: Site) -> None:
    with serving() as other:
        other.page("/landing", "<h1>Other</h1>")
        site.redirect("/away", other.url("/landing"))
        async with mounted(allow_private=True) as web:
            result = await web.fetch(site.url("/away"))
    assert (result.url, result.content) == (other.url("/landing"), "# Other\n")


@pytest.mark.parametrize(
    ("location", "error", "message"),
    [
        (
            "ftp://files.test/x",
            WebInvalidUrlError,
            'cannot fetch "ftp://files.test/x": only http:// and https:// URLs can be fetched',
        ),
        (
            "http://user:secret@127.0.0.1/private",
            WebBlockedUrlError,
            'refusing to fetch "http://127.0.0.1/private" with a user name or password in the URL',
        ),
    ],
)
async def test_each_hop_passes_the_url_rules(
    site: Site, location: str, error: type[Exception], message: str
) -> None:
    site.redirect("/jump", location)
    async with mounted(allow_private=True) as web:
        with pytest.raises(error) as info:
            await web.fetch(site.url("/jump"))
    assert str(info.value) == message
    assert site.paths == ["/jump"]


async def test_a_redirect_into_the_network_is_refused_before_connecting(site: Site) -> None:
    network = Network(
        names={"www.site.test": [PUBLIC], "intranet.test": ["10.20.30.40"]},
        routes={PUBLIC: site.port},
    )
    site.page("/", "<h1>Public</h1>")
    site.redirect("/inside", "http://intranet.test/admin")
    async with mounted(network) as web:
        first = await web.fetch("http://www.site.test/")
        with pytest.raises(WebBlockedUrlError) as info:
            await web.fetch("http://www.site.test/inside")
    assert first.content == "# Public\n"
    assert str(info.value) == (
        "refusing to connect to intranet.test (10.20.30.40): loopback, private, link-local "
        "and metadata addresses are not fetched (set allow_private: true on web-fetch to "
        "fetch them)"
    )
    assert network.looked_up == ["www.site.test", "intranet.test"]
    assert network.attempts == [(PUBLIC, 80)]  # one connection, kept alive for both
    assert site.paths == ["/", "/inside"]


async def test_a_redirect_without_a_location_is_the_result(site: Site) -> None:
    site.page("/moved", "<p>moved, but where?</p>", status=302)
    async with mounted(allow_private=True) as web:
        result = await web.fetch(site.url("/moved"))
    assert (result.status_code, result.content) == (302, "moved, but where?\n")


async def test_cookies_are_never_kept_or_sent(site: Site) -> None:
    site.page("/login", "ok", content_type="text/plain", headers={"Set-Cookie": "sid=1; Path=/"})
    site.redirect("/bounce", "/next")
    site.answer("/next", lambda seen: Page(b"next", headers={"Content-Type": "text/plain"}))
    async with mounted(allow_private=True) as web:
        await web.fetch(site.url("/login"))
        await web.fetch(site.url("/bounce"))
    assert [seen.headers.get("cookie") for seen in site.requests] == [None, None, None]


async def test_requests_say_who_asks_and_what_they_accept(site: Site) -> None:
    seen: list[Seen] = []

    def record(request: Seen) -> Page:
        seen.append(request)
        return Page(b"hi", headers={"Content-Type": "text/plain"})

    site.answer("/who", record)
    async with mounted(allow_private=True, user_agent="tester/1") as web:
        await web.fetch(site.url("/who"))
    (request,) = seen
    assert request.headers["user-agent"] == "tester/1"
    assert request.headers["accept"].startswith("text/html, application/xhtml+xml")
