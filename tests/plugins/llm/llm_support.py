"""Helpers of the llm tests (and of the adapters' tests): requests, streaming, assembly."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import aclosing
from typing import Any

from dsh_llm import AssembledMessage, BlockAssembler, Chunk, Llm, LlmRequest, Message


def assemble(chunks: Iterable[Chunk]) -> AssembledMessage:
    """What a ``BlockAssembler`` makes of ``chunks``."""
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler.result()


def request(model: str = "m", **fields: Any) -> LlmRequest:
    """A request for ``model`` sending the one user message "hi"."""
    return LlmRequest(model=model, messages=(Message.user("hi"),), **fields)


async def collect(llm: Llm, req: LlmRequest) -> list[Chunk]:
    """Every chunk ``llm.stream(req)`` yields."""
    async with aclosing(llm.stream(req)) as chunks:
        return [chunk async for chunk in chunks]
