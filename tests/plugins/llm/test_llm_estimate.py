"""``estimate_tokens``: the local count (UTF-8 bytes / 4, rounded up) for servers that
report no usage, and for telling an overflow from a broken answer."""

from __future__ import annotations

import json
import math

import pytest

from dsh_llm import (
    BYTES_PER_TOKEN,
    LlmRequest,
    Message,
    TextBlock,
    ToolCallBlock,
    estimate_tokens,
)
from dsh_system_prompt import ToolSchema


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("é" * 4, 2), ("日本", 2), ("x" * 4000, 1000)],
)
def test_text_counts_its_utf8_bytes_over_four_rounded_up(text: str, tokens: int) -> None:
    assert BYTES_PER_TOKEN == 4
    assert estimate_tokens(text) == tokens


def test_a_message_counts_its_compact_json() -> None:
    message = Message("assistant", (TextBlock("héllo"), ToolCallBlock("c1", "f", "{}")))
    text = json.dumps(message.to_json(), ensure_ascii=False, separators=(",", ":"))
    assert estimate_tokens(message) == math.ceil(len(text.encode()) / 4)


def test_a_request_counts_its_system_prompt_messages_and_tools() -> None:
    tool = ToolSchema("bash", "Run it.", {"type": "object"})
    messages = (Message.user("list the files"), Message.user("ü"))
    request = LlmRequest("m", messages, system="Be brief.", tools=(tool,), max_tokens=9)
    parts = ["Be brief."]
    parts += [json.dumps(m.to_json(), ensure_ascii=False, separators=(",", ":")) for m in messages]
    parts.append('{"name":"bash","description":"Run it.","parameters":{"type":"object"}}')
    assert estimate_tokens(request) == math.ceil(len("".join(parts).encode()) / 4)
    # The model name, the limits and the ids around the request are not counted.
    assert estimate_tokens(LlmRequest("other-model", messages, "Be brief.", (tool,))) == (
        estimate_tokens(request)
    )
    assert estimate_tokens(LlmRequest("m", ())) == 0
