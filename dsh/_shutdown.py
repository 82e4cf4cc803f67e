"""How a deployment command stops on SIGTERM: first the shutdown, then the word."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator

import anyio
from anyio.abc import TaskStatus

from ._stderr import print_stderr

__all__ = ["EXIT_TERMINATED", "Shutdown"]

#: The exit status after SIGTERM (128 + the signal's number, as a shell reports it).
EXIT_TERMINATED = 128 + signal.SIGTERM


class Shutdown:
    """SIGTERM cancels :attr:`scope` (around a command's body, so the root is disposed
    in order: every running turn records its end, instead of the process dying
    mid-write), and only then says so on stderr. Later SIGTERMs and SIGINTs are taken
    (and ignored) until the command is done, so nothing interrupts the shutdown."""

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        #: Whether SIGTERM arrived.
        self.requested = False
        self._unwound = anyio.Event()

    @contextlib.contextmanager
    def unwinding(self) -> Iterator[None]:
        """Around the body: once it is done (and the root about to be disposed), a
        front-end that handled SIGINT itself while the body ran no longer does."""
        try:
            yield
        finally:
            self._unwound.set()

    async def run(self, command: Callable[[Shutdown], Awaitable[int]]) -> int:
        """``command(self)``, its body in :attr:`scope`, with SIGTERM watched until it
        returns; what it raises is raised as it is (not in a group)."""
        try:
            async with anyio.create_task_group() as watcher:
                await watcher.start(self.watch)
                try:
                    status = await command(self)
                finally:
                    watcher.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The watcher raises nothing: the group holds what the command raised.
            raise group.exceptions[0] from None
        return status

    async def watch(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Wait for SIGTERM, then shut down. Only the main thread receives signals;
        elsewhere this returns at once."""
        if threading.current_thread() is not threading.main_thread():
            task_status.started()
            return
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            task_status.started()
            await anext(signals)
            self.requested = True
            self.scope.cancel()
            print_stderr("terminated: shutting down")
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._ignore, signal.SIGTERM, signal.SIGINT)
                await self._unwound.wait()
                # A front-end's own SIGINT receiver, closed with the body, gave SIGINT
                # back to Python's default (KeyboardInterrupt): take it again.
                tg.start_soon(self._ignore, signal.SIGINT)

    async def _ignore(self, *signums: signal.Signals) -> None:
        with anyio.open_signal_receiver(*signums) as later:
            async for _ in later:
                print_stderr("terminated: already shutting down")
