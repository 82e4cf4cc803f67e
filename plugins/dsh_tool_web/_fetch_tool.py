"""``web_fetch(url)``: one page as text, headed by the URL and the HTTP status."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from dsh_web import FetchResult

__all__ = ["FETCH_DESCRIPTION", "FETCH_GUIDANCE", "TRUNCATED_NOTE", "WebFetchArgs", "render_fetch"]

FETCH_DESCRIPTION = (
    "Fetch one web page by its http:// or https:// URL and return its text: HTML comes "
    "back as Markdown; plain text, JSON and XML come back as they are. The reply starts "
    "with the URL and the HTTP status; a status such as 404 is reported, not an error. "
    "Very long pages are cut short."
)

FETCH_GUIDANCE = (
    "Read a page with web_fetch when you have its URL (the user gave it, or a search "
    "found it) instead of guessing what it says. Rely only on what the fetched text "
    "says, and cite the URL as a markdown link. A page that comes back cut short is "
    "better read through a more specific URL than fetched again."
)

#: Appended to a body that was cut (exact: the model is told how to get the rest).
TRUNCATED_NOTE = "\n\n(Content truncated. Fetch a more specific URL or section for the full text.)"


class WebFetchArgs(BaseModel):
    """The arguments of ``web_fetch``."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="The absolute http:// or https:// URL of the page to fetch.")


def render_fetch(url: str, result: FetchResult, max_chars: int) -> str:
    """``Fetched <url> (HTTP <code>)``, a blank line and the body cut to ``max_chars``,
    then :data:`TRUNCATED_NOTE` when anything was cut (here or by the provider).
    ``url`` is the URL the model asked for."""
    body = result.content
    text = f"Fetched {url} (HTTP {result.status_code})\n\n{body[:max_chars]}"
    if result.truncated or len(body) > max_chars:
        text += TRUNCATED_NOTE
    return text
