"""State shared by one tree of fibers: the task group, services and the event bus."""

from __future__ import annotations

import contextvars
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio

from ._check import CoreSpecs
from ._errors import InactiveContextError, ServiceConflictError
from ._events import Event, EventBus
from ._plugin import PluginSpec, plugin_spec

if TYPE_CHECKING:
    from anyio import TaskHandle
    from anyio.abc import TaskGroup

    from ._fiber import Fiber

__all__ = ["HookimplTable", "Runtime", "wait_settled"]

#: What the ``@hookimpl`` methods of a plugin class listen with, validated once per
#: runtime: (method name, event, the arguments it picks by name or None to call it
#: positionally, where it goes).
HookimplTable = tuple[tuple[str, Event, tuple[tuple[str, int], ...] | None, str], ...]


class _Provision:
    __slots__ = ("fiber", "value")

    def __init__(self, value: object, fiber: Fiber) -> None:
        self.value = value
        self.fiber = fiber


class Runtime:
    """One per root :class:`~dsh.Context`; every context of the tree points at it."""

    def __init__(self, undo_timeout: float | None = None) -> None:
        self.tg: TaskGroup | None = None
        #: Seconds one asynchronous undo step may take before it is cancelled (None:
        #: unbounded). Disposal is shielded, so this is the only way to bound it.
        self.undo_timeout = undo_timeout
        self.closed = False
        self.events = EventBus()
        self.events.add_hookspecs(CoreSpecs)
        #: Specs of the plugin objects fibers run, by ``id(plugin)``: the plugin, its
        #: spec and how many fibers use it (released when the last one is forgotten).
        self.plugin_specs: dict[int, list[Any]] = {}
        #: Specs of the bodies the runtime's own callers load at once (``now``: a
        #: scope's), by body: each is a function of its caller's module, so it is
        #: described once and kept, not released with each fiber.
        self.static_specs: dict[object, PluginSpec] = {}
        self._uid = 0
        self._slots: dict[str, _Provision] = {}
        self._dependents: dict[str, set[Fiber]] = {}
        self._announced: dict[str, set[Fiber]] = {}
        self._busy = 0
        self._idle: anyio.Event | None = None
        #: Fibers whose transition was requested, each with the context variables of
        #: the code that requested it; one task drives them (see :meth:`schedule`).
        #: Per plugin class, its validated ``@hookimpl`` methods (weak: a class made at
        #: run time is not kept alive by it).
        self.hookimpls: weakref.WeakKeyDictionary[type, HookimplTable] = weakref.WeakKeyDictionary()
        self._queue: deque[tuple[Fiber, contextvars.Context]] = deque()
        self._flushing = False

    def spec_of(self, plugin: object) -> PluginSpec:
        """The spec of ``plugin`` for one more fiber (described once while it is used)."""
        cached = self.plugin_specs.get(id(plugin))
        if cached is not None and cached[0] is plugin:
            cached[2] += 1
            spec: PluginSpec = cached[1]
            return spec
        spec = plugin_spec(plugin)
        self.plugin_specs[id(plugin)] = [plugin, spec, 1]
        return spec

    def static_spec(self, body: object) -> PluginSpec:
        """The spec of ``body``, a plugin the runtime's own code loads at once (made on
        first use, then kept)."""
        spec = self.static_specs.get(body)
        if spec is None:
            spec = self.static_specs[body] = plugin_spec(body)
        return spec

    def release_spec(self, key: int) -> None:
        """A fiber whose plugin was looked up by :meth:`spec_of` (``key`` is the
        plugin's id) is gone: forget the plugin once no fiber runs it."""
        cached = self.plugin_specs[key]
        cached[2] -= 1
        if not cached[2]:
            del self.plugin_specs[key]

    def next_uid(self) -> int:
        self._uid += 1
        return self._uid

    def require_open(self) -> TaskGroup:
        tg = self.tg
        if tg is None:
            if self.closed:
                raise InactiveContextError("the root Context has exited")
            raise InactiveContextError(
                "the root Context is not entered: use `async with Context() as root:`"
            )
        return tg

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]], name: str) -> TaskHandle[None]:
        """Run ``fn`` in the root task group, as a task called ``name`` (given, so
        that anyio does not work one out); it must handle its own errors. Returns the
        task's handle (``cancel()`` cancels the task's own scope, ``wait()``)."""
        group = self.require_open()
        # What ``start_soon`` does, without its two helpers (the name is given).
        return group.create_task(fn(), name=name)

    # -- transitions --------------------------------------------------------------------

    def schedule(self, fiber: Fiber) -> None:
        """Drive ``fiber``'s transition soon, in the task that drives the queue.

        One task runs every queued transition as far as it goes synchronously (a
        mount of many plugins costs one task, not one each); a transition that has to
        wait continues in a task of its own. Each runs with a copy of the context
        variables of the code that asked for it, as a task spawned there would.
        """
        if not self._flushing:
            self.spawn(self._flush, "dsh transitions")
            self._flushing = True
        self._queue.append((fiber, contextvars.copy_context()))

    async def _flush(self) -> None:
        queue = self._queue
        try:
            while queue:
                fiber, context = queue.popleft()
                context.run(fiber.drive)
        finally:
            self._flushing = False

    def transition_started(self) -> None:
        self._busy += 1

    def transition_ended(self) -> None:
        self._busy -= 1
        if self._busy == 0 and self._idle is not None:
            self._idle.set()
            self._idle = None

    async def settle(self) -> None:
        """Wait until no fiber of the tree is loading or unloading."""
        while self._busy:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    # -- services -----------------------------------------------------------------------

    def lookup(self, key: str) -> _Provision | None:
        """The provision of ``key`` if its provider is ACTIVE, else None."""
        prov = self._slots.get(key)
        if prov is None or not prov.fiber.is_active:
            return None
        return prov

    def provider_uid(self, key: str) -> int | None:
        prov = self.lookup(key)
        return None if prov is None else prov.fiber.uid

    def provider_name(self, key: str) -> str | None:
        prov = self._slots.get(key)
        return None if prov is None else prov.fiber.name

    def add_service(self, key: str, value: object, fiber: Fiber) -> None:
        taken = self._slots.get(key)
        if taken is not None:
            raise ServiceConflictError(
                f'service "{key}" is already provided by plugin "{taken.fiber.name}"; '
                f'plugin "{fiber.name}" cannot provide it too',
                key=key,
                holder=taken.fiber,
                claimant=fiber,
            )
        self._slots[key] = _Provision(value, fiber)
        fiber.provides.append(key)
        if fiber.is_active:
            self.notify(key)

    def remove_service(self, key: str, fiber: Fiber) -> Awaitable[None] | None:
        del self._slots[key]
        fiber.provides.remove(key)
        moving = self.notify(key)
        return wait_settled(moving) if moving else None

    def depend(self, fiber: Fiber, keys: tuple[str, ...], provides: str | None) -> None:
        """Record what ``fiber`` injects, and the service it will provide if known."""
        for key in keys:
            self._dependents.setdefault(key, set()).add(fiber)
        if provides is not None:
            self._announced.setdefault(provides, set()).add(fiber)

    def forget(self, fiber: Fiber, keys: tuple[str, ...], provides: str | None) -> None:
        if fiber.spec_key is not None:
            self.release_spec(fiber.spec_key)
        for key in keys:
            self._dependents[key].discard(fiber)
        if provides is not None:
            self._announced[provides].discard(fiber)

    def coming(self, keys: tuple[str, ...]) -> list[Fiber]:
        """Fibers in a transition that will provide one of ``keys`` once loaded."""
        return [
            fiber
            for key in keys
            if self.lookup(key) is None
            for fiber in self._announced.get(key, ())
            if fiber._driving
        ]

    def notify(self, key: str) -> list[Fiber]:
        """Tell the fibers injecting ``key`` that its provider changed.

        Returns the ones that started (or are in) a transition.
        """
        return [fiber for fiber in list(self._dependents.get(key, ())) if fiber.refresh()]


async def wait_settled(fibers: list[Fiber]) -> None:
    """Wait, shielded, until every fiber in ``fibers`` has settled."""
    with anyio.CancelScope(shield=True):
        for fiber in fibers:
            await fiber.settled()
