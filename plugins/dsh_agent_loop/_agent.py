"""``LoopAgent``: an agent handle with an inbox and a driver that runs its turns."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio

from dsh import Context, DshError
from dsh_agent import AgentError, StepBlocked, assemble_context_for
from dsh_llm import (
    AssembledMessage,
    BlockAssembler,
    LlmError,
    LlmRequest,
    Message,
    chunk_to_json,
)
from dsh_scope import Scope
from dsh_session import Session
from dsh_system_prompt import render_prompt

from ._tool_calls import run_tool_calls

if TYPE_CHECKING:
    from ._loop import AgentLoop

__all__ = ["LoopAgent"]

_log = logging.getLogger("dsh.agent-loop")


def _as_message(message: str | Message) -> Message:
    if isinstance(message, Message):
        return message
    if isinstance(message, str):
        return Message.user(message)
    raise AgentError(f"an agent message must be a str or a dsh_llm.Message, got {message!r}")


def _returning(value: Any) -> Callable[[], Any]:
    """The innermost step of a waterfall: hand back the seeded value."""
    return lambda: value


def _error_reason(error: BaseException) -> dict[str, Any]:
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

    def __init__(
        self,
        loop: AgentLoop,
        agent_id: str,
        model: str | None,
        max_tokens: int | None,
    ) -> None:
        self.id = agent_id
        self.model = model
        self.max_tokens = max_tokens
        self._loop = loop
        self.session: Session
        self.ctx: Context
        self._scope: Scope
        self._inbox: deque[Message] = deque()
        self._steering: list[Message] = []
        self._status = "idle"
        self._wake: anyio.Event | None = None
        self._idle: anyio.Event | None = None
        self._turn_scope: anyio.CancelScope | None = None
        self._step = 0
        self._header: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"<LoopAgent {self.id!r} {self._status}>"

    # -- the handle ---------------------------------------------------------------------

    @property
    def cwd(self) -> str | None:
        return self.session.header.cwd

    @property
    def status(self) -> str:
        return self._status

    def send(self, message: str | Message) -> None:
        self._inbox.append(_as_message(message))
        if self._wake is not None:
            self._wake.set()

    def steer(self, message: str | Message) -> None:
        if self._turn_scope is not None:
            self._steering.append(_as_message(message))
        else:
            self.send(message)

    def cancel(self) -> None:
        self._inbox.clear()
        self._steering.clear()
        if self._turn_scope is not None:
            self._turn_scope.cancel()

    async def when_idle(self) -> None:
        while self._status == "running" or self._inbox:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    async def dispose(self) -> None:
        self.cancel()
        await self._scope.dispose()

    # -- the driver ---------------------------------------------------------------------

    def _set_status(self, status: str) -> None:
        if status == self._status:
            return
        self._status = status
        if status == "idle" and self._idle is not None:
            self._idle.set()
            self._idle = None
        self._emit("agent/status", self, status)

    def _emit(self, name: str, *args: Any) -> None:
        # Observers never break the loop: their failures are logged.
        try:
            self._loop.ctx.emit(name, *args, scope=self)
        except Exception as exc:
            _log.error("a listener of %s failed for agent %r", name, self.id, exc_info=exc)

    async def drive(self) -> None:
        """Run turns until cancelled; nothing a turn raises escapes (the backstop)."""
        try:
            while True:
                while not self._inbox:
                    self._wake = anyio.Event()
                    await self._wake.wait()
                self._wake = None
                first = self._inbox.popleft()
                self._set_status("running")
                await self._turn(first)
                if not self._inbox:
                    self._set_status("idle")
        finally:
            self._status = "idle"
            if self._idle is not None:
                self._idle.set()

    async def _turn(self, first: Message) -> None:
        session = self.session
        turn = session.last_turn() + 1
        self._step = 0
        reason: dict[str, Any] = {"kind": "completed"}
        session.append("turn/start", {"turn": turn})
        try:
            with anyio.CancelScope() as scope:
                self._turn_scope = scope
                reason = await self._steps(turn, [first])
            if scope.cancelled_caught:
                reason = {"kind": "aborted", "reason": "user"}
        except anyio.get_cancelled_exc_class():
            reason = {"kind": "aborted", "reason": "disposed"}
            raise
        except StepBlocked as exc:
            reason = {"kind": "blocked", "message": str(exc)}
        except Exception as exc:
            reason = _error_reason(exc)
            self._emit("agent/error", self, turn, self._step, exc)
        finally:
            self._turn_scope = None
            self._steering.clear()
            session.append("turn/end", {"turn": turn, "reason": reason})

    async def _steps(self, turn: int, pending: list[Message]) -> dict[str, Any]:
        session = self.session
        ctx = self.ctx
        step = 0
        max_tokens = False
        while True:
            step = self._step = step + 1
            pending.extend(self._steering)
            self._steering.clear()
            messages: list[Message] = await ctx.waterfall(
                "agent/pre-step", self, pending, turn, step, inner=_returning(pending), scope=self
            )
            for message in messages:
                session.append("user/message", {"turn": turn, "message": message.to_json()})
            pending = []
            assembly = await ctx.system_prompt.assemble(assemble_context_for(self))
            system = render_prompt(assembly)
            request = LlmRequest(
                model=self.model or "",
                messages=tuple(session.derive_messages()),
                system=system or None,
                tools=tuple(assembly.tools),
                max_tokens=self.max_tokens,
                session_id=session.id,
                turn=turn,
                step=step,
            )
            request = await ctx.waterfall(
                "agent/request", self, request, inner=_returning(request), scope=self
            )
            if not request.model:
                raise AgentError(
                    f'agent "{self.id}" has no model: give it one in the config or '
                    "supply one through the agent/request waterfall"
                )
            session.append("step/start", {"turn": turn, "step": step})
            calls = []
            try:
                self._log_header(turn, step, request)
                result = await self._stream(turn, step, request)
                finish = result.finish
                if finish.reason in ("error", "aborted"):
                    assert finish.failure is not None
                    raise LlmError(finish.failure)
                data: dict[str, Any] = {
                    "turn": turn,
                    "step": step,
                    "message": result.message.to_json(),
                }
                if result.usage is not None:
                    data["usage"] = result.usage.to_json()
                session.append("assistant/message", data)
                max_tokens = max_tokens or finish.reason == "max-tokens"
                calls = result.message.tool_calls
                if calls:
                    await run_tool_calls(
                        self, turn, step, calls, self._loop.config.max_parallel_tool_calls
                    )
            finally:
                session.append("step/end", {"turn": turn, "step": step})
            if not calls and not self._steering:
                return {"kind": "max-tokens"} if max_tokens else {"kind": "completed"}

    def _log_header(self, turn: int, step: int, request: LlmRequest) -> None:
        header: dict[str, Any] = {
            "model": request.model,
            "tools": [tool.name for tool in request.tools],
        }
        if request.system is not None:
            header["system"] = request.system
        if request.max_tokens is not None:
            header["max_tokens"] = request.max_tokens
        if header != self._header:
            self._header = header
            self.session.append("request/header", {"turn": turn, "step": step, "header": header})

    async def _stream(self, turn: int, step: int, request: LlmRequest) -> AssembledMessage:
        assembler = BlockAssembler()
        session = self.session
        try:
            async with aclosing(self._loop.ctx.llm.stream(request)) as chunks:
                async for chunk in chunks:
                    session.append(
                        "assistant/chunk",
                        {"turn": turn, "step": step, "chunk": chunk_to_json(chunk)},
                    )
                    assembler.push(chunk)
        except anyio.get_cancelled_exc_class():
            kept = assembler.interrupted_blocks()
            if kept:
                session.append(
                    "assistant/message",
                    {
                        "turn": turn,
                        "step": step,
                        "message": Message("assistant", tuple(kept)).to_json(),
                        "interrupted": True,
                    },
                )
            raise
        return assembler.result()
