"""Contexts: the handle plugins use to reach the runtime."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio

from ._disposer import Disposer, EffectBody, native_cancels
from ._errors import ConfigError, DshError, ServiceNotFoundError
from ._events import ALL_SCOPES, EventBus, Listener
from ._fiber import Fiber, FiberState
from ._fiber_unwind import teardown
from ._plugin import Service, plugin_spec
from ._runtime import Runtime

if TYPE_CHECKING:
    import logging

    from ._config import EntryInfo

__all__ = ["Context"]


class Context:
    """A handle on one fiber of a runtime, optionally carrying a scope key.

    ``Context()`` makes a root; use it as ``async with Context() as root:``. Every
    plugin receives its own context; ``ctx.<key>`` reaches an active service.

    Disposal is shielded from cancellation, so a timeout around ``dispose()`` does not
    bound it; ``undo_timeout`` (seconds) does: an asynchronous undo step still running
    after that long is cancelled, logged with its plugin's name, and the unwind goes on.
    """

    __slots__ = ("_fiber", "_rt", "_tg_cm", "scope")

    def __init__(self, *, undo_timeout: float | None = None) -> None:
        if undo_timeout is not None and not undo_timeout > 0:
            raise ConfigError(
                f"undo_timeout must be a positive number of seconds, got {undo_timeout!r}"
            )
        rt = Runtime(undo_timeout)
        self._rt = rt
        self.scope: object = None
        root = Fiber(rt, None, None, None)
        self._fiber = root
        root.ctx = self
        root.dispose = Disposer(root, "root")
        root.dispose._phase = 1
        root.dispose.bounded = False
        root.dispose._undo.append(functools.partial(teardown, root, reset=True))

    @classmethod
    def _derive(cls, rt: Runtime, fiber: Fiber, scope: object) -> Context:
        ctx = object.__new__(cls)
        ctx._rt = rt
        ctx._fiber = fiber
        ctx.scope = scope
        return ctx

    def __repr__(self) -> str:
        scope = "" if self.scope is None else f" scope={self.scope!r}"
        return f"<Context {self._fiber.name!r}{scope}>"

    # -- the root's lifetime ------------------------------------------------------------

    async def __aenter__(self) -> Self:
        rt = self._rt
        if self._fiber.parent is not None or rt.tg is not None or rt.closed:
            raise DshError("only a fresh root Context can be entered, and only once")
        self._tg_cm = anyio.create_task_group()
        rt.tg = await self._tg_cm.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        rt = self._rt
        root = self._fiber
        cancels = native_cancels()
        with anyio.CancelScope(shield=True):
            root._disposed = True
            rest = teardown(root)
            if rest is not None:
                await rest
            await rt.settle()
            root.state = FiberState.DISPOSED
        assert rt.tg is not None
        rt.tg.cancel_scope.cancel()
        rt.tg = None
        rt.closed = True
        if native_cancels() > cancels and exc is None:
            # A task.cancel() that reached the shielded teardown (asyncio delivers
            # those anyway) was collected as an undo step's error: deliver it now that
            # the tree is disposed. (Cancel scopes deliver theirs by themselves.)
            await self._tg_cm.__aexit__(None, None, None)
            raise anyio.get_cancelled_exc_class()
        if exc is None or isinstance(exc, anyio.get_cancelled_exc_class()):
            return await self._tg_cm.__aexit__(exc_type, exc, tb)
        # The body raised: the task group (whose tasks never raise) exits cleanly and
        # the body's exception propagates as it is, not wrapped in an ExceptionGroup.
        await self._tg_cm.__aexit__(None, None, None)
        return None

    # -- basics -------------------------------------------------------------------------

    @property
    def fiber(self) -> Fiber:
        """The fiber that owns the effects created through this context."""
        return self._fiber

    @property
    def events(self) -> EventBus:
        """The runtime's event bus (``ctx.events.pm`` is its pluggy PluginManager)."""
        return self._rt.events

    @property
    def logger(self) -> logging.Logger:
        """The plugin's logger, ``dsh.<plugin-name>``."""
        return self._fiber.logger

    def scoped(self, key: object) -> Context:
        """A context of the same fiber that carries scope ``key``."""
        return Context._derive(self._rt, self._fiber, key)

    async def settle(self) -> None:
        """Wait until no fiber of the tree is loading or unloading."""
        await self._rt.settle()

    # -- plugins and effects ------------------------------------------------------------

    def plugin(self, plugin: object, config: Any = None) -> Fiber:
        """Start ``plugin`` as a child fiber; returns at once (the fiber is awaitable)."""
        return self._plugin(plugin, config)

    def _plugin(
        self,
        plugin: object,
        config: Any = None,
        *,
        name: str | None = None,
        entry: EntryInfo | None = None,
        now: bool = False,
    ) -> Fiber:
        """``plugin(...)``, for the runtime's own callers: ``name`` and ``entry`` say
        where a deployment's plugin came from; ``now`` loads at once, before returning
        (only for a body known to be the caller's own, e.g. a scope's empty one: its
        spec is described once per runtime)."""
        parent = self._fiber
        parent.check_alive()
        rt = self._rt
        if name is not None:
            spec = plugin_spec(plugin, name)
        elif now:
            spec = rt.static_spec(plugin)
        else:
            spec = rt.spec_of(plugin)
        if spec.hookspecs is not None:
            rt.events.add_hookspecs(spec.hookspecs)
        fiber = Fiber(rt, parent, spec, config, entry=entry)
        fiber.ctx = Context._derive(rt, fiber, self.scope)
        if name is None and not now:
            fiber.spec_key = id(plugin)
        fiber.dispose = self.effect(lambda: fiber._start_dispose, label=f"plugin {spec.name}")
        fiber.dispose.bounded = False
        rt.depend(fiber, spec.watches, spec.provides)
        epoch = fiber._epoch()
        if epoch is not None:
            fiber.state = FiberState.LOADING
            if now:
                fiber.load_now(epoch)
            else:
                fiber.refresh()
        return fiber

    def effect(self, body: Callable[[], EffectBody], label: str = "effect") -> Disposer:
        """Run ``body()`` now and return the exact disposer of what it set up."""
        d = self._fiber.add_effect(label)
        try:
            result = body()
        except BaseException:
            d._discard()
            raise
        if d._start(result):
            self._rt.spawn(functools.partial(d._setup_in_background, result), f"dsh {label}")
        return d

    def task(
        self, fn: Callable[..., Awaitable[Any]], *args: Any, label: str | None = None
    ) -> Disposer:
        """Run ``fn(*args)`` in the background as an effect; disposing cancels it."""
        fiber = self._fiber
        rt = self._rt
        name = label or f"task {getattr(fn, '__name__', fn)!s}"

        def start() -> Callable[[], Awaitable[None] | None]:
            scope = anyio.CancelScope()
            done = anyio.Event()

            async def run() -> None:
                try:
                    with scope:
                        await fn(*args)
                except Exception as exc:
                    fiber.logger.error(
                        'plugin "%s": task %r failed', fiber.name, name, exc_info=exc
                    )
                finally:
                    done.set()

            rt.spawn(run, f"dsh {name}")

            def stop() -> Awaitable[None] | None:
                if done.is_set():  # ended by itself: nothing to cancel or wait for
                    return None
                scope.cancel()
                return done.wait()

            return stop

        return self.effect(start, label=name)

    # -- services -----------------------------------------------------------------------

    def provide(self, key: str, value: object) -> Disposer:
        """Provide ``value`` at ``ctx.<key>`` while this fiber is active."""
        fiber = self._fiber
        rt = self._rt

        def body() -> Callable[[], Awaitable[None] | None]:
            rt.add_service(key, value, fiber)
            return functools.partial(rt.remove_service, key, fiber)

        return self.effect(body, label=f"provide {key}")

    def get(self, key: str) -> Any:
        """The service at ``key`` (attributed to this context), or None."""
        prov = self._rt.lookup(key)
        if prov is None:
            return None
        value = prov.value
        if isinstance(value, Service):
            return value._dsh_view(self)
        return value

    def __getattr__(self, key: str) -> Any:
        if key[:1] == "_":
            raise AttributeError(key)
        prov = self._rt.lookup(key)
        if prov is None:
            owner = self._rt.provider_name(key)
            why = (
                f'its provider "{owner}" is not active'
                if owner is not None
                else "no plugin provides it"
            )
            raise ServiceNotFoundError(
                f'ctx.{key}: service "{key}" is not available ({why}); '
                f'list it in the plugin\'s inject, or use ctx.get("{key}")'
            )
        value = prov.value
        if isinstance(value, Service):
            return value._dsh_view(self)
        return value

    # -- events -------------------------------------------------------------------------

    def on(self, name: str, listener: Callable[..., Any], prepend: bool = False) -> Disposer:
        """Listen to ``name`` while this fiber lives (first with ``prepend=True``)."""
        ev = self._rt.events.event(name)
        entry = Listener(listener, self.scope, None)

        def body() -> Callable[[], None]:
            ev.add(entry, "first" if prepend else "normal")
            return functools.partial(ev.remove, entry)

        return self.effect(body, label=f"on {name}")

    def emit(self, name: str, *args: Any, scope: object = ALL_SCOPES) -> None:
        """Call every listener synchronously; errors propagate after all have run."""
        self._rt.events.emit(name, args, scope)

    def bail(self, name: str, *args: Any, scope: object = ALL_SCOPES) -> Any:
        """Call listeners in order until one returns something other than None."""
        return self._rt.events.bail(name, args, scope)

    async def serial(self, name: str, *args: Any, scope: object = ALL_SCOPES) -> Any:
        """Await listeners in order until one returns something other than None."""
        return await self._rt.events.serial(name, args, scope)

    async def parallel(self, name: str, *args: Any, scope: object = ALL_SCOPES) -> None:
        """Run every listener concurrently; failures are raised as one ExceptionGroup."""
        await self._rt.events.parallel(name, args, scope)

    async def waterfall(
        self,
        name: str,
        *args: Any,
        inner: Callable[[], Any] | None = None,
        scope: object = ALL_SCOPES,
    ) -> Any:
        """Run listeners as a chain: each gets ``(*args, call_next)``."""
        return await self._rt.events.waterfall(name, args, inner, scope)
