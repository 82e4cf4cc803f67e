"""The flat records of a model call: why it failed, and the tokens it used."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from dsh._record import record

from ._checks import _COUNT, _INT, _STR, _Check, _Record

__all__ = ["LlmFailure", "Usage", "add_usage"]


@record
class LlmFailure(_Record):
    """Why a model call failed: a readable message and a stable code."""

    _WHAT = "failure"
    _REQUIRED: ClassVar[Mapping[str, _Check]] = {"message": _STR, "code": _STR}
    _OPTIONAL: ClassVar[Mapping[str, _Check]] = {
        "status": _INT,
        "retry_after_ms": _COUNT,
        "request_id": _STR,
    }

    message: str
    code: str
    status: int | None = None
    retry_after_ms: int | None = None
    request_id: str | None = None


@record
class Usage(_Record):
    """Token counts; cache reads are not included in ``input_tokens``."""

    _WHAT = "usage"
    _REQUIRED: ClassVar[Mapping[str, _Check]] = {"input_tokens": _COUNT, "output_tokens": _COUNT}
    _OPTIONAL: ClassVar[Mapping[str, _Check]] = {
        "cache_read_tokens": _COUNT,
        "cache_write_tokens": _COUNT,
        "reasoning_tokens": _COUNT,
    }

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        # _Record's, in one call (every step encodes its usage): the counts not None.
        data: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }
        if self.cache_read_tokens is not None:
            data["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens is not None:
            data["cache_write_tokens"] = self.cache_write_tokens
        if self.reasoning_tokens is not None:
            data["reasoning_tokens"] = self.reasoning_tokens
        return data


def add_usage(total: Usage, usage: Usage) -> Usage:
    """``total`` plus ``usage``, field by field; an absent (None) field counts 0 and
    the sum has every field set."""
    return Usage(
        total.input_tokens + usage.input_tokens,
        total.output_tokens + usage.output_tokens,
        (total.cache_read_tokens or 0) + (usage.cache_read_tokens or 0),
        (total.cache_write_tokens or 0) + (usage.cache_write_tokens or 0),
        (total.reasoning_tokens or 0) + (usage.reasoning_tokens or 0),
    )
