"""HTML-to-Markdown benchmark: web-fetch's converter beside markdownify, on a 1 MB page.

Run: ``.venv/bin/python -m bench.web`` (needs the ``bench`` extra for markdownify;
``--quick`` for a smoke run).

The page is about 1 MB of ordinary article HTML: a head with a style sheet and scripts,
a navigation list, then sections each with a heading, paragraphs with links and inline
code, a nested list, a code block and a table. Both converters must produce Markdown
without the scripts and styles:

* dsh: ``dsh_web_fetch.load_converter()`` — html-to-markdown (Rust core), as a fetch
  calls it (links resolved against the page's URL);
* markdownify: ``markdownify.MarkdownConverter`` (on BeautifulSoup's ``html.parser``)
  with ATX headings, ``-`` bullets and ``script``/``style`` dropped.

Each converter runs in turn, interleaved, and the median of the rounds is reported as
milliseconds per page and megabytes per second, with the ratio to dsh.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from markdownify import MarkdownConverter

from dsh_web_fetch import load_converter

BASE_URL = "https://docs.example.org/guide/page.html"
TARGET = 1_000_000

HEAD = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Guide</title>
<style>body { font: 16px/1.5 sans-serif } pre { background: #eee }</style>
<script>window.analytics = { id: 42 }; function track(e) { return e; }</script>
</head><body><nav><ul><li><a href="/">Home</a></li><li><a href="/guide/">Guide</a></li>
<li><a href="/api/">API</a></li></ul></nav><main>
"""

SECTION = """<section id="s{n}"><h2>Section {n}: configuring the widget</h2>
<p>The <strong>widget</strong> reads its settings from <code>widget.toml</code>; see
<a href="../reference/widget-{n}.html">the reference</a> and the
<a href="https://other.example.org/notes/{n}">release notes</a> for details.</p>
<p>Each option has a default, and <em>most</em> deployments change only a few of them.</p>
<ul><li>Install the package</li><li>Write the config<ul><li>name</li><li>size</li></ul></li>
<li>Run <code>widget check</code></li></ul>
<pre><code class="language-python">def configure(path):
    settings = load(path)
    return settings.get("size", {n})
</code></pre>
<table><thead><tr><th>Option</th><th>Default</th><th>Meaning</th></tr></thead><tbody>
<tr><td>size</td><td>{n}</td><td>how big</td></tr>
<tr><td>name</td><td>widget-{n}</td><td>what it is called</td></tr></tbody></table>
<script>track("s{n}")</script></section>
"""


def page(target: int = TARGET) -> str:
    """About ``target`` characters of HTML (ASCII, so as many bytes)."""
    parts = [HEAD]
    size = len(HEAD)
    n = 0
    while size < target:
        part = SECTION.format(n=n)
        parts.append(part)
        size += len(part)
        n += 1
    parts.append("</main></body></html>")
    return "".join(parts)


class _Markdownify(MarkdownConverter):
    """markdownify set up like the dsh converter: ATX headings, ``-`` bullets, no
    script or style."""

    def __init__(self) -> None:
        super().__init__(heading_style="ATX", bullets="-")

    def convert_script(self, el: Any, text: str, parent_tags: Any) -> str:
        return ""

    def convert_style(self, el: Any, text: str, parent_tags: Any) -> str:
        return ""


def converters() -> dict[str, Callable[[str], str]]:
    dsh_convert = load_converter()
    peer = _Markdownify()
    return {
        "dsh (html-to-markdown)": lambda html: dsh_convert(html, BASE_URL),
        "markdownify": lambda html: str(peer.convert(html)),
    }


def check(name: str, markdown: str) -> None:
    """Both outputs have the page's headings and tables and none of its scripts."""
    for expected in ("## Section 0: configuring the widget", "| Option", "```"):
        assert expected in markdown, (name, expected)
    for dropped in ("track(", "font:", "window.analytics"):
        assert dropped not in markdown, (name, dropped)


def main() -> None:
    quick = "--quick" in sys.argv
    html = page(50_000 if quick else TARGET)
    rounds = 2 if quick else 7
    fns = converters()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            markdown = fn(html)
            samples[name].append(time.perf_counter() - start)
            check(name, markdown)
    size = len(html.encode())
    medians = {name: statistics.median(s) for name, s in samples.items()}
    base = medians["dsh (html-to-markdown)"]
    print(f"\nHTML to Markdown of a {size / 1e6:.2f} MB page  [median of {rounds} rounds]")
    width = max(len(name) for name in medians)
    print(f"{'':<{width}}{'ms/page':>12}{'MB/s':>10}{'time vs dsh':>14}")
    for name, seconds in medians.items():
        print(
            f"{name:<{width}}{seconds * 1e3:>12.1f}{size / seconds / 1e6:>10.2f}"
            f"{seconds / base:>13.1f}x"
        )


if __name__ == "__main__":
    main()
