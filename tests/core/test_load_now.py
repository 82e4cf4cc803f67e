"""``_plugin(..., now=True)`` loads right here; a load that fails or has to wait goes
on as a drive would (the runtime's transition count stays balanced)."""

from __future__ import annotations

import anyio
import pytest

from dsh import Context, FiberState

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
