"""Listening with a plugin instance's ``@hookimpl`` methods while its fiber is active.

pluggy validates a class's hookimpls once (see :func:`_hookimpl_table`); each instance
then only adds its bound methods to the events' listener lists and its name to the
PluginManager's registry.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

from ._errors import InvalidPluginError
from ._events import Listener
from ._plugin import hookimpl_names
from ._runtime import HookimplTable

if TYPE_CHECKING:
    from ._fiber import Fiber
    from ._runtime import Runtime

__all__ = ["register_hookimpls"]

#: A plugin class's ``@hookimpl`` methods as pluggy saw them: (method name, hook name,
#: the argument names it picks, None when it takes them all positionally, where it
#: goes); and the hookspec namespace of each hook it checked.
ClassImpls = tuple[tuple[str, str, tuple[str, ...] | None, str], ...]
SpecsSeen = dict[str, object]

#: Per plugin class (weakly: a class made at run time is not kept alive by this).
_VALIDATED: weakref.WeakKeyDictionary[type, tuple[ClassImpls, SpecsSeen]] = (
    weakref.WeakKeyDictionary()
)


def register_hookimpls(fiber: Fiber, instance: object) -> None:
    """Listen with ``instance``'s ``@hookimpl`` methods while ``fiber`` is active."""
    runtime = fiber.runtime
    scope = fiber.ctx.scope
    name = f"{fiber.name}#{fiber.uid}"

    def body() -> Callable[[], None]:
        table = runtime.hookimpls.get(type(instance))
        if table is None:
            table = _hookimpl_table(fiber, instance, name)
        added = [
            (event, Listener(getattr(instance, attr), scope, picks), where)
            for attr, event, picks, where in table
        ]
        for event, listener, where in added:
            event.add(listener, where)
        # Registered by name only: `pm.get_plugins()` lists the instance, while its
        # methods are dsh's listeners (pluggy's register would walk dir() again).
        registry = runtime.events.pm._name2plugin
        registry[name] = instance

        def undo() -> None:
            for event, listener, _ in added:
                event.remove(listener)
            registry.pop(name, None)  # None: someone ran pm.unregister() already

        return undo

    fiber.ctx.effect(body, label="hookimpls")


def _hookimpl_table(fiber: Fiber, instance: object, name: str) -> HookimplTable:
    """What ``instance``'s class listens with in this runtime, validated by pluggy.

    pluggy checks a class's hookimpls once (register, read, unregister); the verdict is
    kept per class with the hookspecs it was checked against, so another runtime
    declaring the events with the same hookspecs reuses it.
    """
    cls = type(instance)
    runtime = fiber.runtime
    known = _VALIDATED.get(cls)
    table = None if known is None else _bind(runtime, *known)
    if table is None:
        impls, specs = _validate_hookimpls(fiber, instance, name)
        _VALIDATED[cls] = (impls, specs)
        table = _bind(runtime, impls, specs)
        assert table is not None  # just validated against these very specs
    runtime.hookimpls[cls] = table
    return table


def _validate_hookimpls(fiber: Fiber, instance: object, name: str) -> tuple[ClassImpls, SpecsSeen]:
    events = fiber.runtime.events
    pm = events.pm
    try:
        pm.register(instance, name=name)
    except pluggy.PluginValidationError as exc:
        raise InvalidPluginError(f'invalid @hookimpl on plugin "{fiber.name}": {exc}') from exc
    try:
        methods = [(attr, getattr(instance, attr)) for attr in hookimpl_names(type(instance))]
        impls: list[tuple[str, str, tuple[str, ...] | None, str]] = []
        specs: SpecsSeen = {}
        for caller in pm.get_hookcallers(instance) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is not instance:
                    continue
                events.event(caller.name)  # an undeclared event fails the plugin
                assert caller.spec is not None  # declared: it has a spec
                specs[caller.name] = caller.spec.namespace
                attr = next(a for a, method in methods if method == impl.function)
                where = (
                    "first"
                    if impl.opts.get("tryfirst")
                    else "last"
                    if impl.opts.get("trylast")
                    else "normal"
                )
                impls.append((attr, caller.name, _picks(impl, caller.spec.argnames), where))
    finally:
        pm.unregister(instance)
    return tuple(impls), specs


def _bind(runtime: Runtime, impls: ClassImpls, specs: SpecsSeen) -> HookimplTable | None:
    """The class's listeners for ``runtime``'s events, or None when one of its hooks is
    declared there by another hookspec than the one pluggy checked it against."""
    hook = runtime.events.pm.hook
    table = []
    for attr, hook_name, argnames, where in impls:
        caller = getattr(hook, hook_name, None)
        spec = None if caller is None else caller.spec
        if spec is None or spec.namespace is not specs[hook_name]:
            return None
        event = runtime.events.event(hook_name)
        names = (*event.argnames, "call_next") if event.waterfall else event.argnames
        picks = None if argnames is None else tuple((n, names.index(n)) for n in argnames)
        table.append((attr, event, picks, where))
    return tuple(table)


def _picks(impl: pluggy.HookImpl, spec_names: tuple[str, ...]) -> tuple[str, ...] | None:
    """The names ``impl`` takes its arguments by, or None when it takes every one of the
    spec's in order and can be called positionally (as the faster ``ctx.on`` listeners
    are). A wrapper (``__wrapped__``) is always called by name: pluggy read the names
    of the function it wraps, not the wrapper's own parameters."""
    names = tuple(impl.argnames)
    if names == spec_names and not hasattr(impl.function, "__wrapped__"):
        return None
    return names
