"""Events declared as pluggy hookspecs, dispatched in five modes with scope filtering.

pluggy owns the *declarations* (``ctx.events.pm``) and validates ``@hookimpl`` methods;
the listener lists and the dispatch loops are ours, because pluggy has no ownership,
no scopes, no async and no waterfall (see ``docs/rfc/0002``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Iterable
from types import CoroutineType, ModuleType
from typing import Any

import anyio
import pluggy

from ._errors import EventUsageError, UnknownEventError

__all__ = ["ALL_SCOPES", "EventBus", "Listener", "Plan", "hookimpl", "hookspec"]

#: Marks a hookspec method: the declaration of an event.
hookspec = pluggy.HookspecMarker("dsh")
#: Marks a listener method on a :class:`dsh.Plugin` subclass.
hookimpl = pluggy.HookimplMarker("dsh")


class _AllScopes:
    def __repr__(self) -> str:
        return "ALL_SCOPES"


#: The default of ``scope=``: an unfiltered dispatch that every listener hears.
ALL_SCOPES: Any = _AllScopes()


def hook_name(event: str) -> str:
    """``"system-prompt/assemble"`` -> ``"system_prompt_assemble"``."""
    return event.replace("/", "_").replace("-", "_")


def _describe(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


class Listener:
    """One registered listener: the function, its scope, and how to call it."""

    __slots__ = ("fn", "is_async", "picks", "scope")

    def __init__(
        self, fn: Callable[..., Any], scope: object, picks: tuple[tuple[str, int], ...] | None
    ) -> None:
        self.fn = fn
        self.scope = scope
        #: None: call positionally; else (argname, index) pairs for a @hookimpl subset.
        self.picks = picks
        self.is_async = inspect.iscoroutinefunction(fn)

    def call(self, args: tuple[Any, ...]) -> Any:
        picks = self.picks
        if picks is None:
            return self.fn(*args)
        return _call_picked(self.fn, picks, *args)

    def positional(self) -> Callable[..., Any]:
        """A callable taking the event's arguments positionally (the function itself
        unless it picks a subset by name)."""
        if self.picks is None:
            return self.fn
        return functools.partial(_call_picked, self.fn, self.picks)


def _call_picked(fn: Callable[..., Any], picks: tuple[tuple[str, int], ...], *args: Any) -> Any:
    return fn(**{name: args[i] for name, i in picks})


class Plan:
    """One snapshot of the listeners a dispatch reaches, in dispatch order.

    ``calls`` is what the synchronous modes loop over: a callable per listener taking
    the arguments positionally, made once per snapshot (None when a listener is async:
    those modes then refuse it, see :func:`_sync_calls`).
    """

    __slots__ = ("calls", "listeners")

    def __init__(self, listeners: tuple[Listener, ...]) -> None:
        self.listeners = listeners
        self.calls: tuple[Callable[..., Any], ...] | None = (
            None
            if any(listener.is_async for listener in listeners)
            else tuple(listener.positional() for listener in listeners)
        )


_EMPTY = Plan(())


#: Order keys: prepended listeners count down from -1, the others up from 1, and the
#: ``trylast`` ones sit above every other (one int compares faster than a tuple).
_LAST = 1 << 62


class Event:
    """The listeners of one declared event, in dispatch order, indexed by scope.

    Every listener gets an order key when it is added; the snapshots a dispatch reads
    (all listeners, the global ones, and per scope the global ones merged with that
    scope's) are plans (:class:`Plan`) rebuilt only after a change. A scoped dispatch
    looks its scope up by identity, so it costs the same however many other scopes have listeners.
    """

    __slots__ = (
        "_all",
        "_global",
        "_globals",
        "_heard",
        "_keys",
        "_low",
        "_n",
        "_scoped",
        "argnames",
        "arity",
        "bus",
        "name",
        "waterfall",
    )

    def __init__(self, name: str, argnames: tuple[str, ...], bus: EventBus) -> None:
        self.name = name
        #: The bus whose :attr:`EventBus.changes` counts this event's changes too.
        self.bus = bus
        self.waterfall = bool(argnames) and argnames[-1] == "call_next"
        self.argnames = argnames[:-1] if self.waterfall else argnames
        self.arity = len(self.argnames)
        #: Every listener and its order key (a listener is added once).
        self._keys: dict[Listener, int] = {}
        self._n = 0
        self._low = 0
        #: The global listeners, and per id(scope key) that scope's own listeners.
        self._globals: dict[Listener, None] = {}
        self._scoped: dict[int, dict[Listener, None]] = {}
        # Snapshots (None: rebuild on the next read).
        self._all: Plan | None = _EMPTY
        self._global: Plan | None = _EMPTY
        self._heard: dict[int, Plan] = {}

    def _plan(self, listeners: Iterable[Listener]) -> Plan:
        return Plan(tuple(sorted(listeners, key=self._keys.__getitem__)))

    def listeners(self) -> tuple[Listener, ...]:
        """Every listener, in dispatch order (what an unfiltered dispatch reaches)."""
        plan = self._all
        if plan is None:
            plan = self._all = self._plan(self._keys)
        return plan.listeners

    def heard(self, scope: object) -> tuple[Listener, ...]:
        """The listeners a dispatch with ``scope=`` reaches, in dispatch order.

        ``ALL_SCOPES``: every listener; ``None``: the global ones; a scope key: the
        global ones and those registered through a context carrying that key.
        """
        # The usual question (a scope with no listeners of its own) in this one call.
        if scope is not ALL_SCOPES and (scope is None or id(scope) not in self._scoped):
            plan = self._global
            if plan is None:
                plan = self._global = self._plan(self._globals)
            return plan.listeners
        return self.plan(scope).listeners

    def plan(self, scope: object) -> Plan:
        """The snapshot of :meth:`heard`'s listeners, with their synchronous calls."""
        if scope is ALL_SCOPES:
            plan = self._all
            if plan is None:
                plan = self._all = self._plan(self._keys)
            return plan
        own = None if scope is None else self._scoped.get(id(scope))
        if own is None:
            plan = self._global
            if plan is None:
                plan = self._global = self._plan(self._globals)
            return plan
        plan = self._heard.get(id(scope))
        if plan is None:
            plan = self._heard[id(scope)] = self._plan((*self._globals, *own))
        return plan

    def add(self, listener: Listener, where: str) -> None:
        """Add ``listener``: ``"first"`` before every other, ``"last"`` after every
        other, else (``"normal"``) after the normal ones added before it."""
        if where == "first":
            self._low -= 1
            key = self._low
        else:
            self._n += 1
            key = self._n + _LAST if where == "last" else self._n
        self._keys[listener] = key
        scope = listener.scope
        if scope is None:
            self._globals[listener] = None
        else:
            self._scoped.setdefault(id(scope), {})[listener] = None
        self._changed(scope)

    def remove(self, listener: Listener) -> None:
        """Remove ``listener`` (it must have been added)."""
        del self._keys[listener]
        scope = listener.scope
        if scope is None:
            del self._globals[listener]
        else:
            own = self._scoped[id(scope)]
            del own[listener]
            if not own:
                del self._scoped[id(scope)]
        self._changed(scope)

    def _changed(self, scope: object) -> None:
        self.bus.changes += 1
        self._all = None
        if scope is None:
            self._global = None
            self._heard.clear()
        else:
            self._heard.pop(id(scope), None)

    def arity_error(self, args: tuple[Any, ...]) -> EventUsageError:
        """The error for dispatching with ``args``, not :attr:`arity` arguments."""
        return EventUsageError(
            f'event "{self.name}" takes {len(self.argnames)} argument(s) '
            f"({', '.join(self.argnames) or 'none'}), got {len(args)}"
        )


class EventBus:
    """The event bus of one runtime: ``ctx.events``."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager("dsh")
        self._specs: set[type | ModuleType] = set()
        self._by_hook: dict[str, Event] = {}
        self._by_name: dict[str, Event] = {}
        #: Counts the listeners added to and removed from any of this bus's events: a
        #: snapshot of what is heard, taken at another count, may be stale.
        self.changes = 0

    def add_hookspecs(self, spec: type | ModuleType) -> None:
        """Declare the events of a hookspec class or module (idempotent)."""
        if spec in self._specs:
            return
        self.pm.add_hookspecs(spec)
        self._specs.add(spec)

    def event(self, name: str) -> Event:
        """The declared event called ``name`` (event or hook spelling)."""
        ev = self._by_name.get(name)
        if ev is not None:
            return ev
        hook = hook_name(name)
        ev = self._by_hook.get(hook)
        if ev is None:
            caller = getattr(self.pm.hook, hook, None)
            spec = None if caller is None else caller.spec
            if spec is None:
                raise UnknownEventError(
                    f'event "{name}" is not declared: no hookspec named "{hook}" was added '
                    "(the plugin that owns it adds it with ctx.events.add_hookspecs)"
                )
            ev = self._by_hook[hook] = Event(name, tuple(spec.argnames), self)
        self._by_name[name] = ev
        return ev

    # -- dispatch -----------------------------------------------------------------------

    def emit(self, name: str, args: tuple[Any, ...], scope: object) -> None:
        ev = self._by_name.get(name) or self.event(name)
        if len(args) != ev.arity:
            raise ev.arity_error(args)
        plan = ev._all if scope is ALL_SCOPES else None
        if plan is None:
            plan = ev.plan(scope)
        calls = plan.calls
        if calls is None:
            calls = _sync_calls(plan, name, "emit")
        errors: list[Exception] | None = None
        for call in calls:
            try:
                result = call(*args)
                if result is not None and inspect.isawaitable(result):
                    raise _returned_awaitable(plan, calls.index(call), result, name, "emit")
            except Exception as exc:
                if errors is None:
                    errors = [exc]
                else:
                    errors.append(exc)
        if errors is not None:
            if len(errors) == 1:
                raise errors[0]
            raise ExceptionGroup(f'{len(errors)} listeners of "{name}" failed', errors)

    def bail(self, name: str, args: tuple[Any, ...], scope: object) -> Any:
        ev = self._by_name.get(name) or self.event(name)
        if len(args) != ev.arity:
            raise ev.arity_error(args)
        plan = ev.plan(scope)
        calls = plan.calls
        if calls is None:
            calls = _sync_calls(plan, name, "bail")
        for call in calls:
            result = call(*args)
            if result is not None:
                if inspect.isawaitable(result):
                    raise _returned_awaitable(plan, calls.index(call), result, name, "bail")
                return result
        return None

    def _heard(self, name: str, args: tuple[Any, ...], scope: object) -> tuple[Listener, ...]:
        """What an asynchronous dispatch of ``name`` with ``args`` reaches."""
        ev = self._by_name.get(name) or self.event(name)
        if len(args) != ev.arity:
            raise ev.arity_error(args)
        return ev.plan(scope).listeners

    async def serial(self, name: str, args: tuple[Any, ...], scope: object) -> Any:
        for listener in self._heard(name, args, scope):
            result = listener.call(args)
            if result is not None and inspect.isawaitable(result):
                result = await result
            if result is not None:
                return result
        return None

    async def parallel(self, name: str, args: tuple[Any, ...], scope: object) -> None:
        chosen = self._heard(name, args, scope)
        if not chosen:
            return
        errors: list[Exception] = []

        async def run(listener: Listener) -> None:
            try:
                result = listener.call(args)
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for listener in chosen:
                tg.start_soon(run, listener)
        if errors:
            listeners = "1 listener" if len(errors) == 1 else f"{len(errors)} listeners"
            raise ExceptionGroup(f'{listeners} of "{name}" failed', errors)

    async def waterfall(
        self,
        name: str,
        args: tuple[Any, ...],
        inner: Callable[[], Any] | None,
        scope: object,
    ) -> Any:
        ev = self._by_name.get(name) or self.event(name)
        if not ev.waterfall:
            raise EventUsageError(
                f'event "{name}" is not a waterfall: its hookspec must end with a '
                "call_next parameter"
            )
        if len(args) != ev.arity:
            raise ev.arity_error(args)
        chain = ev.plan(scope).listeners
        if not chain:
            # No listener: the value is inner()'s, with no chain built around it.
            if inner is None:
                return None
            result = inner()
            if result is not None and _awaitable(result):
                result = await result
            return result
        return await _Chain(name, args, chain, inner).run(0)


def _sync_calls(plan: Plan, name: str, mode: str) -> tuple[Callable[..., Any], ...]:
    """``plan``'s calls for a synchronous mode when some listener is async: each async
    one raises, in its turn, the error naming it."""
    return tuple(
        functools.partial(_refuse_async, listener.fn, name, mode)
        if listener.is_async
        else listener.positional()
        for listener in plan.listeners
    )


def _refuse_async(fn: Callable[..., Any], name: str, mode: str, *args: Any) -> None:
    raise EventUsageError(
        f'async listener {_describe(fn)} of event "{name}" cannot run in '
        f"{mode}(), which is synchronous; dispatch with serial() or parallel()"
    )


def _returned_awaitable(
    plan: Plan, index: int, result: object, name: str, mode: str
) -> EventUsageError:
    """The error for listener ``index`` of ``plan`` returning ``result``, an awaitable,
    in a synchronous mode (a coroutine is closed first: it will never run)."""
    close = getattr(result, "close", None)
    if close is not None:
        close()
    return EventUsageError(
        f'listener {_describe(plan.listeners[index].fn)} of event "{name}" returned an '
        f"awaitable in {mode}(), which is synchronous; dispatch with serial() or parallel()"
    )


class _Chain:
    """One waterfall dispatch: listener ``i`` receives a ``call_next`` running ``i + 1``.

    ``values[i]`` is what ``run(i)`` returned, so a listener's ``None`` can be told
    apart from a chain below it that legitimately produced ``None``.
    """

    __slots__ = ("args", "inner", "listeners", "name", "values")

    def __init__(
        self,
        name: str,
        args: tuple[Any, ...],
        listeners: tuple[Listener, ...],
        inner: Callable[[], Any] | None,
    ) -> None:
        self.name = name
        self.args = args
        self.listeners = listeners
        self.inner = inner
        self.values: list[Any] = [None] * (len(listeners) + 1)

    async def run(self, i: int) -> Any:
        listeners = self.listeners
        if i == len(listeners):
            inner = self.inner
            if inner is None:
                return None
            result = inner()
            if result is not None and _awaitable(result):
                result = await result
            self.values[i] = result
            return result
        listener = listeners[i]
        called = False

        def call_next() -> Coroutine[Any, Any, Any]:
            """The rest of the chain (await it); call it at most once."""
            nonlocal called
            if called:
                raise EventUsageError(
                    f"waterfall listener {_describe(listener.fn)} of event "
                    f'"{self.name}" called call_next() twice'
                )
            called = True
            return self.run(i + 1)

        if listener.picks is None:
            result = listener.fn(*self.args, call_next)
        else:
            result = listener.call((*self.args, call_next))
        # A coroutine (an async listener) by far most often: skip the generic check.
        if result is not None and (type(result) is CoroutineType or inspect.isawaitable(result)):
            result = await result
        if result is None and (not called or self.values[i + 1] is not None):
            raise EventUsageError(
                f'waterfall listener {_describe(listener.fn)} of event "{self.name}" '
                "returned None; return the (possibly replaced) value or await call_next()"
            )
        self.values[i] = result
        return result


def _awaitable(value: object) -> bool:
    # Coroutines are by far the most common awaitable here: skip the generic check.
    return type(value) is CoroutineType or inspect.isawaitable(value)
