"""A fake SearXNG instance on the loopback site."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.plugins.web.web_support import Page, Seen, Site


class FakeSearxng:
    """Answers ``/search`` with the JSON queued for each query (``replies``), or an
    empty result list; ``asked`` holds each request's query parameters."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.base_url = site.url("/searx")
        self.replies: dict[str, Page] = {}
        self.asked: list[dict[str, list[str]]] = []
        site.answer("/searx/search", self._answer)

    def results(self, query: str, data: Any) -> None:
        self.replies[query] = Page(
            json.dumps(data).encode(), headers={"Content-Type": "application/json"}
        )

    def _answer(self, seen: Seen) -> Page:
        params = parse_qs(urlsplit(seen.path).query)
        self.asked.append(params)
        default = Page(b'{"results": []}', headers={"Content-Type": "application/json"})
        return self.replies.get(params["q"][0], default)
