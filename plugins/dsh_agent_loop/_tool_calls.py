"""Running one step's tool calls: concurrently, with results recorded in model order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from dsh_llm import ToolCallBlock
from dsh_tools import ToolCall, ToolResult

if TYPE_CHECKING:
    from dsh_session import Session

    from ._agent import LoopAgent

__all__ = ["ABORTED", "ABORTED_BEFORE_DISPATCH", "run_tool_calls"]

#: The result of a call that was running when its turn was cancelled.
ABORTED = ToolResult("Error: tool call aborted", is_error=True, code="ABORTED")
#: The result of a call that had not started when its turn was cancelled.
ABORTED_BEFORE_DISPATCH = ToolResult(
    "Error: tool call aborted before dispatch", is_error=True, code="ABORTED_BEFORE_DISPATCH"
)


def _log_result(
    session: Session, turn: int, step: int, call: ToolCallBlock, result: ToolResult
) -> None:
    data: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "call_id": call.id,
        "name": call.name,
        "content": result.content,
        "is_error": result.is_error,
    }
    if result.code is not None:
        data["code"] = result.code
    session.append("tool/result", data)


async def run_tool_calls(
    agent: LoopAgent,
    turn: int,
    step: int,
    calls: list[ToolCallBlock],
    limit: int,
    *,
    tools: Any = None,
) -> None:
    """Log every call, run them (at most ``limit`` at once, started in model order)
    and log each result as soon as the results before it are logged, so results are
    recorded in the model's order whatever order the calls finish in. ``tools`` is
    ``agent.ctx.tools`` (looked up when not given).

    When the turn is cancelled, a call that had started gets :data:`ABORTED` and one
    that had not gets :data:`ABORTED_BEFORE_DISPATCH`: every call gets a result.
    """
    session = agent.session
    for call in calls:
        session.append(
            "tool/call",
            {
                "turn": turn,
                "step": step,
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
            },
        )
    if tools is None:
        tools = agent.ctx.tools
    if len(calls) == 1:
        await _run_one(agent, tools, turn, step, calls[0])
    else:
        await _run_many(agent, turn, step, calls, limit, tools=tools)


async def _run_one(agent: LoopAgent, tools: Any, turn: int, step: int, call: ToolCallBlock) -> None:
    """The fast path of a step with one call: no task, no task group, no semaphore.

    The outcomes are those of :func:`_run_many`: a turn cancelled before the call is
    dispatched gives :data:`ABORTED_BEFORE_DISPATCH`, one cancelled while it runs (or a
    tool that cancels its own call's scope) gives :data:`ABORTED`.
    """
    result = ABORTED_BEFORE_DISPATCH
    try:
        # Where the concurrent path's slot acquisition would notice a pending cancel.
        await anyio.lowlevel.checkpoint_if_cancelled()
        result = ABORTED
        with anyio.CancelScope() as scope:
            result = await tools.execute(
                call.name, call.arguments, ToolCall(call.id, agent=agent, cancel_scope=scope)
            )
    finally:
        _log_result(agent.session, turn, step, call, result)


async def _run_many(
    agent: LoopAgent, turn: int, step: int, calls: list[ToolCallBlock], limit: int, *, tools: Any
) -> None:
    session = agent.session
    count = len(calls)
    results: list[ToolResult | None] = [None] * count
    started = [False] * count
    committed = 0
    slots = anyio.Semaphore(limit)

    def commit(final: bool) -> None:
        nonlocal committed
        while committed < count:
            i = committed
            result = results[i]
            if result is None:
                if not final:
                    return
                result = ABORTED if started[i] else ABORTED_BEFORE_DISPATCH
            committed = i + 1
            _log_result(session, turn, step, calls[i], result)

    async def run(i: int, call: ToolCallBlock) -> None:
        try:
            with anyio.CancelScope() as scope:
                results[i] = await tools.execute(
                    call.name, call.arguments, ToolCall(call.id, agent=agent, cancel_scope=scope)
                )
            # A tool that cancelled its own call's scope ends like an aborted call.
            results[i] = results[i] or ABORTED
            commit(final=False)
        finally:
            slots.release()

    try:
        async with anyio.create_task_group() as tg:
            for i, call in enumerate(calls):
                await slots.acquire()
                started[i] = True
                tg.start_soon(run, i, call)
    finally:
        commit(final=True)
