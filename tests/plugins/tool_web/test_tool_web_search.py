"""``web_search``: query limits, concurrent queries, and the rendering of answers."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from dsh_tool_web import CITE_NOTE, NO_RESULTS
from dsh_web import SearchResult, WebSearchError
from tests.plugins.tool_web.tool_web_support import web_tools
from tests.plugins.web.web_support import StubSearcher, hits

pytestmark = pytest.mark.anyio

CITE = "Cite the relevant URLs above as markdown links in your answer."


async def test_each_query_gets_its_heading_answer_and_sources() -> None:
    assert (CITE_NOTE, NO_RESULTS) == (CITE, "No results found.")
    searcher = StubSearcher(
        results={
            "python release": SearchResult(
                answer="Python 3.14 is the newest release.",
                hits=hits(
                    ("Python 3.14", "https://python.test/3.14", "What's new\n  in 3.14"),
                    ("Downloads", "https://python.test/dl"),
                    ("Python 3.14 again", "https://python.test/3.14", "a repeat"),
                ),
            ),
            "anyio trio": SearchResult(
                hits=hits(("[anyio] docs", "https://anyio.test/", ""), ("", "https://trio.test/"))
            ),
            "nothing here": SearchResult(),
            "just an answer": SearchResult(answer="  42  "),
        }
    )
    queries = ["python release", "anyio trio", "nothing here", "just an answer"]
    async with web_tools(searcher) as web:
        result = await web.call("web_search", {"queries": queries})
    assert result.is_error is False
    assert result.content == (
        "### python release\n"
        "Python 3.14 is the newest release.\n"
        "Sources:\n"
        "- [Python 3.14](https://python.test/3.14) — What's new in 3.14\n"
        "- [Downloads](https://python.test/dl)\n"
        "\n"
        "### anyio trio\n"
        "Sources:\n"
        "- [\\[anyio\\] docs](https://anyio.test/)\n"
        "- [https://trio.test/](https://trio.test/)\n"
        "\n"
        "### nothing here\n"
        "No results found.\n"
        "\n"
        "### just an answer\n"
        "42\n"
        "\n" + CITE
    )
    assert [max_results for _, max_results in searcher.asked] == [8, 8, 8, 8]


async def test_sources_are_capped_per_query() -> None:
    many = SearchResult(hits=hits(*((f"r{n}", f"https://r.test/{n}") for n in range(5))))
    async with web_tools(StubSearcher(results={"q": many}), search_max_results=2) as web:
        result = await web.call("web_search", {"queries": ["q"]})
    assert result.content == (
        "### q\nSources:\n- [r0](https://r.test/0)\n- [r1](https://r.test/1)\n\n" + CITE
    )


async def test_queries_are_stripped_and_deduplicated_before_counting() -> None:
    searcher = StubSearcher()
    queries = ["a", " a ", "b", "a", "c", "d", "b"]
    async with web_tools(searcher) as web:
        result = await web.call("web_search", {"queries": queries})
    assert result.is_error is False
    assert sorted(query for query, _ in searcher.asked) == ["a", "b", "c", "d"]
    assert result.content.startswith("### a\nNo results found.\n\n### b\n")


@pytest.mark.parametrize(
    ("queries", "message"),
    [
        ([], "Error: queries must contain at least 1 query"),
        (["a", "b", "c", "d", "e"], "Error: queries must contain at most 4 queries"),
        (["fine", "  "], "Error: each query must be a non-empty string"),
        ([""], "Error: each query must be a non-empty string"),
        (["ok", 3], "invalid arguments: queries[1]: Input should be a valid string"),
        ("one", "invalid arguments: queries: Input should be a valid list"),
    ],
)
async def test_query_limits_are_invalid_arguments(queries: Any, message: str) -> None:
    searcher = StubSearcher()
    async with web_tools(searcher) as web:
        result = await web.call("web_search", {"queries": queries})
    assert (result.content, result.is_error, result.code) == (message, True, "INVALID_ARGS")
    assert searcher.asked == []


async def test_the_queries_run_concurrently() -> None:
    started: dict[str, anyio.Event] = {"a": anyio.Event(), "b": anyio.Event()}

    class Together:
        id = "together"

        async def search(self, query: str, max_results: int) -> SearchResult:
            started[query].set()
            with anyio.fail_after(10):  # a bound: sequential queries would wait forever
                await started["b" if query == "a" else "a"].wait()
            return SearchResult(hits=hits((query, f"https://{query}.test/")))

    async with web_tools(Together()) as web:
        result = await web.call("web_search", {"queries": ["a", "b"]})
    assert result.content.startswith("### a\nSources:\n- [a](https://a.test/)\n\n### b\n")


async def test_the_first_failing_query_fails_the_call() -> None:
    searcher = StubSearcher(
        results={
            "ok": SearchResult(hits=hits(("x", "https://x.test/"))),
            "down": WebSearchError("SearXNG at http://search.test/search answered HTTP 502"),
            "also down": WebSearchError("second"),
        }
    )
    async with web_tools(searcher) as web:
        result = await web.call("web_search", {"queries": ["ok", "down", "also down"]})
    assert (result.content, result.code) == (
        "Error: SearXNG at http://search.test/search answered HTTP 502",
        "WEB_SEARCH_FAILED",
    )


async def test_two_unconfigured_providers_are_ambiguous() -> None:
    async with web_tools(StubSearcher("x"), StubSearcher("y")) as web:
        result = await web.call("web_search", {"queries": ["q"]})
    assert result.code == "WEB_PROVIDER_AMBIGUOUS"
