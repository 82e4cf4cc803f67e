"""The Messages API loopback server of the llm-anthropic tests (and the claude-agent
example's), on the generic one in ``tests/plugins/llm_http_support.py``: recorded
streams from ``recordings/``, and event builders for the shapes a recording does not
hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsh_llm_anthropic import AnthropicMessages
from tests.plugins.llm_http_support import LoopbackServer

RECORDINGS = Path(__file__).parent / "recordings"
#: The signature of the thinking block in ``thinking_tool_use.sse``.
SIGNATURE = (
    "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds/jzXbXwXbJ3Vb1fWc0WWvuJ2WF8kcFJ"
    "TQT2lZdwk6iBTcnmP9AwMiXSfa0ZFw=="
)


def recording(name: str) -> list[bytes]:
    """The events of ``recordings/<name>.sse``, each with its blank line, in order."""
    text = (RECORDINGS / f"{name}.sse").read_bytes()
    return [part + b"\n\n" for part in text.split(b"\n\n") if part.strip()]


def event(kind: str, **fields: Any) -> bytes:
    """One server-sent event as the API frames it: ``event: <kind>`` and its data."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def message_start(**usage: int) -> bytes:
    """``message_start`` with ``usage`` (default: 10 input tokens, 1 output token)."""
    counts = {"input_tokens": 10, "output_tokens": 1, **usage}
    message: dict[str, Any] = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": counts,
    }
    return event("message_start", message=message)


def block_start(index: int, **block: Any) -> bytes:
    return event("content_block_start", index=index, content_block=block)


def delta(index: int, **change: Any) -> bytes:
    return event("content_block_delta", index=index, delta=change)


def block_stop(index: int) -> bytes:
    return event("content_block_stop", index=index)


def text_block(index: int, *parts: str) -> list[bytes]:
    """A whole text block streamed as ``parts``."""
    deltas = [delta(index, type="text_delta", text=part) for part in parts]
    return [block_start(index, type="text", text=""), *deltas, block_stop(index)]


def finish(reason: str | None = "end_turn", output_tokens: int = 5) -> list[bytes]:
    """``message_delta`` with ``reason`` and the output count, then ``message_stop``."""
    return [
        event(
            "message_delta",
            delta={"stop_reason": reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        event("message_stop"),
    ]


def answer(*parts: str, reason: str = "end_turn") -> list[bytes]:
    """A whole stream answering with one text block."""
    return [message_start(), *text_block(0, *parts), *finish(reason)]


class AnthropicServer(LoopbackServer):
    """A scripted Messages API server (``base_url`` is its root: requests go to
    ``/v1/messages``)."""

    plugin = AnthropicMessages

    def play(self, name: str, *after: Any, headers: dict[str, str] | None = None) -> None:
        """Queue the recording ``name``, then ``after`` (more frames, or an action)."""
        self.stream(*recording(name), *after, headers=headers)

    def ok(self, text: str = "ok") -> None:
        self.stream(*answer(text))

    def partial(self, text: str) -> list[Any]:
        return [
            message_start(),
            block_start(0, type="text", text=""),
            delta(0, type="text_delta", text=text),
        ]
