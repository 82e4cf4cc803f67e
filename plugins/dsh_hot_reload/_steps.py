"""Agent steps in flight, so that a reload happens between steps, never inside one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio

from dsh import Plugin

__all__ = ["StepGate", "Steps"]


class Steps:
    """Which sessions are in a step, and a gate that holds new steps during a reload.

    The steps are followed only while a reload is pending (:meth:`begin` until
    :meth:`release`): an agent step costs nothing otherwise. From :meth:`begin` on, a
    step is in flight from the agent's ``agent/pre-step`` (or, for an agent already
    busy then, from that moment) until its next one (the step boundary, where a step
    that would start is held) or until the agent goes idle (the turn's last step, or
    one that ended early). :meth:`hold` returns once none is, closing the gate at that
    very moment (from the callback that saw the last step end, so the next step of a
    busy agent cannot slip in first); steps that start afterwards wait in
    ``agent/pre-step`` until :meth:`release`. A step that starts while a reload waits
    (a subagent's, inside its parent's tool call) is not held, so the step it serves
    can end.
    """

    def __init__(self) -> None:
        self.running: set[object] = set()
        self.closed = False
        #: Starts following the steps and returns what stops it (set by
        #: :class:`StepGate` while it runs; None: steps are counted by hand).
        self.follow: Callable[[], Callable[[], None]] | None = None
        self._unfollow: Callable[[], None] | None = None
        self._wanted: anyio.Event | None = None
        self._reopened: anyio.Event | None = None

    def begin(self) -> bool:
        """A reload is pending: follow the steps from now until :meth:`release`.
        True when a step is in flight."""
        if self.follow is not None and self._unfollow is None:
            self._unfollow = self.follow()
        return bool(self.running)

    async def hold(self) -> None:
        """Wait until no step is in flight; the gate is closed then."""
        self.begin()
        if not self.running:
            self.closed = True
            return
        wanted = self._wanted = anyio.Event()
        try:
            await wanted.wait()  # set by leave(), which closed the gate
        finally:
            self._wanted = None

    def release(self) -> None:
        """Open the gate again: held steps go on, and the steps are no longer followed."""
        self.closed = False
        unfollow, self._unfollow = self._unfollow, None
        if unfollow is not None:
            unfollow()
        reopened, self._reopened = self._reopened, None
        if reopened is not None:
            reopened.set()

    async def enter(self, key: object) -> None:
        while self.closed:
            if self._reopened is None:
                self._reopened = anyio.Event()
            await self._reopened.wait()
        self.running.add(key)

    def leave(self, key: object) -> None:
        self.running.discard(key)
        if not self.running and self._wanted is not None:
            self.closed = True
            self._wanted.set()


class StepGate(Plugin):
    """Follows the agents' steps into a :class:`Steps` (its config) while a reload is
    pending; it injects ``agents``, whose events it listens to then and whose busy
    agents are the steps in flight when it starts."""

    name = "hot-reload/steps"
    inject = ("agents",)

    def setup(self) -> Iterator[Callable[[], object]]:
        steps: Steps = self.config
        ctx = self.ctx

        async def pre_step(agent: Any, messages: Any, turn: int, step: int, call_next: Any) -> Any:
            steps.leave(agent.session)  # the agent's previous step (if any) has ended
            await steps.enter(agent.session)
            return await call_next()

        def status(agent: Any, status: str) -> None:
            if status == "idle":
                steps.leave(agent.session)

        def follow() -> Callable[[], None]:
            # Listening and taking the busy agents happen with no checkpoint between:
            # every step is either seen starting or is in flight already.
            off_step = ctx.on("agent/pre-step", pre_step, prepend=True)
            off_status = ctx.on("agent/status", status)
            steps.running = {a.session for a in ctx.agents.list() if a.status != "idle"}

            def unfollow() -> None:
                off_status()
                off_step()
                steps.running = set()

            return unfollow

        def forget() -> None:  # the agents are gone with their service
            steps.follow = None
            for key in list(steps.running):
                steps.leave(key)

        steps.follow = follow
        yield forget
