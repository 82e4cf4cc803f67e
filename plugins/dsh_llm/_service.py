"""The ``Llm`` service: the adapter registry and the one streaming call surface."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from contextlib import aclosing
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from dsh import Disposer, DshError, DuplicateNameError, Fiber, Service, hookspec

from ._types import Chunk, Finish, LlmError, LlmFailure, LlmRequest

__all__ = [
    "AdapterRegistrationError",
    "AdapterTypeError",
    "DuplicateAdapterError",
    "Llm",
    "LlmAdapter",
    "LlmConfig",
    "LlmRequestError",
    "LlmSpecs",
    "adapter_failure",
]

_log = logging.getLogger("dsh.llm")


class AdapterRegistrationError(DshError, ValueError):
    """An adapter registration was refused: no model names, an empty or repeated name."""

    code = "INVALID_ADAPTER"


class AdapterTypeError(AdapterRegistrationError, TypeError):
    """An adapter registration had an argument of the wrong type: a model name that is
    not a string, or an adapter without a ``stream`` method."""


class DuplicateAdapterError(AdapterRegistrationError, DuplicateNameError):
    """A model named in a registration is already served by another adapter."""

    code = "DUPLICATE_ADAPTER"


class LlmRequestError(DshError, TypeError):
    """``stream`` was given, or an ``llm/request`` listener returned, something that is
    not an :class:`LlmRequest`."""

    code = "INVALID_REQUEST"


def adapter_failure(error: Exception) -> Finish:
    """The final chunk of a stream whose adapter raised ``error``: an
    :class:`LlmError`'s failure verbatim, else ``model call failed: ...`` with a
    ``DshError``'s code or ``ADAPTER_ERROR``."""
    if isinstance(error, LlmError):
        return Finish("error", error.failure)
    code = error.code if isinstance(error, DshError) else "ADAPTER_ERROR"
    message = str(error) or type(error).__name__
    return Finish("error", LlmFailure(f"model call failed: {message}", code))


def _window(value: object) -> int | None:
    """``value`` when it is a positive ``int`` (a context window), else None."""
    return value if type(value) is int and value > 0 else None


class LlmAdapter(Protocol):
    """A model backend: turns one request into one chunk stream (one provider attempt).

    The stream ends with exactly one ``Finish``; ``UsageChunk`` comes before it.

    An adapter may also declare the context window of the models it serves with a
    method ``context_window(model: str) -> int | None`` (tokens, what it knows now;
    optional, read by :meth:`Llm.context_window`), and find one it has to ask its
    server for with ``async find_context_window(model: str) -> int | None`` (optional,
    read by :meth:`Llm.find_context_window`; asked once, then ``context_window``
    answers it too).
    """

    def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        """Stream the answer to ``request``."""
        ...


class LlmSpecs:
    """The events owned by the model-call service."""

    @hookspec
    def llm_request(self, request: LlmRequest, call_next: Any) -> LlmRequest:
        """Waterfall over every request before it reaches its adapter; return the
        request to send (replace it with ``dataclasses.replace``)."""
        raise NotImplementedError

    @hookspec
    def llm_start(self, request: LlmRequest, provider: str) -> None:
        """A request reaches its adapter (after the ``llm/request`` waterfall):
        ``provider`` is the adapter's ``provider`` attribute when it is a string, else
        the name of the plugin that registered it (``""``: no adapter serves the
        model). Observers only: a listener's failure is logged."""

    @hookspec
    def llm_response(self, request: LlmRequest, chunks: tuple[Chunk, ...] | None) -> None:
        """The stream of ``request`` (the one ``llm/start`` saw) ended: ``chunks`` are
        every chunk it yielded, its final ``Finish`` last (a failure included), or None
        when the stream was cancelled or closed before its end. Assemble them with
        :class:`BlockAssembler` for the answer. Observers only: a listener's failure
        is logged."""

    @hookspec
    def llm_adapters_change(self) -> None:
        """An adapter was registered or removed."""


class LlmConfig(BaseModel):
    """Config of the ``llm`` plugin: it has no settings (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


class Llm(Service):
    """Routes requests to the adapter serving their model (ctx key ``llm``)."""

    key = "llm"
    name = "llm"
    Config = LlmConfig
    hookspecs = LlmSpecs

    def __init__(self, ctx: Any, config: Any) -> None:
        super().__init__(ctx, config)
        self._routes: dict[str, LlmAdapter] = {}
        self._owners: dict[str, Fiber] = {}
        #: The llm/request waterfall, looked up once: a stream skips it when unheard.
        self._on_request = ctx.events.event("llm/request")
        #: The observers of each stream, looked up once the same way.
        self._on_start = ctx.events.event("llm/start")
        self._on_response = ctx.events.event("llm/response")
        #: Whether none of the three is heard, as of the bus's count of changes.
        self._events = ctx.events
        self._unheard = (-1, False)

    def models(self) -> list[str]:
        """The model names some adapter serves, sorted."""
        return sorted(self._routes)

    def context_window(self, model: str) -> int | None:
        """The context window (tokens) the adapter serving ``model`` declares, or None:
        no adapter serves it, the adapter has no ``context_window(model)`` method, or
        that method answers something other than a positive ``int``."""
        declare = getattr(self._routes.get(model), "context_window", None)
        return _window(declare(model)) if callable(declare) else None

    async def find_context_window(self, model: str) -> int | None:
        """The context window of ``model`` as :meth:`context_window` gives it, after
        the adapter was given the chance to find it (its ``find_context_window(model)``
        method, when it has one: ``llm-openai`` asks its server once). None under the
        same conditions. Await it before the first request of a model whose window
        matters; later, :meth:`context_window` answers without I/O."""
        find = getattr(self._routes.get(model), "find_context_window", None)
        if callable(find):
            return _window(await find(model))
        return self.context_window(model)

    def register_adapter(self, models: Sequence[str], adapter: LlmAdapter) -> Disposer:
        """Serve ``models`` with ``adapter`` (a single ``str`` is one model); returns the
        exact disposer of the registration, an effect of the calling plugin.

        All or nothing, checked before anything is registered: an empty list, an empty
        or repeated name (:class:`AdapterRegistrationError`), a name that is not a
        string or an adapter without ``stream`` (:class:`AdapterTypeError`), a model
        already served (:class:`DuplicateAdapterError`). Emits ``llm/adapters-change``
        after the registration and after its removal.
        """
        names: list[object] = [models] if isinstance(models, str) else list(models)
        if not names:
            raise AdapterRegistrationError("an adapter must serve at least one model")
        if not callable(getattr(adapter, "stream", None)):
            raise AdapterTypeError(f"adapter {adapter!r} has no stream(request) method")
        routes: list[str] = []
        for name in names:
            if not isinstance(name, str):
                raise AdapterTypeError(
                    f"adapter model names must be strings, got {type(name).__name__} {name!r}"
                )
            if not name:
                raise AdapterRegistrationError("adapter model names must be non-empty")
            if name in self._routes:
                holder = self._owners[name]
                raise DuplicateAdapterError(
                    f'an adapter for model "{name}" is already registered',
                    kind="model",
                    name=name,
                    holder=holder,
                    claimant=self.ctx.fiber,
                )
            routes.append(name)
        if len(set(routes)) != len(routes):
            repeated = sorted({n for n in routes if routes.count(n) > 1})
            raise AdapterRegistrationError(
                f"adapter model names repeat: {', '.join(repeated)} (in {routes})"
            )

        owner = self.ctx.fiber

        def body() -> Iterator[Callable[[], None]]:
            for name in routes:
                self._routes[name] = adapter
                self._owners[name] = owner
            # The undo comes before the event: a listener that raises rolls the
            # registration back and the error reaches the caller.
            yield functools.partial(self._unroute, routes)
            self.home_ctx.emit("llm/adapters-change")

        return self.ctx.effect(body, label=f"llm adapter {', '.join(routes)}")

    def _unroute(self, names: list[str]) -> None:
        # Runs once per registration, and no other adapter can take these names while
        # it stands.
        for name in names:
            del self._routes[name]
            del self._owners[name]
        self.home_ctx.emit("llm/adapters-change")

    def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        """Stream the answer to ``request``.

        The ``llm/request`` waterfall sees the request first and may replace it; the
        adapter serving the resulting request's model answers. Whatever goes wrong past
        the waterfall ends the stream with one ``Finish("error")`` chunk: no adapter for
        the model (code ``NO_ADAPTER``), or an adapter that raises (after the chunks it
        yielded; an :class:`LlmError`'s failure verbatim, another ``DshError``'s code,
        else ``ADAPTER_ERROR``). Cancellation propagates, and so do errors of the
        waterfall's listeners. Consume it with ``contextlib.aclosing``: closing the
        stream early closes the adapter's stream too.
        """
        if self._on_response.listeners():
            return self._observed(request)
        return self._stream(request, None)

    def direct(self, request: LlmRequest) -> LlmAdapter | None:
        """The adapter serving ``request``'s model when nothing stands between a stream
        of it and that adapter (nobody listens to ``llm/request``, ``llm/start`` or
        ``llm/response``), else None (no adapter serves the model, or a listener would
        see the stream): then use :meth:`stream`.

        A caller that iterates ``adapter.stream(request)`` itself gets what
        :meth:`stream` would give when it ends the stream on an adapter's exception
        with :func:`adapter_failure` and closes the adapter's stream (its ``aclose``,
        when it has one) at the end."""
        changes = self._events.changes
        unheard = self._unheard
        if unheard[0] != changes:
            unheard = self._unheard = (
                changes,
                not (
                    self._on_request.listeners()
                    or self._on_start.listeners()
                    or self._on_response.listeners()
                ),
            )
        return self._routes.get(request.model) if unheard[1] else None

    async def _observed(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        """:meth:`_stream`, its chunks kept for ``llm/response`` on the way."""
        sent: list[LlmRequest] = []
        kept: list[Chunk] = []
        ended = False
        try:
            async with aclosing(self._stream(request, sent)) as chunks:
                async for chunk in chunks:
                    kept.append(chunk)
                    yield chunk
            ended = True
        finally:
            if sent:  # the waterfall settled the request an adapter was asked for
                self._observe("llm/response", sent[0], tuple(kept) if ended else None)

    async def _stream(
        self, request: LlmRequest, sent: list[LlmRequest] | None
    ) -> AsyncGenerator[Chunk, None]:
        """The stream of :meth:`stream`; the request the waterfall settled is appended
        to ``sent`` (when given)."""
        given: object = request
        if not isinstance(given, LlmRequest):
            raise LlmRequestError(
                f"llm.stream needs a dsh_llm.LlmRequest, got {type(given).__name__}"
            )
        if self._on_request.listeners():  # an empty waterfall is skipped
            request = await self.home_ctx.waterfall("llm/request", request, inner=lambda: request)
            if not isinstance(request, LlmRequest):
                raise LlmRequestError(
                    "an llm/request listener returned "
                    f"{type(request).__name__} instead of a dsh_llm.LlmRequest"
                )
        adapter = self._routes.get(request.model)
        if sent is not None:
            sent.append(request)
        if self._on_start.listeners():
            self._observe("llm/start", request, self._provider(request.model, adapter))
        if adapter is None:
            known = ", ".join(self.models()) or "(none)"
            yield Finish(
                "error",
                LlmFailure(
                    f'no adapter serves model "{request.model}"; known models: {known}',
                    "NO_ADAPTER",
                ),
            )
            return
        chunks: AsyncIterator[Chunk] | None = None
        try:
            chunks = adapter.stream(request)
            async for chunk in chunks:
                yield chunk
        except Exception as exc:
            yield adapter_failure(exc)
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    def _provider(self, model: str, adapter: LlmAdapter | None) -> str:
        """What ``llm/start`` names the provider of ``model``."""
        if adapter is None:
            return ""
        named = getattr(adapter, "provider", None)
        return named if isinstance(named, str) else self._owners[model].name

    def _observe(self, event: str, *args: Any) -> None:
        # Observers never break a stream: their failures are logged.
        try:
            self.home_ctx.emit(event, *args)
        except Exception as exc:
            _log.error("a listener of %s failed", event, exc_info=exc)
