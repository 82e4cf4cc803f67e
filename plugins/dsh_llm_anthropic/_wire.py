"""The Messages API wire format: requests out, server-sent events in.

No I/O here: :func:`request_body` builds the JSON body of one call and
:class:`StreamDecoder` turns the decoded events of its stream into dsh chunks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from dsh_llm import (
    Block,
    BlockEnd,
    BlockStart,
    Chunk,
    FinishReason,
    LlmRequest,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from dsh_llm.http import BadResponse, DecoderBase, ServerStreamError, int_field, str_field

__all__ = ["REDACTED", "StreamDecoder", "messages", "request_body"]

#: How a ``redacted_thinking`` block is kept: a reasoning block with no text whose
#: signature is this prefix and the block's encrypted ``data`` (a thinking signature
#: is base64, which never holds a colon).
REDACTED = "redacted_thinking:"

_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
}


# -- request ------------------------------------------------------------------------------


def request_body(
    request: LlmRequest,
    *,
    max_tokens: int = 8192,
    thinking_budget: int | None = None,
    options: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of a streamed Messages call for ``request``.

    ``max_tokens`` is sent when the request sets none; ``thinking_budget`` turns
    thinking on when the request's token limit leaves room for it; ``options`` (the
    sampling and tool knobs) are added, then ``extra`` is merged over everything.
    """
    limit = max_tokens if request.max_tokens is None else request.max_tokens
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": limit,
        "messages": messages(request.messages),
        "stream": True,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            for tool in request.tools
        ]
    if thinking_budget is not None and thinking_budget < limit:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    body.update(options or {})
    body.update(extra or {})
    return body


def messages(history: Iterable[Message]) -> list[dict[str, Any]]:
    """The ``messages`` of a request: tool results go to the user, consecutive messages
    of one role are merged (the API alternates roles), and in each user message the
    tool results come first."""
    out: list[dict[str, Any]] = []
    for message in history:
        role = "assistant" if message.role == "assistant" else "user"
        content = [part for block in message.content if (part := _block(block)) is not None]
        if not content:
            continue  # the API refuses an empty message
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})
    for entry in out:
        if entry["role"] == "user":
            entry["content"].sort(key=lambda part: part["type"] != "tool_result")  # stable
    return out


def _block(block: Block) -> dict[str, Any] | None:
    """One content block in the API's form, or None for what it does not take back."""
    if isinstance(block, TextBlock):
        # The API refuses text blocks without visible text.
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if isinstance(block, ReasoningBlock):
        signature = block.signature
        if signature is None:
            return None  # unsigned reasoning (another provider's, or cut short) is refused
        if signature.startswith(REDACTED):
            return {"type": "redacted_thinking", "data": signature[len(REDACTED) :]}
        return {"type": "thinking", "thinking": block.text, "signature": signature}
    if isinstance(block, ToolCallBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": _input(block)}
    result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": block.tool_call_id,
        "content": block.content,
    }
    if block.is_error:
        result["is_error"] = True
    return result


def _input(call: ToolCallBlock) -> dict[str, Any]:
    """A call's arguments as the JSON object the API wants back; arguments that are not
    one (the call already failed with an error result) go back as ``{}``."""
    try:
        value = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


# -- stream -------------------------------------------------------------------------------


class _Block:
    __slots__ = ("closed", "kind", "parts", "signature")

    def __init__(self, kind: str | None) -> None:
        self.kind = kind  # "text", "thinking", "tool", or None for a block dsh ignores
        self.parts: list[str] = []  # the thinking text
        self.signature: str | None = None
        self.closed = False


#: The content block types dsh reads, by the kind of block they open.
_KINDS = {
    "text": "text",
    "thinking": "thinking",
    "redacted_thinking": "thinking",
    "tool_use": "tool",
}
#: Delta type -> (the kind of block it belongs to, the key of its value).
_DELTAS = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("thinking", "signature"),
    "input_json_delta": ("tool", "partial_json"),
}
#: Usage keys -> the wire keys they are read from.
_USAGE = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def _index(payload: dict[str, Any], event: str) -> int:
    index = int_field(payload.get("index"), f"a {event} index")
    if index < 0:
        raise BadResponse(f"a {event} index is {index}, not a block index")
    return index


def _describe_error(error: Any) -> str:
    if isinstance(error, dict):
        parts = [v for v in (error.get("type"), error.get("message")) if isinstance(v, str) and v]
        if parts:
            return ": ".join(parts)
    elif isinstance(error, str) and error:
        return error
    return json.dumps(error)


class StreamDecoder(DecoderBase):
    """Turns the events of one Messages stream into chunks, in order.

    Feed each decoded ``data:`` payload to :meth:`feed` (it returns True at
    ``message_stop``) and call :meth:`end` when the stream is over; both append to
    ``out``. A content block keeps the API's index. Thinking ends with a ``BlockEnd``
    carrying the whole ``ReasoningBlock`` with its signature; tool input arrives as
    ``ToolCallDelta`` fragments of partial JSON. ``ping``, event types and delta types
    added after this adapter, and content blocks of other types (server tools) are
    ignored. Usage and the finish are held back until :meth:`end`.
    """

    reason_field = "stop_reason"
    end_field = "message_stop"

    __slots__ = ("_blocks", "_counts", "_reason")

    def __init__(self, request_id: str | None = None) -> None:
        super().__init__(request_id)
        self._blocks: dict[int, _Block] = {}
        self._counts: dict[str, int] = {}  # the usage counts seen so far; the last wins
        self._reason: str | None = None  # stop_reason, once seen

    def feed(self, payload: Any, out: list[Chunk], event: str = "message") -> bool:
        """Take one decoded event; True at ``message_stop``. Raises ``BadResponse`` on a
        bad shape and ``ServerStreamError`` for an ``error`` event."""
        if not isinstance(payload, dict):
            raise BadResponse(f"expected a JSON object, got {payload!r}")
        kind = payload.get("type", event)
        if kind == "message_start":
            message = payload.get("message")
            if not isinstance(message, dict):
                raise BadResponse(f"message_start.message is {message!r}, not an object")
            self._take_usage(message.get("usage"), "message_start.message.usage")
        elif kind == "content_block_start":
            self._start(_index(payload, kind), payload.get("content_block"), out)
        elif kind == "content_block_delta":
            self._delta(_index(payload, kind), payload.get("delta"), out)
        elif kind == "content_block_stop":
            index = _index(payload, kind)
            self._close(index, self._block(index, kind), out)
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            if not isinstance(delta, dict):
                raise BadResponse(f"message_delta.delta is {delta!r}, not an object")
            reason = delta.get("stop_reason")
            if reason is not None:
                self._reason = str_field(reason, "stop_reason")
            self._take_usage(payload.get("usage"), "message_delta.usage")
        elif kind == "message_stop":
            self._stop(out)
            return True
        elif kind == "error":
            error = _describe_error(payload.get("error"))
            raise ServerStreamError(f"the server reported an error mid-stream: {error}")
        return False

    def _block(self, index: int, event: str) -> _Block:
        state = self._blocks.get(index)
        if state is None:
            raise BadResponse(f"a {event} for block {index}, which never started")
        return state

    def _start(self, index: int, block: Any, out: list[Chunk]) -> None:
        if index in self._blocks:
            raise BadResponse(f"block {index} started twice")
        if not isinstance(block, dict):
            raise BadResponse(f"content_block is {block!r}, not an object")
        kind = block.get("type")
        state = self._blocks[index] = _Block(_KINDS.get(kind) if isinstance(kind, str) else None)
        if kind == "text":
            out.append(BlockStart(index, "text"))
            self._text(index, str_field(block.get("text", ""), "a text block's text"), out)
        elif kind == "thinking":
            out.append(BlockStart(index, "reasoning"))
            text = str_field(block.get("thinking", ""), "a thinking block's thinking")
            self._thinking(index, state, text, out)
            signature = block.get("signature")
            if signature:
                state.signature = str_field(signature, "a thinking block's signature")
        elif kind == "redacted_thinking":
            out.append(BlockStart(index, "reasoning"))
            state.signature = REDACTED + str_field(block.get("data"), "a redacted_thinking's data")
        elif kind == "tool_use":
            call_id = str_field(block.get("id"), "a tool_use block's id")
            name = str_field(block.get("name"), "a tool_use block's name")
            given = block.get("input") or {}
            if not isinstance(given, dict):
                raise BadResponse(f"a tool_use block's input is {given!r}, not an object")
            self._content = True
            out.append(BlockStart(index, "tool-call"))
            out.append(ToolCallDelta(index, call_id, json.dumps(given) if given else "", name=name))

    def _delta(self, index: int, delta: Any, out: list[Chunk]) -> None:
        state = self._block(index, "content_block_delta")
        if not isinstance(delta, dict):
            raise BadResponse(f"a content_block_delta's delta is {delta!r}, not an object")
        kind = delta.get("type")
        expected = _DELTAS.get(kind) if isinstance(kind, str) else None
        if expected is None or state.kind is None:
            return  # a delta type added later (citations), or a block dsh ignores
        block_kind, key = expected
        if state.kind != block_kind:
            raise BadResponse(
                f"block {index} is a {state.kind} block: {kind} does not belong in it"
            )
        value = str_field(delta.get(key), f"a {kind}'s {key}")
        if kind == "text_delta":
            self._text(index, value, out)
        elif kind == "thinking_delta":
            self._thinking(index, state, value, out)
        elif kind == "signature_delta":
            state.signature = (state.signature or "") + value
        elif value:
            out.append(ToolCallDelta(index, None, value))

    def _text(self, index: int, text: str, out: list[Chunk]) -> None:
        if text:
            self._content = True
            out.append(TextDelta(index, text))

    def _thinking(self, index: int, state: _Block, text: str, out: list[Chunk]) -> None:
        if text:
            state.parts.append(text)
            out.append(ReasoningDelta(index, text))

    def _close(self, index: int, state: _Block, out: list[Chunk]) -> None:
        if state.closed or state.kind is None:
            return
        state.closed = True
        if state.kind == "thinking":
            reasoning = ReasoningBlock("".join(state.parts), signature=state.signature)
            out.append(BlockEnd(index, reasoning))
        else:
            out.append(BlockEnd(index))

    def _take_usage(self, data: Any, what: str) -> None:
        if data is None:
            return
        if not isinstance(data, dict):
            raise BadResponse(f"{what} is {data!r}, not an object")
        for key in _USAGE:
            value = data.get(key)
            if value is not None:
                self._counts[key] = int_field(value, f"{what}.{key}")
        counts = self._counts
        self._usage = Usage(
            input_tokens=counts.get("input_tokens", 0),
            output_tokens=counts.get("output_tokens", 0),
            cache_read_tokens=counts.get("cache_read_input_tokens"),
            cache_write_tokens=counts.get("cache_creation_input_tokens"),
        )

    def _stop(self, out: list[Chunk]) -> None:
        for index, state in self._blocks.items():
            self._close(index, state, out)
        if self._reason is None:
            self._finish = self._failure(
                "the stream ended (message_stop) without a stop_reason", "BAD_RESPONSE"
            )
        else:
            self._stopped(self._reason, _STOP.get(self._reason))
