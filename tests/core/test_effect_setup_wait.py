"""Waiting for an effect's asynchronous setup: any awaitable body, several waiters, and
the checkpoint of waiting on a setup that has finished."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any

import anyio
import pytest

from dsh import Context

pytestmark = pytest.mark.anyio


class Gate:
    """An awaitable that is not a coroutine: it waits for ``open`` and returns ``undo``."""

    def __init__(self, undo: Callable[[], object]) -> None:
        self.opened = anyio.Event()
        self.undo = undo

    def __await__(self) -> Generator[Any, None, Callable[[], object]]:
        return self._wait().__await__()

    async def _wait(self) -> Callable[[], object]:
        await self.opened.wait()
        return self.undo


async def test_an_awaitable_body_that_is_not_a_coroutine_sets_up_asynchronously() -> None:
    log: list[str] = []
    gate = Gate(lambda: log.append("undo"))
    async with Context() as root:
        d = root.effect(lambda: gate, label="gated")
        gate.opened.set()
        assert await d is d
        assert log == []
        await d()
    assert log == ["undo"]


async def test_every_waiter_of_a_running_setup_wakes_when_it_finishes() -> None:
    release = anyio.Event()
    woke: list[int] = []

    async def body() -> Callable[[], None]:
        await release.wait()
        return lambda: None

    async with Context() as root:
        d = root.effect(body, label="slow")

        async def wait(n: int) -> None:
            await d
            woke.append(n)

        async with anyio.create_task_group() as tg:
            for n in range(3):
                tg.start_soon(wait, n)
            await anyio.wait_all_tasks_blocked()
            assert woke == []  # every waiter waits for the one setup
            release.set()
        assert sorted(woke) == [0, 1, 2]
        await d()


async def test_awaiting_a_finished_async_setup_is_a_checkpoint() -> None:
    async def body() -> None:
        return None

    async with Context() as root:
        d: Awaitable[object] = root.effect(body, label="quick")
        await d  # the setup has run: nothing is left to wait for
        with anyio.CancelScope() as scope:
            scope.cancel()
            await d  # a checkpoint: the pending cancel is delivered here
            pytest.fail("not a checkpoint")  # pragma: no cover - reached only on failure
        assert scope.cancelled_caught
