"""The ``web`` seam: provider registries with exact disposers, and choosing a provider."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dsh import ConfigError, Context, Disposer
from dsh_web import (
    FetchResult,
    SearchResult,
    Web,
    WebProviderAmbiguousError,
    WebProviderError,
    WebProviderUnavailableError,
)
from tests.plugins.web.web_support import StubFetcher, StubSearcher, hits

pytestmark = pytest.mark.anyio

PAGE = FetchResult(url="https://a.test/", status_code=200, content_type="text/plain", content="hi")


def registered(web: Web) -> tuple[list[str], list[str]]:
    return [p.id for p in web.fetch_providers()], [p.id for p in web.search_providers()]


async def test_the_only_provider_of_each_kind_answers() -> None:
    fetcher = StubFetcher(pages={"https://a.test/": PAGE})
    found = SearchResult(hits=hits(("A", "https://a.test/")), answer="yes")
    searcher = StubSearcher(results={"q": found})
    async with Context() as root:
        await root.plugin(Web)
        web: Web = root.web
        web.register_fetch_provider(fetcher)
        web.register_search_provider(searcher)
        assert web.fetch_provider() is fetcher
        assert web.search_provider() is searcher
        assert await web.fetch("https://a.test/") == PAGE
        assert await web.search("q", 3) == found
        assert searcher.asked == [("q", 3)]


async def test_register_returns_the_exact_disposer() -> None:
    async with Context() as root:
        await root.plugin(Web)
        web: Web = root.web
        fetch = web.register_fetch_provider(StubFetcher())
        search = web.register_search_provider(StubSearcher())
        assert type(fetch) is Disposer
        assert type(search) is Disposer
        assert registered(web) == (["stub"], ["stub"])
        await fetch()
        assert registered(web) == ([], ["stub"])
        await search()
        await search()  # a second call starts nothing new
        assert registered(web) == ([], [])


async def test_a_composite_adopts_the_registrations_and_undoes_them_in_order() -> None:
    async with Context() as root:
        await root.plugin(Web)
        web: Web = root.web
        seen: list[tuple[str, list[str]]] = []

        def probe(label: str) -> Any:
            return lambda: seen.append((label, [p.id for p in web.fetch_providers()]))

        def wiring() -> Iterator[Any]:
            yield probe("first")
            yield web.register_fetch_provider(StubFetcher("a"))
            yield probe("last")

        composite = root.effect(wiring, label="wiring")
        await composite()
        assert seen == [("last", ["a"]), ("first", [])]


async def test_unloading_the_registering_plugin_restores_the_registries() -> None:
    async with Context() as root:
        await root.plugin(Web)
        web: Web = root.web
        web.register_fetch_provider(StubFetcher("kept"))
        before = registered(web)

        def contributor(ctx: Context, config: None) -> Iterator[Disposer]:
            yield ctx.web.register_fetch_provider(StubFetcher("a"))
            yield ctx.web.register_search_provider(StubSearcher("b"))

        fiber = await root.plugin(contributor)
        assert registered(web) == (["kept", "a"], ["b"])
        await fiber.dispose()
        assert registered(web) == before


async def test_a_configured_provider_is_chosen_among_several() -> None:
    async with Context() as root:
        await root.plugin(Web, {"fetch_provider": "b", "search_provider": " y "})
        web: Web = root.web
        b = StubFetcher("b")
        y = StubSearcher("y")
        for provider in (StubFetcher("a"), b):
            web.register_fetch_provider(provider)
        for other in (StubSearcher("x"), y):
            web.register_search_provider(other)
        assert web.fetch_provider() is b
        assert web.search_provider() is y


async def test_a_configured_provider_that_is_not_registered_is_unavailable() -> None:
    async with Context() as root:
        await root.plugin(Web, {"search_provider": "searxng"})
        web: Web = root.web
        web.register_search_provider(StubSearcher("other"))
        with pytest.raises(WebProviderUnavailableError) as info:
            await web.search("q", 5)
        assert str(info.value) == (
            'the web search provider "searxng" named by search_provider in the web config '
            'is not registered (registered: "other")'
        )
        assert info.value.code == "WEB_PROVIDER_UNAVAILABLE"


async def test_no_provider_is_unavailable_and_several_unconfigured_are_ambiguous() -> None:
    async with Context() as root:
        await root.plugin(Web)
        web: Web = root.web
        with pytest.raises(WebProviderUnavailableError, match=r"^no web fetch provider is"):
            await web.fetch("https://a.test/")
        with pytest.raises(WebProviderUnavailableError) as info:
            web.search_provider()
        assert str(info.value) == "no web search provider is registered"
        web.register_search_provider(StubSearcher("x"))
        web.register_search_provider(StubSearcher("y"))
        with pytest.raises(WebProviderAmbiguousError) as ambiguous:
            web.search_provider()
        assert str(ambiguous.value) == (
            '2 web search providers are registered ("x", "y"); name the one to use as '
            "search_provider in the web config"
        )
        assert ambiguous.value.code == "WEB_PROVIDER_AMBIGUOUS"


class NoId:
    async def fetch(self, url: str) -> FetchResult:
        return PAGE


class NoMethod:
    id = "lazy"


@pytest.mark.parametrize(
    ("provider", "problem"),
    [
        (NoId(), "a web fetch provider needs a non-blank string id, got None on NoId"),
        (StubFetcher(" "), "a web fetch provider needs a non-blank string id, got ' '"),
        (NoMethod(), 'web fetch provider "lazy" has no fetch() method (NoMethod)'),
        (StubSearcher("s"), 'web fetch provider "s" has no fetch() method (StubSearcher)'),
        (StubFetcher("taken"), 'a web fetch provider "taken" is already registered'),
    ],
)
async def test_a_refused_registration_leaves_nothing_behind(provider: Any, problem: str) -> None:
    async with Context() as root:
        await root.plugin(Web)
        web: Web = root.web
        web.register_fetch_provider(StubFetcher("taken"))
        with pytest.raises(WebProviderError) as info:
            web.register_fetch_provider(provider)
        assert str(info.value).startswith(problem)
        assert registered(web) == (["taken"], [])


async def test_search_providers_are_checked_for_a_search_method() -> None:
    async with Context() as root:
        await root.plugin(Web)
        with pytest.raises(WebProviderError, match='"stub" has no search'):
            root.web.register_search_provider(StubFetcher())


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"fetch_provider": ""}, r"\(at fetch_provider\)"),
        ({"search_provider": "  "}, r"\(at search_provider\)"),
        ({"search_provider": 3}, r"\(at search_provider\)"),
        ({"provider": "x"}, r"Extra inputs are not permitted \(at provider\)"),
    ],
)
async def test_bad_configs_fail_the_plugin_naming_the_key(
    config: dict[str, Any], problem: str
) -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match=problem) as info:
            await root.plugin(Web, config)
        assert "web" in str(info.value)
        assert root.get("web") is None
