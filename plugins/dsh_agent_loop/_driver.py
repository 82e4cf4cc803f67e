"""The driver: the task that runs an agent's queued turns.

A message sent while no driver runs starts one, a plain task of the runtime's task
group; it ends when the agent goes idle. It is not an effect of the agent's scope: the
agent's close (the last thing the scope's wiring undoes first) cancels it and waits for
its end, so that the running turn records its end before anything else is undone.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from ._agent import LoopAgent

__all__ = ["Driver"]

_log = logging.getLogger("dsh.agent-loop")


class Driver:
    """One run of an agent's driver: cancel it with :meth:`stop`, wait with :meth:`ended`."""

    __slots__ = ("_agent", "_done", "_running", "_scope")

    def __init__(self, agent: LoopAgent) -> None:
        self._agent = agent
        #: Cancelled to stop the driver; entered by the task (cancelled before it
        #: starts, the task stops at its first checkpoint).
        self._scope = anyio.CancelScope()
        self._running = True
        #: Set when the task ends; made by the first waiter (most drivers have none).
        self._done: anyio.Event | None = None

    def start(self) -> None:
        """Start the task (its name: ``dsh agent <id>``)."""
        agent = self._agent
        agent.ctx.fiber.runtime.spawn(self._run, f"dsh agent {agent.id}")

    async def _run(self) -> None:
        try:
            with self._scope:
                await self._agent.drive()
        except Exception as exc:
            # ``drive`` keeps what a turn raises; this would be a bug of the loop's own.
            _log.error("the driver of agent %r failed", self._agent.id, exc_info=exc)
        finally:
            self._running = False
            done = self._done
            if done is not None:
                done.set()

    def stop(self) -> None:
        """Cancel the driver: the running turn ends ``aborted``/``disposed``."""
        self._scope.cancel()

    async def ended(self) -> None:
        """Cancel the driver and wait until its task has ended, whatever cancels the
        waiter meanwhile (that cancellation is delivered once the task has ended)."""
        self._scope.cancel()
        if self._running:
            done = self._done
            if done is None:
                done = self._done = anyio.Event()
            with anyio.CancelScope(shield=True):
                await done.wait()
            await anyio.lowlevel.checkpoint_if_cancelled()
