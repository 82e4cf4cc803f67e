"""Scopes: a fiber whose context carries a key, so registrations land in its layer.

A scope key is any object, compared by identity. Registries read the key of the
context a registration came through (``scope_of(ctx)``) and keep a layer per key;
event dispatch filters listeners by it (``scope=`` on every dispatch method).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

from dsh import Context, DshError, Fiber

__all__ = ["Scope", "ScopeError", "ScopeKeyError", "create_scope", "scope_of"]


class ScopeError(DshError, ValueError):
    """A second live scope was requested for the same key."""

    code = "SCOPE_TAKEN"


class ScopeKeyError(DshError, TypeError):
    """``None`` was given as a scope key (``None`` is the global scope)."""

    code = "SCOPE_KEY"


# Live scopes per runtime, by id(key): a key can have one live scope at a time.
_LIVE: weakref.WeakKeyDictionary[Any, dict[int, Scope]] = weakref.WeakKeyDictionary()


def _scope_fiber(ctx: Context, config: None) -> Callable[[], None]:
    """The plugin behind a scope: it only owns what is registered through it. Its one
    undo, the scope's first effect (so undone last), frees the key."""
    fiber = ctx.fiber
    return functools.partial(_free, _LIVE[fiber.runtime], id(ctx.scope), fiber)


def _free(live: dict[int, Scope], key_id: int, fiber: Fiber) -> None:
    """Take the key off ``live`` unless another scope holds it by now (this one left
    the table already when its fiber was restarted)."""
    scope = live.get(key_id)
    if scope is not None and scope.fiber is fiber:
        del live[key_id]


# One stable name for every scope fiber: a name per key would create a logger per key,
# and the logging module keeps every logger for the life of the process. As a plugin
# attribute (not a name given per call) the runtime describes the plugin once.
_scope_fiber.name = "scope"  # type: ignore[attr-defined]


class Scope:
    """A live scope: register through :attr:`ctx`; :meth:`dispose` undoes it all."""

    __slots__ = ("ctx", "fiber", "key")

    def __init__(self, key: object, fiber: Fiber) -> None:
        self.key = key
        self.fiber = fiber
        self.ctx: Context = fiber.ctx

    def __repr__(self) -> str:
        return f"<Scope {self.key!r}>"

    async def dispose(self) -> None:
        """Undo every registration made through this scope (idempotent)."""
        await self.fiber.dispose()


def create_scope(ctx: Context, key: object) -> Scope:
    """Open a scope for ``key`` owned by ``ctx``'s fiber (synchronous).

    Raises :class:`ScopeError` when ``key`` already has a live scope.
    """
    if key is None:
        raise ScopeKeyError("a scope key cannot be None (None is the global scope)")
    live = _LIVE.setdefault(ctx.fiber.runtime, {})
    if id(key) in live:
        raise ScopeError(f"scope {key!r} is already live; dispose it before creating another")
    # Loaded before this returns (its body is empty): the scope is active at once.
    fiber = ctx.scoped(key)._plugin(_scope_fiber, now=True)
    scope = live[id(key)] = Scope(key, fiber)
    return scope


def scope_of(ctx: Context) -> object:
    """The scope key ``ctx`` carries, or None for the global scope."""
    return ctx.scope
