"""``dsh_scope``: per-key scopes whose context routes registrations into a layer.

``create_scope(ctx, key)`` is synchronous and returns a :class:`Scope` (``.key``,
``.ctx``, ``await .dispose()``); ``scope_of(ctx)`` reads the key a context carries.
A key is any object, compared by identity, with at most one live scope per runtime.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

import dsh
from dsh_scope import Scope, ScopeError, ScopeKeyError, create_scope, scope_of

pytestmark = pytest.mark.anyio


class Specs:
    """A local event for the scope-filtering tests."""

    @dsh.hookspec
    def scope_test_ping(self) -> None:
        """Emitted by the tests."""


def undo_recorder(log: list[str], tag: str) -> Callable[[], Callable[[], None]]:
    """An effect body whose disposer appends ``tag`` to ``log``."""

    def body() -> Callable[[], None]:
        return lambda: log.append(tag)

    return body


# --- creation --------------------------------------------------------------------------------


async def test_create_scope_is_synchronous_and_exposes_key_and_ctx() -> None:
    key = object()
    async with dsh.Context() as root:
        scope = create_scope(root, key)
        assert not inspect.isawaitable(scope)
        assert isinstance(scope, Scope)
        assert scope.key is key
        assert isinstance(scope.ctx, dsh.Context)
        assert scope_of(scope.ctx) is key
        assert scope.ctx.scope is key
        assert scope.ctx.fiber is scope.fiber
        assert scope.fiber.parent is root.fiber
        # Active at once: its fiber loaded before create_scope returned.
        assert scope.fiber.state is dsh.FiberState.ACTIVE
        log: list[str] = []
        scope.ctx.effect(undo_recorder(log, "undone"))
        await scope.fiber
        await scope.dispose()
        assert log == ["undone"]


async def test_disposing_a_scope_with_synchronous_undos_finishes_in_the_call() -> None:
    log: list[str] = []
    async with dsh.Context() as root:
        scope = create_scope(root, object())
        scope.ctx.effect(undo_recorder(log, "undone"))
        scope.fiber.dispose()  # not awaited
        assert scope.fiber.state is dsh.FiberState.DISPOSED
        assert log == ["undone"]


async def test_scope_of_global_contexts_is_none() -> None:
    async with dsh.Context() as root:
        assert scope_of(root) is None

        seen: list[object] = []

        def plugin(ctx: dsh.Context, config: None) -> None:
            seen.append(scope_of(ctx))

        await root.plugin(plugin)
        assert seen == [None]


async def test_scope_of_plugins_started_through_a_scope() -> None:
    key = object()
    seen: list[object] = []

    def plugin(ctx: dsh.Context, config: None) -> None:
        seen.append(scope_of(ctx))

    async with dsh.Context() as root:
        scope = create_scope(root, key)
        fiber = await scope.ctx.plugin(plugin)
        assert seen == [key]
        await scope.dispose()
        assert fiber.state is dsh.FiberState.DISPOSED


async def test_nested_scope_reports_the_nearest_key() -> None:
    outer_key, inner_key = object(), object()
    async with dsh.Context() as root:
        outer = create_scope(root, outer_key)
        inner = create_scope(outer.ctx, inner_key)
        assert scope_of(inner.ctx) is inner_key
        assert inner.fiber.parent is outer.fiber
        await outer.dispose()
        assert inner.fiber.state is dsh.FiberState.DISPOSED
        # Both keys are free again.
        create_scope(root, inner_key)
        create_scope(root, outer_key)


async def test_repr_names_the_key() -> None:
    async with dsh.Context() as root:
        scope = create_scope(root, "agent-1")
        assert repr(scope) == "<Scope 'agent-1'>"
        # Every scope fiber shares one name (and so one logger): no logger per key.
        assert scope.fiber.name == "scope"


# --- disposal --------------------------------------------------------------------------------


async def test_dispose_undoes_registrations_made_through_the_scope() -> None:
    key = object()
    log: list[str] = []
    async with dsh.Context() as root:
        root.events.add_hookspecs(Specs)
        scope = create_scope(root, key)
        scope.ctx.effect(undo_recorder(log, "first"))
        scope.ctx.effect(undo_recorder(log, "second"))
        scope.ctx.on("scope-test/ping", lambda: log.append("ping"))
        root.emit("scope-test/ping")
        assert log == ["ping"]
        await scope.dispose()
        assert log == ["ping", "second", "first"]
        assert scope.fiber.state is dsh.FiberState.DISPOSED
        root.emit("scope-test/ping")
        assert log.count("ping") == 1


async def test_dispose_is_idempotent() -> None:
    log: list[str] = []
    async with dsh.Context() as root:
        scope = create_scope(root, object())
        scope.ctx.effect(undo_recorder(log, "undone"))
        await scope.dispose()
        await scope.dispose()
        assert log == ["undone"]


async def test_dispose_right_after_create() -> None:
    key = object()
    log: list[str] = []
    async with dsh.Context() as root:
        scope = create_scope(root, key)
        scope.ctx.effect(undo_recorder(log, "undone"))
        await scope.dispose()
        assert log == ["undone"]
        assert scope.fiber.state is dsh.FiberState.DISPOSED
        create_scope(root, key)


async def test_disposed_scope_takes_no_new_registrations() -> None:
    async with dsh.Context() as root:
        scope = create_scope(root, object())
        await scope.dispose()
        with pytest.raises(dsh.InactiveContextError):
            scope.ctx.effect(lambda: None)


async def test_disposing_the_owner_disposes_its_scopes() -> None:
    key = object()
    log: list[str] = []
    scopes: list[Scope] = []

    def owner(ctx: dsh.Context, config: None) -> None:
        scope = create_scope(ctx, key)
        scope.ctx.effect(undo_recorder(log, "scoped undone"))
        scopes.append(scope)

    async with dsh.Context() as root:
        fiber = await root.plugin(owner)
        (scope,) = scopes
        with pytest.raises(ScopeError):
            create_scope(root, key)
        await fiber.dispose()
        assert log == ["scoped undone"]
        assert scope.fiber.state is dsh.FiberState.DISPOSED
        assert create_scope(root, key).key is key


async def test_leaving_the_root_disposes_live_scopes() -> None:
    log: list[str] = []
    async with dsh.Context() as root:
        scope = create_scope(root, object())
        scope.ctx.effect(undo_recorder(log, "undone"))
    assert log == ["undone"]
    assert scope.fiber.state is dsh.FiberState.DISPOSED


# --- one live scope per key ------------------------------------------------------------------


async def test_second_live_scope_for_a_key_is_an_error() -> None:
    key = "agent-1"
    async with dsh.Context() as root:
        first = create_scope(root, key)
        with pytest.raises(ScopeError) as info:
            create_scope(root, key)
        assert str(info.value) == (
            "scope 'agent-1' is already live; dispose it before creating another"
        )
        assert isinstance(info.value, dsh.DshError)
        assert isinstance(info.value, ValueError)
        assert info.value.code == "SCOPE_TAKEN"
        # Also through another context, and the first scope is untouched.
        with pytest.raises(ScopeError):
            create_scope(first.ctx, key)
        assert first.fiber.state in (dsh.FiberState.LOADING, dsh.FiberState.ACTIVE)
        await first.fiber
        assert first.fiber.state is dsh.FiberState.ACTIVE


async def test_key_gets_a_new_scope_after_disposal() -> None:
    key = object()
    log: list[str] = []
    async with dsh.Context() as root:
        first = create_scope(root, key)
        await first.dispose()
        second = create_scope(root, key)
        assert second is not first
        assert second.fiber is not first.fiber
        assert second.key is key
        second.ctx.effect(undo_recorder(log, "second"))
        await second.dispose()
        assert log == ["second"]


async def test_none_key_is_rejected() -> None:
    async with dsh.Context() as root:
        with pytest.raises(ScopeKeyError) as info:
            create_scope(root, None)
        assert str(info.value) == "a scope key cannot be None (None is the global scope)"


async def test_keys_are_compared_by_identity() -> None:
    first: dict[str, Any] = {"id": 1}
    second: dict[str, Any] = {"id": 1}
    assert first == second
    async with dsh.Context() as root:
        root.events.add_hookspecs(Specs)
        one = create_scope(root, first)
        two = create_scope(root, second)
        assert one.key is first
        assert two.key is second
        heard: list[str] = []
        one.ctx.on("scope-test/ping", lambda: heard.append("one"))
        two.ctx.on("scope-test/ping", lambda: heard.append("two"))
        root.emit("scope-test/ping", scope=first)
        assert heard == ["one"]
        root.emit("scope-test/ping", scope={"id": 1})
        assert heard == ["one"]
        await one.dispose()
        assert two.fiber.state is not dsh.FiberState.DISPOSED
        with pytest.raises(ScopeError):
            create_scope(root, second)


async def test_scoped_listeners_are_filtered_by_key() -> None:
    key, other = object(), object()
    heard: list[str] = []
    async with dsh.Context() as root:
        root.events.add_hookspecs(Specs)
        scope = create_scope(root, key)
        scope.ctx.on("scope-test/ping", lambda: heard.append("scoped"))
        root.on("scope-test/ping", lambda: heard.append("global"))
        root.emit("scope-test/ping", scope=key)
        assert heard == ["scoped", "global"]
        heard.clear()
        root.emit("scope-test/ping", scope=None)
        root.emit("scope-test/ping", scope=other)
        assert heard == ["global", "global"]
        heard.clear()
        root.emit("scope-test/ping")  # unfiltered
        assert heard == ["scoped", "global"]


async def test_live_keys_are_per_runtime() -> None:
    key = object()
    async with dsh.Context() as first_root, dsh.Context() as second_root:
        first = create_scope(first_root, key)
        second = create_scope(second_root, key)  # another runtime: the key is free there
        assert first.key is second.key is key
        assert first.ctx.scope is second.ctx.scope is key
        assert first.fiber is not second.fiber
        assert first.fiber.runtime is not second.fiber.runtime
        # Within one runtime the key stays taken while its scope lives.
        with pytest.raises(ScopeError, match="already"):
            create_scope(first_root, key)
        await second.dispose()
        with pytest.raises(ScopeError, match="already"):
            create_scope(first_root, key)


async def test_failed_creation_does_not_take_the_key() -> None:
    key = object()
    async with dsh.Context() as root:
        fiber = await root.plugin(lambda ctx, config: None)
        dead = fiber.ctx
        await fiber.dispose()
        with pytest.raises(dsh.InactiveContextError):
            create_scope(dead, key)
        create_scope(root, key)
