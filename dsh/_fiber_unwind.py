"""Undoing a fiber's effects: the synchronous parts now, the rest awaited together."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio

from ._disposer import _UNWINDING, Disposer

if TYPE_CHECKING:
    from ._fiber import Fiber

__all__ = ["begin_unwinds", "teardown", "then"]


def begin_unwinds(fiber: Fiber) -> tuple[list[Disposer], Awaitable[None] | None]:
    """Undo every top-level effect of ``fiber``: the synchronous parts now, in reverse
    order.

    Returns the effects whose unwinds this call started and, when some of them (or
    unwinds already in flight) go on asynchronously, the awaitable finishing them.
    """
    began: list[Disposer] = []
    pending: list[Disposer] = []
    for d in reversed(list(fiber._effects)):
        # A sibling's synchronous disposer may already have started this one.
        if d._phase < _UNWINDING:
            began.append(d)
            if d._begin():
                pending.append(d)
    # The root's own dispose is the unwind running this call: never wait for it.
    waiting = [d for d in fiber._inflight if d is not fiber.dispose]
    if not pending and not waiting:
        return began, None
    return began, _finish_unwinds(pending, waiting)


def teardown(fiber: Fiber, *, reset: bool = False) -> Awaitable[None] | None:
    """Undo every effect of ``fiber``, logging the errors; an awaitable when some undo
    goes on asynchronously. ``reset``: the root's effects are undone while it stays
    active (the log says so)."""
    began, rest = begin_unwinds(fiber)
    if rest is None:
        _log_undo_errors(fiber, began, reset)
        return None
    return _finish_teardown(fiber, began, rest, reset)


async def _finish_teardown(
    fiber: Fiber, began: list[Disposer], rest: Awaitable[None], reset: bool
) -> None:
    await rest
    _log_undo_errors(fiber, began, reset)


def _log_undo_errors(fiber: Fiber, began: list[Disposer], reset: bool) -> None:
    for d in began:
        for exc in d._errors:
            if reset:
                fiber.logger.error("error while disposing the root's effects", exc_info=exc)
            else:
                fiber.logger.error(
                    'plugin "%s": error while disposing it', fiber.name, exc_info=exc
                )


async def _finish_unwinds(pending: list[Disposer], waiting: list[Disposer]) -> None:
    """The asynchronous parts of a fiber's unwinds, concurrently and shielded."""
    with anyio.CancelScope(shield=True):
        if len(pending) == 1 and not waiting:
            await pending[0]._finish_inline()
        else:
            async with anyio.create_task_group() as tg:
                for d in pending:
                    tg.start_soon(d._finish_inline)
                for d in waiting:
                    tg.start_soon(d._wait_done)


async def then(rest: Awaitable[None], after: Callable[[], None]) -> None:
    """Await ``rest``, then call ``after``."""
    await rest
    after()
