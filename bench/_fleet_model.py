"""The fleet benchmark's model, loaded from its deployment file (so a Ray worker runs
it too): every call streams ``done`` in one text block, a checkpoint before each chunk
as a real model's I/O would have."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

from dsh import Context
from dsh_llm import BlockEnd, BlockStart, Chunk, Finish, LlmRequest, TextDelta, Usage, UsageChunk

name = "bench-fleet-model"
inject = ["llm"]
MODEL = "bench-fleet"
REPLY: tuple[Chunk, ...] = (
    BlockStart(0, "text"),
    TextDelta(0, "done"),
    BlockEnd(0),
    UsageChunk(Usage(10, 1)),
    Finish("stop"),
)


class Answer:
    async def stream(self, request: LlmRequest) -> AsyncIterator[Chunk]:
        for chunk in REPLY:
            await anyio.lowlevel.checkpoint()
            yield chunk


def apply(ctx: Context, config: None) -> object:
    return ctx.llm.register_adapter([MODEL], Answer())
