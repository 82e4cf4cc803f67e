"""A scripted web site on loopback, and stand-in providers for the ``web`` seam.

``Site`` runs a :class:`tests.http_support.Loopback` server and
answers GETs from a table of pages (``site.page(...)``, ``site.redirect(...)``); an
unknown path is a 404 page. Every request is recorded. No test here talks to any other
address.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from dsh import ConfigError, Context
from dsh_web import FetchResult, SearchHit, SearchResult, Web
from tests.http_support import Loopback, QuietHandler


@dataclass(frozen=True)
class Seen:
    """One request as the site saw it (header names lower-cased)."""

    path: str
    headers: dict[str, str]


@dataclass
class Page:
    """What the site answers on one path. ``chunks`` sends the body in chunked
    encoding (no ``Content-Length``); otherwise ``body`` goes with its length, unless
    ``headers`` declares one itself."""

    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: Sequence[bytes] | None = None


class Site:
    """The scripted site; see the module docstring."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.pages: dict[str, Page | Callable[[Seen], Page]] = {}
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self.http = Loopback(type("Handler", (_Handler,), {"site": self}), tls)
        self.port = self.http.port
        self.root = self.http.root

    def url(self, path: str) -> str:
        return self.root + path

    def page(
        self,
        path: str,
        body: str | bytes = b"",
        *,
        content_type: str | None = "text/html; charset=utf-8",
        status: int = 200,
        headers: dict[str, str] | None = None,
        chunks: Sequence[bytes] | None = None,
    ) -> None:
        """Serve ``body`` (or ``chunks``) at ``path``."""
        all_headers = {} if content_type is None else {"Content-Type": content_type}
        all_headers.update(headers or {})
        raw = body.encode() if isinstance(body, str) else body
        self.pages[path] = Page(raw, status, all_headers, chunks)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        """Answer ``path`` with a redirect to ``location``."""
        self.pages[path] = Page(status=status, headers={"Location": location})

    def answer(self, path: str, respond: Callable[[Seen], Page]) -> None:
        """Answer ``path`` with ``respond(request)``."""
        self.pages[path] = respond

    @property
    def paths(self) -> list[str]:
        """The paths requested so far, in order."""
        return [seen.path for seen in self.requests]

    def _serve(self, seen: Seen) -> Page:
        with self._lock:
            self.requests.append(seen)
        found = self.pages.get(seen.path.split("?")[0])
        if found is None:
            return Page(b"<h1>Not found</h1>", 404, {"Content-Type": "text/html"})
        return found(seen) if callable(found) else found

    def close(self) -> None:
        self.http.close()


class _Handler(QuietHandler):
    site: Site

    def do_GET(self) -> None:
        headers = {key.lower(): value for key, value in self.headers.items()}
        page = self.site._serve(Seen(self.path, headers))
        self.send_response(page.status)
        for key, value in page.headers.items():
            self.send_header(key, value)
        if page.chunks is not None:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in page.chunks:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        if "Content-Length" not in page.headers:
            self.send_header("Content-Length", str(len(page.body)))
        self.end_headers()
        self.wfile.write(page.body)


class Gate:
    """A page that answers only once ``release`` is set; ``arrived`` is set when it is
    asked for. Use it as ``site.answer(path, gate)``."""

    def __init__(self, body: bytes = b"late", content_type: str = "text/plain") -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.body = body
        self.content_type = content_type

    def __call__(self, seen: Seen) -> Page:
        self.arrived.set()
        self.release.wait(30)
        return Page(self.body, headers={"Content-Type": self.content_type})

    async def wait_arrived(self) -> None:
        assert await anyio.to_thread.run_sync(self.arrived.wait, 30)


@contextmanager
def serving(tls: ssl.SSLContext | None = None) -> Iterator[Site]:
    """A :class:`Site` for the length of the block (over TLS with ``tls``)."""
    site = Site(tls)
    try:
        yield site
    finally:
        site.close()


@dataclass
class StubFetcher:
    """A fetch provider answering from ``pages`` (url -> result, or an exception to
    raise); every URL asked for is kept in ``asked``."""

    id: str = "stub"
    pages: dict[str, FetchResult | Exception] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    async def fetch(self, url: str) -> FetchResult:
        self.asked.append(url)
        found = self.pages.get(url)
        if found is None:
            return FetchResult(url=url, status_code=404, content_type="text/plain", content="")
        if isinstance(found, Exception):
            raise found
        return found


@dataclass
class StubSearcher:
    """A search provider answering from ``results`` (query -> result, or an exception
    to raise); every ``(query, max_results)`` asked is kept in ``asked``."""

    id: str = "stub"
    results: dict[str, SearchResult | Exception] = field(default_factory=dict)
    asked: list[tuple[str, int]] = field(default_factory=list)

    async def search(self, query: str, max_results: int) -> SearchResult:
        self.asked.append((query, max_results))
        found = self.results.get(query, SearchResult())
        if isinstance(found, Exception):
            raise found
        return found


def hits(*pairs: tuple[str, str] | tuple[str, str, str]) -> list[SearchHit]:
    """Search hits from ``(title, url[, snippet])`` tuples."""
    return [SearchHit(*pair) for pair in pairs]


async def assert_config_refused(
    plugin: Any, name: str, config: dict[str, Any], problem: str
) -> None:
    """Starting ``plugin`` (named ``name``) with ``config`` beside the web seam fails
    matching ``problem`` and naming the plugin, and leaves the seam without providers."""
    async with Context() as root:
        await root.plugin(Web)
        with pytest.raises(ConfigError, match=problem) as info:
            await root.plugin(plugin, config)
        assert name in str(info.value)
        assert (root.web.fetch_providers(), root.web.search_providers()) == ([], [])
