"""Transitions that finish synchronously, and the ones that go on in a task (RFC 0017).

A fiber's load and unload run as far as they can without waiting: mounting many plugins
costs one task, and disposing a plugin whose undos are synchronous is done before the
call returns. Whatever has to wait (an async setup, an async undo, dependents leaving)
goes on in a task of its own, with the same ordering rules as before.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dsh import Context, Fiber, FiberState
from dsh.testing import capture_logs, errors_logged, state

pytestmark = pytest.mark.anyio


def undo_async(log: list[str], name: str) -> Callable[[], Awaitable[None]]:
    async def undo() -> None:
        log.append(f"{name}-start")
        await anyio.lowlevel.checkpoint()
        log.append(f"{name}-end")

    return undo


async def test_disposing_a_plugin_with_synchronous_undos_finishes_in_the_call() -> None:
    log: list[str] = []

    def plugin(ctx: Context, config: Any) -> Iterator[Callable[[], None]]:
        yield lambda: log.append("first")
        yield lambda: log.append("second")

    async with Context() as root:
        fiber = await root.plugin(plugin)
        fiber.dispose()  # not awaited
        assert state(fiber) is FiberState.DISPOSED
        assert log == ["second", "first"]


async def test_a_parent_disposes_its_synchronous_children_in_the_call() -> None:
    log: list[str] = []
    children: list[Fiber] = []

    def child(ctx: Context, config: Any) -> Callable[[], None]:
        return lambda: log.append(f"child {config}")

    def parent(ctx: Context, config: Any) -> None:
        children.extend(ctx.plugin(child, i) for i in range(3))

    async with Context() as root:
        fiber = root.plugin(parent)
        await root.settle()
        assert [state(c) for c in children] == [FiberState.ACTIVE] * 3
        fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
        assert [state(c) for c in children] == [FiberState.DISPOSED] * 3
        assert log == ["child 2", "child 1", "child 0"]  # newest first


async def test_queued_loads_run_in_the_context_of_whoever_asked() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[str] = []

    def plugin(ctx: Context, config: Any) -> None:
        seen.append(var.get())
        var.set("leaked?")  # stays in this load's copy

    async with Context() as root:
        var.set("first")
        root.plugin(plugin)
        var.set("second")
        root.plugin(plugin)
        await root.settle()
        assert seen == ["first", "second"]
        assert var.get() == "second"


async def test_a_fiber_disposed_before_its_async_setup_ran_is_cancelled_at_once() -> None:
    log: list[str] = []

    async def slow(ctx: Context, config: Any) -> None:
        log.append("setup started")
        await anyio.lowlevel.checkpoint()
        log.append("setup finished")  # never: the first checkpoint is cancelled

    slow_fiber: list[Fiber] = []

    def disposer(ctx: Context, config: Any) -> None:
        # Queued after `slow`, so it runs once slow's synchronous part is done and
        # before its asynchronous setup has started.
        slow_fiber[0].dispose()

    async with Context() as root:
        slow_fiber.append(root.plugin(slow))
        root.plugin(disposer)
        await root.settle()
        assert state(slow_fiber[0]) is FiberState.DISPOSED
        assert log == ["setup started"]


async def test_a_failed_synchronous_setup_waits_for_its_asynchronous_undo() -> None:
    log: list[str] = []

    def plugin(ctx: Context, config: Any) -> None:
        ctx.effect(lambda: undo_async(log, "undo"))
        raise ValueError("broken")

    async with Context() as root:
        with capture_logs() as logs:
            fiber = root.plugin(plugin)
            with pytest.raises(ValueError, match="broken"):
                await fiber
        assert state(fiber) is FiberState.FAILED
        assert log == ["undo-start", "undo-end"]
        assert [r.getMessage() for r in errors_logged(logs)] == ["plugin 'plugin' failed to start"]


async def test_a_failed_asynchronous_setup_waits_for_its_asynchronous_undo() -> None:
    log: list[str] = []

    async def plugin(ctx: Context, config: Any) -> AsyncIterator[Callable[[], object]]:
        yield undo_async(log, "undo")
        ctx.effect(lambda: undo_async(log, "sibling"))
        await anyio.lowlevel.checkpoint()
        raise ValueError("broken later")

    async with Context() as root:
        with capture_logs():
            fiber = root.plugin(plugin)
            with pytest.raises(ValueError, match="broken later"):
                await fiber
        assert state(fiber) is FiberState.FAILED
        # The setup's own undo runs as it fails; the sibling effect with the teardown.
        assert log == ["undo-start", "undo-end", "sibling-start", "sibling-end"]


async def test_a_provider_of_two_services_waits_for_the_dependents_of_each() -> None:
    log: list[str] = []

    def provider(ctx: Context, config: Any) -> None:
        ctx.provide("one", 1)
        ctx.provide("two", 2)

    def dependent(key: str) -> Any:
        def apply(ctx: Context, config: Any) -> Callable[[], Awaitable[None]]:
            return undo_async(log, key)

        apply.inject = [key]  # type: ignore[attr-defined]
        return apply

    async with Context() as root:
        first = root.plugin(dependent("one"))
        second = root.plugin(dependent("two"))
        source = await root.plugin(provider)
        await root.settle()
        assert state(first) is state(second) is FiberState.ACTIVE
        await source.dispose()
        assert state(first) is state(second) is FiberState.PENDING
        # The dependents of each service left before the provider was torn down.
        assert sorted(log) == ["one-end", "one-start", "two-end", "two-start"]


async def test_disposing_the_root_fiber_with_an_asynchronous_undo_waits_for_it() -> None:
    log: list[str] = []
    async with Context() as root:
        root.effect(lambda: undo_async(log, "root effect"))
        await root.fiber.dispose()
        assert log == ["root effect-start", "root effect-end"]
        assert state(root.fiber) is FiberState.ACTIVE


async def test_the_root_logs_a_failing_undo_of_its_own_effects() -> None:
    def broken() -> None:
        raise RuntimeError("undo failed")

    async with Context() as root:
        root.effect(lambda: broken)
        with capture_logs() as logs:
            await root.fiber.dispose()
        assert [r.getMessage() for r in errors_logged(logs)] == [
            "error while disposing the root's effects"
        ]
