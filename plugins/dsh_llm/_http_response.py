"""Reading an HTTP response's side channels: the wait it asks for, its request id, the
message of an error body, and what follows the last event."""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import AsyncIterator, Mapping

import anyio
import httpx

__all__ = ["retry_after"]

#: How much of an error response body is read for its message.
_ERROR_BODY_LIMIT = 16_384
#: How long to wait for the end of the body after the stream's last event.
_DRAIN_SECONDS = 1.0
#: How much of an unexpected payload an error message quotes.
_QUOTE = 200
#: How much of a server's error message (or error body) a failure shows.
_DETAIL = 300


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a response asks the client to wait (``retry-after-ms``, then
    ``Retry-After`` as seconds or an HTTP date), or ``None``."""
    value = headers.get("retry-after-ms")
    scale = 1000.0
    if value is None:
        value = headers.get("retry-after")
        scale = 1.0
    if value is None:
        return None
    try:
        seconds = float(value) / scale
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def _quote(text: str) -> str:
    return repr(text if len(text) <= _QUOTE else text[:_QUOTE] + "…")


def _request_id(headers: Mapping[str, str]) -> str | None:
    return headers.get("x-request-id") or headers.get("request-id")


def _shorten(text: str) -> str:
    """``text`` on one line, cut to :data:`_DETAIL` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _DETAIL else flat[: _DETAIL - 1] + "…"


def _server_message(text: str) -> str:
    """The human part of an error body: ``error.message``, ``message``, ``detail`` or
    the text itself."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        message = error.get("message") or error.get("detail") if isinstance(error, dict) else error
        if isinstance(message, str) and message:
            text = message
    return _shorten(text)


async def _error_text(response: httpx.Response) -> str:
    parts: list[bytes] = []
    size = 0
    try:
        async for part in response.aiter_bytes():
            parts.append(part)
            size += len(part)
            if size >= _ERROR_BODY_LIMIT:
                break
    except httpx.HTTPError:
        pass  # the status says enough; the body is a courtesy
    return b"".join(parts)[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")


async def _drain(lines: AsyncIterator[str]) -> None:
    """Read what follows the last event (normally nothing) so the connection can be
    reused."""
    with anyio.move_on_after(_DRAIN_SECONDS):
        try:
            async for _ in lines:
                pass
        except httpx.HTTPError:
            pass  # the answer is complete; the connection just will not be reused
