"""A local token count for servers that report none: UTF-8 bytes / 4, rounded up."""

from __future__ import annotations

import json
import math

from ._types import LlmRequest, Message

__all__ = ["BYTES_PER_TOKEN", "estimate_tokens"]

#: The bytes one token is assumed to stand for (close for English and code).
BYTES_PER_TOKEN = 4


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def estimate_tokens(item: LlmRequest | Message | str) -> int:
    """The tokens ``item`` is estimated to take: ``ceil(bytes / 4)`` of its UTF-8 text.

    A ``str`` counts as itself; a :class:`Message` as its compact JSON
    (``Message.to_json``); an :class:`LlmRequest` as what the model reads: its system
    prompt, then each message and each tool schema as compact JSON. The same count
    for the same request, whichever adapter sends it.
    """
    if isinstance(item, str):
        text = item
    elif isinstance(item, Message):
        text = _dumps(item.to_json())
    else:
        parts = [item.system or ""]
        parts.extend(_dumps(message.to_json()) for message in item.messages)
        parts.extend(
            _dumps({"name": t.name, "description": t.description, "parameters": t.parameters})
            for t in item.tools
        )
        text = "".join(parts)
    return math.ceil(len(text.encode()) / BYTES_PER_TOKEN)
