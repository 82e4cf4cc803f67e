"""The adapter: one streamed chat-completions call per request, with retries before
the stream starts and every failure turned into a final ``Finish("error")`` chunk."""

from __future__ import annotations

import email.utils
import json
import logging
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any, cast

import anyio
import httpx

from dsh import InFlight
from dsh_llm import Chunk, Finish, LlmFailure, LlmRequest

from ._config import OpenAICompatibleConfig
from ._wire import BadResponse, StreamDecoder, StreamError, request_body

__all__ = ["OpenAIAdapter"]

_log = logging.getLogger("dsh.llm-openai")

#: How much of an error response body is read for its message.
_ERROR_BODY_LIMIT = 16_384
#: Keys at least this long are masked in server messages (shorter ones, such as the
#: placeholder ``EMPTY`` local servers accept, would mask ordinary words).
_MASK_MIN = 8
#: How long to wait for the end of the body after ``[DONE]``.
_DRAIN_SECONDS = 1.0
#: How much of an unexpected payload an error message quotes.
_QUOTE = 200
#: How much of a server's error message (or error body) a failure shows.
_DETAIL = 300
#: How a server says a request is too long for the model's context window.
_CONTEXT_LENGTH = re.compile(
    r"context[ _-]?(length|size|window)|maximum context|too many tokens|prompt is too long",
    re.IGNORECASE,
)


def _quote(text: str) -> str:
    return repr(text if len(text) <= _QUOTE else text[:_QUOTE] + "…")


def _request_id(headers: Mapping[str, str]) -> str | None:
    return headers.get("x-request-id") or headers.get("request-id")


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


def _shorten(text: str) -> str:
    """``text`` on one line, cut to :data:`_DETAIL` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _DETAIL else flat[: _DETAIL - 1] + "…"


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
    """Read what follows ``[DONE]`` (normally nothing) so the connection can be reused."""
    with anyio.move_on_after(_DRAIN_SECONDS):
        try:
            async for _ in lines:
                pass
        except httpx.HTTPError:
            pass  # the answer is complete; the connection just will not be reused


class _NoEvents(StreamError):
    """A successful response whose body holds no server-sent event."""


class OpenAIAdapter:
    """Streams chat completions from one OpenAI-compatible server (a ``dsh_llm.LlmAdapter``).

    ``client`` is the ``httpx.AsyncClient`` to send with; its owner closes it. Each
    :meth:`stream` call is one provider call: up to ``1 + max_retries`` HTTP attempts
    while no response body has been read, none after.
    """

    def __init__(self, config: OpenAICompatibleConfig, client: httpx.AsyncClient) -> None:
        self.config = config
        self.url = f"{config.base_url}/chat/completions"
        self._client = client
        #: The calls streaming now: the client is closed only once none is.
        self.inflight = InFlight()
        headers = {
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
            "User-Agent": "dsh-harness llm-openai",
        }
        if config.api_key is not None:
            headers["Authorization"] = f"Bearer {config.api_key}"
        headers.update(config.headers)
        self._headers = headers

    def __repr__(self) -> str:
        return f"<OpenAIAdapter {self.url} models={self.config.models}>"

    async def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        """Stream the answer to ``request``; the last chunk is always a ``Finish``."""
        with self.inflight:
            async with aclosing(self._stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk

    async def _stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        config = self.config
        body = request_body(
            request,
            send_reasoning=config.send_reasoning,
            options=config.request_options(bool(request.tools)),
            extra=config.extra_body,
        )
        http_request = self._client.build_request(
            "POST",
            self.url,
            content=json.dumps(body, ensure_ascii=False).encode(),
            headers=self._headers,
        )
        attempt = 1
        while True:
            try:
                response = await self._client.send(http_request, stream=True)
            except httpx.TransportError as exc:
                failure, retry = self._transport_failure(exc, attempt)
            else:
                try:
                    if response.is_success:
                        async with aclosing(self._read(response)) as chunks:
                            async for chunk in chunks:
                                yield chunk
                        return
                    failure, retry = await self._status_failure(response, request, attempt)
                finally:
                    await response.aclose()
            if not retry or attempt > config.max_retries:
                yield Finish("error", failure)
                return
            if failure.retry_after_ms is None:
                delay = config.retry_backoff * 2 ** (attempt - 1)
            else:
                delay = min(failure.retry_after_ms / 1000, config.max_retry_after)
            # INFO, not WARNING: a retry that succeeds is not the user's problem, and
            # one that fails for good is reported once, with its attempt count. A
            # front-end shows `dsh_status` as a passing status line (the terminal chat).
            status = f"{failure.code}: retrying in {delay:.1f}s (attempt {attempt + 1} of "
            status += f"{config.max_retries + 1})"
            _log.info(
                "%s failed (%s), retrying in %.2fs (attempt %d of %d): %s",
                self.url,
                failure.code,
                delay,
                attempt + 1,
                config.max_retries + 1,
                failure.message,
                extra={"dsh_status": status},
            )
            await anyio.sleep(delay)
            attempt += 1

    # -- failures before the stream ------------------------------------------------------

    def _transport_failure(
        self, exc: httpx.TransportError, attempt: int
    ) -> tuple[LlmFailure, bool]:
        """The failure for a request that got no response, and whether to retry it."""
        tries = f"(attempt {attempt} of {self.config.max_retries + 1})"
        if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
            message = (
                f"connecting to {self.url} timed out after {self.config.connect_timeout:g}s "
                f"(connect_timeout) {tries}"
            )
            return LlmFailure(message, "TIMEOUT"), True
        if isinstance(exc, httpx.TimeoutException):
            # The request went out; waiting again would double a long wait.
            message = (
                f"{self.url} sent no response within {self.config.read_timeout:g}s (read_timeout)"
            )
            return LlmFailure(message, "TIMEOUT"), False
        detail = str(exc) or type(exc).__name__
        return LlmFailure(f"cannot connect to {self.url}: {detail} {tries}", "CONNECTION"), True

    async def _status_failure(
        self, response: httpx.Response, request: LlmRequest, attempt: int
    ) -> tuple[LlmFailure, bool]:
        """The failure for an HTTP error status, and whether to retry it."""
        status = response.status_code
        detail = _server_message(await _error_text(response))
        key = self.config.api_key
        if key is not None and len(key) >= _MASK_MIN:
            detail = detail.replace(key, "***")
        suffix = f": {detail}" if detail else ""
        base = self.config.base_url
        retry = False
        if status in (401, 403):
            if key is None:
                message = f"{base} requires an API key (HTTP {status}) and api_key is not set"
            else:
                message = f"the API key was rejected by {base} (HTTP {status})"
            code = "AUTH"
        elif status == 404:
            message = (
                f'{self.url} answered HTTP 404 for model "{request.model}" '
                "(check base_url and the model name)"
            )
            code = "NOT_FOUND"
        elif status == 429:
            message = f"{base} is rate limiting requests (HTTP 429, attempt {attempt})"
            code, retry = "RATE_LIMITED", True
        elif status >= 500:
            message = f"{base} failed with HTTP {status} (attempt {attempt})"
            code, retry = "SERVER_ERROR", True
        elif status >= 400 and _CONTEXT_LENGTH.search(detail):
            message = f"the request is too long for the context window of {request.model!r}"
            code = "CONTEXT_LENGTH"
        elif status >= 400:
            message = f"{base} rejected the request (HTTP {status})"
            code = "BAD_REQUEST"
        else:
            location = response.headers.get("location")
            where = f" to {location}" if location else ""
            message = f"{self.url} answered with an unexpected HTTP {status}{where}"
            code = "BAD_RESPONSE"
        wait = retry_after(response.headers)
        failure = LlmFailure(
            message + suffix,
            code,
            status=status,
            retry_after_ms=None if wait is None else round(wait * 1000),
            request_id=_request_id(response.headers),
        )
        return failure, retry

    # -- the stream ----------------------------------------------------------------------

    async def _read(self, response: httpx.Response) -> AsyncGenerator[Chunk, None]:
        """The chunks of a successful response; a broken stream ends in an error finish."""
        decoder = StreamDecoder(_request_id(response.headers))
        out: list[Chunk] = []
        pending: str | None = None  # the data of the event being read
        data = ""  # the data of the last event
        events = 0
        first = ""  # the first line that is not an event, for a useless body's message
        try:
            # aiter_lines is an async generator (typed as a plain iterator).
            lines = cast("AsyncGenerator[str, None]", response.aiter_lines())
            async with aclosing(lines):
                async for line in lines:
                    if line.startswith("data:"):
                        value = line[6:] if line.startswith("data: ") else line[5:]
                        pending = value if pending is None else f"{pending}\n{value}"
                        continue
                    if line or pending is None:
                        if not first and line and not line.startswith(":"):
                            first = line
                        continue  # a comment, another field, or a blank line after nothing
                    data, pending = pending, None
                    events += 1
                    if data == "[DONE]":
                        await _drain(lines)
                        break
                    decoder.feed(self._parse(data), out)
                    for chunk in out:
                        yield chunk
                    out.clear()
            if pending is not None:  # the server closed right after an event's data
                data = pending
                events += 1
                if data != "[DONE]":
                    decoder.feed(self._parse(data), out)
            if not events:
                content_type = response.headers.get("content-type", "no content-type")
                text = f": {_quote(first)}" if first else ""
                raise _NoEvents(
                    f"{self.url} answered HTTP {response.status_code} ({content_type}) "
                    f"without a single server-sent event{text}"
                )
            decoder.end(out)
        except (StreamError, httpx.HTTPError) as exc:
            decoder.fail(self._broken(response, exc, data), out)
        for chunk in out:
            yield chunk

    def _parse(self, data: str) -> Any:
        """The JSON value of one event's data; :class:`BadResponse` when it is not
        JSON, or nests too deeply to decode."""
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            why = "nests too deeply" if isinstance(exc, RecursionError) else "is not JSON"
            raise BadResponse(f"{self.url} sent a data: line that {why}: {_quote(data)}") from None

    def _broken(self, response: httpx.Response, exc: Exception, data: str) -> LlmFailure:
        """The failure for a stream that broke with ``exc`` after ``data``."""
        if isinstance(exc, StreamError):
            message, code = str(exc), exc.code
        elif isinstance(exc, httpx.TimeoutException):
            message = (
                f"{self.url} sent nothing for {self.config.read_timeout:g}s mid-stream "
                "(read_timeout)"
            )
            code = "TIMEOUT"
        elif isinstance(exc, httpx.TransportError):
            message = f"the connection to {self.url} dropped mid-stream: {exc}"
            code = "STREAM_INTERRUPTED"
        else:
            message = f"cannot decode the response body of {self.url}: {exc}"
            code = "BAD_RESPONSE"
        request_id = _request_id(response.headers)
        if request_id is not None:
            # The server answered: its id for the request finds it in the server's log.
            message += f" (request id {request_id})"
        return LlmFailure(message, code, request_id=request_id)
