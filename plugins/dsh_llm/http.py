"""The HTTP core of streaming model adapters (``llm-openai``, ``llm-anthropic``).

What every provider that answers one POST with server-sent events shares: the config
keys of the connection (:class:`HttpModelConfig`), one call with retries before the
stream starts and every failure turned into a final ``Finish("error")`` chunk
(:class:`HttpAdapter`), the HTTP statuses classified into stable codes, the SSE framing
read into a provider's decoder (:class:`DecoderBase`), and the plugin that owns the
client (:class:`HttpModelPlugin`). A provider supplies its endpoint, its headers, its
request body and its decoder.

Import it as ``dsh_llm.http``: ``import dsh_llm`` alone does not load httpx.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from typing import Any, ClassVar, Generic, TypeVar, cast

import anyio
import httpx

from dsh import Disposer, InFlight, Plugin

from ._estimate import estimate_tokens
from ._http_config import HttpModelConfig
from ._http_response import _drain, _error_text, _quote, _request_id, _server_message, retry_after
from ._sse import (
    BadResponse,
    DecoderBase,
    EventDecoder,
    ServerStreamError,
    StreamError,
    _Events,
    _NoEvents,
    _Overflow,
    int_field,
    str_field,
)
from ._types import Chunk, Finish, LlmFailure, LlmRequest

__all__ = [
    "CONTEXT_LENGTH",
    "OVERFLOW_RATIO",
    "BadResponse",
    "DecoderBase",
    "EventDecoder",
    "HttpAdapter",
    "HttpModelConfig",
    "HttpModelPlugin",
    "ServerStreamError",
    "StreamError",
    "int_field",
    "retry_after",
    "str_field",
]

#: Keys at least this long are masked in server messages (shorter ones, such as the
#: placeholder ``EMPTY`` local servers accept, would mask ordinary words).
_MASK_MIN = 8
#: How a server says a request is too long for the model's context window.
CONTEXT_LENGTH = re.compile(
    r"context[ _-]?(length|size|window|limit)|maximum context|too many tokens"
    r"|prompt is too long",
    re.IGNORECASE,
)
#: A 200 without a single event for a request estimated at this share of the context
#: window (or more) is taken for an overflow: some servers (llama-cpp-python's) fail
#: that way instead of refusing the request.
OVERFLOW_RATIO = 0.9


# -- the adapter --------------------------------------------------------------------------

ConfigT = TypeVar("ConfigT", bound=HttpModelConfig)


class HttpAdapter(ABC, Generic[ConfigT]):
    """Streams one provider's answers over HTTP (a ``dsh_llm.LlmAdapter``).

    ``client`` is the ``httpx.AsyncClient`` to send with; its owner closes it. Each
    :meth:`stream` call is one provider call: up to ``1 + max_retries`` HTTP attempts
    while no response body has been read, none after. A subclass names itself, its
    endpoint and its credential header, and builds the body and the decoder.
    """

    #: The plugin's name: logs go to ``dsh.<name>``, the User-Agent is ``dsh-harness <name>``.
    name: ClassVar[str]
    #: The endpoint, appended to ``base_url``.
    path: ClassVar[str]
    #: A ``data:`` payload that ends the stream (OpenAI's ``[DONE]``), or None.
    done_marker: ClassVar[str | None] = None

    def __init__(self, config: ConfigT, client: httpx.AsyncClient) -> None:
        self.config = config
        self.url = f"{config.base_url}{self.path}"
        self._client = client
        #: The calls streaming now: the client is closed only once none is.
        self.inflight = InFlight()
        self._log = logging.getLogger(f"dsh.{self.name}")
        headers = {
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
            "User-Agent": f"dsh-harness {self.name}",
        }
        headers.update(self.auth_headers())
        headers.update(config.headers)
        self._headers = headers
        #: The windows the server was asked for, by model (None: it did not say).
        self._found: dict[str, int | None] = {}
        #: Set when the one probe under way for a model is over.
        self._finding: dict[str, anyio.Event] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url} models={self.config.models}>"

    # -- context windows ------------------------------------------------------------------

    def context_window(self, model: str) -> int | None:
        """The context window of ``model`` known now: ``context_windows[model]``, else
        ``context_window``, else what the server said when it was asked
        (:meth:`find_context_window`), else None."""
        config = self.config
        window = config.context_windows.get(model, config.context_window)
        return self._found.get(model) if window is None else window

    async def find_context_window(self, model: str) -> int | None:
        """:meth:`context_window`, after asking the server (:meth:`probe_context_window`)
        when the config gives none. The server is asked once per model, whatever it
        answers (concurrent callers wait for that one probe)."""
        window = self.context_window(model)
        if window is not None or model in self._found:
            return window
        finding = self._finding.get(model)
        if finding is not None:
            await finding.wait()
            return self._found.get(model)
        finding = self._finding[model] = anyio.Event()
        try:
            self._found[model] = await self.probe_context_window(model)
        finally:
            del self._finding[model]
            finding.set()
        return self._found[model]

    async def probe_context_window(self, model: str) -> int | None:
        """Ask the server for the context window of ``model``; None when it cannot
        say (a provider that has a way overrides this; it must not raise for a
        failed probe: log it and answer None)."""
        del model
        return None

    @abstractmethod
    def auth_headers(self) -> dict[str, str]:
        """The headers that carry the credential (and the API version, if any)."""
        ...

    @abstractmethod
    def request_body(self, request: LlmRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``."""
        ...

    @abstractmethod
    def decoder(self, request_id: str | None) -> EventDecoder:
        """A fresh decoder for one response (``request_id``: the server's id for it)."""
        ...

    async def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        """Stream the answer to ``request``; the last chunk is always a ``Finish``."""
        with self.inflight:
            async with aclosing(self._stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk

    async def _stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        config = self.config
        http_request = self._client.build_request(
            "POST",
            self.url,
            content=json.dumps(self.request_body(request), ensure_ascii=False).encode(),
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
                        async with aclosing(self._read(response, request)) as chunks:
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
            request_id = "" if failure.request_id is None else f" (request id {failure.request_id})"
            status = f"{failure.code}: retrying in {delay:.1f}s (attempt {attempt + 1} of "
            status += f"{config.max_retries + 1})"
            self._log.info(
                "%s failed (%s), retrying in %.2fs (attempt %d of %d): %s%s",
                self.url,
                failure.code,
                delay,
                attempt + 1,
                config.max_retries + 1,
                failure.message,
                request_id,
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
        elif status >= 400 and CONTEXT_LENGTH.search(detail):
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

    async def _read(
        self, response: httpx.Response, request: LlmRequest
    ) -> AsyncGenerator[Chunk, None]:
        """The chunks of a successful response; a broken stream ends in an error finish."""
        decoder = self.decoder(_request_id(response.headers))
        out: list[Chunk] = []
        events = _Events(self.done_marker)
        try:
            # aiter_lines is an async generator (typed as a plain iterator).
            lines = cast("AsyncGenerator[str, None]", response.aiter_lines())
            async with aclosing(lines):
                async for line in lines:
                    event = events.line(line)
                    if event is not None and self._feed(decoder, event, out):
                        await _drain(lines)
                        break
                    for chunk in out:
                        yield chunk
                    out.clear()
            event = events.flush()  # the server closed right after an event's data
            if event is not None:
                self._feed(decoder, event, out)
            if not events.count:
                raise await self._no_events(response, request, events.first)
            decoder.end(out)
        except (StreamError, httpx.HTTPError) as exc:
            failure = self._broken(response, exc)
            if (
                not events.count
                and isinstance(exc, httpx.TransportError)
                and not isinstance(exc, httpx.TimeoutException)
            ):
                # The server hung up before its first event: an overflow, perhaps.
                _, overflow = await self._overflow(request)
                if overflow is not None:
                    message = f"{overflow}: {failure.message}"
                    failure = dataclasses.replace(failure, message=message, code=_Overflow.code)
            decoder.fail(failure, out)
        for chunk in out:
            yield chunk

    async def _overflow(self, request: LlmRequest) -> tuple[int | None, str | None]:
        """The model's context window (None: unknown) and, when the request is
        estimated at :data:`OVERFLOW_RATIO` of it or more, what the overflow failure
        says first (else None)."""
        window = await self.find_context_window(request.model)
        size = estimate_tokens(request)
        if window is None or size < OVERFLOW_RATIO * window:
            return window, None
        return window, (
            f"the request is too long for the context window of {request.model!r} "
            f"(an estimated {size} tokens of {window})"
        )

    async def _no_events(
        self, response: httpx.Response, request: LlmRequest, first: str
    ) -> StreamError:
        """What a successful response without a single event (``first``: its first
        line that is not SSE) means: an overflow (``CONTEXT_LENGTH``) for a request
        near the window, else a bad response that may be the server's failure."""
        content_type = response.headers.get("content-type", "no content-type")
        text = f": {_quote(first)}" if first else " (an empty body)"
        what = (
            f"{self.url} answered HTTP {response.status_code} ({content_type}) "
            f"without a single server-sent event{text}"
        )
        window, overflow = await self._overflow(request)
        if overflow is not None:
            return _Overflow(f"{overflow}: {what}")
        hint = "; the server may have failed mid-request (its log says why)"
        if window is None:
            hint += (
                f", or the request may not fit the context window of {request.model!r}, "
                "which is unknown (set context_windows to have that recognised)"
            )
        return _NoEvents(what + hint)

    def _feed(self, decoder: EventDecoder, event: tuple[str, str], out: list[Chunk]) -> bool:
        """Give one event to ``decoder``; True when the stream is complete."""
        name, data = event
        if data == self.done_marker:
            return True
        try:
            payload = json.loads(data)
        except (ValueError, RecursionError) as exc:
            why = "nests too deeply" if isinstance(exc, RecursionError) else "is not JSON"
            raise BadResponse(f"{self.url} sent a data: line that {why}: {_quote(data)}") from None
        return decoder.feed(payload, out, name)

    def _broken(self, response: httpx.Response, exc: Exception) -> LlmFailure:
        """The failure for a stream that broke with ``exc``."""
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


# -- the plugin ---------------------------------------------------------------------------


class HttpModelPlugin(Plugin):
    """Serves ``config.models`` with one :attr:`Adapter` over one HTTP client; unloading
    removes the route, then closes the client once no call is streaming."""

    inject = ("llm",)
    #: The adapter class the plugin registers.
    Adapter: ClassVar[type[HttpAdapter[Any]]]

    config: HttpModelConfig
    #: The adapter registered for the configured models (set by :meth:`setup`).
    adapter: HttpAdapter[Any]

    def setup(self) -> Iterator[Any]:
        config = self.config
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(
                config.read_timeout,
                connect=config.connect_timeout,
                pool=config.connect_timeout,
            ),
            follow_redirects=False,
        )
        adapter = self.adapter = self.Adapter(config, client)

        async def close_client() -> None:
            # Turns still streaming end first (their agents are being disposed too,
            # or they finish): a client closed under them would fail them instead.
            await adapter.inflight.idle()
            await client.aclose()

        # Undone last to first: the route goes, then the client closes.
        yield close_client
        registration: Disposer = self.ctx.llm.register_adapter(config.models, adapter)
        yield registration
