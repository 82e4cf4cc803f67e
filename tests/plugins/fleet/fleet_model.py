"""The fleet tests' model, loaded from a deployment file so that a ``dsh`` subprocess
and a Ray worker run it too: no network, answers read from the last message.

- a tool result: ``done: <content>``, except for ``block <x>`` while the file
  ``<control>/block-<x>`` exists: the model takes the file (so only the first attempt
  blocks), streams a few words, writes its process id to the FIFO ``<control>/fifo``
  and never finishes — the test kills the process that runs it;
- ``block <x>`` or ``tool <x>``: a call of the ``echo`` tool with ``<x>``;
- ``fail``: the call fails (``SERVER_ERROR``), so the turn ends ``error``;
- the fleet's resume prompt: ``resumed``;
- anything else: ``answer: <text>``.

Every answer carries usage (10 tokens in, 2 out).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict

from dsh import Context
from dsh_llm import (
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    LlmFailure,
    LlmRequest,
    TextDelta,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    UsageChunk,
)

name = "fleet-test-model"
inject = ["llm"]
#: The model name it serves.
MODEL = "fleet-mock"


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: The folder of the block files and the FIFO.
    control: str = "."


def _report_pid(fifo: Path) -> None:
    with fifo.open("w") as out:  # waits for the test to open it for reading
        out.write(f"{os.getpid()}\n")


class FleetMock:
    def __init__(self, control: Path) -> None:
        self.control = control

    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        last = request.messages[-1]
        results = [b for b in last.content if isinstance(b, ToolResultBlock)]
        if results:
            content = results[-1].content
            marker = self.control / f"block-{content}"
            try:
                marker.unlink()
            except FileNotFoundError:
                pass
            else:
                yield BlockStart(0, "text")
                yield TextDelta(0, "working on it")
                await anyio.to_thread.run_sync(_report_pid, self.control / "fifo")
                await anyio.sleep_forever()
            async for chunk in _text(f"done: {content}"):
                yield chunk
            return
        text = last.text.strip()
        word, _, rest = text.partition(" ")
        if word in ("block", "tool"):
            yield BlockStart(0, "tool-call")
            arguments = json.dumps({"text": rest})
            yield ToolCallDelta(0, f"call-{request.turn}-{request.step}", arguments, name="echo")
            yield BlockEnd(0)
            yield UsageChunk(Usage(10, 2))
            yield Finish("tool-calls")
            return
        if word == "fail":
            yield Finish("error", LlmFailure("the scripted model failed", "SERVER_ERROR"))
            return
        if text.startswith("Your previous turn was interrupted"):
            answer = "resumed"
        else:
            answer = f"answer: {text}"
        async for chunk in _text(answer):
            yield chunk


async def _text(text: str) -> AsyncIterator[Chunk]:
    yield BlockStart(0, "text")
    yield TextDelta(0, text)
    yield BlockEnd(0)
    yield UsageChunk(Usage(10, 2))
    yield Finish("stop")


def apply(ctx: Context, config: Config) -> object:
    return ctx.llm.register_adapter([MODEL], FleetMock(Path(config.control)))
