"""``web-searxng``: SearXNG's JSON API as a search provider, against a fake instance."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from dsh import Context, load_deployment
from dsh.testing import write_deployment
from dsh_web import SearchHit, SearchResult, Web, WebSearchError, WebTimeoutError
from dsh_web_searxng import SearxngProvider, SearxngSearch, parse_reply
from tests.plugins.web.web_support import Gate, Page, assert_config_refused
from tests.plugins.web_searxng.searxng_support import FakeSearxng

pytestmark = pytest.mark.anyio

REPLY = {
    "query": "dsh",
    "answers": ["dsh is a harness.", {"answer": " A newer answer form. "}, {"url": "x"}, "  "],
    "results": [
        {"url": "https://dsh.test/", "title": "dsh", "content": "The harness.", "score": 3},
        {"url": "https://docs.dsh.test/", "title": "  ", "content": None},
        {"title": "no url"},
        "not an object",
        {"url": "https://third.test/", "title": "Third"},
    ],
}


async def search(base_url: str, query: str, max_results: int = 8, **config: Any) -> SearchResult:
    async with Context() as root:
        await root.plugin(Web)
        await root.plugin(SearxngSearch, {"base_url": base_url, **config})
        web: Web = root.web
        return await web.search(query, max_results)


async def test_a_search_is_one_json_get_with_the_query(searxng: FakeSearxng) -> None:
    searxng.results("dsh", REPLY)
    found = await search(searxng.base_url + "/", "dsh", params={"language": "en"})
    assert found == SearchResult(
        hits=[
            SearchHit("dsh", "https://dsh.test/", "The harness."),
            SearchHit("https://docs.dsh.test/", "https://docs.dsh.test/", ""),
            SearchHit("Third", "https://third.test/", ""),
        ],
        answer="dsh is a harness.\n\nA newer answer form.",
    )
    assert searxng.asked == [{"q": ["dsh"], "format": ["json"], "language": ["en"]}]
    (request,) = searxng.site.requests
    assert request.path.startswith("/searx/search?")
    assert request.headers["accept"] == "application/json"


async def test_max_results_caps_the_hits(searxng: FakeSearxng) -> None:
    searxng.results("dsh", REPLY)
    found = await search(searxng.base_url, "dsh", max_results=1)
    assert [hit.url for hit in found.hits] == ["https://dsh.test/"]


async def test_configured_headers_are_sent(searxng: FakeSearxng) -> None:
    await search(searxng.base_url, "q", headers={"Authorization": "Bearer t"})
    assert searxng.site.requests[0].headers["authorization"] == "Bearer t"


async def test_a_loopback_instance_is_reached_whatever_the_fetch_fence(
    searxng: FakeSearxng,
) -> None:
    from dsh_web_fetch import WebFetch

    searxng.results("q", {"results": [{"url": "https://a.test/", "title": "A"}]})
    async with Context() as root:
        await root.plugin(Web)
        await root.plugin(WebFetch, {"allow_private": False})
        await root.plugin(SearxngSearch, {"base_url": searxng.base_url})
        found = await root.web.search("q", 5)
    assert [hit.title for hit in found.hits] == ["A"]


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (403, "answered HTTP 403 (is json listed under search.formats in its settings.yml?)"),
        (502, "answered HTTP 502"),
    ],
)
async def test_a_non_2xx_answer_fails_the_search(
    searxng: FakeSearxng, status: int, message: str
) -> None:
    searxng.replies["q"] = Page(b"nope", status=status, headers={"Content-Type": "text/plain"})
    with pytest.raises(WebSearchError) as info:
        await search(searxng.base_url, "q")
    assert str(info.value) == f"SearXNG at {searxng.base_url}/search {message}"
    assert info.value.code == "WEB_SEARCH_FAILED"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>", "answered with invalid JSON"),
        (b"[1, 2]", "answered JSON without a results list"),
        (b'{"results": {"a": 1}}', "answered JSON without a results list"),
    ],
)
async def test_a_reply_that_is_not_searxng_json_fails(
    searxng: FakeSearxng, body: bytes, message: str
) -> None:
    searxng.replies["q"] = Page(body, headers={"Content-Type": "application/json"})
    with pytest.raises(WebSearchError, match=message):
        await search(searxng.base_url, "q")


def test_odd_answer_fields_are_ignored() -> None:
    assert parse_reply({"results": [], "answers": "not a list"}, 5) == SearchResult(hits=[])
    assert parse_reply({}, 5) == SearchResult(hits=[])


async def test_an_unreachable_instance_fails_the_search() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(WebSearchError) as info:
        await search(f"http://127.0.0.1:{port}", "q")
    assert str(info.value).startswith(f"cannot reach SearXNG at http://127.0.0.1:{port}/search: ")


async def test_a_slow_instance_times_out(searxng: FakeSearxng) -> None:
    gate = Gate(b"{}", "application/json")
    searxng.site.answer("/searx/search", gate)
    try:
        with pytest.raises(WebTimeoutError) as info:
            await search(searxng.base_url, "slow", timeout_seconds=0.2)
    finally:
        gate.release.set()
    assert str(info.value) == 'searching SearXNG for "slow" took longer than 0.2 s'


async def test_mounting_registers_it_and_disposing_removes_it(searxng: FakeSearxng) -> None:
    async with Context() as root:
        await root.plugin(Web)
        web: Web = root.web
        fiber = await root.plugin(SearxngSearch, {"base_url": searxng.base_url, "id": "mine"})
        (provider,) = web.search_providers()
        assert isinstance(provider, SearxngProvider)
        assert provider.id == "mine"
        await fiber.dispose()
        assert web.search_providers() == []


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({}, r"Field required \(at base_url\)"),
        (
            {"base_url": "search.test"},
            r"must start with http:// or https://, got 'search.test' \(at base_url\)",
        ),
        ({"base_url": "http://s.test", "params": {"q": "x", "format": "csv"}}, r"format, q"),
        ({"base_url": "http://s.test", "timeout_seconds": 0}, r"\(at timeout_seconds\)"),
        ({"base_url": "http://s.test", "url": "x"}, r"Extra inputs are not permitted \(at url\)"),
    ],
)
async def test_bad_configs_fail_the_plugin_naming_the_key(
    config: dict[str, Any], problem: str
) -> None:
    await assert_config_refused(SearxngSearch, "web-searxng", config, problem)


async def test_a_deployment_starts_it_by_its_yaml_name(
    searxng: FakeSearxng, tmp_path: Path
) -> None:
    searxng.results("q", {"results": [{"url": "https://a.test/", "title": "A"}]})
    path = write_deployment(
        tmp_path,
        f"""\
        - {{id: web, name: web, config: {{search_provider: searxng}}}}
        - {{id: search, name: web-searxng, config: {{base_url: "{searxng.base_url}"}}}}
        """,
    )
    async with Context() as root:
        await load_deployment(path, root)
        found = await root.web.search("q", 3)
    assert found.hits == [SearchHit("A", "https://a.test/", "")]
