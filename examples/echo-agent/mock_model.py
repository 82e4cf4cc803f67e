"""A scripted model for the echo example: no network, no API key.

It reads the conversation and answers like a tiny agent would: a user message that
starts with "echo " becomes a call to the ``echo`` tool; a tool result becomes a short
answer quoting it; anything else is answered directly. Text streams in small deltas.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from dsh import Context
from dsh_llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    LlmRequest,
    TextDelta,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    UsageChunk,
)

name = "echo-mock-model"
inject = ["llm"]


class EchoMock:
    """Answers from the last message of the request."""

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        last = request.messages[-1]
        results = [b for b in last.content if isinstance(b, ToolResultBlock)]
        if results:
            async for chunk in _text(f"The echo tool returned: {results[-1].content}"):
                yield chunk
            yield Finish("stop")
            return
        text = last.text.strip()
        if text.lower().startswith("echo "):
            arguments = json.dumps({"text": text[5:].strip()})
            yield BlockStart(0, "tool-call")
            yield ToolCallDelta(0, f"call-{request.turn}-{request.step}", arguments, name="echo")
            yield BlockEnd(0)
            yield UsageChunk(Usage(len(request.messages), 1))
            yield Finish("tool-calls")
            return
        async for chunk in _text(f"You said: {text}. Try `echo <words>`."):
            yield chunk
        yield Finish("stop")


async def _text(text: str) -> AsyncIterator[Chunk]:
    yield BlockStart(0, "text")
    for start in range(0, len(text), 8):
        yield TextDelta(0, text[start : start + 8])
    yield BlockEnd(0)
    yield UsageChunk(Usage(10, len(text.split())))


def apply(ctx: Context, config: None) -> None:
    ctx.llm.register_adapter(["echo-mock"], EchoMock())
