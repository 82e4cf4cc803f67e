"""Disposal under pressure: undo steps that raise anything, outer cancellation, hung steps.

Each test here failed on the runtime before the fix it pins (a cancelled undo step left
the fiber UNLOADING forever; a hung undo step could not be bounded; a shield could be
removed without a test noticing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence

import anyio
import anyio.lowlevel
import pytest

import dsh
from dsh import ConfigError, Context, FiberState
from dsh.testing import capture_logs, errors_logged, state

pytestmark = pytest.mark.anyio


class Stop(BaseException):
    """A BaseException that is not a cancellation (like KeyboardInterrupt)."""


class Specs:
    @dsh.hookspec
    def ping(self) -> None: ...


def listening(ctx: Context) -> None:
    ctx.events.add_hookspecs(Specs)
    ctx.on("ping", lambda: None)


def listeners(root: Context) -> int:
    return len(root.events.event("ping").listeners())


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_undo_step_awaiting_a_task_it_cancelled_does_not_stop_disposal() -> None:
    # The common asyncio idiom: cancel a helper task, then await it. Awaiting it raises
    # the helper's CancelledError in the undo step; it must not escape the unwind.
    async def helper() -> None:
        await asyncio.Event().wait()

    def plugin(ctx: Context, config: None) -> None:
        listening(ctx)

        def body() -> Callable[[], Awaitable[None]]:
            task = asyncio.get_running_loop().create_task(helper())

            async def undo() -> None:
                task.cancel()
                await task

            return undo

        ctx.effect(body, label="helper task")

    async with Context() as root:
        with capture_logs() as logs:
            fiber = await root.plugin(plugin)
            assert listeners(root) == 1
            await fiber.dispose()
            assert state(fiber) is FiberState.DISPOSED
            assert listeners(root) == 0
            # The caller goes on: its next await is not cancelled.
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
        (error,) = errors_logged(logs)
        assert error.getMessage() == 'plugin "plugin": error while disposing it'
        assert isinstance(error.exc_info[1], asyncio.CancelledError)  # type: ignore[index]


async def test_a_base_exception_of_an_undo_step_is_collected_and_the_rest_run() -> None:
    log: list[str] = []

    def composite() -> Iterator[Callable[[], object]]:
        yield lambda: log.append("first undone")

        async def async_stop() -> None:
            await anyio.lowlevel.checkpoint()
            log.append("async stop")
            raise Stop("async")

        def sync_stop() -> None:
            log.append("sync stop")
            raise Stop("sync")

        yield async_stop
        yield sync_stop
        yield lambda: log.append("last undone")

    async with Context() as root:
        d = root.effect(composite)
        with pytest.raises(BaseExceptionGroup) as info:
            await d()
        assert log == ["last undone", "sync stop", "async stop", "first undone"]
        assert [str(e) for e in info.value.exceptions] == ["sync", "async"]
        assert all(isinstance(e, Stop) for e in info.value.exceptions)


async def test_an_outer_cancel_of_the_unwinding_task_is_honoured_afterwards() -> None:
    log: list[str] = []
    inside = anyio.Event()

    def plugin(ctx: Context, config: None) -> Callable[[], Awaitable[None]]:
        async def undo() -> None:
            inside.set()
            for step in range(3):
                await anyio.lowlevel.checkpoint()
                log.append(f"step {step}")

        return undo

    async with Context() as root:
        fiber = await root.plugin(plugin)
        reached_after = False
        scope = anyio.CancelScope()

        async def dispose() -> None:
            nonlocal reached_after
            with scope:
                await fiber.dispose()
                reached_after = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(dispose)
            await inside.wait()
            scope.cancel()
        # The unwind ran to the end, then the cancellation was delivered.
        assert log == ["step 0", "step 1", "step 2"]
        assert state(fiber) is FiberState.DISPOSED
        assert not reached_after
        assert scope.cancelled_caught


class HeldUndo:
    """A plugin whose undo step waits to be released, then logs ``undone``."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.inside, self.released = anyio.Event(), anyio.Event()

        def plugin(ctx: Context, config: None) -> Callable[[], Awaitable[None]]:
            async def undo() -> None:
                self.inside.set()
                await self.released.wait()  # a native cancel lands here, despite the shield
                self.log.append("undone")

            return undo

        self.plugin = plugin

    async def cancel_inside(self, task: asyncio.Task[None]) -> None:
        """Cancel ``task`` (natively) while the undo step waits, then release it: the
        task ends cancelled, after the undo step ran to its end."""
        await self.inside.wait()
        task.cancel()
        await anyio.lowlevel.checkpoint()  # the cancel reaches the waiting undo step first
        self.released.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert self.log == ["undone"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_native_task_cancel_during_an_unwind_is_honoured_afterwards() -> None:
    held = HeldUndo()
    async with Context() as root:
        fiber = await root.plugin(held.plugin)

        async def dispose() -> None:
            await fiber.dispose()

        await held.cancel_inside(asyncio.get_running_loop().create_task(dispose()))
        assert state(fiber) is FiberState.DISPOSED


async def dispose_a_composite(
    undo_timeout: float, label: str, steps: Sequence[Callable[[], object]]
) -> list[str]:
    """Load a plugin holding one composite effect called ``label`` whose undo steps are
    ``steps``, dispose it under ``undo_timeout``: what was logged."""

    def composite() -> Iterator[Callable[[], object]]:
        yield from steps

    def plugin(ctx: Context, config: None) -> None:
        ctx.effect(composite, label=label)

    async with Context(undo_timeout=undo_timeout) as root:
        with capture_logs() as logs:
            fiber = await root.plugin(plugin)
            await fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
    return logs.messages()


async def test_undo_timeout_bounds_a_hung_undo_step() -> None:
    log: list[str] = []

    async def hung() -> None:
        await anyio.Event().wait()

    steps = [lambda: log.append("first undone"), hung, lambda: log.append("last undone")]
    assert await dispose_a_composite(0.05, "with a hung step", steps) == [
        "plugin \"plugin\": an undo step of effect 'with a hung step' did not finish "
        "within 0.05s; it was cancelled and disposal went on"
    ]
    assert log == ["last undone", "first undone"]


async def test_an_undo_step_within_the_bound_finishes_unreported() -> None:
    # A generous bound, so a loaded machine never turns the quick step into a hung one.
    log: list[str] = []

    async def quick() -> None:
        await anyio.lowlevel.checkpoint()
        log.append("quick, within the bound")

    steps = [quick, lambda: log.append("last undone")]
    assert await dispose_a_composite(600, "with a quick step", steps) == []
    assert log == ["last undone", "quick, within the bound"]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_undo_timeout_must_be_positive(bad: float) -> None:
    with pytest.raises(ConfigError, match="undo_timeout must be a positive number"):
        Context(undo_timeout=bad)


# -- the shields, each pinned --------------------------------------------------------------


def stepping(log: list[str], name: str, steps: int = 3) -> Callable[[], Awaitable[None]]:
    """An undo step that takes several checkpoints, logging each."""

    async def undo() -> None:
        for step in range(steps):
            await anyio.lowlevel.checkpoint()
            log.append(f"{name} {step}")

    return undo


async def test_a_background_unwind_survives_an_outer_cancel() -> None:
    # d() is called and not awaited: the unwind runs in the root's task group. An
    # outer cancel that ends the root must not cut it short.
    log: list[str] = []
    with anyio.CancelScope() as outer:
        async with Context() as root:
            d = root.effect(lambda: stepping(log, "undo"))
            d()
            outer.cancel()
            await anyio.lowlevel.checkpoint()
    assert outer.cancelled_caught
    assert log == ["undo 0", "undo 1", "undo 2"]


async def test_a_fiber_teardown_with_two_async_effects_survives_an_outer_cancel() -> None:
    log: list[str] = []

    def plugin(ctx: Context, config: None) -> None:
        ctx.effect(lambda: stepping(log, "a"), label="a")
        ctx.effect(lambda: stepping(log, "b"), label="b")

    async with Context() as root:
        fiber = await root.plugin(plugin)
        with anyio.CancelScope() as scope:
            pending = fiber.dispose()
            scope.cancel()
            await pending
        assert sorted(log) == ["a 0", "a 1", "a 2", "b 0", "b 1", "b 2"]
        assert state(fiber) is FiberState.DISPOSED


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_native_cancel_during_the_roots_teardown_is_delivered_after_it() -> None:
    held = HeldUndo()

    async def run_root() -> None:
        async with Context() as root:
            await root.plugin(held.plugin)
        held.log.append("after the root")  # not reached: the cancellation comes first

    await held.cancel_inside(asyncio.get_running_loop().create_task(run_root()))


async def test_awaiting_an_unwind_that_finished_synchronously_is_no_checkpoint() -> None:
    # Nothing was waited for, so no cancellation can have come meanwhile: the await
    # returns as the synchronous unwind left it, even in a cancelled scope.
    undone: list[str] = []
    async with Context() as root:
        d = root.effect(lambda: lambda: undone.append("undo"))
        with anyio.CancelScope() as scope:
            scope.cancel()
            await d()
            undone.append("after")
        assert undone == ["undo", "after"]
        assert not scope.cancelled_caught
