"""Running one step's tool calls: concurrently, with results recorded in model order.

Each call passes the ``tool/before`` and ``tool/after`` events (RFC 0036) when someone
in the agent's scope listens; with nobody listening they cost one lookup each.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
from typing import TYPE_CHECKING, Any

import anyio

from dsh_agent import HookDecision
from dsh_llm import ToolCallBlock
from dsh_tools import ToolCall, ToolResult

from ._hearing import hearing

if TYPE_CHECKING:
    from dsh_approval import ApprovalRequest
    from dsh_session import Session

    from ._agent import LoopAgent

__all__ = ["ABORTED", "ABORTED_BEFORE_DISPATCH", "run_tool_calls"]

_log = logging.getLogger("dsh.agent-loop")

#: The result of a call that was running when its turn was cancelled.
ABORTED = ToolResult("Error: tool call aborted", is_error=True, code="ABORTED")
#: The result of a call that had not started when its turn was cancelled.
ABORTED_BEFORE_DISPATCH = ToolResult(
    "Error: tool call aborted before dispatch", is_error=True, code="ABORTED_BEFORE_DISPATCH"
)
#: The code of a call a ``tool/before`` listener refused.
_HOOK_DENIED = "HOOK_DENIED"

#: The most characters of a call's arguments the ``ask`` question's title shows.
_TITLE_ARGUMENTS = 120


def _log_result(session: Session, turn: int, step: int, call: ToolCall, result: ToolResult) -> None:
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
    arguments = call.arguments
    if type(arguments) is not str and not isinstance(arguments, str):  # str: no call
        # A tool/before listener replaced the model's arguments (its tool/call event
        # keeps what the model wrote): what the tool ran with.
        data["arguments"] = dict(arguments)
    session.append("tool/result", data)


def _denied(reason: str) -> ToolResult:
    return ToolResult(f"Error: blocked by a hook: {reason}", is_error=True, code=_HOOK_DENIED)


def _ask_request(call: ToolCall, reason: str) -> ApprovalRequest:
    from dsh_approval import ApprovalRequest  # only an "ask" needs it: not at start-up

    shown = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    if len(shown) > _TITLE_ARGUMENTS:
        shown = shown[: _TITLE_ARGUMENTS - 1] + "…"
    title = f"{call.name} {shown}".rstrip()
    return ApprovalRequest(
        kind="tool",
        title=f"{title} ({reason})" if reason else title,
        detail=reason,
        call=call,
        always_ask=True,
    )


async def _before(agent: LoopAgent, call: ToolCall) -> ToolResult | None:
    """The ``tool/before`` event: None lets the call run (its arguments and permission
    possibly settled by the answer), a result refuses it. A listener that fails or
    answers something else than a :class:`HookDecision` refuses the call (a guard
    that cannot answer fails closed)."""
    try:
        decision = await agent._loop.ctx.serial("tool/before", call, scope=agent)
    except Exception as exc:
        _log.error("a tool/before listener failed for %s", call.name, exc_info=exc)
        return _denied(f"a tool/before listener failed: {str(exc) or type(exc).__name__}")
    if decision is None:
        return None
    if not isinstance(decision, HookDecision):
        return _denied(
            f"a tool/before listener answered {type(decision).__name__}; "
            "it must answer a dsh_agent.HookDecision or None"
        )
    if decision.arguments is not None:
        call.arguments = dict(decision.arguments)
    verdict = decision.decision
    if verdict == "deny":
        return _denied(decision.reason or "no reason given")
    if verdict == "allow":
        call.permission = "allow"
    elif verdict == "ask":
        request = _ask_request(call, decision.reason)
        approval = agent.ctx.get("approval")
        if approval is None or not await approval.request(request):
            from dsh_approval import ApprovalDeniedError  # imported by _ask_request

            policy = None if approval is None or approval.policy != "deny" else "deny"
            error = ApprovalDeniedError(request, policy)
            return ToolResult(f"Error: {error}", is_error=True, code=error.code)
        call.permission = "approved"
    return None


async def _after(agent: LoopAgent, call: ToolCall, result: ToolResult) -> ToolResult:
    """The ``tool/after`` event: every listener, in order; each text appended to the
    result. A listener that fails (or answers something else than text) is logged
    and adds nothing."""
    texts: list[str] = []
    for listener in agent._loop.tool_after.heard(agent):
        try:
            text = listener.call((call, result))
            if inspect.isawaitable(text):
                text = await text
        except Exception as exc:
            _log.error("a tool/after listener failed for %s", call.name, exc_info=exc)
            continue
        if isinstance(text, str):
            if text:
                texts.append(text)
        elif text is not None:
            _log.error(
                "a tool/after listener answered %s for %s; it must answer a str or None",
                type(text).__name__,
                call.name,
            )
    if not texts:
        return result
    return dataclasses.replace(result, content="\n\n".join((result.content, *texts)))


async def _execute(agent: LoopAgent, tools: Any, call: ToolCall) -> ToolResult:
    """One call, through ``tool/before`` and ``tool/after`` when they are heard."""
    if hearing(agent).tool_before:
        refused = await _before(agent, call)
        if refused is not None:
            return refused
    result: ToolResult = await tools.execute(call.name, call.arguments, call)
    if hearing(agent).tool_after:
        result = await _after(agent, call, result)
    return result


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

    A step with one call (the usual one) runs it here: no task, no task group, no
    semaphore, no coroutine of its own. Its outcomes are those of :func:`_run_many`.
    """
    if tools is None:
        tools = agent.ctx.tools
    session = agent.session
    made = []
    for block in calls:
        session.append(
            "tool/call",
            {
                "turn": turn,
                "step": step,
                "call_id": block.id,
                "name": block.name,
                "arguments": block.arguments,
            },
        )
        made.append(ToolCall(block.id, agent=agent, name=block.name, arguments=block.arguments))
    turn_scope = agent._turn_scope
    # A new scope per call. ``anyio.CancelScope()`` asks which backend runs before it
    # makes the backend's own scope; the turn scope's class (the running backend's)
    # skips that question.
    new_scope: type[anyio.CancelScope] = (
        anyio.CancelScope if turn_scope is None else type(turn_scope)
    )
    if len(made) > 1:
        await _run_many(agent, turn, step, made, limit, tools=tools, new_scope=new_scope)
        return
    call = made[0]
    result = ABORTED_BEFORE_DISPATCH
    try:
        # Where the concurrent path's slot acquisition would notice a pending cancel:
        # the turn's (from a listener, say: the agent notes its aborts, so no scope
        # is asked) is looked at here, any other cancel is delivered by the checkpoint
        # ``tools.execute`` starts with.
        if turn_scope is None or agent._aborting:
            await anyio.lowlevel.checkpoint_if_cancelled()
        result = ABORTED
        with new_scope() as scope:
            call.cancel_scope = scope
            if hearing(agent).tool_before:
                result = await _execute(agent, tools, call)
            else:  # _execute's path with no tool/before: one coroutine layer less
                result = await tools.execute(call.name, call.arguments, call)
                if hearing(agent).tool_after:
                    result = await _after(agent, call, result)
    finally:
        _log_result(session, turn, step, call, result)


async def _run_many(
    agent: LoopAgent,
    turn: int,
    step: int,
    calls: list[ToolCall],
    limit: int,
    *,
    tools: Any,
    new_scope: type[anyio.CancelScope],
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

    async def run(i: int, call: ToolCall) -> None:
        try:
            with new_scope() as scope:
                call.cancel_scope = scope
                results[i] = await _execute(agent, tools, call)
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
