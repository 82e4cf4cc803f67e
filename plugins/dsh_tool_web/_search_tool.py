"""``web_search(queries)``: up to four queries at once, each answered with its sources."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from dsh_tools import ToolArgumentsError
from dsh_web import SearchHit, SearchResult

__all__ = [
    "CITE_NOTE",
    "MAX_QUERIES",
    "NO_RESULTS",
    "SEARCH_DESCRIPTION",
    "SEARCH_GUIDANCE",
    "WebSearchArgs",
    "normalise_queries",
    "render_search",
]

#: The most queries one call may carry.
MAX_QUERIES = 4

SEARCH_DESCRIPTION = (
    f"Search the web. Pass 1 to {MAX_QUERIES} distinct queries; they run together, and "
    "each is answered under its own `### <query>` heading with its sources as markdown "
    "links (title, URL, snippet)."
)

SEARCH_GUIDANCE = (
    "When an answer depends on facts that may have changed or that you are unsure of, "
    "search with web_search first: put one to four short, distinct queries in a single "
    "call rather than calling it again and again, answer from the sources it returns, "
    "and cite the URLs you used as markdown links."
)

#: What a query with neither an answer nor a source shows (exact).
NO_RESULTS = "No results found."
#: The last line of every reply (exact).
CITE_NOTE = "Cite the relevant URLs above as markdown links in your answer."

_SPACE = re.compile(r"\s+")


class WebSearchArgs(BaseModel):
    """The arguments of ``web_search``."""

    model_config = ConfigDict(extra="forbid")

    queries: list[str] = Field(
        description=f"1 to {MAX_QUERIES} distinct, non-empty search queries.",
        json_schema_extra={"minItems": 1, "maxItems": MAX_QUERIES},
    )


def normalise_queries(queries: Sequence[str]) -> list[str]:
    """The queries stripped and without repeats, in order; raises
    :class:`ToolArgumentsError` (``INVALID_ARGS``) for a blank query, none, or more
    than :data:`MAX_QUERIES` distinct ones."""
    if any(not query.strip() for query in queries):
        raise ToolArgumentsError("each query must be a non-empty string")
    unique = list(dict.fromkeys(query.strip() for query in queries))
    if not unique:
        raise ToolArgumentsError("queries must contain at least 1 query")
    if len(unique) > MAX_QUERIES:
        raise ToolArgumentsError(f"queries must contain at most {MAX_QUERIES} queries")
    return unique


def render_search(answers: Sequence[tuple[str, SearchResult]], max_results: int) -> str:
    """One ``### <query>`` section per query (its answer, then ``Sources:`` and at most
    ``max_results`` ``- [title](url) — snippet`` lines, URLs not repeated; or
    :data:`NO_RESULTS`), then :data:`CITE_NOTE`."""
    sections: list[str] = []
    for query, result in answers:
        lines = [f"### {query}"]
        answer = result.answer.strip()
        if answer:
            lines.append(answer)
        sources = _unique(result.hits)[:max_results]
        if sources:
            lines.append("Sources:")
            lines.extend(_source(hit) for hit in sources)
        elif not answer:
            lines.append(NO_RESULTS)
        sections.append("\n".join(lines))
    sections.append(CITE_NOTE)
    return "\n\n".join(sections)


def _unique(hits: Sequence[SearchHit]) -> list[SearchHit]:
    seen: dict[str, SearchHit] = {}
    for hit in hits:
        seen.setdefault(hit.url, hit)
    return list(seen.values())


def _source(hit: SearchHit) -> str:
    title = _one_line(hit.title) or hit.url
    title = title.replace("[", "\\[").replace("]", "\\]")
    line = f"- [{title}]({hit.url})"
    snippet = _one_line(hit.snippet)
    return f"{line} — {snippet}" if snippet else line


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text).strip()
