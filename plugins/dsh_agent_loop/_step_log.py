"""What a step writes to the agent's session log.

The messages sent, the request header (when it changed), the streamed answer (kept
as an interrupted message when the stream is cancelled or fails), and the answer
with its usage, reported or estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio

from dsh_llm import AssembledMessage, BlockAssembler, Chunk, LlmRequest, Message, adapter_failure

from ._limits import turn_tokens
from ._usage import USAGE_EVENT, add_usage, estimate_usage

if TYPE_CHECKING:
    from dsh_session import Session

    from ._agent import LoopAgent

__all__ = ["log_header", "log_messages", "record_answer", "stream"]


def log_messages(session: Session, turn: int, step: int, messages: Sequence[Message]) -> None:
    """One ``user/message`` per message sent in the step."""
    for message in messages:
        session.append(
            "user/message",
            {"turn": turn, "step": step, "message": message},  # encoded where read
            message=message,
        )


def log_header(agent: LoopAgent, turn: int, step: int, request: LlmRequest) -> None:
    """A ``request/header`` when the step's model, tools, system prompt or token
    limit differ from the agent's last one."""
    # The same request parts as the last step's (most often the very same objects):
    # the same header, with no header built.
    key = (request.model, request.tools, request.system, request.max_tokens)
    if key == agent._header_key:
        return
    agent._header_key = key
    header: dict[str, Any] = {
        "model": request.model,
        "tools": [tool.name for tool in request.tools],
    }
    if request.system is not None:
        header["system"] = request.system
    if request.max_tokens is not None:
        header["max_tokens"] = request.max_tokens
    if header != agent._header:
        agent._header = header
        agent.session.append("request/header", {"turn": turn, "step": step, "header": header})


def record_answer(
    agent: LoopAgent, turn: int, step: int, request: LlmRequest, result: AssembledMessage
) -> int:
    """The step's ``assistant/message`` (with ``usage`` when the stream reported
    one), then its ``usage/step``: the reported usage, else an estimate marked
    ``estimated: true``. The agent's usage grows by it; returns its turn tokens."""
    message = result.message
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}  # encoded where read
    usage = result.usage
    step_data: dict[str, Any] = {"turn": turn, "step": step}
    if usage is not None:
        data["usage"] = step_data["usage"] = usage.to_json()
    agent.session.append("assistant/message", data, message=message)
    if usage is None:
        usage = estimate_usage(request, message)
        step_data["usage"] = usage.to_json()
        step_data["estimated"] = True
        agent._estimated = add_usage(agent._estimated, usage)
    agent.session.append(USAGE_EVENT, step_data)
    agent._usage = add_usage(agent._usage, usage)
    return turn_tokens(usage)


async def stream(
    session: Session, turn: int, step: int, request: LlmRequest, llm: Any
) -> AssembledMessage:
    """Stream the step's answer into the log; a stream that is cancelled or fails
    keeps what the user already saw as an interrupted assistant message."""
    assembler = BlockAssembler()
    adapter = llm.direct(request)
    try:
        if adapter is None:
            async with aclosing(llm.stream(request)) as chunks:
                async for chunk in chunks:
                    session.append_chunk(turn, step, chunk)  # packed with the step's others
                    assembler.push(chunk)
        else:
            await _from_adapter(session, turn, step, request, adapter, into=assembler)
    except anyio.get_cancelled_exc_class():
        _keep_partial(session, turn, step, assembler)
        raise
    result = assembler.result()
    if result.finish.failure is not None:
        _keep_partial(session, turn, step, assembler)
    return result


async def _from_adapter(
    session: Session, turn: int, step: int, request: LlmRequest, adapter: Any, *, into: Any
) -> None:
    """The stream straight from the adapter (nobody listens to the model call's
    events: ``llm.direct``), pushed ``into`` the step's assembler and ended as
    ``llm.stream`` ends it when the adapter raises."""
    opened: Any = None
    following: Any = None  # the stream's __anext__
    failure: Chunk | None = None
    try:
        try:
            opened = adapter.stream(request)
            following = aiter(opened).__anext__
        except Exception as exc:
            failure = adapter_failure(exc)
        # Looked up once: each chunk takes these three calls.
        append, push = session.append_chunk, into.push
        while failure is None:
            try:
                chunk = await following()
            except StopAsyncIteration:
                return
            except Exception as exc:
                failure = adapter_failure(exc)
                break
            append(turn, step, chunk)  # packed with the step's others
            push(chunk)
        append(turn, step, failure)
        push(failure)
    finally:
        aclose = getattr(opened, "aclose", None)
        if aclose is not None:
            await aclose()


def _keep_partial(session: Session, turn: int, step: int, assembler: BlockAssembler) -> None:
    kept = assembler.interrupted_blocks()
    if kept:
        message = Message("assistant", tuple(kept))
        session.append(
            "assistant/message",
            {"turn": turn, "step": step, "message": message, "interrupted": True},
            message=message,
        )
