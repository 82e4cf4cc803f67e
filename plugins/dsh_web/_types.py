"""What the web seam passes around: fetched pages, search hits, and the two provider kinds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["FetchProvider", "FetchResult", "SearchHit", "SearchProvider", "SearchResult"]


@dataclass(frozen=True)
class FetchResult:
    """One fetched page.

    ``url`` is where the body came from (after redirects), ``status_code`` the final
    HTTP status (a non-2xx status is a result like any other), ``content_type`` the
    media type without parameters (``text/html``), ``content`` the body as text
    (HTML already turned into Markdown by the provider), and ``truncated`` whether the
    provider cut the body at its size cap.
    """

    url: str
    status_code: int
    content_type: str
    content: str
    truncated: bool = False


@dataclass(frozen=True)
class SearchHit:
    """One search result: a page's title, its URL and a short snippet (may be empty)."""

    title: str
    url: str
    snippet: str = ""


@dataclass(frozen=True)
class SearchResult:
    """What one query found: an optional direct answer and the hits, best first."""

    hits: Sequence[SearchHit] = ()
    answer: str = ""


class FetchProvider(Protocol):
    """Fetches one URL. ``id`` names it in the ``web`` config (``fetch_provider``)."""

    @property
    def id(self) -> str: ...

    async def fetch(self, url: str) -> FetchResult:
        """The page at ``url``; raise a :class:`dsh.DshError` (the ``WEB_*`` errors of
        ``dsh_web``) for a URL that cannot or may not be fetched."""
        ...


class SearchProvider(Protocol):
    """Answers one query. ``id`` names it in the ``web`` config (``search_provider``)."""

    @property
    def id(self) -> str: ...

    async def search(self, query: str, max_results: int) -> SearchResult:
        """At most ``max_results`` hits for ``query``, best first."""
        ...
