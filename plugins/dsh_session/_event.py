"""A record of a session's log, and the error of a misused session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsh import DshError

__all__ = ["SessionError", "SessionEvent"]


class SessionError(DshError, ValueError):
    """A session was misused: an unknown event type, a duplicate id, a bad stored log."""

    code = "SESSION"


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One record of the log; ``seq`` counts from 0 without gaps, ``time`` is epoch seconds."""

    seq: int
    type: str
    time: float
    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "time": self.time, "data": self.data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionEvent:
        return cls(data["seq"], data["type"], data["time"], data["data"])
