"""The listener events a turn's steps dispatch, and the checks of their answers.

``user/prompt`` over the messages that start a turn, the ``agent/pre-step`` and
``agent/request`` waterfalls, ``agent/request-failed`` after a failed stream and
``turn/stop`` when a turn has nothing left to do. The step loop asks each only when
someone in the agent's scope listens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dsh_agent import AgentTypeError, HookDecision, StepBlocked
from dsh_llm import AssembledMessage, LlmFailure, LlmRequest, Message, ReasoningBlock, TextBlock

if TYPE_CHECKING:
    from ._agent import LoopAgent

__all__ = ["filter_request", "pre_step", "recover", "turn_stop", "user_prompt"]


def _returning(value: Any) -> Callable[[], Any]:
    """The innermost step of a waterfall: hand back the seeded value."""

    def inner() -> Any:
        return value

    return inner


async def user_prompt(agent: LoopAgent, messages: list[Message]) -> list[Message]:
    """The ``user/prompt`` event over the messages that start a turn: each
    decision's ``context`` follows its message as a user message; a ``deny``
    refuses the turn (:class:`StepBlocked` with the reason: it ends ``blocked``
    and nothing of it is recorded)."""
    kept: list[Message] = []
    for message in messages:
        decision = await agent._loop.ctx.serial("user/prompt", agent, message, scope=agent)
        kept.append(message)
        if decision is None:
            continue
        if not isinstance(decision, HookDecision):
            raise AgentTypeError(
                "a user/prompt listener must answer a dsh_agent.HookDecision or None, "
                f"got {type(decision).__name__}"
            )
        if decision.decision == "deny":
            raise StepBlocked(decision.reason or "a user/prompt listener refused the message")
        if decision.context:
            kept.append(Message.user(decision.context))
    return kept


async def pre_step(
    agent: LoopAgent, pending: list[Message], turn: int, step: int
) -> Sequence[Message]:
    """The ``agent/pre-step`` waterfall (run only when someone listens)."""
    sent = await agent.ctx.waterfall(
        "agent/pre-step", agent, pending, turn, step, inner=_returning(pending), scope=agent
    )
    if not isinstance(sent, list | tuple) or not all(isinstance(m, Message) for m in sent):
        raise AgentTypeError(
            f"an agent/pre-step listener must return a list of dsh_llm.Message, got {sent!r}"
        )
    messages: Sequence[Message] = sent
    return messages


async def filter_request(agent: LoopAgent, request: LlmRequest) -> LlmRequest:
    """The ``agent/request`` waterfall (run only when someone listens)."""
    answer = await agent.ctx.waterfall(
        "agent/request", agent, request, inner=_returning(request), scope=agent
    )
    if not isinstance(answer, LlmRequest):
        raise AgentTypeError(
            "an agent/request listener must return a dsh_llm.LlmRequest, got "
            f"{type(answer).__name__}"
        )
    return answer


async def recover(
    agent: LoopAgent, request: LlmRequest, result: AssembledMessage, failure: LlmFailure
) -> bool:
    """Whether an ``agent/request-failed`` listener made a retry of the failed
    request worthwhile; asked only when the model produced nothing visible."""
    if any(
        isinstance(b, TextBlock | ReasoningBlock) and b.text.strip() for b in result.message.content
    ):
        return False
    answer = await agent.ctx.serial("agent/request-failed", agent, request, failure, scope=agent)
    return answer is True


async def turn_stop(agent: LoopAgent, turn: int) -> list[Message]:
    """The ``turn/stop`` event (asked only when heard): the user message that keeps
    the turn going, or none."""
    held = await agent._loop.ctx.serial("turn/stop", agent, turn, scope=agent)
    if held is None or held == "":
        return []
    if not isinstance(held, str):
        raise AgentTypeError(
            f"a turn/stop listener must answer a str or None, got {type(held).__name__}"
        )
    return [Message.user(held)]
