"""A record of a session's log, and the error of a misused session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh import DshError
from dsh._record import record
from dsh_llm import Message

__all__ = ["OpaqueEvent", "SessionError", "SessionEvent"]


class SessionError(DshError, ValueError):
    """A session was misused: an unknown event type, a duplicate id, a bad stored log."""

    code = "SESSION"


@record(eq=False)
class SessionEvent:
    """One record of the log; ``seq`` counts from 0 without gaps, ``time`` is epoch seconds.

    Two events are equal when their fields are, whatever their class (an
    :class:`OpaqueEvent` equals the event its writer appended).
    """

    seq: int
    type: str
    time: float
    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "time": self.time, "data": self.data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionEvent:
        return cls(data["seq"], data["type"], data["time"], data["data"])

    def _value(self, key: str) -> Any:
        """``data[key]``, read without building ``data`` where the event keeps its
        values apart (a compact event's ``message`` is the ``Message`` it keeps)."""
        return self.data[key]

    def _kept_message(self) -> Message:
        """The :class:`~dsh_llm.Message` ``data["message"]`` encodes (decoded here; a
        compact event reads the one it keeps)."""
        return Message.from_json(self.data["message"])

    def _fields(self) -> tuple[int, str, float, Mapping[str, Any]]:
        return (self.seq, self.type, self.time, self.data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SessionEvent):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())


@record(eq=False)
class OpaqueEvent(SessionEvent):
    """A stored event of a type that no plugin of the reading deployment declares.

    It is history, not damage (RFC 0023): loaded as it was stored (its ``data`` is
    neither checked nor interpreted), counted in the seqs, skipped by the history, and
    written back as it is wherever its session is copied. Only the reader's knowledge
    differs from a :class:`SessionEvent`'s, so it equals the event its writer appended.
    """
