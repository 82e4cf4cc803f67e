"""The ``http`` fetch provider: one GET, redirects re-checked hop by hop, capped reading."""

from __future__ import annotations

import codecs
import re

import anyio
import httpx

from dsh import InFlight
from dsh_web import (
    FetchResult,
    WebFetchError,
    WebFetchTooLargeError,
    WebTimeoutError,
    WebTooManyRedirectsError,
    WebUnsupportedContentTypeError,
)

from ._config import WebFetchConfig
from ._convert import Converter
from ._urls import check_url

__all__ = ["ACCEPT", "HttpFetcher"]

#: The ``Accept`` header: the content types a fetch can return.
ACCEPT = (
    "text/html, application/xhtml+xml, application/json;q=0.9, application/xml;q=0.9, text/*;q=0.8"
)
#: Statuses that carry no body, whatever their headers say.
_NO_BODY = frozenset({204, 205, 304})
_HTML = frozenset({"text/html", "application/xhtml+xml"})
_CHARSET = re.compile(r"""charset\s*=\s*["']?([^"';\s]+)""", re.IGNORECASE)


class HttpFetcher:
    """A fetch provider over one ``httpx.AsyncClient`` (which must not follow redirects
    itself). ``inflight`` counts the fetches in progress, so the client's owner closes
    it only after them."""

    def __init__(self, config: WebFetchConfig, client: httpx.AsyncClient, convert: Converter):
        self.id = config.id
        self.inflight = InFlight()
        self._config = config
        self._client = client
        self._convert = convert

    async def fetch(self, url: str) -> FetchResult:
        """GET ``url``; see the package README for the rules and the errors."""
        limit = self._config.timeout_seconds
        with self.inflight:
            try:
                with anyio.fail_after(limit):
                    return await self._follow(url)
            except TimeoutError:
                raise WebTimeoutError(f"fetching {url} took longer than {limit:g} s") from None
            except httpx.HTTPError as exc:
                raise WebFetchError(f"fetching {url} failed: {_reason(exc)}") from exc

    async def _follow(self, url: str) -> FetchResult:
        request = self._client.build_request("GET", check_url(url))
        redirects = 0
        while True:
            response = await self._client.send(request, stream=True)
            try:
                target = response.next_request
                if target is None:
                    return await self._read(response)
            finally:
                await response.aclose()
            redirects += 1
            if redirects > self._config.max_redirects:
                raise WebTooManyRedirectsError(
                    f"fetching {url} was redirected more than {self._config.max_redirects} "
                    f"times (the last hop pointed to {target.url})"
                )
            check_url(str(target.url))
            request = target

    async def _read(self, response: httpx.Response) -> FetchResult:
        url = str(response.url)
        status = response.status_code
        media, charset = _content_type(response.headers.get("content-type", ""))
        declared = _declared_length(response.headers.get("content-length"))
        if status in _NO_BODY or declared == 0:
            return FetchResult(url=url, status_code=status, content_type=media, content="")
        if not _readable(media):
            shown = f'"{media}"' if media else "none"
            raise WebUnsupportedContentTypeError(
                f"cannot read {url}: its content type is {shown}; only HTML, XHTML, text, "
                "JSON and XML are fetched"
            )
        cap = self._config.max_bytes
        if declared is not None and declared > cap:
            raise WebFetchTooLargeError(
                f"cannot read {url}: it declares {declared} bytes, over the {cap}-byte limit"
            )
        data, truncated = await _read_capped(response, cap)
        text = _decode(data, charset, final=not truncated)
        if media in _HTML:
            text = await anyio.to_thread.run_sync(self._convert, text, url)
        return FetchResult(
            url=url, status_code=status, content_type=media, content=text, truncated=truncated
        )


def _content_type(header: str) -> tuple[str, str | None]:
    """The media type (lower case, no parameters) and the charset of a ``Content-Type``."""
    media, _, params = header.partition(";")
    found = _CHARSET.search(params)
    return media.strip().lower(), found.group(1) if found else None


def _readable(media: str) -> bool:
    return (
        media in _HTML
        or media.startswith("text/")
        or media in ("application/json", "application/xml")
        or media.endswith(("+json", "+xml"))
    )


def _declared_length(value: str | None) -> int | None:
    # h11 has already refused a response whose Content-Length is not a number.
    return None if value is None else int(value)


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of the (decompressed) body, and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        room = cap - size
        if len(chunk) > room:
            chunks.append(chunk[:room])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _decode(data: bytes, charset: str | None, *, final: bool) -> str:
    """``data`` as text in ``charset`` (UTF-8 when unset or unknown), bad bytes replaced;
    a character cut by the size cap (``final`` false) is dropped, not replaced."""
    try:
        decoder = codecs.getincrementaldecoder(charset or "utf-8")(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return decoder.decode(data, final=final)


def _reason(exc: httpx.HTTPError) -> str:
    return str(exc) or type(exc).__name__
