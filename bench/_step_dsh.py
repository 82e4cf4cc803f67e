"""dsh as an impl of :mod:`bench.agent_step`: agent-core with scripted adapters on
``root.llm`` (the script's model, a short answer, an answer of many deltas) and the
``echo`` tool on ``root.tools``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from pydantic import BaseModel, Field

import dsh
from bench._step_script import (
    DSH_USAGE,
    ECHO_DESCRIPTION,
    ECHO_JSON,
    FINAL,
    INSTRUCTIONS,
    MODEL,
    PROMPT,
    SCRIPT,
    SHORT,
    Outcome,
)
from dsh_agent import Agent
from dsh_agent_core import AgentCore
from dsh_llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    LlmRequest,
    Message,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)
from dsh_session import Session
from dsh_tools import Tool, ToolCall


class ScriptedAdapter:
    """Streams each scripted reply as one block: start, one delta, end, usage, finish."""

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        call_id = SCRIPT.next_call()
        if call_id is None:
            yield BlockStart(0, "text")
            yield TextDelta(0, FINAL)
            yield BlockEnd(0)
            yield UsageChunk(DSH_USAGE)
            yield Finish("stop")
            return
        yield BlockStart(0, "tool-call")
        yield ToolCallDelta(0, call_id, ECHO_JSON, name="echo")
        yield BlockEnd(0)
        yield UsageChunk(DSH_USAGE)
        yield Finish("tool-calls")


class EchoArgs(BaseModel):
    text: str = Field(description="The text to send back.")


async def dsh_echo(args: EchoArgs, call: ToolCall) -> str:
    return args.text


async def make_dsh(root: dsh.Context) -> Callable[[], Awaitable[object]]:
    root.plugin(AgentCore, {"persona": INSTRUCTIONS, "max_steps": 1000})
    await root.settle()
    root.llm.register_adapter([MODEL], ScriptedAdapter())
    root.llm.register_adapter([SHORT], ShortAdapter())
    root.llm.register_adapter([STREAM], DeltasAdapter())
    root.tools.register(
        Tool(name="echo", description=ECHO_DESCRIPTION, parameters=EchoArgs, execute=dsh_echo)
    )
    await root.settle()

    async def run() -> Session:
        agent: Agent = root.agents.create(model=MODEL)
        agent.send(PROMPT)
        await agent.when_idle()
        await agent.dispose()
        return agent.session

    return run


def dsh_outcome(result: object) -> Outcome:
    assert isinstance(result, Session)
    events = result.events
    results = []
    for event in events:
        if event.type == "tool/result":
            assert not event.data["is_error"], event.data
            results.append(str(event.data["content"]))
    ends = [e.data["reason"] for e in events if e.type == "turn/end"]
    assert ends == [{"kind": "completed"}], ends
    final = [e.data["message"] for e in events if e.type == "assistant/message"][-1]
    chunks = sum(1 for e in events if e.type == "assistant/chunk")
    return Outcome(results, Message.from_json(final).text, chunks)


class ShortAdapter:
    """Answers every request with one short text block (no tool call)."""

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        yield BlockStart(0, "text")
        yield TextDelta(0, "ok")
        yield BlockEnd(0)
        yield UsageChunk(DSH_USAGE)
        yield Finish("stop")


STREAM = "stream"
DELTAS = 1000
WORDS = [f"w{i % 997} " for i in range(DELTAS)]
ANSWER = "".join(WORDS)


class DeltasAdapter:
    """Streams :data:`ANSWER` in :data:`DELTAS` text deltas, or whole when asked."""

    def __init__(self) -> None:
        self.whole = False

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        yield BlockStart(0, "text")
        # Whole: a string made now, as a model's reply would be (not the constant).
        for piece in ["".join(WORDS)] if self.whole else WORDS:
            yield TextDelta(0, piece)
        yield BlockEnd(0)
        yield UsageChunk(DSH_USAGE)
        yield Finish("stop")
