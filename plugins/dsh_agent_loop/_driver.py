"""The driver: the task that runs an agent's queued turns.

A message sent while no driver runs starts one, a plain task of the runtime's task
group; it ends when the agent goes idle. Its task handle is what cancels it (the
handle's own cancel scope wraps the task). It is not an effect of the agent's scope:
the agent's close (the first thing the scope's wiring undoes) cancels it and waits for
its end, so that the running turn records its end before anything else is undone.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from ._agent import LoopAgent

__all__ = ["end_driver", "start_driver"]

_log = logging.getLogger("dsh.agent-loop")


def start_driver(agent: LoopAgent) -> anyio.TaskHandle[None]:
    """Start ``agent``'s driver, a task named ``dsh agent <id>``; returns its handle."""
    runtime = agent._scope.fiber.runtime
    return runtime.spawn(functools.partial(_drive, agent), f"dsh agent {agent.id}")


async def _drive(agent: LoopAgent) -> None:
    try:
        await agent.drive()
    except Exception as exc:
        # ``drive`` keeps what a turn raises; this would be a bug of the loop's own.
        _log.error("the driver of agent %r failed", agent.id, exc_info=exc)


async def end_driver(driver: anyio.TaskHandle[None]) -> None:
    """Cancel ``driver`` (the running turn ends ``aborted``/``disposed``) and wait until
    its task has ended, whatever cancels the waiter meanwhile (that cancellation is
    delivered once the task has ended)."""
    driver.cancel()
    with anyio.CancelScope(shield=True):
        await driver.wait()
    await anyio.lowlevel.checkpoint_if_cancelled()
