"""The chat-completions wire format: requests out, server-sent event payloads in.

No I/O here: :func:`request_body` builds the JSON body of one call and
:class:`StreamDecoder` turns decoded ``data:`` payloads into dsh chunks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsh_llm import (
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
    ToolResultBlock,
    Usage,
)
from dsh_llm.http import BadResponse, DecoderBase, ServerStreamError, int_field, str_field

__all__ = ["StreamDecoder", "request_body"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "length": "max-tokens",
}


# -- request ------------------------------------------------------------------------------


def request_body(
    request: LlmRequest,
    *,
    send_reasoning: bool = False,
    options: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of a streamed chat-completions call for ``request``: ``options``
    (sampling and tool knobs) are added, then ``extra`` is merged over everything."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        _append_message(messages, message, send_reasoning)
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    body.update(options or {})
    body.update(extra or {})
    return body


def _append_message(out: list[dict[str, Any]], message: Message, send_reasoning: bool) -> None:
    # Tool results become one "tool" message each, placed before the message's text.
    out.extend(
        {"role": "tool", "tool_call_id": block.tool_call_id, "content": block.content}
        for block in message.content
        if isinstance(block, ToolResultBlock)
    )
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    if message.role == "assistant":
        calls = [
            {
                "id": b.id,
                "type": "function",
                "function": {"name": b.name, "arguments": b.arguments},
            }
            for b in message.content
            if isinstance(b, ToolCallBlock)
        ]
        if not text and not calls:
            return  # reasoning only (an interrupted answer): nothing the server accepts
        # "" rather than null for a message that only calls tools: OpenAI and DeepSeek
        # take either, llama-cpp-python's server refuses null (and a missing key).
        entry: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            entry["tool_calls"] = calls
        if send_reasoning:
            entry["reasoning_content"] = "".join(
                b.text for b in message.content if isinstance(b, ReasoningBlock)
            )
        out.append(entry)
    elif message.role == "user" and (
        text or not any(isinstance(b, ToolResultBlock) for b in message.content)
    ):
        out.append({"role": "user", "content": text})


# -- stream -------------------------------------------------------------------------------


def _optional_int(data: Any, key: str, what: str) -> int | None:
    if not isinstance(data, dict):
        return None
    value = data.get(key)
    return None if value is None else int_field(value, what)


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        raise BadResponse(f"usage is {data!r}, not an object")
    prompt = int_field(data.get("prompt_tokens", 0), "usage.prompt_tokens")
    completion = int_field(data.get("completion_tokens", 0), "usage.completion_tokens")
    # DeepSeek reports cache hits at the top level, OpenAI in prompt_tokens_details.
    cached = _optional_int(data, "prompt_cache_hit_tokens", "usage.prompt_cache_hit_tokens")
    if cached is None:
        cached = _optional_int(
            data.get("prompt_tokens_details"),
            "cached_tokens",
            "usage.prompt_tokens_details.cached_tokens",
        )
    reasoning = _optional_int(
        data.get("completion_tokens_details"),
        "reasoning_tokens",
        "usage.completion_tokens_details.reasoning_tokens",
    )
    return Usage(
        input_tokens=max(prompt - (cached or 0), 0),
        output_tokens=completion,
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
    )


class _ToolCall:
    __slots__ = ("has_id", "has_name", "index")

    def __init__(self, index: int) -> None:
        self.index = index
        self.has_id = False
        self.has_name = False


class StreamDecoder(DecoderBase):
    """Turns the payloads of one stream into chunks, in order.

    Feed each decoded ``data:`` JSON payload to :meth:`feed` and call :meth:`end`
    when the stream is over; both append to ``out``. Blocks get indexes in order of
    first appearance. A text or reasoning block ends when other content starts; tool
    calls (merged by their ``index``) end with the stream. Usage and the finish are
    held back until :meth:`end`, so usage always precedes the finish.
    """

    __slots__ = ("_kind", "_next", "_open", "_reason", "_tools")

    def __init__(self, request_id: str | None = None) -> None:
        super().__init__(request_id)
        self._next = 0  # the next block index
        self._kind: str | None = None  # "text" / "reasoning" while such a block is open
        self._open = -1  # the index of that block
        self._tools: dict[int, _ToolCall] = {}  # provider tool-call index -> state
        self._reason: str | None = None  # finish_reason, once seen

    def feed(self, payload: Any, out: list[Chunk], event: str = "message") -> bool:
        """Take one decoded ``data:`` payload (the event name does not matter); raises
        :class:`BadResponse` on a bad shape. The stream ends with ``[DONE]``, never
        here: always False."""
        if not isinstance(payload, dict):
            raise BadResponse(f"expected a JSON object, got {payload!r}")
        usage = payload.get("usage")
        if usage is not None:
            self._usage = _usage(usage)
        choices = payload.get("choices")
        if not choices:
            error = payload.get("error")
            if error is not None:
                message = error.get("message") if isinstance(error, dict) else error
                if not isinstance(message, str) or not message:
                    message = json.dumps(error)
                raise ServerStreamError(f"the server reported an error mid-stream: {message}")
            return False  # the usage-only chunk, or a keep-alive
        if not isinstance(choices, list):
            raise BadResponse(f"choices is {choices!r}, not a list")
        choice = choices[0]  # only the first choice: dsh never asks for n > 1
        if not isinstance(choice, dict):
            raise BadResponse(f"a choice is {choice!r}, not an object")
        if self._reason is not None:
            return False  # nothing counts after finish_reason but usage
        delta = choice.get("delta")
        if delta:
            if not isinstance(delta, dict):
                raise BadResponse(f"delta is {delta!r}, not an object")
            # DeepSeek and vLLM say reasoning_content; Ollama and newer vLLM say reasoning.
            reasoning = delta.get("reasoning_content")
            if reasoning is None and type(delta.get("reasoning")) is str:
                reasoning = delta["reasoning"]
            if reasoning:
                self._text("reasoning", reasoning, out)
            content = delta.get("content")
            if content:
                self._text("text", content, out)
            calls = delta.get("tool_calls")
            if calls:
                self._tool_calls(calls, out)
        reason = choice.get("finish_reason")
        if reason is not None:
            self._finish_reason(reason, out)
        return False

    def _text(self, kind: str, text: Any, out: list[Chunk]) -> None:
        str_field(text, f"a {kind} delta")
        if self._kind != kind:
            self._close_text(out)
            self._kind = kind
            self._open = index = self._next
            self._next += 1
            out.append(BlockStart(index, "text" if kind == "text" else "reasoning"))
        if kind == "text":
            self._content = True
            out.append(TextDelta(self._open, text))
        else:
            out.append(ReasoningDelta(self._open, text))

    def _close_text(self, out: list[Chunk]) -> None:
        if self._kind is not None:
            out.append(BlockEnd(self._open))
            self._kind = None

    def _tool_calls(self, calls: Any, out: list[Chunk]) -> None:
        if not isinstance(calls, list):
            raise BadResponse(f"tool_calls is {calls!r}, not a list")
        self._close_text(out)
        self._content = True
        for position, call in enumerate(calls):
            if not isinstance(call, dict):
                raise BadResponse(f"a tool call is {call!r}, not an object")
            key = call.get("index")
            if key is None:
                key = position  # servers that send whole calls may leave the index out
            elif type(key) is not int:
                raise BadResponse(f"a tool call index is {key!r}, not an integer")
            function = call.get("function") or {}
            if not isinstance(function, dict):
                raise BadResponse(f"a tool call's function is {function!r}, not an object")
            call_id = call.get("id") or None
            name = function.get("name") or None
            arguments = function.get("arguments") or ""
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments)  # a whole call, sent as an object
            for value, what in ((call_id, "id"), (name, "name"), (arguments, "arguments")):
                if value is not None and type(value) is not str:
                    raise BadResponse(f"a tool call's {what} is {value!r}, not a string")
            state = self._tools.get(key)
            if state is None:
                state = self._tools[key] = _ToolCall(self._next)
                self._next += 1
                out.append(BlockStart(state.index, "tool-call"))
            # The id and the name go out once, with the first fragment that has them.
            if state.has_id:
                call_id = None
            if state.has_name:
                name = None
            if call_id is None and name is None and not arguments:
                continue
            state.has_id = state.has_id or call_id is not None
            state.has_name = state.has_name or name is not None
            out.append(ToolCallDelta(state.index, call_id, arguments, name=name))

    def _finish_reason(self, reason: Any, out: list[Chunk]) -> None:
        self._reason = reason = str_field(reason, "finish_reason")
        self._close_text(out)
        out.extend(BlockEnd(state.index) for state in self._tools.values())
        self._stopped(reason, _FINISH.get(reason))
