"""What a fetch returns: HTML as Markdown, text as it is, the content-type and size rules.

Every fetch here goes to the loopback site with ``allow_private: true``.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from dsh import PluginLoadError
from dsh_web import WebFetchTooLargeError, WebUnsupportedContentTypeError
from dsh_web_fetch import DEFAULT_MAX_BYTES, load_converter
from tests.plugins.llm_openai.openai_support import HTTPX_GC_WARNING
from tests.plugins.web.web_support import Site
from tests.plugins.web_fetch.fetch_support import mounted

pytestmark = pytest.mark.anyio

MENU = """<!doctype html>
<html><head><title>Café menu</title>
<style>body { color: red }</style><script>alert("hi")</script></head>
<body>
<h1>Café menu</h1>
<p>Fresh <em>every</em> day. See <a href="/about">about us</a> or
<a href="https://example.org/x">elsewhere</a>.</p>
<h2>Drinks</h2>
<ul><li>Tea<ul><li>Green</li></ul></li><li>Coffee</li></ul>
<ol><li>Order</li><li>Pay</li></ol>
<pre><code class="language-python">def total(items):
    return sum(i.price for i in items) &lt; 10
</code></pre>
<p>Call <code>total()</code>.</p>
<table><thead><tr><th>Item</th><th>Price</th></tr></thead>
<tbody><tr><td>Tea</td><td>2</td></tr><tr><td>Cake</td><td>3</td></tr></tbody></table>
<noscript>Turn on scripts</noscript>
</body></html>"""


async def test_html_becomes_markdown_with_links_made_absolute(site: Site) -> None:
    site.page("/menu.html", MENU)
    async with mounted(allow_private=True) as web:
        result = await web.fetch(site.url("/menu.html"))
    assert (result.status_code, result.content_type, result.truncated) == (200, "text/html", False)
    assert result.url == site.url("/menu.html")
    assert result.content == (
        "# Café menu\n\n"
        f"Fresh *every* day. See [about us]({site.url('/about')}) or "
        "[elsewhere](https://example.org/x).\n\n"
        "## Drinks\n\n"
        "- Tea\n  - Green\n- Coffee\n\n"
        "1. Order\n2. Pay\n\n"
        "```python\ndef total(items):\n    return sum(i.price for i in items) < 10\n```\n\n"
        "Call `total()`.\n\n"
        "| Item | Price |\n| ---- | ----- |\n| Tea  | 2     |\n| Cake | 3     |\n"
    )
    for dropped in ("alert", "color", "Turn on scripts", "<p>", "<table>"):
        assert dropped not in result.content


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain; charset=utf-8", "plain *text* <b>kept</b>"),
        ("text/markdown", "# kept as written"),
        ("application/json", '{"a": [1, 2]}'),
        ("application/problem+json", '{"title": "nope"}'),
        ("application/xml", "<a><b>1</b></a>"),
        ("application/atom+xml", "<feed/>"),
        ("text/csv", "a,b\n1,2\n"),
    ],
)
async def test_text_json_and_xml_come_back_as_they_are(
    site: Site, content_type: str, body: str
) -> None:
    site.page("/doc", body, content_type=content_type)
    async with mounted(allow_private=True) as web:
        result = await web.fetch(site.url("/doc"))
    assert result.content == body
    assert result.content_type == content_type.split(";", maxsplit=1)[0]


async def test_xhtml_is_converted_too(site: Site) -> None:
    site.page("/x", "<html><body><h2>Hi</h2></body></html>", content_type="application/xhtml+xml")
    async with mounted(allow_private=True) as web:
        assert (await web.fetch(site.url("/x"))).content == "## Hi\n"


@pytest.mark.parametrize(
    ("content_type", "shown"),
    [
        ("image/png", '"image/png"'),
        ("application/octet-stream", '"application/octet-stream"'),
        ("application/pdf; charset=binary", '"application/pdf"'),
        (None, "none"),
    ],
)
async def test_other_content_types_are_refused(
    site: Site, content_type: str | None, shown: str
) -> None:
    site.page("/file", b"\x89PNG\r\n\x1a\n", content_type=content_type)
    async with mounted(allow_private=True) as web:
        with pytest.raises(WebUnsupportedContentTypeError) as info:
            await web.fetch(site.url("/file"))
    assert str(info.value) == (
        f"cannot read {site.url('/file')}: its content type is {shown}; only HTML, XHTML, "
        "text, JSON and XML are fetched"
    )
    assert info.value.code == "WEB_UNSUPPORTED_CONTENT_TYPE"


async def test_a_non_2xx_status_is_a_result(site: Site) -> None:
    site.page("/gone", "<h1>Gone</h1><p>Try <a href='/new'>the new page</a>.</p>", status=410)
    async with mounted(allow_private=True) as web:
        missing = await web.fetch(site.url("/missing"))
        gone = await web.fetch(site.url("/gone"))
    assert (missing.status_code, missing.content) == (404, "# Not found\n")
    assert gone.status_code == 410
    assert gone.content == f"# Gone\n\nTry [the new page]({site.url('/new')}).\n"


@pytest.mark.parametrize(
    ("status", "headers"),
    [(204, {}), (304, {}), (200, {"Content-Length": "0"})],
)
async def test_an_empty_answer_is_an_empty_body_whatever_its_type(
    site: Site, status: int, headers: dict[str, str]
) -> None:
    content_type = None if status != 200 else "image/png"
    site.page("/empty", content_type=content_type, status=status, headers=headers)
    async with mounted(allow_private=True) as web:
        result = await web.fetch(site.url("/empty"))
    assert (result.status_code, result.content, result.truncated) == (status, "", False)


async def test_the_charset_of_the_header_decodes_the_body(site: Site) -> None:
    site.page("/latin", "café".encode("latin-1"), content_type="text/plain; charset=ISO-8859-1")
    site.page("/quoted", "naïve".encode("utf-16"), content_type='text/plain; charset="utf-16"')
    site.page("/unknown", "ok é".encode(), content_type="text/plain; charset=no-such-codec")
    site.page("/broken", b"bad \xff byte", content_type="text/plain")
    async with mounted(allow_private=True) as web:
        assert (await web.fetch(site.url("/latin"))).content == "café"
        assert (await web.fetch(site.url("/quoted"))).content == "naïve"
        assert (await web.fetch(site.url("/unknown"))).content == "ok é"
        assert (await web.fetch(site.url("/broken"))).content == "bad \ufffd byte"


async def test_a_declared_body_over_the_cap_is_refused_unread(site: Site) -> None:
    site.page("/big", b"x" * 10, content_type="text/plain", headers={"Content-Length": "101"})
    site.page("/fits", b"x" * 100, content_type="text/plain")
    async with mounted(allow_private=True, max_bytes=100) as web:
        with pytest.raises(WebFetchTooLargeError) as info:
            await web.fetch(site.url("/big"))
        fits = await web.fetch(site.url("/fits"))
    assert str(info.value) == (
        f"cannot read {site.url('/big')}: it declares 101 bytes, over the 100-byte limit"
    )
    assert info.value.code == "WEB_FETCH_TOO_LARGE"
    assert (fits.content, fits.truncated) == ("x" * 100, False)


async def test_the_default_cap_is_five_mebibytes(site: Site) -> None:
    declared = str(DEFAULT_MAX_BYTES + 1)
    site.page("/big", b"{}", content_type="application/json", headers={"Content-Length": declared})
    async with mounted(allow_private=True) as web:
        with pytest.raises(WebFetchTooLargeError, match=f"declares {declared} bytes"):
            await web.fetch(site.url("/big"))
    assert DEFAULT_MAX_BYTES == 5 * 1024 * 1024


@HTTPX_GC_WARNING  # reading stops at the cap; the connection is closed
async def test_a_streamed_body_over_the_cap_is_cut_there(site: Site) -> None:
    site.page("/stream", content_type="text/plain", chunks=[b"a" * 60, b"b" * 60, b"c" * 60])
    # "é" is two bytes in UTF-8; the cap falls between them, and half a character is
    # dropped rather than shown as a replacement character.
    site.page("/split", content_type="text/plain", chunks=[("x" * 99 + "é").encode()])
    site.page("/exact", content_type="text/plain", chunks=[b"d" * 50, b"e" * 50])
    async with mounted(allow_private=True, max_bytes=100) as web:
        cut = await web.fetch(site.url("/stream"))
        split = await web.fetch(site.url("/split"))
        exact = await web.fetch(site.url("/exact"))
    assert (cut.content, cut.truncated) == ("a" * 60 + "b" * 40, True)
    assert (split.content, split.truncated) == ("x" * 99, True)
    assert (exact.content, exact.truncated) == ("d" * 50 + "e" * 50, False)


async def test_a_page_too_deep_to_convert_is_passed_on_as_html(site: Site) -> None:
    deep = "<html><body>" + "<div>" * 1100 + "deep" + "</div>" * 1100 + "</body></html>"
    site.page("/deep", deep)
    async with mounted(allow_private=True) as web:
        assert (await web.fetch(site.url("/deep"))).content == deep


async def test_a_page_the_library_fails_on_is_passed_on_as_html(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    import html_to_markdown

    def fail(html: str, options: Any = None) -> Any:
        raise html_to_markdown.ConversionError("cannot")

    monkeypatch.setattr(html_to_markdown, "convert", fail)
    site.page("/odd", "<p>odd</p>")
    async with mounted(allow_private=True) as web:
        assert (await web.fetch(site.url("/odd"))).content == "<p>odd</p>"


def test_without_the_web_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "html_to_markdown", None)
    with pytest.raises(PluginLoadError) as info:
        load_converter()
    assert "pip install 'dsh-harness[web]'" in str(info.value)
    assert "html-to-markdown" in str(info.value)
