"""``_plugin(..., now=True)`` loads right here; a load that fails or has to wait goes
on as a drive would (the runtime's transition count stays balanced)."""

from __future__ import annotations

import anyio
import pytest

from dsh import Context, Fiber, FiberState

pytestmark = pytest.mark.anyio


def _fails(ctx: Context, config: None) -> None:
    raise ValueError("no body today")


_fails.name = "fails-now"  # type: ignore[attr-defined]


async def test_a_now_body_that_raises_leaves_the_fiber_failed_and_settled() -> None:
    async with Context() as root:
        fiber = root._plugin(_fails, now=True)
        assert fiber.state is FiberState.FAILED
        assert isinstance(fiber.error, ValueError)
        await root.settle()
        assert not fiber._driving


async def test_a_now_body_that_waits_goes_on_in_a_drive() -> None:
    release = anyio.Event()

    async def waits(ctx: Context, config: None) -> None:
        await release.wait()

    waits.name = "waits-now"  # type: ignore[attr-defined]
    async with Context() as root:
        fiber = root._plugin(waits, now=True)
        assert fiber._driving
        assert fiber.state.name == "LOADING"
        release.set()
        await root.settle()
        assert fiber.state is FiberState.ACTIVE
        await fiber.dispose()
        assert fiber.state.name == "DISPOSED"


class Stop(BaseException):
    """Not an Exception: a KeyboardInterrupt, say."""


async def test_a_base_exception_of_a_now_load_propagates_and_leaves_the_fiber_undriven(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stopped: list[Fiber] = []

    def stop(fiber: Fiber, epoch: object) -> bool:
        stopped.append(fiber)
        raise Stop("load")

    monkeypatch.setattr(Fiber, "_load", stop)
    async with Context() as root:
        with pytest.raises(Stop):
            root._plugin(_fails, now=True)
        assert [f._driving for f in stopped] == [False]
        monkeypatch.undo()


async def test_a_base_exception_of_a_synchronous_unload_leaves_the_fiber_undriven(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def plugin(ctx: Context, config: None) -> None:
        ctx.effect(lambda: lambda: None)

    async with Context() as root:
        fiber = root.plugin(plugin)
        await root.settle()

        def stop() -> bool:
            raise Stop("unload")

        monkeypatch.setattr(fiber, "_unload", stop)
        fiber.dispose()  # the disposer collects and logs what its step raised
        assert not fiber._driving
        monkeypatch.undo()
