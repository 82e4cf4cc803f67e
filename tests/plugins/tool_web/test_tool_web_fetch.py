"""``web_fetch``: the header, the body cap and its note, errors as results."""

from __future__ import annotations

import pytest

from dsh_tool_web import TRUNCATED_NOTE
from dsh_web import FetchResult, WebBlockedUrlError, WebInvalidUrlError
from tests.plugins.tool_web.tool_web_support import web_tools
from tests.plugins.web.web_support import StubFetcher

pytestmark = pytest.mark.anyio

URL = "https://docs.test/guide"
NOTE = "\n\n(Content truncated. Fetch a more specific URL or section for the full text.)"


def page(
    content: str, *, status: int = 200, truncated: bool = False, url: str = URL
) -> FetchResult:
    return FetchResult(
        url=url, status_code=status, content_type="text/html", content=content, truncated=truncated
    )


async def test_the_reply_names_the_url_asked_for_and_the_status() -> None:
    # The provider followed a redirect; the model is told about the URL it asked for.
    fetcher = StubFetcher(pages={URL: page("# Guide\n", url="https://docs.test/v2/guide")})
    async with web_tools(fetcher) as web:
        result = await web.call("web_fetch", {"url": URL})
    assert (result.content, result.is_error) == (f"Fetched {URL} (HTTP 200)\n\n# Guide\n", False)
    assert fetcher.asked == [URL]


async def test_a_non_2xx_status_is_not_an_error() -> None:
    async with web_tools(StubFetcher(pages={URL: page("# Gone", status=410)})) as web:
        result = await web.call("web_fetch", {"url": URL})
    assert (result.content, result.is_error) == (f"Fetched {URL} (HTTP 410)\n\n# Gone", False)


async def test_a_long_body_is_cut_to_the_cap_and_the_note_appended() -> None:
    assert TRUNCATED_NOTE == NOTE
    fetcher = StubFetcher(pages={URL: page("a" * 11), "https://docs.test/ten": page("b" * 10)})
    async with web_tools(fetcher, fetch_max_output_chars=10) as web:
        long = await web.call("web_fetch", {"url": URL})
        exact = await web.call("web_fetch", {"url": "https://docs.test/ten"})
    assert long.content == f"Fetched {URL} (HTTP 200)\n\n" + "a" * 10 + NOTE
    assert exact.content == "Fetched https://docs.test/ten (HTTP 200)\n\n" + "b" * 10


async def test_the_default_cap_is_200000_characters() -> None:
    fetcher = StubFetcher(pages={URL: page("x" * 200_001)})
    async with web_tools(fetcher) as web:
        result = await web.call("web_fetch", {"url": URL})
    assert result.content == f"Fetched {URL} (HTTP 200)\n\n" + "x" * 200_000 + NOTE


async def test_a_body_the_provider_cut_gets_the_note_too() -> None:
    async with web_tools(StubFetcher(pages={URL: page("short", truncated=True)})) as web:
        result = await web.call("web_fetch", {"url": URL})
    assert result.content == f"Fetched {URL} (HTTP 200)\n\nshort" + NOTE


@pytest.mark.parametrize(
    "error",
    [
        WebInvalidUrlError('cannot fetch "ftp://x": only http:// and https:// URLs can be fetched'),
        WebBlockedUrlError("refusing to connect to intranet.test (10.0.0.1): …"),
    ],
)
async def test_a_refused_fetch_is_an_error_result_with_its_code(error: Exception) -> None:
    async with web_tools(StubFetcher(pages={URL: error})) as web:
        result = await web.call("web_fetch", {"url": URL})
    assert (result.content, result.is_error) == (f"Error: {error}", True)
    assert result.code == getattr(error, "code", None)


async def test_without_a_fetch_provider_the_tool_is_there_and_fails() -> None:
    async with web_tools() as web:
        result = await web.call("web_fetch", {"url": URL})
    assert (result.content, result.is_error, result.code) == (
        "Error: no web fetch provider is registered",
        True,
        "WEB_PROVIDER_UNAVAILABLE",
    )


async def test_a_missing_url_is_invalid_arguments() -> None:
    async with web_tools(StubFetcher()) as web:
        result = await web.call("web_fetch", {})
    assert (result.content, result.code) == (
        "invalid arguments: url: Field required",
        "INVALID_ARGS",
    )
