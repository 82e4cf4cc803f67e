"""Model calls: the adapter registry, the chunk vocabulary and the block assembler.

YAML name ``llm``; service ``Llm`` at ctx key ``llm``. See this package's README.
"""

from __future__ import annotations

from ._assembler import AssembledMessage, AssemblyError, BlockAssembler
from ._service import (
    AdapterRegistrationError,
    AdapterTypeError,
    DuplicateAdapterError,
    Llm,
    LlmAdapter,
    LlmRequestError,
    LlmSpecs,
)
from ._types import (
    BLOCK_TYPES,
    FINISH_REASONS,
    Block,
    BlockEnd,
    BlockStart,
    BlockType,
    Chunk,
    Finish,
    FinishReason,
    LlmError,
    LlmFailure,
    LlmFormatError,
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
    "BLOCK_TYPES",
    "FINISH_REASONS",
    "AdapterRegistrationError",
    "AdapterTypeError",
    "AssembledMessage",
    "AssemblyError",
    "Block",
    "BlockAssembler",
    "BlockEnd",
    "BlockStart",
    "BlockType",
    "Chunk",
    "DuplicateAdapterError",
    "Finish",
    "FinishReason",
    "Llm",
    "LlmAdapter",
    "LlmError",
    "LlmFailure",
    "LlmFormatError",
    "LlmRequest",
    "LlmRequestError",
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
