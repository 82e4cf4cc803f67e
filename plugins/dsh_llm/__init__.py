"""Model calls: the adapter registry, the chunk vocabulary and the block assembler.

YAML name ``llm``; service ``Llm`` at ctx key ``llm``. See this package's README.
"""

from __future__ import annotations

from ._assembler import AssembledMessage, AssemblyError, BlockAssembler
from ._service import AdapterRegistrationError, Llm, LlmAdapter, LlmSpecs
from ._types import (
    FINISH_REASONS,
    Block,
    BlockEnd,
    BlockStart,
    Chunk,
    Finish,
    LlmError,
    LlmFailure,
    LlmRequest,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    UsageChunk,
    block_from_json,
    block_to_json,
    chunk_from_json,
    chunk_to_json,
)

plugin = Llm

__all__ = [
    "FINISH_REASONS",
    "AdapterRegistrationError",
    "AssembledMessage",
    "AssemblyError",
    "Block",
    "BlockAssembler",
    "BlockEnd",
    "BlockStart",
    "Chunk",
    "Finish",
    "Llm",
    "LlmAdapter",
    "LlmError",
    "LlmFailure",
    "LlmRequest",
    "LlmSpecs",
    "Message",
    "ReasoningBlock",
    "ReasoningDelta",
    "TextBlock",
    "TextDelta",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolResultBlock",
    "Usage",
    "UsageChunk",
    "block_from_json",
    "block_to_json",
    "chunk_from_json",
    "chunk_to_json",
    "plugin",
]
