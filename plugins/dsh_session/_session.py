"""A session: the append-only event log of one agent, and the history derived from it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh import DshError
from dsh_llm import Message, ToolResultBlock

__all__ = [
    "COMMIT_EVENTS",
    "EVENT_TYPES",
    "Session",
    "SessionError",
    "SessionEvent",
    "SessionHeader",
]

#: Every event type a session records.
EVENT_TYPES = frozenset(
    {
        "turn/start",  # {turn}
        "turn/end",  # {turn, reason: {kind, message?, code?}}
        "step/start",  # {turn, step}
        "step/end",  # {turn, step}
        "user/message",  # {turn, message}
        "assistant/chunk",  # {turn, step, chunk}
        "assistant/message",  # {turn, step, message, usage?, interrupted?}
        "tool/call",  # {turn, step, call_id, name, arguments}
        "tool/result",  # {turn, step, call_id, name, content, is_error, code?}
        "request/header",  # {turn, step, header: {model, system?, tools, max_tokens?}}
    }
)

#: The events that commit state: persistence makes each durable before going on.
COMMIT_EVENTS = frozenset(
    {"user/message", "assistant/message", "tool/call", "tool/result", "turn/end"}
)


class SessionError(DshError, ValueError):
    """A session was misused: an unknown event type, a duplicate id, a bad log."""

    code = "SESSION"


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One record of the log; ``seq`` counts from 0 without gaps."""

    seq: int
    type: str
    time: float
    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "time": self.time, "data": self.data}


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """What a session is: its id, when it began and the agent's working directory."""

    id: str
    created_at: float
    cwd: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "created_at": self.created_at}
        if self.cwd is not None:
            data["cwd"] = self.cwd
        if self.meta:
            data["meta"] = dict(self.meta)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionHeader:
        return cls(data["id"], data["created_at"], data.get("cwd"), data.get("meta", {}))


class Session:
    """The log of one agent: append events, read them back, derive the history.

    ``on_append`` is called after each append (the store publishes ``session/event``).
    """

    __slots__ = ("_derived", "_messages", "_on_append", "events", "header")

    def __init__(
        self,
        header: SessionHeader,
        events: list[SessionEvent] | None = None,
        on_append: Callable[[Session, SessionEvent], None] | None = None,
    ) -> None:
        self.header = header
        self.events: list[SessionEvent] = events if events is not None else []
        self._on_append = on_append
        self._messages: list[Message] = []
        self._derived = 0

    @property
    def id(self) -> str:
        return self.header.id

    def __repr__(self) -> str:
        return f"<Session {self.id!r} ({len(self.events)} events)>"

    def append(self, type: str, data: Mapping[str, Any]) -> SessionEvent:
        """Record one event (``data`` must be JSON-compatible) and publish it."""
        if type not in EVENT_TYPES:
            raise SessionError(f'unknown session event type "{type}"')
        event = SessionEvent(len(self.events), type, time.time(), data)
        self.events.append(event)
        if self._on_append is not None:
            self._on_append(self, event)
        return event

    def derive_messages(self) -> list[Message]:
        """The model-facing history: user and assistant messages and tool results."""
        events = self.events
        for event in events[self._derived :]:
            message = _message_of(event)
            if message is not None:
                self._messages.append(message)
        self._derived = len(events)
        return list(self._messages)

    def last_turn(self) -> int:
        """The number of the latest turn that started (0 before any)."""
        for event in reversed(self.events):
            if event.type == "turn/start":
                turn: int = event.data["turn"]
                return turn
        return 0

    def turn_end(self, turn: int) -> Mapping[str, Any] | None:
        """The ``reason`` of turn ``turn``'s end, or None while it is open."""
        for event in reversed(self.events):
            if event.type == "turn/end" and event.data["turn"] == turn:
                reason: Mapping[str, Any] = event.data["reason"]
                return reason
        return None


def _message_of(event: SessionEvent) -> Message | None:
    kind = event.type
    if kind == "user/message":
        return Message.from_json(event.data["message"])
    if kind == "assistant/message":
        message = Message.from_json(event.data["message"])
        return message if message.content else None
    if kind == "tool/result":
        data = event.data
        block = ToolResultBlock(data["call_id"], data["content"], data["is_error"])
        return Message("tool", (block,))
    return None
