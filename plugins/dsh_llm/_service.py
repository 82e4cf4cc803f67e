"""The ``Llm`` service: the adapter registry and the one streaming call surface."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Protocol

import anyio

from dsh import Disposer, DshError, Service, hookspec

from ._types import Chunk, Finish, LlmError, LlmFailure, LlmRequest

__all__ = ["AdapterRegistrationError", "Llm", "LlmAdapter", "LlmSpecs"]


class AdapterRegistrationError(DshError, ValueError):
    """An adapter registration was malformed or a model is already served."""

    code = "INVALID_ADAPTER"


class LlmAdapter(Protocol):
    """A model backend: turns one request into one chunk stream (one provider attempt).

    The stream ends with exactly one ``Finish``; ``UsageChunk`` comes before it.
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
    def llm_adapters_change(self) -> None:
        """An adapter was registered or removed."""


class Llm(Service):
    """Routes requests to the adapter serving their model (ctx key ``llm``)."""

    key = "llm"
    name = "llm"
    hookspecs = LlmSpecs

    def __init__(self, ctx: Any, config: Any) -> None:
        super().__init__(ctx, config)
        self._routes: dict[str, LlmAdapter] = {}

    def models(self) -> list[str]:
        """The model names some adapter serves, sorted."""
        return sorted(self._routes)

    def register_adapter(self, models: Sequence[str], adapter: LlmAdapter) -> Disposer:
        """Serve ``models`` with ``adapter``; returns the exact disposer.

        All or nothing: an empty list, an empty name or a model already served raises
        :class:`AdapterRegistrationError` and registers none of them.
        """
        names = [models] if isinstance(models, str) else list(models)
        if not names:
            raise AdapterRegistrationError("an adapter must serve at least one model")
        if not callable(getattr(adapter, "stream", None)):
            raise AdapterRegistrationError(f"adapter {adapter!r} has no stream(request) method")
        for name in names:
            if not isinstance(name, str) or not name:
                raise AdapterRegistrationError(
                    f"adapter model names must be non-empty strings, got {name!r}"
                )
            if name in self._routes:
                raise AdapterRegistrationError(
                    f'an adapter for model "{name}" is already registered'
                )
        if len(set(names)) != len(names):
            raise AdapterRegistrationError(f"adapter model names repeat: {names}")

        def body() -> Iterator[Callable[[], None]]:
            for name in names:
                self._routes[name] = adapter
            yield functools.partial(self._unroute, names, adapter)
            self.home_ctx.emit("llm/adapters-change")

        return self.ctx.effect(body, label=f"llm adapter {', '.join(names)}")

    def _unroute(self, names: list[str], adapter: LlmAdapter) -> None:
        for name in names:
            if self._routes.get(name) is adapter:
                del self._routes[name]
        self.home_ctx.emit("llm/adapters-change")

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        """Stream the answer to ``request``.

        The ``llm/request`` waterfall sees the request first. A missing adapter or an
        adapter that raises ends the stream with one ``Finish("error")`` chunk naming
        the failure; cancellation propagates. Consume it with ``contextlib.aclosing``.
        """
        request = await self.home_ctx.waterfall("llm/request", request, inner=lambda: request)
        adapter = self._routes.get(request.model)
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
        try:
            async for chunk in adapter.stream(request):
                yield chunk
        except anyio.get_cancelled_exc_class():
            raise
        except LlmError as exc:
            yield Finish("error", exc.failure)
        except Exception as exc:
            code = exc.code if isinstance(exc, DshError) else "ADAPTER_ERROR"
            message = str(exc) or type(exc).__name__
            yield Finish("error", LlmFailure(f"model call failed: {message}", code))
