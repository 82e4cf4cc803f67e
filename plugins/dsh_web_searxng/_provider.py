"""The SearXNG search provider: one ``GET <base_url>/search?q=…&format=json`` per query."""

from __future__ import annotations

from typing import Any

import anyio
import httpx

from dsh import InFlight
from dsh_web import SearchHit, SearchResult, WebSearchError, WebTimeoutError

from ._config import SearxngConfig

__all__ = ["SearxngProvider", "parse_reply"]


class SearxngProvider:
    """A search provider over a SearXNG instance's JSON API. ``inflight`` counts the
    searches in progress, so the client's owner closes it only after them."""

    def __init__(self, config: SearxngConfig, client: httpx.AsyncClient) -> None:
        self.id = config.id
        self.inflight = InFlight()
        self._config = config
        self._client = client

    async def search(self, query: str, max_results: int) -> SearchResult:
        """At most ``max_results`` hits for ``query``; raises :class:`WebSearchError` when
        the instance cannot be reached, answers non-2xx or sends what is not its JSON,
        and :class:`WebTimeoutError` past ``timeout_seconds``."""
        config = self._config
        url = f"{config.base_url}/search"
        with self.inflight:
            try:
                with anyio.fail_after(config.timeout_seconds):
                    response = await self._client.get(
                        url, params={**config.params, "q": query, "format": "json"}
                    )
            except TimeoutError:
                raise WebTimeoutError(
                    f'searching SearXNG for "{query}" took longer than {config.timeout_seconds:g} s'
                ) from None
            except httpx.HTTPError as exc:
                raise WebSearchError(
                    f"cannot reach SearXNG at {url}: {str(exc) or type(exc).__name__}"
                ) from exc
        if not response.is_success:
            hint = (
                " (is json listed under search.formats in its settings.yml?)"
                if response.status_code == 403
                else ""
            )
            raise WebSearchError(f"SearXNG at {url} answered HTTP {response.status_code}{hint}")
        try:
            data = response.json()
        except ValueError as exc:
            raise WebSearchError(f"SearXNG at {url} answered with invalid JSON: {exc}") from exc
        return parse_reply(data, max_results, url)


def parse_reply(data: Any, max_results: int, source: str = "SearXNG") -> SearchResult:
    """A SearXNG JSON reply as a :class:`SearchResult`: its first ``max_results``
    results that have a URL, and its answers joined by blank lines (an answer is a
    string, or an object with an ``answer`` field in newer versions)."""
    if not isinstance(data, dict) or not isinstance(data.get("results", []), list):
        raise WebSearchError(f"{source} answered JSON without a results list")
    found: list[SearchHit] = []
    for item in data.get("results", []):
        if len(found) == max_results:
            break
        url = item.get("url") if isinstance(item, dict) else None
        if isinstance(url, str) and url:
            title = item.get("title")
            snippet = item.get("content")
            found.append(
                SearchHit(
                    title=title if isinstance(title, str) and title.strip() else url,
                    url=url,
                    snippet=snippet if isinstance(snippet, str) else "",
                )
            )
    answers: list[str] = []
    raw_answers = data.get("answers", [])
    for answer in raw_answers if isinstance(raw_answers, list) else []:
        text = answer.get("answer") if isinstance(answer, dict) else answer
        if isinstance(text, str) and text.strip():
            answers.append(text.strip())
    return SearchResult(hits=found, answer="\n\n".join(answers))
