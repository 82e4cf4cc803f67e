"""Effects and their exact disposers.

An effect is a registration that knows how to undo itself. ``ctx.effect(body)`` runs
``body()`` at once and returns the effect's :class:`Disposer`: the one object that both
undoes the effect (call it) and waits for its setup (await it). The disposer *is* the
effect record, so identity is ownership: a composite effect that yields the exact
disposer of another effect of the same fiber adopts it (see ``docs/rfc/0001``).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from contextlib import aclosing
from types import AsyncGeneratorType, CoroutineType, GeneratorType
from typing import TYPE_CHECKING, Any

import anyio

from ._errors import InvalidEffectError

if TYPE_CHECKING:
    from ._fiber import Fiber

__all__ = ["Disposer", "EffectBody", "native_cancels"]

#: What an effect body may return (see the table in ARCHITECTURE §3.2).
EffectBody = Any

_SETUP = 0  # the body is still producing disposers
_READY = 1  # set up; nothing undone yet
_UNWINDING = 2  # undo started
_DONE = 3  # undo finished


class Disposer:
    """The exact disposer of one effect: callable (undo) and awaitable (setup).

    ``d()`` runs the synchronous part of the unwind before it returns and gives back an
    awaitable that completes when the whole unwind has finished (ignoring it is fine).
    A second call starts nothing new. ``await d`` waits for the effect's setup and
    raises its setup error; it returns the disposer itself.
    """

    __slots__ = (
        "__weakref__",
        "_done",
        "_errors",
        "_fiber",
        "_orphaned",
        "_pending",
        "_phase",
        "_running",
        "_setting_up",
        "_setup_error",
        "_setup_scope",
        "_setup_waiter",
        "_top",
        "_undo",
        "bounded",
        "label",
    )

    def __init__(self, fiber: Fiber, label: str) -> None:
        self._fiber = fiber
        self.label = label
        self._undo: list[Callable[[], object]] = []
        self._phase = _SETUP
        self._top = False
        self._setup_scope: anyio.CancelScope | None = None
        #: Whether an asynchronous setup is running (None: the setup was synchronous);
        #: ``_setup_waiter`` is the event its waiters wait on, made by the first of
        #: them (most setups have none).
        self._setting_up: bool | None = None
        self._setup_waiter: anyio.Event | None = None
        self._setup_error: Exception | None = None
        self._pending: object = None
        self._done: anyio.Event | None = None
        self._errors: list[BaseException] = []
        self._orphaned = False
        self._running = False
        #: Whether ``undo_timeout`` bounds this effect's asynchronous undo steps (not
        #: for a fiber's own disposer, whose one step is the fiber's whole teardown,
        #: made of steps that are each bounded).
        self.bounded = True

    def __repr__(self) -> str:
        return f"<Disposer {self.label!r} of {self._fiber.name!r}>"

    # -- the public surface -------------------------------------------------------------

    def __call__(self) -> Awaitable[None]:
        """Start undoing the effect; the result completes when the unwind has finished."""
        runtime = self._fiber.runtime
        if self._phase >= _UNWINDING or runtime.closed:
            return _Unwind(self, owner=False)
        runtime.require_open()
        if self._begin():
            self._continue_in_background()
        return _Unwind(self, owner=True)

    def __await__(self) -> Generator[Any, None, Disposer]:
        return self._wait_setup().__await__()

    async def _wait_setup(self) -> Disposer:
        await self._setup_finished()
        if self._setup_error is not None:
            raise self._setup_error
        return self

    # -- setup --------------------------------------------------------------------------

    def _collect(self, item: object) -> None:
        if not callable(item):
            raise InvalidEffectError(
                f"effect {self.label!r} of plugin {self._fiber.name!r} produced "
                f"{type(item).__name__!r}, expected a disposer (a callable)"
            )
        if isinstance(item, Disposer) and item._top and item._fiber is self._fiber:
            # The exact disposer of a sibling effect: adopt it, so it is undone at its
            # position inside this composite instead of concurrently beside it.
            item._top = False
            del self._fiber._effects[item]
        self._undo.append(item)

    def _start(self, result: EffectBody) -> bool:
        """Interpret a body's result; True when an asynchronous setup must follow."""
        # The common kinds by exact type first (no generator or coroutine is callable).
        kind = type(result)
        if result is None:
            self._settle()
        elif kind is GeneratorType:
            self._drain(result)
        elif kind is CoroutineType or kind is AsyncGeneratorType:
            self._setting_up = True
            return True
        elif callable(result):
            self._collect(result)
            self._settle()
        elif inspect.isawaitable(result):
            self._setting_up = True
            return True
        else:
            self._discard()
            raise InvalidEffectError(
                f"effect {self.label!r} of plugin {self._fiber.name!r} returned "
                f"{type(result).__name__!r}: expected a disposer, None, an awaitable, "
                "a generator or an async generator"
            )
        return False

    def _settle(self) -> None:
        """The setup finished while nobody was undoing the effect."""
        self._phase = _READY
        if not self._undo:
            self._discard()

    def _discard(self) -> None:
        """Forget an effect that holds nothing to undo."""
        if self._top:
            self._top = False
            del self._fiber._effects[self]
        self._phase = _DONE

    def _drain(self, gen: Generator[Any, Any, Any]) -> None:
        try:
            for item in gen:
                self._collect(item)
        except BaseException:
            gen.close()
            self._rollback()
            if self._begin():
                self._continue_in_background()
            raise
        self._settle()

    def _rollback(self) -> None:
        """Prepare to undo a failed setup; nobody awaits that unwind, so log its errors."""
        self._phase = _READY
        self._orphaned = True

    async def _setup_finished(self) -> None:
        """Wait until the asynchronous setup (if any) has finished."""
        if self._setting_up:
            waiter = self._setup_waiter
            if waiter is None:
                waiter = self._setup_waiter = anyio.Event()
            await waiter.wait()
        elif self._setting_up is not None:
            # Finished already: a checkpoint, as waiting on a set event is.
            await anyio.lowlevel.checkpoint()

    async def _setup_async(self, result: Any) -> None:
        """Drive an awaitable or async-generator body; dispose cancels it."""
        try:
            with anyio.CancelScope() as scope:
                self._setup_scope = scope
                if self._phase >= _UNWINDING:
                    scope.cancel()
                if type(result) is AsyncGeneratorType:
                    await self._drain_async(result)
                else:
                    value = await result
                    if value is not None:
                        self._collect(value)
        except Exception as exc:
            self._setup_error = exc
        finally:
            self._setup_scope = None
            self._setting_up = False
            waiter = self._setup_waiter
            if waiter is not None:
                self._setup_waiter = None
                waiter.set()
        if self._phase == _SETUP:
            if self._setup_error is None:
                self._settle()
            else:
                self._rollback()
                if self._begin():
                    await self._finish_inline()

    async def _setup_in_background(self, result: Any) -> None:
        """The async setup of an effect created by ``ctx.effect``: failures are logged."""
        await self._setup_async(result)
        if self._setup_error is not None:
            self._fiber.logger.error(
                'plugin "%s": setup of effect %r failed',
                self._fiber.name,
                self.label,
                exc_info=self._setup_error,
            )

    async def _drain_async(self, agen: AsyncGenerator[Any, Any]) -> None:
        async with aclosing(agen):
            async for item in agen:
                self._collect(item)

    # -- unwind -------------------------------------------------------------------------

    def _begin(self) -> bool:
        """Run the synchronous part of the unwind; True when an async part remains."""
        self._phase = _UNWINDING
        if self._top:
            self._top = False
            del self._fiber._effects[self]
        if self._setting_up:
            if self._setup_scope is not None:
                self._setup_scope.cancel()
            return True
        return self._run_sync()

    def _run_sync(self) -> bool:
        """Undo LIFO until a step is asynchronous (True: ``_pending`` holds it)."""
        undo = self._undo
        while undo:
            fn = undo.pop()
            if isinstance(fn, Disposer):
                if fn._phase < _UNWINDING:
                    if not fn._begin():
                        self._errors.extend(fn._errors)
                        continue
                elif fn._phase == _DONE:
                    continue
                self._pending = fn
                return True
            try:
                result = fn()
            except BaseException as exc:  # collected like an error: the rest still run
                self._errors.append(exc)
                continue
            if result is not None and inspect.isawaitable(result):
                self._pending = result
                return True
        self._complete()
        return False

    async def _finish(self) -> None:
        """The asynchronous part of the unwind: LIFO, each step awaited, shielded.

        Whatever a step raises is collected, cancellation included (an undo step that
        awaits a task it has just cancelled sees that task's ``CancelledError``): the
        shield means no cancellation from outside can reach a step, so one that
        surfaces here is the step's own failure, and the rest must still run.
        """
        with anyio.CancelScope(shield=True):
            await self._setup_finished()
            while True:
                pending = self._pending
                self._pending = None
                if isinstance(pending, Disposer):
                    if pending._running:
                        await pending._wait_done()
                    else:
                        await pending._finish_inline()
                        self._errors.extend(pending._errors)
                elif pending is not None:
                    await self._step(pending)
                if not self._run_sync():
                    return

    async def _step(self, pending: Any) -> None:
        """Await one asynchronous undo step, bounded by the runtime's ``undo_timeout``."""
        timeout = self._fiber.runtime.undo_timeout if self.bounded else None
        try:
            if timeout is None:
                await pending
            else:
                with anyio.move_on_after(timeout) as bound:
                    await pending
                if bound.cancelled_caught:
                    self._fiber.logger.error(
                        'plugin "%s": an undo step of effect %r did not finish within '
                        "%ss; it was cancelled and disposal went on",
                        self._fiber.name,
                        self.label,
                        timeout,
                    )
        except BaseException as exc:  # collected like an error: the rest still run
            self._errors.append(exc)

    async def _finish_inline(self) -> None:
        self._running = True
        await self._finish()

    def _continue_in_background(self) -> None:
        self._running = True
        self._fiber._inflight.add(self)
        self._fiber.runtime.spawn(self._finish_in_background, f"dsh undo of {self.label}")

    async def _finish_in_background(self) -> None:
        try:
            await self._finish()
        finally:
            self._fiber._inflight.discard(self)

    def _complete(self) -> None:
        self._phase = _DONE
        done = self._done
        if done is not None:
            done.set()
        if self._orphaned:
            self._report()

    async def _wait_done(self) -> None:
        # After the root has exited nothing is in flight any more (and nothing will be).
        if self._phase != _DONE and not self._fiber.runtime.closed:
            if self._done is None:
                self._done = anyio.Event()
            await _wait_shielded(self._done)

    def _report(self) -> None:
        for exc in self._errors:
            self._fiber.logger.error(
                'plugin "%s": error while disposing effect %r',
                self._fiber.name,
                self.label,
                exc_info=exc,
            )


async def _wait_shielded(event: anyio.Event) -> None:
    """Wait for ``event`` whatever cancels the waiter; a native asyncio cancellation
    that reached the wait anyway is re-raised once the event is set."""
    cancelled: BaseException | None = None
    with anyio.CancelScope(shield=True):
        while not event.is_set():
            try:
                await event.wait()
            except anyio.get_cancelled_exc_class() as exc:  # only a native task.cancel()
                cancelled = exc
    if cancelled is not None:
        raise cancelled


def native_cancels() -> int:
    """How many ``task.cancel()`` requests the current asyncio task has pending (0 when
    not on asyncio). Read before and after a shielded unwind, the difference is a
    native cancellation that reached an await inside the shield anyway (on asyncio a
    ``task.cancel()`` from outside does; cancel scopes never do)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:  # never imported, so not running on it (``import dsh`` skips it)
        return 0
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not running on asyncio
        return 0
    if task is None:  # pragma: no cover - asyncio code always runs inside a task
        return 0
    pending: int = task.cancelling()
    return pending


class _Unwind:
    """What calling a disposer returns: await it to wait for the unwind to finish."""

    __slots__ = ("_awaited", "_disposer", "_owner")

    def __init__(self, disposer: Disposer, owner: bool) -> None:
        self._disposer = disposer
        self._owner = owner
        self._awaited = False

    def __await__(self) -> Generator[Any, None, None]:
        return self._wait().__await__()

    async def _wait(self) -> None:
        self._awaited = True
        d = self._disposer
        if d._phase != _DONE:
            await d._wait_done()
            # The wait is shielded: a cancellation that came meanwhile is delivered now
            # (an unwind that finished synchronously waited for nothing: none came).
            await anyio.lowlevel.checkpoint_if_cancelled()
        if self._owner and d._errors:
            raise BaseExceptionGroup(f"disposing effect {d.label!r} failed", list(d._errors))

    def __del__(self) -> None:
        if self._owner and not self._awaited:
            d = self._disposer
            d._orphaned = True
            if d._phase == _DONE:
                d._report()
