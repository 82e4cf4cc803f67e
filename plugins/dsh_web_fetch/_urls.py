"""The URL rules every hop of a fetch must pass: http(s), a host, no credentials."""

from __future__ import annotations

import httpx

from dsh_web import WebBlockedUrlError, WebInvalidUrlError

__all__ = ["MAX_URL_LENGTH", "check_url"]

#: The longest URL fetched, in characters.
MAX_URL_LENGTH = 2048


def check_url(url: str) -> httpx.URL:
    """``url`` parsed, or :class:`WebInvalidUrlError` (not http(s), no host, malformed,
    longer than :data:`MAX_URL_LENGTH`) or :class:`WebBlockedUrlError` (a user name or
    password in it, which is never echoed back)."""
    if len(url) > MAX_URL_LENGTH:
        raise WebInvalidUrlError(
            f"cannot fetch a URL of {len(url)} characters: the limit is {MAX_URL_LENGTH}"
        )
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise WebInvalidUrlError(f'cannot fetch "{url}": {exc}') from exc
    if parsed.scheme not in ("http", "https"):
        raise WebInvalidUrlError(
            f'cannot fetch "{url}": only http:// and https:// URLs can be fetched'
        )
    if not parsed.host:
        raise WebInvalidUrlError(f'cannot fetch "{url}": the URL has no host')
    if parsed.userinfo:
        shown = parsed.copy_with(username=None, password=None)
        raise WebBlockedUrlError(
            f'refusing to fetch "{shown}" with a user name or password in the URL'
        )
    return parsed
