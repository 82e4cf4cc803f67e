"""Effects and their exact disposers (ARCHITECTURE §3.2)."""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import dsh
from dsh import Context, Disposer, FiberState, InactiveContextError, InvalidEffectError
from dsh._disposer import _DONE
from dsh.testing import capture_logs, errors_logged, state, until
from tests.core.cancel_support import wait_for_cancel

pytestmark = pytest.mark.anyio


# -- the five body forms ----------------------------------------------------------------


async def test_callable_body_is_one_disposer() -> None:
    log: list[str] = []
    async with Context() as root:
        d = root.effect(lambda: lambda: log.append("undo"), label="one")
        assert isinstance(d, Disposer)
        assert d.label == "one"
        assert "one" in repr(d)
        assert log == []
        d()
        assert log == ["undo"]
        await d()
        assert log == ["undo"]
    assert log == ["undo"]


async def test_none_body_has_nothing_to_undo() -> None:
    ran: list[str] = []
    async with Context() as root:
        d = root.effect(lambda: ran.append("body"))
        assert ran == ["body"]
        assert await d is d
        await d()
        await d()


async def test_awaitable_body_is_awaited_in_the_background() -> None:
    log: list[str] = []
    gate = anyio.Event()

    async def body() -> Callable[[], None]:
        log.append("setup-start")
        await gate.wait()
        log.append("setup-end")
        return lambda: log.append("undo")

    async with Context() as root:
        d = root.effect(body)
        assert log == []  # it runs in the background, not before effect() returns
        await until(lambda: log == ["setup-start"])
        gate.set()
        assert await d is d
        assert log == ["setup-start", "setup-end"]
        await d()
        assert log == ["setup-start", "setup-end", "undo"]


async def test_awaitable_body_returning_none() -> None:
    async def body() -> None:
        await anyio.lowlevel.checkpoint()

    async with Context() as root:
        d = root.effect(body)
        assert await d is d
        await d()


async def test_generator_body_is_drained_now_and_undone_lifo() -> None:
    log: list[str] = []

    def body() -> Iterator[Callable[[], None]]:
        log.append("a")
        yield lambda: log.append("undo a")
        log.append("b")
        yield lambda: log.append("undo b")

    async with Context() as root:
        d = root.effect(body)
        assert log == ["a", "b"]  # drained before effect() returned
        assert await d is d
        await d()
        assert log == ["a", "b", "undo b", "undo a"]


async def test_async_generator_body_is_drained_in_the_background() -> None:
    log: list[str] = []

    async def undo(name: str) -> None:
        log.append(f"{name}-start")
        await anyio.lowlevel.checkpoint()
        log.append(f"{name}-end")

    async def body() -> AsyncIterator[Callable[[], Awaitable[None]]]:
        yield lambda: undo("first")
        await anyio.lowlevel.checkpoint()
        yield lambda: undo("second")

    async with Context() as root:
        d = root.effect(body)
        assert await d is d
        await d()
        # inside one effect: strictly LIFO, each awaited before the next
        assert log == ["second-start", "second-end", "first-start", "first-end"]


@pytest.mark.parametrize("value", [42, "text", [lambda: None], object()])
async def test_anything_else_is_a_type_error(value: object) -> None:
    async with Context() as root:
        with pytest.raises(TypeError, match="returned") as info:
            root.effect(lambda: value, label="bad")
        assert isinstance(info.value, InvalidEffectError)
        assert isinstance(info.value, dsh.DshError)
        assert "bad" in str(info.value)


async def test_a_body_that_raises_registers_nothing() -> None:
    def body() -> None:
        raise ValueError("no")

    async with Context() as root:
        with pytest.raises(ValueError, match="no"):
            root.effect(body)


async def test_non_callable_yield_rolls_back_what_was_collected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    finished: list[str] = []

    def body() -> Iterator[object]:
        try:
            yield lambda: log.append("undo 1")
            yield 42
            yield lambda: log.append("never")
        finally:
            finished.append("closed")

    async with Context() as root:
        with pytest.raises(InvalidEffectError, match="'int'"):
            root.effect(body, label="mixed")
        assert log == ["undo 1"]
        assert finished == ["closed"]  # the generator was closed
        assert errors_logged(caplog) == []


async def test_sync_generator_raising_after_d1_undoes_d1() -> None:
    log: list[str] = []

    def body() -> Iterator[Callable[[], None]]:
        yield lambda: log.append("d1")
        raise RuntimeError("halfway")

    async with Context() as root:
        with pytest.raises(RuntimeError, match="halfway"):
            root.effect(body)
        assert log == ["d1"]


async def test_rollback_errors_of_a_failed_setup_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    undone = anyio.Event()

    def bad_undo() -> None:
        raise KeyError("rollback")

    async def async_undo() -> None:
        await anyio.lowlevel.checkpoint()
        undone.set()

    def body() -> Iterator[Callable[[], object]]:
        yield async_undo
        yield bad_undo
        raise RuntimeError("setup")

    async def plugin(ctx: Context, config: Any) -> None:
        with pytest.raises(RuntimeError, match="setup"):
            ctx.effect(body, label="half")

    async with Context() as root:
        await root.plugin(plugin)
        await undone.wait()  # the async part of the rollback ran in the background
    messages = [r.getMessage() for r in errors_logged(caplog)]
    assert any('plugin "plugin"' in m and "half" in m for m in messages), messages


# -- async setup errors and dispose during setup -------------------------------------------


async def test_async_setup_error_is_raised_by_await_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def body() -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("late")

    def plugin(ctx: Context, config: Any) -> None:
        holder.append(ctx.effect(body, label="late-effect"))

    holder: list[Disposer] = []
    async with Context() as root:
        fiber = await root.plugin(plugin)
        (d,) = holder
        with pytest.raises(ValueError, match="late"):
            await d
        assert state(fiber) is FiberState.ACTIVE  # a background effect does not fail the fiber
        await d()  # nothing left to undo
    records = errors_logged(caplog)
    assert [r.name for r in records] == ["dsh.plugin"]
    assert "late-effect" in records[0].getMessage()
    assert 'plugin "plugin"' in records[0].getMessage()


async def test_awaitable_resolving_to_a_non_callable_is_a_setup_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def body() -> int:
        await anyio.lowlevel.checkpoint()
        return 7

    async with Context() as root:
        d = root.effect(body)
        with pytest.raises(InvalidEffectError, match="'int'"):
            await d
    assert len(errors_logged(caplog)) == 1


async def test_async_generator_raising_after_d1_undoes_d1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []

    async def body() -> AsyncIterator[Callable[[], None]]:
        yield lambda: log.append("d1")
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("agen")

    async with Context() as root:
        d = root.effect(body)
        with pytest.raises(RuntimeError, match="agen"):
            await d
        await until(lambda: log == ["d1"])
        await d()  # already rolled back: nothing runs twice
        assert log == ["d1"]
    assert len(errors_logged(caplog)) == 1


async def test_async_rollback_of_a_failed_setup_is_awaited() -> None:
    log: list[str] = []

    async def undo() -> None:
        await anyio.lowlevel.checkpoint()
        log.append("undo")

    async def body() -> AsyncIterator[Callable[[], Awaitable[None]]]:
        yield undo
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("agen")

    async with Context() as root:
        d = root.effect(body)
        with pytest.raises(RuntimeError):
            await d
        await d()  # joins the rollback in flight
        assert log == ["undo"]


async def test_dispose_during_async_generator_setup_cancels_and_undoes() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def body() -> AsyncIterator[Callable[[], None]]:
        yield lambda: log.append("undo d1")
        await wait_for_cancel(started, log, "cancelled")
        yield lambda: log.append("never")

    async with Context() as root:
        d = root.effect(body)
        await started.wait()
        await d()
        assert log == ["cancelled", "undo d1"]
        assert await d is d  # cancellation is not a setup error


async def test_dispose_before_async_setup_started() -> None:
    log: list[str] = []

    async def body() -> Callable[[], None]:
        log.append("body")
        await anyio.lowlevel.checkpoint()
        log.append("after the checkpoint")
        return lambda: log.append("undo")

    async with Context() as root:
        d = root.effect(body)
        d()  # before the background setup task has started
        await d()
        assert "after the checkpoint" not in log
        assert await d is d


async def test_dispose_during_awaitable_setup_cancels_it() -> None:
    started = anyio.Event()

    async def body() -> Callable[[], None]:
        started.set()
        await anyio.sleep_forever()
        return lambda: None

    async with Context() as root:
        d = root.effect(body)
        await started.wait()
        with anyio.fail_after(5):  # a guard against a hang, not a wait for state
            await d()


# -- calling a disposer ------------------------------------------------------------------


async def test_sync_part_runs_before_the_call_returns_and_second_call_joins() -> None:
    log: list[str] = []
    gate = anyio.Event()

    def undo() -> Awaitable[None]:
        log.append("sync")

        async def rest() -> None:
            await gate.wait()
            log.append("async")
            raise ValueError("late")

        return rest()

    async with Context() as root:
        d = root.effect(lambda: undo)
        first = d()
        assert log == ["sync"]
        second = d()
        assert log == ["sync"]  # the second call starts nothing
        joined: list[str] = []

        async def join() -> None:
            await second  # does not raise the unwind's errors again
            joined.append("done")

        async def join_again() -> None:
            await d()  # a third call: joins too
            joined.append("again")

        async with anyio.create_task_group() as tg:
            tg.start_soon(join)
            tg.start_soon(join_again)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            assert joined == []  # both wait for the unwind in flight
            gate.set()
        assert sorted(joined) == ["again", "done"]
        with pytest.raises(ExceptionGroup) as info:
            await first
        assert [str(e) for e in info.value.exceptions] == ["late"]
        assert log == ["sync", "async"]


async def test_ignoring_the_returned_awaitable_warns_nothing() -> None:
    log: list[str] = []

    async def later() -> None:
        await anyio.lowlevel.checkpoint()
        log.append("async")

    async with Context() as root:
        d_sync = root.effect(lambda: lambda: log.append("sync"))
        d_async = root.effect(lambda: later)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            d_sync()
            d_async()
            gc.collect()
            await d_async()  # a second call: waits for the unwind in flight
        assert caught == []
    assert log == ["sync", "async"]


async def test_errors_of_an_unawaited_unwind_are_logged_with_the_plugin_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    holder: list[Disposer] = []

    def boom() -> None:
        raise ValueError("sync boom")

    async def aboom() -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("async boom")

    def probe(ctx: Context, config: Any) -> None:
        holder.append(ctx.effect(lambda: boom, label="sync-effect"))
        holder.append(ctx.effect(lambda: aboom, label="async-effect"))

    async with Context() as root:
        fiber = await root.plugin(probe)
        d_sync, d_async = holder
        d_sync()
        d_async()
        await d_async()  # joins without raising
        assert state(fiber) is FiberState.ACTIVE
    records = errors_logged(caplog)
    assert {r.name for r in records} == {"dsh.probe"}
    text = "\n".join(r.getMessage() for r in records)
    assert 'plugin "probe"' in text
    assert "sync-effect" in text
    assert "async-effect" in text
    assert {str(r.exc_info[1]) for r in records if r.exc_info} == {"sync boom", "async boom"}


async def test_direct_awaiting_caller_gets_every_error(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []

    def first() -> None:
        log.append("first")

    def second() -> None:
        log.append("second")
        raise KeyError("second")

    async def third() -> None:
        await anyio.lowlevel.checkpoint()
        log.append("third")
        raise ValueError("third")

    def fourth() -> None:
        log.append("fourth")

    def body() -> Iterator[Callable[[], object]]:
        yield first
        yield second
        yield third
        yield fourth

    async with Context() as root:
        d = root.effect(body, label="composite")
        with pytest.raises(ExceptionGroup) as info:
            await d()
        assert log == ["fourth", "third", "second", "first"]  # all ran, LIFO
        assert sorted(type(e).__name__ for e in info.value.exceptions) == ["KeyError", "ValueError"]
        assert "composite" in str(info.value)
    assert errors_logged(caplog) == []  # the caller got them: nothing logged


async def test_after_the_root_exits_a_disposer_does_nothing() -> None:
    log: list[str] = []
    async with Context() as root:
        d = root.effect(lambda: lambda: log.append("undo"))
        root_dispose = root.fiber.dispose
    assert log == ["undo"]  # the exit undid it
    d()
    await d()
    with anyio.fail_after(5):  # a guard against a hang, not a wait for state
        await root_dispose()
        root_dispose()
    assert log == ["undo"]


# -- inactive contexts -------------------------------------------------------------------


class Specs:
    @dsh.hookspec
    def ping(self) -> None: ...


async def test_effects_on_a_disposed_fiber_raise() -> None:
    async with Context() as root:
        fiber = await root.plugin(lambda ctx, config: None)
        await fiber.dispose()
        ctx = fiber.ctx
        with pytest.raises(InactiveContextError, match="disposed") as info:
            ctx.effect(lambda: None)
        assert info.value.code == "INACTIVE_CONTEXT"
        root.events.add_hookspecs(Specs)
        with pytest.raises(InactiveContextError):
            ctx.on("ping", print)
        with pytest.raises(InactiveContextError):
            ctx.plugin(lambda ctx, config: None)
        with pytest.raises(InactiveContextError):
            ctx.provide("svc", object())
        with pytest.raises(InactiveContextError):
            ctx.task(anyio.sleep_forever)


async def test_effects_from_inside_an_unloading_fibers_disposer_raise() -> None:
    seen: list[BaseException] = []

    def plugin(ctx: Context, config: Any) -> Callable[[], None]:
        def undo() -> None:
            for attempt in (
                lambda: ctx.effect(lambda: None),
                lambda: ctx.plugin(lambda c, cfg: None),
                lambda: ctx.task(anyio.sleep_forever),
            ):
                try:
                    attempt()
                except InactiveContextError as exc:
                    seen.append(exc)

        return undo

    async with Context() as root:
        fiber = await root.plugin(plugin)
        await fiber.restart()  # UNLOADING on the way to a reload
        assert state(fiber) is FiberState.ACTIVE
        assert len(seen) == 3
        assert all("unloading" in str(e) for e in seen)
        await fiber.dispose()
        assert state(fiber) is FiberState.DISPOSED
    assert len(seen) == 6
    assert all("disposed" in str(e) for e in seen[3:])


async def test_root_effects_from_the_roots_own_teardown_raise() -> None:
    seen: list[BaseException] = []

    async with Context() as root:

        def undo() -> None:
            try:
                root.effect(lambda: None)
            except InactiveContextError as exc:
                seen.append(exc)

        root.effect(lambda: undo)
    assert len(seen) == 1


# -- adoption and joins --------------------------------------------------------------------


async def test_composite_adopts_an_effect_whose_async_setup_is_running() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def slow() -> AsyncIterator[Callable[[], None]]:
        yield lambda: log.append("inner")
        started.set()
        await anyio.sleep_forever()
        yield lambda: None

    async with Context() as root:
        inner = root.effect(slow, label="inner")

        def composite() -> Iterator[Callable[[], object]]:
            yield lambda: log.append("first")
            yield inner
            yield lambda: log.append("last")

        outer = root.effect(composite)
        await started.wait()
        await outer()
        assert log == ["last", "inner", "first"]


async def test_adopting_an_effect_whose_setup_finished_empty() -> None:
    gate = anyio.Event()

    async def body() -> None:
        await gate.wait()

    async with Context() as root:
        inner = root.effect(body)
        outer = root.effect(lambda: inner)
        gate.set()
        await inner
        await outer()


async def test_composite_joins_an_unwind_already_in_flight() -> None:
    log: list[str] = []
    gate = anyio.Event()

    async def slow() -> None:
        await gate.wait()
        log.append("inner done")

    async with Context() as root:
        inner = root.effect(lambda: slow)

        def composite() -> Iterator[Callable[[], object]]:
            yield lambda: log.append("first")
            yield inner
            yield lambda: log.append("last")

        outer = root.effect(composite)
        inner()  # starts the inner unwind in the background
        unwinding = outer()
        assert log == ["last"]
        gate.set()
        await unwinding
        assert log == ["last", "inner done", "first"]


async def test_composite_skips_an_inner_effect_already_undone() -> None:
    log: list[str] = []
    async with Context() as root:
        inner = root.effect(lambda: lambda: log.append("inner"))

        def composite() -> Iterator[Callable[[], object]]:
            yield lambda: log.append("first")
            yield inner

        outer = root.effect(composite)
        inner()
        await outer()
        assert log == ["inner", "first"]


async def test_inner_errors_are_reported_to_the_composites_caller() -> None:
    async def aboom() -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("async inner")

    async with Context() as root:
        sync_inner = root.effect(lambda: lambda: 1 / 0)
        async_inner = root.effect(lambda: aboom)

        def composite() -> Iterator[Callable[[], object]]:
            yield sync_inner
            yield async_inner

        outer = root.effect(composite)
        with pytest.raises(ExceptionGroup) as info:
            await outer()
        assert sorted(type(e).__name__ for e in info.value.exceptions) == [
            "ValueError",
            "ZeroDivisionError",
        ]


async def test_a_disposer_of_another_fiber_is_not_adopted() -> None:
    log: list[str] = []
    async with Context() as root:
        fiber = await root.plugin(lambda ctx, config: None)
        foreign = fiber.ctx.effect(lambda: lambda: log.append("foreign"))
        composite = root.effect(lambda: foreign)
        await composite()
        assert log == ["foreign"]
        await fiber.dispose()
        assert log == ["foreign"]  # undone once


async def test_a_sync_disposer_may_undo_a_sibling_effect() -> None:
    log: list[str] = []

    def plugin(ctx: Context, config: Any) -> None:
        first = ctx.effect(lambda: lambda: log.append("first"))

        def undo_second() -> None:
            log.append("second")
            first()

        ctx.effect(lambda: undo_second)

    async with Context() as root:
        fiber = await root.plugin(plugin)
        await fiber.dispose()
        assert log == ["second", "first"]


async def test_fiber_unload_waits_for_an_unwind_in_flight() -> None:
    log: list[str] = []
    gate = anyio.Event()
    holder: list[Disposer] = []

    async def slow() -> None:
        await gate.wait()
        log.append("slow done")

    def plugin(ctx: Context, config: Any) -> None:
        holder.append(ctx.effect(lambda: slow))

    async with Context() as root:
        fiber = await root.plugin(plugin)
        holder[0]()  # in flight, nobody awaits it
        disposed: list[str] = []

        async def dispose() -> None:
            await fiber.dispose()
            disposed.append("done")

        async with anyio.create_task_group() as tg:
            tg.start_soon(dispose)
            await until(lambda: state(fiber) is FiberState.UNLOADING)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            assert disposed == []
            gate.set()
        assert log == ["slow done"]
        assert state(fiber) is FiberState.DISPOSED


async def test_disposing_a_fiber_logs_its_disposers_errors_and_runs_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []

    def plugin(ctx: Context, config: Any) -> Iterator[Callable[[], None]]:
        def boom() -> None:
            log.append("boom")
            raise ValueError("boom")

        ctx.effect(lambda: lambda: log.append("separate"))
        yield lambda: log.append("first")
        yield boom
        yield lambda: log.append("last")

    async with Context() as root:
        fiber = await root.plugin(plugin)
        await fiber.dispose()  # never raises the disposers' errors
        await fiber.dispose()  # a no-op
        assert state(fiber) is FiberState.DISPOSED
    assert log.count("boom") == 1
    assert log.index("last") < log.index("boom") < log.index("first")
    records = errors_logged(caplog)
    assert len(records) == 1
    assert records[0].name == "dsh.plugin"
    assert 'plugin "plugin"' in records[0].getMessage()


# -- ctx.task ------------------------------------------------------------------------------


async def test_task_is_cancelled_on_dispose_and_awaited() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def worker(tag: str) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()
            log.append(f"cleanup {tag}")

    async with Context() as root:
        d = root.task(worker, "x")
        assert d.label == "task worker"
        await started.wait()
        await d()
        assert log == ["cleanup x"]  # awaited: the cleanup has finished


async def test_task_is_cancelled_when_its_fiber_unloads() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def worker() -> None:
        await wait_for_cancel(started, log, "cleanup")

    def plugin(ctx: Context, config: Any) -> None:
        ctx.task(worker, label="loop")

    async with Context() as root:
        fiber = await root.plugin(plugin)
        await started.wait()
        await fiber.dispose()
        assert log == ["cleanup"]


async def test_failing_task_is_logged_and_its_fiber_stays_active(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def worker() -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("task failed")

    def plugin(ctx: Context, config: Any) -> None:
        ctx.task(worker, label="doomed")

    async with Context() as root:
        fiber = await root.plugin(plugin)
        await until(lambda: bool(errors_logged(caplog)))
        assert state(fiber) is FiberState.ACTIVE
        (record,) = errors_logged(caplog)
        assert record.name == "dsh.plugin"
        assert 'plugin "plugin"' in record.getMessage()
        assert "doomed" in record.getMessage()
        await fiber.dispose()


async def test_a_finished_task_disposes_quietly() -> None:
    done = anyio.Event()

    async def worker() -> None:
        done.set()

    with capture_logs() as logs:
        async with Context() as root:
            d = root.task(worker)
            await done.wait()
            await d()
            assert d._phase == _DONE  # the unwind is complete, not merely started
    assert logs.records == []  # nothing failed, so nothing is reported
