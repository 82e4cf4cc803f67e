"""``dsh.InFlight``: the count of work in progress that a resource's owner waits for."""

from __future__ import annotations

import anyio
import pytest

from dsh import InFlight
from dsh.testing import until

pytestmark = pytest.mark.anyio


async def test_idle_returns_at_once_when_nothing_is_in_flight() -> None:
    inflight = InFlight()
    assert inflight.count == 0
    await inflight.idle()


async def test_every_waiter_wakes_once_the_last_operation_ends() -> None:
    inflight = InFlight()
    woke: list[int] = []

    async def wait(n: int) -> None:
        await inflight.idle()
        woke.append(n)

    with inflight as same:
        assert same is inflight
        inflight.__enter__()
        assert inflight.count == 2
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, 1)
            tg.start_soon(wait, 2)
            await until(lambda: inflight._idle is not None)
            inflight.__exit__(None, None, None)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            assert woke == []  # one operation is still in flight
            inflight.__exit__(None, None, None)
            inflight.__enter__()  # a new one starts before the woken waiters run
            await until(lambda: inflight._idle is not None)
            assert woke == []  # they saw it and wait again
            inflight.__exit__(None, None, None)
        inflight.__enter__()  # balances the outer `with`
    assert sorted(woke) == [1, 2]
    assert inflight.count == 0
