"""Running one step's tool calls: concurrently, with results recorded in model order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from dsh_llm import ToolCallBlock
from dsh_tools import ToolCall, ToolResult

if TYPE_CHECKING:
    from ._agent import LoopAgent

__all__ = ["run_tool_calls"]

_ABORTED = ToolResult("Error: tool call aborted", is_error=True, code="ABORTED")
_NOT_STARTED = ToolResult(
    "Error: tool call aborted before dispatch", is_error=True, code="ABORTED_BEFORE_DISPATCH"
)


async def run_tool_calls(
    agent: LoopAgent, turn: int, step: int, calls: list[ToolCallBlock], limit: int
) -> None:
    """Log each call, run them (at most ``limit`` at once), then log every result in
    the model's order. When the turn is cancelled, a call that had started gets an
    ``ABORTED`` result and one that had not gets ``ABORTED_BEFORE_DISPATCH``."""
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
    results: list[ToolResult | None] = [None] * len(calls)
    started = [False] * len(calls)
    limiter = anyio.CapacityLimiter(limit)
    tools: Any = agent.ctx.tools

    async def run(i: int, call: ToolCallBlock) -> None:
        async with limiter:
            started[i] = True
            with anyio.CancelScope() as scope:
                results[i] = await tools.execute(
                    call.name, call.arguments, ToolCall(call.id, agent=agent, cancel_scope=scope)
                )

    try:
        if len(calls) == 1:
            await run(0, calls[0])
        else:
            async with anyio.create_task_group() as tg:
                for i, call in enumerate(calls):
                    tg.start_soon(run, i, call)
    finally:
        for i, call in enumerate(calls):
            result = results[i] or (_ABORTED if started[i] else _NOT_STARTED)
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
