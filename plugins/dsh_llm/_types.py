"""The model-call vocabulary: content blocks, messages, requests and stream chunks.

Everything here is a small frozen dataclass with ``to_json``/``from_json`` so sessions
can log it and persistence can write it; the chunk set is closed (:data:`Chunk`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from dsh import DshError
from dsh_system_prompt import ToolSchema

__all__ = [
    "FINISH_REASONS",
    "Block",
    "BlockEnd",
    "BlockStart",
    "Chunk",
    "Finish",
    "LlmError",
    "LlmFailure",
    "LlmRequest",
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
]

BlockType: TypeAlias = Literal["text", "reasoning", "tool-call"]

#: Every finish reason: the three successful ones, then the two failures.
FINISH_REASONS = ("stop", "tool-calls", "max-tokens", "aborted", "error")


class LlmError(DshError, RuntimeError):
    """A model call failed; ``failure`` carries the provider's details."""

    code = "LLM_ERROR"

    def __init__(self, failure: LlmFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass(frozen=True, slots=True)
class LlmFailure:
    """Why a model call failed: a readable message and a stable code."""

    message: str
    code: str
    status: int | None = None
    retry_after_ms: int | None = None
    request_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in _fields(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LlmFailure:
        return cls(**data)


# -- content blocks -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Text the model wrote, or text a user sent."""

    text: str
    type: Literal["text"] = field(default="text", init=False)


@dataclass(frozen=True, slots=True)
class ReasoningBlock:
    """The model's reasoning (DeepSeek's ``reasoning_content``)."""

    text: str
    type: Literal["reasoning"] = field(default="reasoning", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallBlock:
    """A tool call; ``arguments`` is the raw JSON text the model produced."""

    id: str
    name: str
    arguments: str
    type: Literal["tool-call"] = field(default="tool-call", init=False)


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The result of one tool call, sent back to the model."""

    tool_call_id: str
    content: str
    is_error: bool = False
    type: Literal["tool-result"] = field(default="tool-result", init=False)


Block: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock

_BLOCKS: dict[str, Any] = {
    "text": TextBlock,
    "reasoning": ReasoningBlock,
    "tool-call": ToolCallBlock,
    "tool-result": ToolResultBlock,
}


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def block_to_json(block: Block) -> dict[str, Any]:
    return _fields(block)


def block_from_json(data: dict[str, Any]) -> Block:
    """Rebuild a block from :func:`block_to_json` output."""
    fields = dict(data)
    kind = fields.pop("type")
    cls = _BLOCKS.get(kind)
    if cls is None:
        raise ValueError(f"unknown content block type {kind!r}")
    block: Block = cls(**fields)
    return block


# -- messages and requests ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the history: ``user``, ``assistant`` or ``tool`` (results)."""

    role: Literal["user", "assistant", "tool"]
    content: tuple[Block, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", (TextBlock(text),))

    @property
    def text(self) -> str:
        """The message's text blocks, joined."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        return [b for b in self.content if isinstance(b, ToolCallBlock)]

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "content": [block_to_json(b) for b in self.content]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        return cls(data["role"], tuple(block_from_json(b) for b in data["content"]))


@dataclass(frozen=True, slots=True)
class LlmRequest:
    """One model call: which model, the system prompt, the history and the tools."""

    model: str
    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSchema, ...] = ()
    max_tokens: int | None = None
    session_id: str | None = None
    turn: int | None = None
    step: int | None = None


# -- stream chunks ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts; cache reads are not included in ``input_tokens``."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in _fields(self).items() if v is not None}


@dataclass(frozen=True, slots=True)
class BlockStart:
    index: int
    block_type: BlockType
    type: Literal["block-start"] = field(default="block-start", init=False)


@dataclass(frozen=True, slots=True)
class TextDelta:
    index: int
    text: str
    type: Literal["text-delta"] = field(default="text-delta", init=False)


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    index: int
    text: str
    type: Literal["reasoning-delta"] = field(default="reasoning-delta", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call: the id and name arrive once, arguments in pieces."""

    index: int
    id: str | None
    arguments_delta: str
    name: str | None = None
    type: Literal["tool-call-delta"] = field(default="tool-call-delta", init=False)


@dataclass(frozen=True, slots=True)
class BlockEnd:
    """The block at ``index`` is complete (``block`` is its final form, if known)."""

    index: int
    block: Block | None = None
    type: Literal["block-end"] = field(default="block-end", init=False)


@dataclass(frozen=True, slots=True)
class UsageChunk:
    usage: Usage
    type: Literal["usage"] = field(default="usage", init=False)


@dataclass(frozen=True, slots=True)
class Finish:
    """The end of a stream: ``reason`` is one of :data:`FINISH_REASONS`."""

    reason: Literal["stop", "tool-calls", "max-tokens", "aborted", "error"]
    failure: LlmFailure | None = None
    type: Literal["finish"] = field(default="finish", init=False)


Chunk: TypeAlias = (
    BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | UsageChunk | Finish
)


def chunk_to_json(chunk: Chunk) -> dict[str, Any]:
    data = _fields(chunk)
    if isinstance(chunk, BlockEnd) and chunk.block is not None:
        data["block"] = block_to_json(chunk.block)
    elif isinstance(chunk, UsageChunk):
        data["usage"] = chunk.usage.to_json()
    elif isinstance(chunk, Finish) and chunk.failure is not None:
        data["failure"] = chunk.failure.to_json()
    return {k: v for k, v in data.items() if v is not None}


def chunk_from_json(data: dict[str, Any]) -> Chunk:
    """Rebuild a chunk from :func:`chunk_to_json` output (or a recorded stream)."""
    fields = dict(data)
    kind = fields.pop("type", None)
    if kind == "block-start":
        return BlockStart(**fields)
    if kind == "text-delta":
        return TextDelta(**fields)
    if kind == "reasoning-delta":
        return ReasoningDelta(**fields)
    if kind == "tool-call-delta":
        fields.setdefault("id", None)
        return ToolCallDelta(**fields)
    if kind == "block-end":
        block = fields.get("block")
        return BlockEnd(fields["index"], None if block is None else block_from_json(block))
    if kind == "usage":
        return UsageChunk(Usage(**fields["usage"]))
    if kind == "finish":
        failure = fields.get("failure")
        return Finish(fields["reason"], None if failure is None else LlmFailure.from_json(failure))
    raise ValueError(f"unknown chunk type {kind!r}")
