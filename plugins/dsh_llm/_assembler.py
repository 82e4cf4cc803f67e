"""Turning a chunk stream into one assistant message, tolerating adapter quirks.

The edge protocol: a repeated ``block-start`` is ignored (its text keeps accumulating);
deltas may arrive without a ``block-start`` (the block is created implicitly); deltas
and ``block-end``s after a block's first ``block-end`` are stragglers and are ignored;
a tool call keeps the first id and name it receives and gets ``call-<index>`` when no
id ever arrives; the last ``usage`` wins and without one the usage is None; without a
``finish`` chunk the finish is ``stop``; on ``max-tokens`` the (truncated) tool calls
are dropped. Contradictions are :class:`AssemblyError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsh import DshError
from dsh._record import record

from ._types import (
    BLOCK_TYPES,
    Block,
    BlockEnd,
    BlockStart,
    BlockType,
    Chunk,
    Finish,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
    UsageChunk,
)

__all__ = ["AssembledMessage", "AssemblyError", "BlockAssembler"]


class AssemblyError(DshError, ValueError):
    """A chunk stream contradicts itself: a chunk targets a block of another type, a
    ``block-end`` closes a block that never started without carrying it, a block type
    a model stream cannot produce, or an object that is not a chunk."""

    code = "ASSEMBLY_INVARIANT"


@record
class AssembledMessage:
    """The outcome of one stream."""

    message: Message
    usage: Usage | None
    finish: Finish


class _Partial:
    __slots__ = ("block", "block_type", "call_id", "name", "parts")

    def __init__(self, block_type: BlockType) -> None:
        self.block_type = block_type
        self.parts: list[str] = []
        self.call_id: str | None = None
        self.name: str | None = None
        self.block: Block | None = None  # set by the first block-end


class BlockAssembler:
    """Feed chunks with :meth:`push`; read the result with :meth:`result`."""

    __slots__ = ("_finish", "_partials", "_usage")

    def __init__(self) -> None:
        self._partials: dict[int, _Partial] = {}
        self._usage: Usage | None = None
        self._finish: Finish | None = None

    def _claim(self, index: int, block_type: BlockType, chunk_type: str) -> _Partial:
        """The partial at ``index``, created if new; it must hold ``block_type``."""
        partials = self._partials
        if index not in partials:  # a new block (no dict.get call: most chunks)
            partial = partials[index] = _Partial(block_type)
            return partial
        partial = partials[index]
        if partial.block_type != block_type:
            raise AssemblyError(
                f"block {index} is a {partial.block_type} block, but a {chunk_type} "
                f"chunk targets it as a {block_type} block"
            )
        return partial

    def push(self, chunk: Chunk) -> None:
        """Take one chunk of the stream; raises :class:`AssemblyError` on a contradiction."""
        # The chunk's own class picks its handler (no isinstance chain for the usual
        # chunks); a subclass is handled as the chunk class it derives from.
        try:
            handle = _HANDLERS[chunk.__class__]
        except KeyError:
            handle = _HANDLERS[_chunk_class(chunk)]
        handle(self, chunk)

    def _text(self, chunk: TextDelta) -> None:
        partial = self._claim(chunk.index, "text", chunk.type)
        if partial.block is None:
            partial.parts.append(chunk.text)

    def _reasoning(self, chunk: ReasoningDelta) -> None:
        partial = self._claim(chunk.index, "reasoning", chunk.type)
        if partial.block is None:
            partial.parts.append(chunk.text)

    def _tool_call(self, chunk: ToolCallDelta) -> None:
        partial = self._claim(chunk.index, "tool-call", chunk.type)
        if partial.block is None:
            if chunk.id:
                partial.call_id = chunk.id
            if chunk.name:
                partial.name = chunk.name
            partial.parts.append(chunk.arguments_delta)

    def _start(self, chunk: BlockStart) -> None:
        block_type = chunk.block_type
        given: object = block_type  # what the adapter put there, whatever its type hint
        # A str that is a known type exactly (the usual chunk): no _block_type call.
        if type(given) is not str or given not in BLOCK_TYPES:
            block_type = _block_type(chunk, given)
        self._claim(chunk.index, block_type, chunk.type)

    def _end(self, chunk: BlockEnd) -> None:
        block = chunk.block
        if block is None:
            partials = self._partials
            if chunk.index not in partials:
                raise AssemblyError(
                    f"block-end for block {chunk.index}, which never started and carries no block"
                )
            partial = partials[chunk.index]
        else:
            partial = self._claim(chunk.index, _block_type(chunk, block.type), chunk.type)
        if partial.block is None:
            partial.block = _build(chunk.index, partial) if block is None else block

    def _usage_of(self, chunk: UsageChunk) -> None:
        self._usage = chunk.usage

    def _finish_of(self, chunk: Finish) -> None:
        self._finish = chunk

    def result(self) -> AssembledMessage:
        """The assistant message so far (open blocks are completed as they stand)."""
        finish = self._finish or Finish("stop")
        blocks = [
            partial.block if partial.block is not None else _build(index, partial)
            for index, partial in self._partials.items()
        ]
        if finish.reason == "max-tokens":
            blocks = [b for b in blocks if not isinstance(b, ToolCallBlock)]
        return AssembledMessage(Message("assistant", tuple(blocks)), self._usage, finish)

    def interrupted_blocks(self) -> list[Block]:
        """Text and reasoning blocks with visible content, for an interrupted stream."""
        return [
            block
            for block in self.result().message.content
            if isinstance(block, TextBlock | ReasoningBlock) and block.text.strip()
        ]


#: Each chunk class's handler in :meth:`BlockAssembler.push`.
_HANDLERS: dict[type, Callable[[BlockAssembler, Any], None]] = {
    TextDelta: BlockAssembler._text,
    ReasoningDelta: BlockAssembler._reasoning,
    ToolCallDelta: BlockAssembler._tool_call,
    BlockStart: BlockAssembler._start,
    BlockEnd: BlockAssembler._end,
    UsageChunk: BlockAssembler._usage_of,
    Finish: BlockAssembler._finish_of,
}


def _chunk_class(chunk: object) -> type:
    """The chunk class ``chunk`` is an instance of, else :class:`AssemblyError`."""
    for kind in _HANDLERS:
        if isinstance(chunk, kind):
            return kind
    raise AssemblyError(f"unknown chunk {chunk!r}: not one of the dsh_llm chunk types")


def _block_type(chunk: BlockStart | BlockEnd, block_type: object) -> BlockType:
    """``block_type`` if a model stream can produce it, else :class:`AssemblyError`."""
    for known in BLOCK_TYPES:
        if block_type == known:
            return known
    raise AssemblyError(
        f"a {chunk.type} chunk gives block {chunk.index} the type {block_type!r}, which "
        f"a model stream cannot produce (expected one of {', '.join(BLOCK_TYPES)})"
    )


def _build(index: int, partial: _Partial) -> Block:
    text = "".join(partial.parts)
    if partial.block_type == "text":
        return TextBlock(text)
    if partial.block_type == "reasoning":
        return ReasoningBlock(text)
    return ToolCallBlock(partial.call_id or f"call-{index}", partial.name or "", text)
