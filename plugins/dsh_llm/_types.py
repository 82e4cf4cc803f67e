"""The model-call vocabulary: content blocks, messages, requests and stream chunks.

Everything here is a small frozen dataclass with a JSON form so sessions can log it,
persistence can write it and a replay can read it back; the chunk set is closed
(:data:`Chunk`). The ``from_json`` decoders validate what they read: a malformed
value is a :class:`LlmFormatError` that says which key is wrong and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal, TypeAlias

from dsh import DshError
from dsh._record import record
from dsh_system_prompt import ToolSchema

from ._checks import (
    _BOOL,
    _COUNT,
    _LIST,
    _OBJECT,
    _STR,
    LlmFormatError,
    _Check,
    _compact,
    _fields,
    _kind,
    _one_of,
    _record,
)
from ._records import LlmFailure, Usage, add_usage

__all__ = [
    "BLOCK_TYPES",
    "FINISH_REASONS",
    "Block",
    "BlockEnd",
    "BlockStart",
    "BlockType",
    "Chunk",
    "Finish",
    "FinishReason",
    "LlmError",
    "LlmFailure",
    "LlmFormatError",
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
    "add_usage",
    "block_from_json",
    "block_to_json",
    "chunk_from_json",
    "chunk_to_json",
]

#: The kind of block a model stream produces (``BlockStart.block_type``).
BlockType: TypeAlias = Literal["text", "reasoning", "tool-call"]

#: Every :data:`BlockType`.
BLOCK_TYPES: tuple[BlockType, ...] = ("text", "reasoning", "tool-call")

FinishReason: TypeAlias = Literal["stop", "tool-calls", "max-tokens", "aborted", "error"]

#: Every finish reason: the three successful ones, then the two failures.
FINISH_REASONS: tuple[FinishReason, ...] = ("stop", "tool-calls", "max-tokens", "aborted", "error")

_FAILING = ("aborted", "error")


class LlmError(DshError, RuntimeError):
    """A model call failed; ``failure`` carries the provider's details."""

    code = "LLM_ERROR"

    def __init__(self, failure: LlmFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


# -- content blocks -----------------------------------------------------------------------


@record
class TextBlock:
    """Text the model wrote, or text a user sent."""

    text: str
    type: Literal["text"] = field(default="text", init=False)


@record
class ReasoningBlock:
    """The model's reasoning (DeepSeek's ``reasoning_content``, Anthropic's thinking).

    ``signature`` is opaque provider data that must go back with the block unchanged
    (Anthropic signs its thinking); ``None`` when the provider gives none. Only the
    adapter that made it reads it.
    """

    text: str
    signature: str | None = None
    type: Literal["reasoning"] = field(default="reasoning", init=False)


@record
class ToolCallBlock:
    """A tool call; ``arguments`` is the raw JSON text the model produced."""

    id: str
    name: str
    arguments: str
    type: Literal["tool-call"] = field(default="tool-call", init=False)


@record
class ToolResultBlock:
    """The result of one tool call, sent back to the model."""

    tool_call_id: str
    content: str
    is_error: bool = False
    type: Literal["tool-result"] = field(default="tool-result", init=False)


Block: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock

_BLOCKS: dict[str, tuple[Any, dict[str, _Check], dict[str, _Check]]] = {
    "text": (TextBlock, {"text": _STR}, {}),
    "reasoning": (ReasoningBlock, {"text": _STR}, {"signature": _STR}),
    "tool-call": (ToolCallBlock, {"id": _STR, "name": _STR, "arguments": _STR}, {}),
    "tool-result": (
        ToolResultBlock,
        {"tool_call_id": _STR, "content": _STR},
        {"is_error": _BOOL},
    ),
}
_BLOCK_KINDS = tuple(_BLOCKS)


def block_to_json(block: Block) -> dict[str, Any]:
    """The JSON form of a block: its fields without the ``None`` ones, ``type`` included."""
    return _compact(block)


def block_from_json(data: Mapping[str, Any]) -> Block:
    """Rebuild a block from :func:`block_to_json` output; raises :class:`LlmFormatError`."""
    kind = _kind(data, "content block", _BLOCK_KINDS)
    cls, required, optional = _BLOCKS[kind]
    block: Block = cls(**_record(data, f'"{kind}" block', required, optional, typed=True))
    return block


# -- messages and requests ----------------------------------------------------------------


@record
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
    def from_json(cls, data: Mapping[str, Any]) -> Message:
        """Rebuild a message from :meth:`to_json` output; raises :class:`LlmFormatError`."""
        fast = _plain_message(data)
        if fast is not None:
            return fast
        fields = _record(data, "message", _MESSAGE_FIELDS, {})
        blocks: list[Block] = []
        for i, item in enumerate(fields["content"]):
            try:
                blocks.append(block_from_json(item))
            except LlmFormatError as exc:
                raise LlmFormatError(f"message content[{i}]: {exc}") from None
        return cls(fields["role"], tuple(blocks))


_ROLES: tuple[Literal["user", "assistant", "tool"], ...] = ("user", "assistant", "tool")
_MESSAGE_FIELDS = {"role": _one_of(_ROLES), "content": _LIST}


def _plain_block(item: object) -> Block | None:
    """The block ``item`` encodes when it is exactly what :func:`block_to_json` writes
    (plain ``dict``, ``str`` values, no extra key), else None: the validating decoder
    then decides, and words its errors. Accepts nothing that decoder refuses."""
    if type(item) is not dict:
        return None
    kind = item.get("type")
    size = len(item)
    if kind == "text" and size == 2:
        text = item.get("text")
        return TextBlock(text) if type(text) is str else None
    if kind == "tool-call" and size == 4:
        call_id, name, arguments = item.get("id"), item.get("name"), item.get("arguments")
        if type(call_id) is str and type(name) is str and type(arguments) is str:
            return ToolCallBlock(call_id, name, arguments)
        return None
    if kind == "tool-result" and size == 4:
        call_id, content, is_error = (
            item.get("tool_call_id"),
            item.get("content"),
            item.get("is_error"),
        )
        if type(call_id) is str and type(content) is str and type(is_error) is bool:
            return ToolResultBlock(call_id, content, is_error)
        return None
    if kind == "reasoning" and size == 2:
        text = item.get("text")
        return ReasoningBlock(text) if type(text) is str else None
    return None


def _plain_message(data: object) -> Message | None:
    """The fast path of :meth:`Message.from_json` for what :meth:`Message.to_json`
    writes; None hands anything else to the validating decoder."""
    if type(data) is not dict or len(data) != 2:
        return None
    role = data.get("role")
    content = data.get("content")
    if type(content) is not list or type(role) is not str or role not in _ROLES:
        return None
    blocks = []
    for item in content:
        block = _plain_block(item)
        if block is None:
            return None
        blocks.append(block)
    return Message(role, tuple(blocks))


@record
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


@record
class BlockStart:
    """Block ``index`` begins; it holds ``block_type`` content."""

    index: int
    block_type: BlockType
    type: Literal["block-start"] = field(default="block-start", init=False)


@record
class TextDelta:
    """More text for text block ``index``."""

    index: int
    text: str
    type: Literal["text-delta"] = field(default="text-delta", init=False)


@record
class ReasoningDelta:
    """More reasoning for reasoning block ``index``."""

    index: int
    text: str
    type: Literal["reasoning-delta"] = field(default="reasoning-delta", init=False)


@record
class ToolCallDelta:
    """A fragment of a tool call: the id and name arrive once, arguments in pieces."""

    index: int
    id: str | None
    arguments_delta: str
    name: str | None = None
    type: Literal["tool-call-delta"] = field(default="tool-call-delta", init=False)


@record
class BlockEnd:
    """The block at ``index`` is complete (``block`` is its final form, if known)."""

    index: int
    block: Block | None = None
    type: Literal["block-end"] = field(default="block-end", init=False)


@record
class UsageChunk:
    """The call's token counts (before the finish)."""

    usage: Usage
    type: Literal["usage"] = field(default="usage", init=False)


@record
class Finish:
    """The end of a stream: ``reason`` is one of :data:`FINISH_REASONS`.

    ``aborted`` and ``error`` carry a ``failure``; the other reasons carry none.
    """

    reason: FinishReason
    failure: LlmFailure | None = None
    type: Literal["finish"] = field(default="finish", init=False)

    def __post_init__(self) -> None:
        if self.reason not in FINISH_REASONS:
            raise LlmFormatError(
                f"unknown finish reason {self.reason!r} (expected one of "
                f"{', '.join(FINISH_REASONS)})"
            )
        if (self.failure is not None) != (self.reason in _FAILING):
            raise LlmFormatError(
                f'finish reason "{self.reason}" needs a failure'
                if self.failure is None
                else f'finish reason "{self.reason}" takes no failure'
            )


Chunk: TypeAlias = (
    BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | UsageChunk | Finish
)

_INDEX = {"index": _COUNT}
_CHUNKS: dict[str, tuple[Any, dict[str, _Check], dict[str, _Check]]] = {
    "block-start": (BlockStart, {**_INDEX, "block_type": _one_of(BLOCK_TYPES)}, {}),
    "text-delta": (TextDelta, {**_INDEX, "text": _STR}, {}),
    "reasoning-delta": (ReasoningDelta, {**_INDEX, "text": _STR}, {}),
    "tool-call-delta": (
        ToolCallDelta,
        {**_INDEX, "arguments_delta": _STR},
        {"id": _STR, "name": _STR},
    ),
    "block-end": (BlockEnd, _INDEX, {"block": _OBJECT}),
    "usage": (UsageChunk, {"usage": _OBJECT}, {}),
    "finish": (Finish, {"reason": _one_of(FINISH_REASONS)}, {"failure": _OBJECT}),
}
_CHUNK_KINDS = tuple(_CHUNKS)


def chunk_to_json(chunk: Chunk) -> dict[str, Any]:
    """The JSON form of a chunk: its fields without the ``None`` ones, ``type`` included."""
    data = _fields(chunk)
    if isinstance(chunk, BlockEnd) and chunk.block is not None:
        data["block"] = block_to_json(chunk.block)
    elif isinstance(chunk, UsageChunk):
        data["usage"] = chunk.usage.to_json()
    elif isinstance(chunk, Finish) and chunk.failure is not None:
        data["failure"] = chunk.failure.to_json()
    return {k: v for k, v in data.items() if v is not None}


def chunk_from_json(data: Mapping[str, Any]) -> Chunk:
    """Rebuild a chunk from :func:`chunk_to_json` output (or a recorded stream).

    Raises :class:`LlmFormatError` naming the unknown type, the missing or unknown key,
    or the value of the wrong type.
    """
    kind = _kind(data, "chunk", _CHUNK_KINDS)
    cls, required, optional = _CHUNKS[kind]
    what = f'"{kind}" chunk'
    fields = _record(data, what, required, optional, typed=True)
    try:
        if kind == "block-end" and "block" in fields:
            fields["block"] = block_from_json(fields["block"])
        elif kind == "usage":
            fields["usage"] = Usage.from_json(fields["usage"])
        elif kind == "finish":
            failure = fields.get("failure")
            fields["failure"] = None if failure is None else LlmFailure.from_json(failure)
        elif kind == "tool-call-delta":
            fields.setdefault("id", None)
        chunk: Chunk = cls(**fields)
    except LlmFormatError as exc:
        raise LlmFormatError(f"{what}: {exc}") from None
    return chunk
