"""Disposal order: the discriminating composite probe and its neighbours (ARCHITECTURE §3.2).

Every wait here is on an event or a bounded number of scheduler checkpoints, so the
orders below are the same on asyncio and on trio (whose task start order is random).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import dsh
from dsh import Context, FiberState
from dsh.testing import state

pytestmark = pytest.mark.anyio


#: The composite's last disposer outlasts the inner effect's whole unwind.
LONG = 8


async def step(log: list[str], name: str, checkpoints: int = 1) -> None:
    log.append(f"{name}-start")
    for _ in range(checkpoints):
        await anyio.lowlevel.checkpoint()
    log.append(f"{name}-end")


def undo_async(log: list[str], name: str, checkpoints: int = 1) -> Callable[[], Awaitable[None]]:
    return lambda: step(log, name, checkpoints)


def probe_plugin(log: list[str], *, exact: bool, inner_first: bool) -> Any:
    """A plugin whose composite effect yields an inner effect, exactly or wrapped."""

    def apply(ctx: Context, config: Any) -> None:
        def make_inner() -> dsh.Disposer:
            return ctx.effect(lambda: undo_async(log, "inner"), label="inner")

        early = make_inner() if inner_first else None

        def composite() -> Iterator[Callable[[], object]]:
            yield undo_async(log, "first")
            inner = early if early is not None else make_inner()

            def wrapper() -> Awaitable[None]:  # what `lambda: inner()` would be
                return inner()

            yield inner if exact else wrapper
            yield undo_async(log, "last", LONG)

        ctx.effect(composite, label="composite")

    return apply


@pytest.mark.parametrize("inner_first", [False, True])
async def test_exact_disposer_is_strictly_lifo(inner_first: bool) -> None:
    log: list[str] = []
    async with Context() as root:
        fiber = await root.plugin(probe_plugin(log, exact=True, inner_first=inner_first))
        await fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
    assert log == [
        "last-start",
        "last-end",
        "inner-start",
        "inner-end",
        "first-start",
        "first-end",
    ]


@pytest.mark.parametrize("inner_first", [False, True])
async def test_wrapper_leaves_the_inner_effect_a_concurrent_sibling(inner_first: bool) -> None:
    log: list[str] = []
    async with Context() as root:
        fiber = await root.plugin(probe_plugin(log, exact=False, inner_first=inner_first))
        await fiber.dispose()
    # The inner effect fired mid-drain: before the composite's last disposer finished.
    assert log.index("inner-start") < log.index("last-end")
    assert log.index("inner-end") < log.index("last-end")
    assert log[-2:] == ["first-start", "first-end"]
    assert log.count("inner-start") == 1


async def test_separate_effects_sync_parts_reverse_and_async_parts_overlap() -> None:
    log: list[str] = []

    def effect_body(i: int) -> Callable[[], object]:
        def undo() -> Awaitable[None] | None:
            log.append(f"sync-{i}")
            if i == 1:
                return None  # a purely synchronous effect
            return step(log, f"async-{i}")

        return lambda: undo

    def apply(ctx: Context, config: Any) -> None:
        for i in range(4):
            ctx.effect(effect_body(i), label=f"e{i}")

    async with Context() as root:
        fiber = await root.plugin(apply)
        await fiber.dispose()
    assert log[:4] == ["sync-3", "sync-2", "sync-1", "sync-0"]
    # the async parts run concurrently: every one starts before any one ends
    assert sorted(log[4:7]) == ["async-0-start", "async-2-start", "async-3-start"]
    assert sorted(log[7:]) == ["async-0-end", "async-2-end", "async-3-end"]


async def test_nested_composites_undo_lifo() -> None:
    log: list[str] = []

    class Specs:
        @dsh.hookspec
        def tick(self) -> None: ...

    def apply(ctx: Context, config: Any) -> Iterator[Callable[[], object]]:
        ctx.events.add_hookspecs(Specs)
        yield lambda: log.append("1")
        yield ctx.on("tick", lambda: log.append("tick-outer"))
        yield lambda: log.append("2")

        def nested() -> Iterator[Callable[[], object]]:
            yield ctx.on("tick", lambda: log.append("tick-inner"))
            yield lambda: log.append("3")

        yield ctx.effect(nested, label="nested")

    async with Context() as root:
        fiber = await root.plugin(apply)
        root.emit("tick")
        assert log == ["tick-outer", "tick-inner"]
        await fiber.dispose()
        root.emit("tick")
    assert log == ["tick-outer", "tick-inner", "3", "2", "1"]


def slow_composite(log: list[str], started: anyio.Event) -> Any:
    async def first() -> None:
        started.set()
        await step(log, "first", 4)

    def apply(ctx: Context, config: Any) -> Iterator[Callable[[], object]]:
        yield undo_async(log, "a", 3)
        yield undo_async(log, "b", 3)
        yield first

    return apply


FULL = ["first-start", "first-end", "b-start", "b-end", "a-start", "a-end"]


async def test_cancelling_the_task_awaiting_dispose_leaves_nothing_half_undone() -> None:
    log: list[str] = []
    started = anyio.Event()
    async with Context() as root:
        fiber = await root.plugin(slow_composite(log, started))
        returned: list[str] = []

        async def dispose() -> None:
            await fiber.dispose()
            returned.append("returned")

        async with anyio.create_task_group() as tg:
            tg.start_soon(dispose)
            await started.wait()
            tg.cancel_scope.cancel()
        # The awaiting task was cancelled mid-unwind, yet the unwind finished first.
        assert log == FULL
        assert state(fiber) is FiberState.DISPOSED


async def test_dispose_awaited_in_a_cancelled_scope_still_completes() -> None:
    log: list[str] = []
    async with Context() as root:
        fiber = await root.plugin(slow_composite(log, anyio.Event()))
        with anyio.CancelScope() as scope:
            scope.cancel()
            await fiber.dispose()
        assert log == FULL
        assert state(fiber) is FiberState.DISPOSED


async def test_root_exit_in_a_cancelled_scope_undoes_everything() -> None:
    log: list[str] = []
    with anyio.CancelScope() as scope:
        async with Context() as root:
            await root.plugin(slow_composite(log, anyio.Event()))
            scope.cancel()
            await anyio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    assert log == FULL


async def test_child_fiber_teardown_runs_beside_the_parents_other_effects() -> None:
    log: list[str] = []

    def child(ctx: Context, config: Any) -> Callable[[], Awaitable[None]]:
        return undo_async(log, "child", 2)

    def parent(ctx: Context, config: Any) -> None:
        ctx.plugin(child)
        ctx.effect(lambda: undo_async(log, "sibling", 2))

    async with Context() as root:
        fiber = await root.plugin(parent)
        await root.settle()
        await fiber.dispose()  # returns only after the child has finished
    assert sorted(log[:2]) == ["child-start", "sibling-start"]
    assert sorted(log[2:]) == ["child-end", "sibling-end"]
