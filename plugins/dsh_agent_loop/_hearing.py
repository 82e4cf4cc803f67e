"""Which of the loop's step events someone in an agent's scope listens to.

A step asks whether ``agent/pre-step``, ``agent/request``, ``tool/before``,
``tool/after`` and ``turn/stop`` are heard. The answers change only when a listener is
added or removed somewhere on the bus, so they are taken once per count of the bus's
changes (:attr:`dsh.EventBus.changes`) and asked again only after another change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._agent import LoopAgent
    from ._loop import AgentLoop

__all__ = ["Hearing", "hearing"]


class Hearing:
    """One snapshot: what the agent's scope hears, as of the bus's count ``changes``."""

    __slots__ = ("changes", "pre_step", "request", "tool_after", "tool_before", "turn_stop")

    def __init__(self, loop: AgentLoop, agent: LoopAgent) -> None:
        self.changes = loop.events.changes
        self.pre_step = bool(loop.pre_step.heard(agent))
        self.request = bool(loop.request.heard(agent))
        self.tool_before = bool(loop.tool_before.heard(agent))
        self.tool_after = bool(loop.tool_after.heard(agent))
        self.turn_stop = bool(loop.turn_stop.heard(agent))


def hearing(agent: LoopAgent) -> Hearing:
    """What ``agent``'s scope hears now: its snapshot, taken again after a change."""
    snapshot = agent._hearing
    loop = agent._loop
    if snapshot is None or snapshot.changes != loop.events.changes:
        snapshot = agent._hearing = Hearing(loop, agent)
    return snapshot
