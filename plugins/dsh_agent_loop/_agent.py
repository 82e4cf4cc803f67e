"""``LoopAgent``: the agent handle, its inbox, the driver task and each turn's step loop.

What a step dispatches is in ``_step_hooks``, what it records in ``_step_log``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio

from dsh import Context, DshError
from dsh_agent import AgentError, AgentTypeError, NoModelError, StepBlocked, assemble_context_for
from dsh_llm import LlmError, LlmRequest, Message, Usage
from dsh_scope import Scope
from dsh_session import Session, SessionFencedError
from dsh_system_prompt import read_tools, render_prompt

from ._driver import end_driver, start_driver
from ._hearing import Hearing, hearing
from ._limits import check_turn_limits
from ._step_hooks import filter_request, pre_step, recover, turn_stop, user_prompt
from ._step_log import log_header, log_messages, record_answer, stream
from ._tool_calls import run_tool_calls
from ._usage import NO_USAGE, cost

if TYPE_CHECKING:
    from ._loop import AgentLoop

__all__ = ["LoopAgent"]

_log = logging.getLogger("dsh.agent-loop")

#: The agent whose driver runs the current task (tools and listeners inherit it).
_DRIVING: ContextVar[LoopAgent | None] = ContextVar("dsh_agent_loop_driving", default=None)


def _as_message(message: object) -> Message:
    if isinstance(message, Message):
        return message
    if isinstance(message, str):
        return Message.user(message)
    raise AgentTypeError(
        f"an agent message must be a str or a dsh_llm.Message, got {type(message).__name__}"
    )


def _fence_of(error: BaseException) -> SessionFencedError | None:
    """The :class:`SessionFencedError` in ``error`` (itself, or in its groups)."""
    if isinstance(error, SessionFencedError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _fence_of(inner)
            if found is not None:
                return found
    return None


def _error_reason(error: BaseException) -> dict[str, Any]:
    """The ``turn/end`` reason of a turn that raised ``error``."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, LlmError):
        return {"kind": "error", "message": error.failure.message, "code": error.failure.code}
    code = error.code if isinstance(error, DshError) else "UNKNOWN"
    return {"kind": "error", "message": str(error) or type(error).__name__, "code": code}


class LoopAgent:
    """One agent: ``send`` queues a turn, ``steer`` joins the running one.

    Each queued message starts its own turn; a failed turn ends with reason ``error``
    and the next queued message still runs. ``cancel`` aborts the running turn and
    drops what is queued.
    """

    # "__dict__" keeps the handle open to attributes others attach; it is made only
    # when one is.
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_abort_reason",
        "_aborting",
        "_disposed",
        "_driver",
        "_estimated",
        "_fenced",
        "_header",
        "_header_key",
        "_hearing",
        "_in_session",
        "_inbox",
        "_loop",
        "_scope",
        "_status",
        "_steering",
        "_step",
        "_turn_scope",
        "ctx",
        "id",
        "max_steps",
        "max_tokens",
        "max_turn_tokens",
        "model",
        "session",
    )

    def __init__(
        self,
        loop: AgentLoop,
        agent_id: str,
        model: str | None,
        max_tokens: int | None,
        *,
        max_steps: int,
        max_turn_tokens: int | None,
    ) -> None:
        self.id = agent_id
        self.model = model
        self.max_tokens = max_tokens
        #: The turn limits (RFC 0031), looked at after each step that would go on.
        self.max_steps = max_steps
        self.max_turn_tokens = max_turn_tokens
        self._loop = loop
        self.session: Session
        self.ctx: Context
        self._scope: Scope
        self._inbox: list[list[Message]] = []
        self._steering: list[Message] = []
        self._status = "idle"
        self._turn_scope: anyio.CancelScope | None = None
        self._abort_reason = "user"
        #: Whether the running turn's scope was cancelled (only ``_abort`` cancels it):
        #: a step reads this rather than ask the scope.
        self._aborting = False
        self._step = 0
        self._header: dict[str, Any] | None = None
        #: The request parts the last header was made of (``log_header``).
        self._header_key: tuple[object, ...] | None = None
        #: What the agent's scope hears of the step events (taken at the first step).
        self._hearing: Hearing | None = None
        self._disposed = False
        #: Why the store refused this agent's writer (``SESSION_FENCED``), once it did.
        self._fenced: str | None = None
        #: The sum of the session's ``usage/step`` events (set for a resumed session by
        #: the factory, then kept up to date by each step).
        self._usage = NO_USAGE
        #: The part of it the loop estimated (steps whose server reported no usage).
        self._estimated = NO_USAGE
        #: The driver: a task started by a message while none runs; it ends when the
        #: agent goes idle.
        self._driver: anyio.TaskHandle[None] | None = None
        #: Whether ``session/start`` was dispatched and ``session/end`` not yet.
        self._in_session = False

    def __repr__(self) -> str:
        return f"<LoopAgent {self.id!r} {self._status}>"

    # -- the handle ---------------------------------------------------------------------

    @property
    def cwd(self) -> str | None:
        return self.session.header.cwd

    @property
    def status(self) -> str:
        return self._status

    @property
    def usage(self) -> Usage:
        """The tokens of the whole session: every ``usage/step`` summed, each field
        set (absent ones count 0). Kept up to date as steps record usage: O(1)."""
        return self._usage

    @property
    def estimated_usage(self) -> Usage:
        """The part of :attr:`usage` the loop estimated because the server reported
        none (``usage/step`` events with ``estimated: true``); all zero when every
        step's usage was reported. O(1), like :attr:`usage`."""
        return self._estimated

    def cost(self, usage: Usage | None = None) -> float | None:
        """What ``usage`` (default: :attr:`usage`) cost at the price the loop's
        ``prices`` table gives this agent's model; None when it gives none."""
        return cost(self._usage if usage is None else usage, self._loop.config.prices, self.model)

    def send(self, message: str | Message) -> None:
        """Queue ``message``; it starts its own turn once the turns before it ended."""
        self._queue([_as_message(message)])

    def steer(self, message: str | Message) -> None:
        """Add ``message`` to the next step of the running turn; with no turn running
        it is queued like :meth:`send`. Steering still pending when a turn fails is
        queued as the next turn; a cancel drops it."""
        checked = _as_message(message)
        self._refuse_if_fenced()
        if self._turn_scope is None:
            self._queue([checked])
        else:
            self._steering.append(checked)

    def _refuse_if_fenced(self) -> None:
        """Raise :class:`SessionFencedError` once a newer writer took the session over:
        nothing this agent does could be recorded."""
        if self._fenced is not None:
            raise SessionFencedError(self._fenced)

    def _queue(self, messages: list[Message]) -> None:
        if self._fenced is not None:
            self._refuse_if_fenced()  # raises
        if self._disposed:
            raise AgentError(f'agent "{self.id}" is disposed; it takes no more messages')
        if self._driver is None:
            # Like an effect, it is refused once the scope is being undone. (The task
            # starts later: the message is queued for it below.)
            self._scope.fiber.check_alive()
            self._driver = start_driver(self)
        self._inbox.append(messages)

    def cancel(self) -> None:
        """Abort the running turn (reason ``aborted``/``user``) and drop the queue;
        a no-op while idle with nothing queued."""
        self._abort("user")

    def _abort(self, reason: str) -> None:
        self._inbox.clear()
        self._steering.clear()
        scope = self._turn_scope
        if scope is not None and not scope.cancel_called:
            self._abort_reason = reason
            self._aborting = True
            scope.cancel()

    async def when_idle(self) -> None:
        """Wait until no turn runs and nothing is queued."""
        # A driver runs while a turn runs or a message is queued; it ends once none is
        # left. A message queued after it ended starts the next one: wait for that too.
        while (driver := self._driver) is not None:
            await driver.wait()

    def _close(self) -> Awaitable[None] | None:
        """The agent's scope is being undone: it takes no more messages, and what its
        scope undoes next waits for the running driver (if any) to finish the turn and
        for the session's end (if it started)."""
        self._disposed = True
        driver = self._driver
        if driver is None:
            # Idle: only a heard ``session/end`` is left to wait for.
            return self._notify("session/end") if self._leave_session() else None
        driver.cancel()  # now, as the rest of the scope's undo starts
        return self._stop(driver)

    async def _stop(self, driver: anyio.TaskHandle[None]) -> None:
        await end_driver(driver)
        await self.end_session()

    async def dispose(self) -> None:
        """Abort the running turn (reason ``aborted``/``disposed``), wait for it to end,
        then undo everything registered through ``agent.ctx``."""
        self._abort("disposed")
        self._disposed = True
        if _DRIVING.get() is self:
            # Called from inside this agent's own turn (a tool, a listener): waiting
            # for the turn to end would wait for ourselves. Start the disposal and
            # return; the turn ends at its next checkpoint.
            self._scope.fiber.dispose()
            return
        # Stop the running driver first (the turn records its end); the scope's undo
        # ends the session (every disposal waits for it). An idle agent has no driver.
        if self._driver is not None:
            await end_driver(self._driver)
        await self._scope.dispose()

    # -- the driver ---------------------------------------------------------------------

    def _set_status(self, status: str) -> None:
        if status != self._status:
            self._status = status
            if self._loop.status_changed.heard(self):
                self._emit("agent/status", self, status)

    def _emit(self, name: str, *args: Any) -> None:
        # Observers never break the loop: their failures are logged.
        try:
            self._loop.ctx.emit(name, *args, scope=self)
        except Exception as exc:
            _log.error("a listener of %s failed for agent %r", name, self.id, exc_info=exc)

    async def _notify(self, name: str) -> None:
        """``session/start`` or ``session/end``, heard in parallel; failures logged."""
        try:
            await self._loop.ctx.parallel(name, self, self.session, scope=self)
        except Exception as exc:
            _log.error("a listener of %s failed for agent %r", name, self.id, exc_info=exc)

    async def _start_session(self) -> None:
        self._in_session = True
        if self._loop.session_start.heard(self):
            await self._notify("session/start")

    async def end_session(self) -> None:
        """End the session for the loop events: dispatch ``session/end`` (when heard)
        once per ``session/start``; a no-op when the session is not started. The next
        turn starts it again. The agent's close calls it; a front-end that ends while
        its agents live on (the terminal) calls it too, so that every listener hears it
        before the deployment unloads them."""
        if self._leave_session():
            await self._notify("session/end")

    def _leave_session(self) -> bool:
        """Mark the session ended; True when ``session/end`` is to be dispatched (it
        was started and someone in the agent's scope hears its end)."""
        if not self._in_session:
            return False
        self._in_session = False
        return bool(self._loop.session_end.heard(self))

    async def drive(self) -> None:
        """Run one turn per queued message until none is left, then return: the agent
        is idle and the next message starts a new driver. Nothing a turn raises
        escapes (the backstop): a failed turn is recorded and the next one runs.

        It dispatches ``session/start`` before a turn when the session is not started
        (the first turn, or the first after :meth:`end_session`); the agent's close
        ends it. Cancelled (the agent is being disposed), it leaves the agent idle."""
        _DRIVING.set(self)
        try:
            while self._inbox:
                messages = self._inbox.pop(0)
                # The scope exists before anyone hears "running": a cancel from a
                # status listener already aborts this turn.
                scope = self._turn_scope = anyio.CancelScope()
                self._abort_reason = "user"
                self._aborting = False
                self._set_status("running")
                if not self._in_session:  # running already: when_idle waits for it
                    await self._start_session()
                await self._turn(messages, scope)
                if self._fenced is not None:
                    # The store takes nothing more of this writer: no turn may run.
                    self._inbox.clear()
                    self._steering.clear()
                if not self._inbox:  # a status listener may queue more: taken above
                    self._set_status("idle")
        except BaseException:
            self._disposed = True
            self._inbox.clear()
            self._set_status("idle")
            raise
        finally:
            # Nothing awaited since the inbox was found empty: a message queued from
            # now on starts a new driver.
            self._driver = None

    async def _turn(self, messages: list[Message], scope: anyio.CancelScope) -> None:
        session = self.session
        turn = session.last_turn() + 1
        self._step = 0
        reason: dict[str, Any] = {"kind": "completed"}
        # Held until the turn's end is recorded: persistence waits for it (RFC 0008).
        with session.writing:
            try:
                session.append("turn/start", {"turn": turn})
                if self._loop.turn_started.heard(self):
                    self._emit("agent/turn-start", self, turn)
                with scope:
                    reason = await self._steps(turn, messages)
                if scope.cancelled_caught:
                    reason = {"kind": "aborted", "reason": self._abort_reason}
            except anyio.get_cancelled_exc_class():
                reason = {"kind": "aborted", "reason": "disposed"}
                raise
            except StepBlocked as exc:
                reason = {"kind": "blocked", "message": str(exc)}
            except Exception as exc:
                reason = _error_reason(exc)
                self._note_fence(exc)
                self._emit("agent/error", self, turn, self._step, exc)
            finally:
                self._turn_scope = None
                if self._steering and reason["kind"] != "aborted":
                    self._inbox.insert(0, self._steering)
                self._steering = []
                try:
                    # Kept in memory even when fenced (the store refuses it, no I/O).
                    session.append("turn/end", {"turn": turn, "reason": reason})
                except Exception as exc:
                    # A fenced writer's end is refused like the rest: expected.
                    if not self._note_fence(exc):
                        _log.error(
                            "recording the end of turn %d of agent %r failed",
                            turn,
                            self.id,
                            exc_info=exc,
                        )
                if self._loop.turn_ended.heard(self):
                    self._emit("agent/turn-end", self, turn, reason)

    def _note_fence(self, error: BaseException) -> bool:
        """Remember that the store fenced this writer off when ``error`` says so."""
        fence = _fence_of(error)
        if fence is None:
            return False
        self._fenced = str(fence)
        return True

    async def _steps(self, turn: int, messages: list[Message]) -> dict[str, Any]:
        session = self.session
        ctx = self.ctx
        loop = self._loop
        # The services' views, taken once a turn: a provider cannot change under a
        # running turn (the loop injects them: it restarts, and its agents go, first).
        prompt = ctx.system_prompt
        tools = ctx.tools
        llm, session_id = loop.ctx.llm, session.id
        pending = await user_prompt(self, messages) if loop.user_prompt.heard(self) else messages
        max_tokens = retried = False
        step = used = 0
        while True:
            # Another step: within the turn's limits? (Always, before the first one.)
            check_turn_limits(self, step, used)
            step = self._step = step + 1
            # A cancel of the turn that came before the first await of a step (from a
            # listener, say) takes effect here rather than after the model call. Any
            # other cancel reaches the step at its first await that waits, or at the
            # tool call's checkpoint (``tools.execute``).
            if self._aborting:
                await anyio.lowlevel.checkpoint_if_cancelled()
            pending.extend(self._steering)
            self._steering.clear()
            sent = await pre_step(self, pending, turn, step) if hearing(self).pre_step else pending
            if sent:
                log_messages(session, turn, step, sent)
            elif step == 1:
                # A listener took every message (a command handled locally, say).
                return {"kind": "completed"}
            assembly = await prompt.assemble(assemble_context_for(self))
            request = LlmRequest(
                model=self.model or "",
                messages=session.history(),
                system=render_prompt(assembly) or None,
                # The shared schemas, not copies: a request is read, never changed.
                tools=read_tools(assembly),
                max_tokens=self.max_tokens,
                session_id=session_id,
                turn=turn,
                step=step,
            )
            if hearing(self).request:
                request = await filter_request(self, request)
            if not request.model:
                raise NoModelError(
                    f'agent "{self.id}" has no model: give it one (agents.create(model=...) '
                    "or the config) or supply one through the agent/request waterfall"
                )
            calls = []
            try:
                session.append("step/start", {"turn": turn, "step": step})
                log_header(self, turn, step, request)
                result = await stream(session, turn, step, request, llm)
                finish = result.finish
                if finish.failure is not None:
                    # One retry, in a new step, when a listener fixed the cause.
                    if retried or not await recover(self, request, result, finish.failure):
                        raise LlmError(finish.failure)
                    retried = True
                    pending = []
                    continue
                retried = False
                used += record_answer(self, turn, step, request, result)
                max_tokens = max_tokens or finish.reason == "max-tokens"
                calls = result.message.tool_calls
                if calls:
                    await run_tool_calls(
                        self, turn, step, calls, loop.config.max_parallel_tool_calls, tools=tools
                    )
            finally:
                session.append("step/end", {"turn": turn, "step": step})
            # With nothing left to do, a turn/stop listener may keep the turn going.
            pending = (
                await turn_stop(self, turn)
                if not (calls or self._steering) and hearing(self).turn_stop
                else []
            )
            if not pending and not calls and not self._steering:
                return {"kind": "max-tokens"} if max_tokens else {"kind": "completed"}
